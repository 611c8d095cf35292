// Copyright hopbudget authors.
//
// inspect_flags.h: hopbudget-inspect's command line. The absl flags (--json,
// --watch, --interval, --timeout) are defined in inspect_flags.cc, which is
// compiled into the binary and its test, never into a library (absl flags
// are global to a binary).
//
//   cli::CommandLine cl = cli::ParseOrExit(argc, argv, InspectCliOptions());
//   absl::StatusOr<InspectOptions> options = OptionsFromCommandLine(cl);
//   if (!options.ok()) cli::ExitIfBad("hopbudget-inspect", options.status());
//
// Thread safety: main's thread, before any other thread starts.
#ifndef HOPBUDGET_CLIENT_INSPECT_INSPECT_FLAGS_H_
#define HOPBUDGET_CLIENT_INSPECT_INSPECT_FLAGS_H_

#include "absl/status/statusor.h"
#include "client/cli/cli_flags.h"
#include "inspect.h"

namespace hopbudget::inspect {

// The program name, the usage message and the flags of hopbudget-inspect.
cli::CliOptions InspectCliOptions();

// The flags' values and the positional TARGETs, checked (ValidateOptions):
// InvalidArgument naming the flag and the value otherwise (--interval
// without --watch too).
absl::StatusOr<InspectOptions> OptionsFromCommandLine(const cli::CommandLine& cl);

}  // namespace hopbudget::inspect

#endif  // HOPBUDGET_CLIENT_INSPECT_INSPECT_FLAGS_H_
