// Copyright hopbudget authors.
//
// chainctl faults: changes a service's faults at run time (Admin service).
#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "chain.h"
#include "commands.h"

ABSL_FLAG(std::string, latency, "none",
          "none, fixed:100ms, uniform:50ms-200ms, exp:100ms, spike:5%:1s");
ABSL_FLAG(double, error_rate, 0, "probability of UNAVAILABLE, 0..1");
ABSL_FLAG(double, hang, 0, "probability of hanging until cancelled, 0..1");
ABSL_FLAG(int, hang_next, 0, "the next N calls hang");
ABSL_FLAG(absl::Duration, slow_commit, absl::ZeroDuration(),
          "ledger: each commit first waits this long");
ABSL_FLAG(bool, silence, false,
          "ledger: WatchOrder streams send no message, staying open (--silence=false ends it)");
ABSL_FLAG(bool, clear, false, "start from no faults instead of the current ones");

namespace hopbudget::chainctl {

int FaultsCmd(int argc, char** argv) {
  cli::CommandLine cl = ParseCommand(
      argc, argv, "faults",
      "chainctl faults: change a service's faults at run time (Admin service); flags not given "
      "keep their current value (--clear: start from none).\n\n"
      "  chainctl faults --admin=HOST:PORT [--latency=SPEC] [--error-rate=P] [--hang=P] "
      "[--hang-next=N] [--slow-commit=D] [--silence[=false]] [--clear]",
      {"admin", "latency", "error_rate", "hang", "hang_next", "slow_commit", "silence", "clear"});
  const std::string admin = absl::GetFlag(FLAGS_admin);
  const std::string latency = absl::GetFlag(FLAGS_latency);
  cli::ExitIfBad("chainctl faults",
                 cli::FirstError({
                     cli::Required("admin", admin),
                     cli::InRange("error-rate", absl::GetFlag(FLAGS_error_rate), 0.0, 1.0),
                     cli::InRange("hang", absl::GetFlag(FLAGS_hang), 0.0, 1.0),
                     cli::InRange("hang-next", absl::GetFlag(FLAGS_hang_next), 0, 1 << 30),
                     cli::NonNegative("slow-commit", absl::GetFlag(FLAGS_slow_commit)),
                 }));
  demo::Faults f;
  f.set_latency("none");
  if (!absl::GetFlag(FLAGS_clear)) {
    absl::StatusOr<demo::Faults> current = GetFaults(admin);
    if (!current.ok()) {
      std::cerr << "chainctl: " << current.status() << "\n";
      return 1;
    }
    f = *current;
  }
  if (cl.WasSet("latency")) f.set_latency(latency);
  if (cl.WasSet("error_rate")) f.set_error_rate(absl::GetFlag(FLAGS_error_rate));
  if (cl.WasSet("hang")) f.set_hang_rate(absl::GetFlag(FLAGS_hang));
  if (cl.WasSet("hang_next")) f.set_hang_next(absl::GetFlag(FLAGS_hang_next));
  if (cl.WasSet("slow_commit")) {
    f.set_slow_commit_ms(absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_slow_commit)));
  }
  if (cl.WasSet("silence")) f.set_silence(absl::GetFlag(FLAGS_silence));
  absl::StatusOr<demo::Faults> now = SetFaults(admin, f);
  if (!now.ok()) {
    std::cerr << "chainctl: " << now.status() << "\n";
    return now.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  std::cout << admin << ": latency=" << now->latency() << " error_rate=" << now->error_rate()
            << " hang_rate=" << now->hang_rate() << " hang_next=" << now->hang_next()
            << " slow_commit_ms=" << now->slow_commit_ms()
            << " silence=" << (now->silence() ? "true" : "false") << "\n";
  return 0;
}

}  // namespace hopbudget::chainctl
