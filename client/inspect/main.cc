// Copyright hopbudget authors.
//
// hopbudget-inspect: prints what hopbudget services report on /metrics.
// See inspect.h and `hopbudget-inspect --help`.
#include <pthread.h>
#include <signal.h>

#include <cerrno>
#include <ctime>
#include <iostream>
#include <string>
#include <vector>

#include "inspect.h"
#include "inspect_flags.h"
#include "run.h"

int main(int argc, char** argv) {
  namespace cli = hopbudget::cli;
  const cli::CommandLine cl = cli::ParseOrExit(argc, argv, hopbudget::inspect::InspectCliOptions());
  absl::StatusOr<hopbudget::inspect::InspectOptions> parsed =
      hopbudget::inspect::OptionsFromCommandLine(cl);
  cli::ExitIfBad("hopbudget-inspect", parsed.status());
  if (!parsed->watch) {
    return hopbudget::inspect::RunInspect(*parsed, std::cout, std::cerr);
  }
  // Watching: Ctrl-C (or SIGTERM) ends the wait between refreshes, so the
  // last refresh stays on screen and the exit is clean. The signals are
  // blocked and taken synchronously with sigtimedwait: no handler, no
  // polling. One arriving during a scrape is taken when that scrape ends
  // (bounded by --timeout).
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  return hopbudget::inspect::RunInspectWith(*parsed, std::cout, std::cerr,
                                            [&stop](absl::Duration interval) {
                                              const absl::Time end = absl::Now() + interval;
                                              while (true) {
                                                const absl::Duration left = end - absl::Now();
                                                if (left <= absl::ZeroDuration()) return true;
                                                const timespec ts = absl::ToTimespec(left);
                                                const int sig = sigtimedwait(&stop, nullptr, &ts);
                                                if (sig > 0) return false;
                                                if (errno == EAGAIN) return true;
                                                // EINTR (another signal): wait for the rest of the
                                                // interval.
                                              }
                                            });
}
