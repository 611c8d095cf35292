// Copyright hopbudget authors.
//
// child_process.h: one demo service (gateway, orders, ledger) as a real
// process, for tests of what a process does at start and at exit: its exit
// status, what it printed on stderr, how it answers signals.
//
//   auto p = ChildProcess::Spawn(HOPBUDGET_DEMO_LEDGER, {"--port=0", "--db=" + db});
//   ASSERT_TRUE(p.ok()) << p.status();
//   absl::Status ready = (*p)->WaitReady(absl::Seconds(30));  // the ready line
//   ... (*p)->port() ...
//   (*p)->Signal(SIGTERM);
//   absl::StatusOr<int> code = (*p)->WaitExit(absl::Seconds(30));
//   EXPECT_THAT((*p)->Stderr(), HasSubstr("..."));
//
// stdout is a pipe read for the ready line; stderr goes to a file (read it
// any time). The child dies with the test (PR_SET_PDEATHSIG); the destructor
// SIGKILLs a child still running. Waiting uses pidfd/poll, never sleeps.
//
// Thread safety: one thread uses a ChildProcess.
#ifndef HOPBUDGET_TESTS_DEMO_CHILD_PROCESS_H_
#define HOPBUDGET_TESTS_DEMO_CHILD_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace hopbudget::demo {

class ChildProcess {
 public:
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Spawn(const std::string& binary,
                                                             const std::vector<std::string>& args);
  ~ChildProcess();

  // Waits for "<name> listening on <port> metrics on <port>" (or the
  // examples' "listening on <port>"). An error when
  // the process exits first (its stderr in the message) or time runs out.
  absl::Status WaitReady(absl::Duration timeout);
  int port() const { return port_; }
  // The demo services' HTTP port (0 for the examples, which print none).
  int metrics_port() const { return metrics_port_; }
  std::string address() const;

  // Waits for the process to end: its exit status (128 + signal when killed
  // by one). DeadlineExceeded when it still runs after `timeout`.
  absl::StatusOr<int> WaitExit(absl::Duration timeout);
  void Signal(int sig);
  pid_t pid() const { return pid_; }
  // Threads of the running process (/proc/<pid>/status), or -1.
  int Threads() const;
  std::string Stderr() const;

 private:
  ChildProcess() = default;
  pid_t pid_ = -1;
  int pidfd_ = -1;
  int stdout_fd_ = -1;
  std::string stderr_path_;
  std::string stdout_buffer_;
  bool exited_ = false;
  int exit_status_ = 0;
  int port_ = 0;
  int metrics_port_ = 0;
};

// A fresh temporary directory under /tmp, removed with its contents when
// the test process exits normally.
std::string TempDir();

}  // namespace hopbudget::demo

#endif  // HOPBUDGET_TESTS_DEMO_CHILD_PROCESS_H_
