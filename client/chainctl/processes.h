// Copyright hopbudget authors.
//
// processes.h: starting, waiting for and stopping the chain's processes
// (chainctl up and chainctl demo).
//
// Spawn starts a binary with its stdout and stderr in files (or the
// caller's), every signal unblocked and in a process group of its own, so
// that a terminal's Ctrl-C reaches chainctl alone, which then stops the
// chain in order. WaitReady reads a service's ready line ("<name>
// listening on <port> metrics on <port> ...", or the edge's "<name>
// listening on <port>": metrics port 0). Stop sends SIGTERM and waits.
//
// Edge cases: a process that exits before its ready line is Unavailable,
// with its stderr; no ready line within the timeout is DeadlineExceeded;
// a line without ports is Internal. An empty `out` or `err` keeps the
// caller's.
//
// Thread safety: free functions; waitpid reaps the caller's own children
// only, so one thread owns each pid.
#ifndef HOPBUDGET_CHAINCTL_PROCESSES_H_
#define HOPBUDGET_CHAINCTL_PROCESSES_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace hopbudget::chainctl {

// Starts `binary` with `args`; stdout to `out` and stderr to `err`
// (truncated; "" keeps the caller's).
[[nodiscard]] absl::StatusOr<pid_t> Spawn(const std::string& binary,
                                          const std::vector<std::string>& args,
                                          const std::string& out, const std::string& err);

struct ReadyPorts {
  int port = 0;
  int metrics_port = 0;  // 0: the service has none (the edge)
};

// Waits for the ready line in `out` of `pid`, which writes its stderr to
// `err`. On Unavailable the process has been reaped.
[[nodiscard]] absl::StatusOr<ReadyPorts> WaitReady(pid_t pid, const std::string& out,
                                                   const std::string& err, absl::Duration timeout);

// The exit code of a waitpid status: 128 + the signal when killed by one.
int ExitCode(int status);

// SIGTERM, then waits: the exit code (ExitCode); 1 for no process (-1).
int Stop(pid_t pid);

}  // namespace hopbudget::chainctl

#endif  // HOPBUDGET_CHAINCTL_PROCESSES_H_
