// Copyright hopbudget authors.
//
// chain_process.h: starts the demo chain's real processes for end-to-end
// tests: each on port 0, ready when it prints "<name> listening on <port>
// metrics on <port> ...", stopped (SIGTERM, then SIGKILL) when destroyed.
// A child also dies with the test. The process itself is a
// demo::ChildProcess (tests/demo/child_process.h); its stderr goes to a
// file, quoted in the error when it fails to start. ChainProcesses holds
// one test's chain of them.
#ifndef HOPBUDGET_TESTS_E2E_CHAIN_PROCESS_H_
#define HOPBUDGET_TESTS_E2E_CHAIN_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "child_process.h"

namespace hopbudget::e2e {

class ChainProcess {
 public:
  // Starts `binary` (a demo service) with `args` and waits (up to
  // `ready_timeout`) for its ready line. The error names the binary and what
  // it printed. The service checks absl::Mutex lock order, which it does not
  // by default (`--mutex-deadlock-detection`): a test run is where a lock
  // cycle should abort.
  static absl::StatusOr<std::unique_ptr<ChainProcess>> Start(
      const std::string& binary, const std::vector<std::string>& args,
      absl::Duration ready_timeout = absl::Seconds(60));
  ~ChainProcess();

  int port() const { return child_->port(); }
  int metrics_port() const { return child_->metrics_port(); }
  std::string address() const { return child_->address(); }

 private:
  explicit ChainProcess(std::unique_ptr<demo::ChildProcess> child) : child_(std::move(child)) {}
  std::unique_ptr<demo::ChildProcess> child_;
};

// The processes of one test's chain and a temporary directory for their
// files. Start them back to front (the callee first, so that each caller
// gets its callee's address); the destructor stops them front to back (in
// the reverse order: no hop is stopped while a hop in front of it can still
// call it), then removes the directory. One test thread uses it.
//
//   ChainProcesses chain;
//   ChainProcess* ledger = chain.Start(
//       HOPBUDGET_DEMO_LEDGER, {"--port=0", "--metrics-port=0", "--db=" + chain.dir() + "/l.db"});
//   ASSERT_NE(ledger, nullptr) << chain.error();
class ChainProcesses {
 public:
  ChainProcesses();
  ~ChainProcesses();
  ChainProcesses(const ChainProcesses&) = delete;
  ChainProcesses& operator=(const ChainProcesses&) = delete;

  // ChainProcess::Start; the process lives as long as this object. nullptr
  // when it failed, or when something failed before (the directory, an
  // earlier Start): error() says what, and nothing more starts.
  ChainProcess* Start(const std::string& binary, const std::vector<std::string>& args);

  // The temporary directory ("" if it could not be made).
  const std::string& dir() const { return dir_; }
  // What failed first ("" while nothing did).
  const std::string& error() const { return error_; }

 private:
  std::string dir_, error_;
  std::vector<std::unique_ptr<ChainProcess>> started_;  // in start order
};

// GET http://127.0.0.1:<port><path> (HTTP/1.0, one connection): the body, or
// an error naming what failed.
absl::StatusOr<std::string> HttpGet(int port, const std::string& path,
                                    absl::Duration timeout = absl::Seconds(20));

}  // namespace hopbudget::e2e

#endif  // HOPBUDGET_TESTS_E2E_CHAIN_PROCESS_H_
