// Copyright hopbudget authors.
//
// processes.h: starting, waiting for and stopping the chain's processes
// (chainctl up, demo and overload).
//
// Spawn starts a binary with its stdout and stderr in files (or the
// caller's), every signal unblocked and in a process group of its own, so
// that a terminal's Ctrl-C reaches chainctl alone, which then stops the
// chain in order. WaitReady reads a service's ready line ("<name>
// listening on <port> metrics on <port> ...", or the edge's "<name>
// listening on <port>": metrics port 0). Stop sends SIGTERM and waits.
// StartChain starts a whole chain from its description (topology.h), callee
// first; StopChain stops it front to back. CpuTicks and WaitQuiet read the
// processes' CPU time from /proc.
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

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "topology.h"

namespace hopbudget::chainctl {

// Starts `binary` with `args`; stdout to `out` and stderr to `err`
// (truncated; "" keeps the caller's); on CPU `cpu` alone when it is >= 0.
[[nodiscard]] absl::StatusOr<pid_t> Spawn(const std::string& binary,
                                          const std::vector<std::string>& args,
                                          const std::string& out, const std::string& err,
                                          int cpu = -1);

struct ReadyPorts {
  int port = 0;
  int metrics_port = 0;  // 0: the service has none (the edge)
};

// Waits for the ready line in `out` of `pid`, which writes its stderr to
// `err`. On Unavailable the process has been reaped.
[[nodiscard]] absl::StatusOr<ReadyPorts> WaitReady(pid_t pid, const std::string& out,
                                                   const std::string& err, absl::Duration timeout);

// This program's own file (/proc/self/exe), to run its commands as steps;
// `argv0` when that cannot be read.
std::string SelfPath(const std::string& argv0);

// The exit code of a waitpid status: 128 + the signal when killed by one.
int ExitCode(int status);

// SIGTERM, then waits: the exit code (ExitCode); 1 for no process (-1).
int Stop(pid_t pid);

struct StartedHop {
  Hop hop;
  pid_t pid = -1;
  int port = 0, metrics_port = 0;
};

// Starts every hop of `spec` (StartOrder), each the binary of that name in
// `bin`, its output in `work`/<hop>.out and .err, on CPU `cpu` when >= 0,
// each ready (30 s at most) before the next starts. On an error the hops
// already started are stopped, and the error names the hop that did not
// start, with its stderr.
[[nodiscard]] absl::StatusOr<std::vector<StartedHop>> StartChain(const ChainSpec& spec,
                                                                 const std::string& bin,
                                                                 const std::string& work,
                                                                 int cpu = -1);

// Stops the hops front to back (no hop is stopped while one in front of it
// can still call it), each sent SIGTERM and waited for; "" when each exited
// 0, else one line per hop that did not ("orders exited 139").
std::string StopChain(const std::vector<StartedHop>& hops);

// The CPU time those processes used so far (utime + stime); a process that
// is gone counts nothing.
absl::Duration CpuTime(const std::vector<pid_t>& pids);

// Waits until those processes together use under 5 % of a core over 200 ms,
// at most `max`: the time waited (`max` when they never went quiet). A hop
// that fell behind its socket goes on reading streams whose callers have
// left, with no call in its handlers: only its CPU shows it. `stop`, when
// given, is asked between samples and ends the wait when it says true.
absl::Duration WaitQuiet(const std::vector<pid_t>& pids, absl::Duration max,
                         const std::function<bool()>& stop = nullptr);

}  // namespace hopbudget::chainctl

#endif  // HOPBUDGET_CHAINCTL_PROCESSES_H_
