// Copyright hopbudget authors.
//
// run.h: the parts of hopbudget-inspect behind RunInspect (inspect.h) that
// the binary and the tests need: option validation and
// a watch loop whose wait between refreshes is injected (the binary stops on
// Ctrl-C; tests count refreshes without sleeping).
//
// Thread safety: pure functions; RunInspectWith shares no state between calls.
#ifndef HOPBUDGET_CLIENT_INSPECT_RUN_H_
#define HOPBUDGET_CLIENT_INSPECT_RUN_H_

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "format.h"
#include "hopbudget/advanced/clock.h"
#include "inspect.h"

namespace hopbudget::inspect {

// The usage text: the top of --help, and printed after bad options.
extern const char kUsage[];

// Why `options` cannot run: no target, a bad target, a timeout or (with
// watch) an interval that is not a positive finite duration.
absl::Status ValidateOptions(const InspectOptions& options);

// Scrapes and summarizes every target once, in order (a failed target is an
// error result, never skipped).
std::vector<TargetResult> ScrapeAll(const InspectOptions& options);

// Waits for the next refresh; false = stop watching (Ctrl-C).
using WaitFn = std::function<bool(absl::Duration interval)>;

// RunInspect with the wait between refreshes given by `wait` (only called
// with options.watch). Returns the exit code of the last refresh.
// `clock` (not owned; null: the real clock) times the scrapes, for the
// rates between two of them.
int RunInspectWith(const InspectOptions& options, std::ostream& out, std::ostream& err,
                   const WaitFn& wait, const Clock* clock = nullptr);

}  // namespace hopbudget::inspect

#endif  // HOPBUDGET_CLIENT_INSPECT_RUN_H_
