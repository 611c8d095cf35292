// Copyright hopbudget authors.
//
// demo_services.h: the demo's services, by label (hb-gateway, bl-ledger,
// ...): started from the chain's one description (topology.h), restarted
// on their ports, and checked for a crash.
//
// Each service's stdout and stderr are files in the work folder
// (<label>.out, <label>.err); a stopped service's stderr is kept as
// <label>.err.<n>, the file a restart starts afresh. A service that was
// sent SIGTERM must exit 0 with no sanitizer report in its stderr
// (a sanitizer build: scripts/soak.sh --sanitize); StopChecked says so
// otherwise, with the end of its stderr, and counts it in crashed().
//
// Edge cases: a service that does not start (no ready line in 30 s, or it
// exits) is an error naming it, with its stderr. Died() reaps a service that
// exited on its own and remembers its status.
//
// Thread safety: not thread-safe; the demo's one thread owns it (and is the
// parent of every service).
#ifndef HOPBUDGET_CHAINCTL_DEMO_SERVICES_H_
#define HOPBUDGET_CHAINCTL_DEMO_SERVICES_H_

#include <sys/types.h>

#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/optional.h"
#include "topology.h"

namespace hopbudget::chainctl {

class DemoServices {
 public:
  // `bin`: the folder of the service binaries; `work`: of their output.
  DemoServices(std::string bin, std::string work);

  // Starts hop `hop` of `spec` as `label`, its callees from the services
  // already started (by hop, in `callees`).
  absl::Status Start(const std::string& label, const ChainSpec& spec, Hop hop,
                     const std::map<Hop, std::string>& callees);

  // SIGTERM, wait, StopChecked, then starts it again with the same command
  // line on the same ports. `stop_ms` is SIGTERM to exit, `down_ms` exit to
  // its ready line.
  absl::Status Restart(const std::string& label, int64_t* stop_ms, int64_t* down_ms,
                       std::ostream& out);

  int port(const std::string& label) const { return at(label).port; }
  int metrics_port(const std::string& label) const { return at(label).metrics_port; }
  pid_t pid(const std::string& label) const { return at(label).pid; }
  std::string address(const std::string& label) const;  // "127.0.0.1:<port>"
  std::string err_file(const std::string& label) const;

  // Every service's pid that is still running, in start order.
  std::vector<pid_t> Pids() const;
  // The labels in start order.
  std::vector<std::string> Labels() const;

  // The exit code of `label` when it has exited (reaped now if need be).
  absl::optional<int> Died(const std::string& label);

  // Says (on `out`) that a service sent SIGTERM did not stop cleanly, when
  // it did not; keeps its stderr as <label>.err.<n>.
  void StopChecked(const std::string& label, int exit_code, std::ostream& out);

  // Sends SIGTERM to every running service, waits for each, and checks each
  // (StopChecked), in start order.
  void StopAllChecked(std::ostream& out);

  // SIGTERM to every running service and waits, unchecked (on the way out).
  void StopAll();

  // The last `lines` lines of `label`'s stderr, each indented 8 spaces.
  std::string ErrTail(const std::string& label, int lines = 40) const;

  int crashed() const { return crashed_; }
  void count_crash() { ++crashed_; }

 private:
  struct Service {
    std::string binary;  // full path
    std::vector<std::string> args;
    pid_t pid = -1;
    int port = 0, metrics_port = 0;
    absl::optional<int> exit_code;  // once reaped
    int kept_errs = 0;
  };
  const Service& at(const std::string& label) const;
  // SIGTERM to every running service, then waits for each; checks each
  // (StopChecked) on `check` when it is not null.
  void StopEvery(std::ostream* check);
  absl::Status Launch(const std::string& label, Service& s, int port, int metrics_port);

  std::string bin_, work_;
  std::map<std::string, Service> services_;
  std::vector<std::string> order_;
  int crashed_ = 0;
};

}  // namespace hopbudget::chainctl

#endif  // HOPBUDGET_CHAINCTL_DEMO_SERVICES_H_
