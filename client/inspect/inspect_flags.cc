// Copyright hopbudget authors.
#include "inspect_flags.h"

#include <unistd.h>

#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "run.h"

ABSL_FLAG(bool, json, false, "one JSON document (one line) instead of the table");
ABSL_FLAG(bool, watch, false,
          "scrape again every --interval until Ctrl-C (JSON: one document per line)");
ABSL_FLAG(absl::Duration, interval, absl::Seconds(2), "time between refreshes with --watch");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(2),
          "bound on the connect and each read of one scrape");

namespace hopbudget::inspect {

cli::CliOptions InspectCliOptions() {
  cli::CliOptions options;
  options.program = "hopbudget-inspect";
  options.usage = kUsage;
  return options;
}

absl::StatusOr<InspectOptions> OptionsFromCommandLine(const cli::CommandLine& cl) {
  InspectOptions options;
  options.targets = cl.positional;
  options.json = absl::GetFlag(FLAGS_json);
  options.watch = absl::GetFlag(FLAGS_watch);
  options.interval = absl::GetFlag(FLAGS_interval);
  options.timeout = absl::GetFlag(FLAGS_timeout);
  options.terminal = isatty(STDOUT_FILENO) == 1;
  if (absl::Status s = cli::FirstError(
          {cli::Positive("timeout", options.timeout), cli::Positive("interval", options.interval)});
      !s.ok()) {
    return s;
  }
  if (cl.WasSet("interval") && !options.watch) {
    return absl::InvalidArgumentError("--interval applies only with --watch");
  }
  if (absl::Status s = ValidateOptions(options); !s.ok()) return s;
  return options;
}

}  // namespace hopbudget::inspect
