// Copyright hopbudget authors.
//
// chainctl metrics: the inspection table of the services' /metrics
// (hopbudget-inspect's, client/inspect).
#include <unistd.h>

#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "commands.h"
#include "inspect.h"

ABSL_FLAG(std::string, targets, "", "HTTP HOST:PORT of each service's /metrics (required)");
ABSL_FLAG(bool, watch, false, "refresh until Ctrl-C");
ABSL_FLAG(absl::Duration, interval, absl::Seconds(2), "refresh interval with --watch");

namespace hopbudget::chainctl {

int Metrics(int argc, char** argv) {
  cli::CommandLine cl =
      ParseCommand(argc, argv, "metrics",
                   "chainctl metrics: the inspection table of the services' /metrics.\n\n"
                   "  chainctl metrics --targets=H:P,H:P,H:P [--watch [--interval=2s]] [--json]",
                   {"targets", "watch", "json", "interval"});
  const std::string targets = absl::GetFlag(FLAGS_targets);
  const std::string json = absl::GetFlag(FLAGS_json);
  cli::ExitIfBad("chainctl metrics",
                 cli::FirstError({cli::Required("targets", targets),
                                  cli::Positive("interval", absl::GetFlag(FLAGS_interval))}));
  if (cl.WasSet("json") && json != "-") {
    return Fail("metrics", absl::StrCat("--json=", json,
                                        ": metrics writes JSON to stdout only "
                                        "(--json or --json=-)"));
  }
  inspect::InspectOptions options;
  options.targets = absl::StrSplit(targets, ',');
  options.watch = absl::GetFlag(FLAGS_watch);
  options.json = cl.WasSet("json");
  options.interval = absl::GetFlag(FLAGS_interval);
  options.terminal = isatty(STDOUT_FILENO) == 1;
  return inspect::RunInspect(options, std::cout, std::cerr);
}

}  // namespace hopbudget::chainctl
