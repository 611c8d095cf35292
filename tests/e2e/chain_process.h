// Copyright hopbudget authors.
//
// chain_process.h: starts the demo chain's real processes for end-to-end
// tests: each on port 0, ready when it prints "<name> listening on <port>
// metrics on <port> ...", stopped (SIGTERM, then SIGKILL) when destroyed.
// A child also dies with the test. The process itself is a
// demo::ChildProcess (tests/demo/child_process.h); its stderr goes to a
// file, quoted in the error when it fails to start. ChainProcesses holds
// one test's chain of them, started one by one or, as a whole, from the
// chain's description (client/chainctl/topology.h: the hops, who calls
// whom, each hop's flags; the test adds its own flags as extras).
#ifndef HOPBUDGET_TESTS_E2E_CHAIN_PROCESS_H_
#define HOPBUDGET_TESTS_E2E_CHAIN_PROCESS_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "child_process.h"
#include "topology.h"

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
//   ChainProcesses processes;
//   chainctl::ChainSpec spec;
//   spec.db = processes.dir() + "/ledger.db";
//   spec.extra[chainctl::Hop::kLedger] = {"--shield-bound=5s"};
//   std::map<chainctl::Hop, ChainProcess*> hops = processes.StartChain(spec);
//   ASSERT_FALSE(hops.empty()) << processes.error();
//   ChainProcess* gateway = hops[chainctl::Hop::kGateway];
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

  // Starts the chain `spec` describes: each hop of chainctl::StartOrder in
  // turn, with chainctl::CommandFor's arguments (its callees' addresses
  // from the hops started before it) and DemoBinary's file. Every hop
  // started, by hop; empty when the spec is bad or a hop failed to start
  // (error() says which and why; the hops already started stay until this
  // object is destroyed).
  std::map<chainctl::Hop, ChainProcess*> StartChain(const chainctl::ChainSpec& spec);

  // The temporary directory ("" if it could not be made).
  const std::string& dir() const { return dir_; }
  // What failed first ("" while nothing did).
  const std::string& error() const { return error_; }

 private:
  std::string dir_, error_;
  std::vector<std::unique_ptr<ChainProcess>> started_;  // in start order
};

// The demo service binary named `binary` ("gateway", "orders", "ledger":
// chainctl::HopCommand::binary) this library was built with; "" for
// another name.
std::string DemoBinary(const std::string& binary);

// GET http://127.0.0.1:<port><path> (HTTP/1.0, one connection): the body, or
// an error naming what failed.
absl::StatusOr<std::string> HttpGet(int port, const std::string& path,
                                    absl::Duration timeout = absl::Seconds(20));

}  // namespace hopbudget::e2e

#endif  // HOPBUDGET_TESTS_E2E_CHAIN_PROCESS_H_
