// Copyright hopbudget authors.
//
// lint.h: what hopbudget-lint says about a service config, as values.
//
// For every method, service and default a gRPC service config names
// (ReadServiceConfig, hopbudget/advanced/service_config.h), LintServiceConfig says
// whether its budgets nest (ValidateMethodPolicy), how many attempts fit in
// its timeout, and whether it is the seeds' incident: retries configured
// under a timeout that fires during the first attempt, so that retries
// never run. The formatters render the report as text or JSON;
// hopbudget-lint (main.cc) reads the file and picks the exit status.
//
// Thread safety: pure functions on values.
#ifndef HOPBUDGET_CLIENT_LINT_LINT_H_
#define HOPBUDGET_CLIENT_LINT_LINT_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "hopbudget/advanced/service_config.h"

namespace hopbudget::lint {

enum class Verdict { kFits, kUnfit };
// Stable names for the report: "fits", "unfit".
inline absl::string_view VerdictName(Verdict v) { return v == Verdict::kFits ? "fits" : "unfit"; }
template <typename Sink>
void AbslStringify(Sink& sink, Verdict v) {
  sink.Append(VerdictName(v));
}
inline std::ostream& operator<<(std::ostream& os, Verdict v) { return os << VerdictName(v); }

struct MethodReport {
  std::string name;  // "pkg.S/M", "pkg.S/*" or "*"
  Verdict verdict = Verdict::kFits;
  // The budgets as configured: "timeout 5s, 3 attempts of
  // perAttemptRecvTimeout 10s, reserve 5ms".
  std::string budgets;
  // The method's timeout and perAttemptRecvTimeout (InfiniteDuration():
  // none).
  absl::Duration timeout = absl::InfiniteDuration();
  absl::Duration per_attempt_timeout = absl::InfiniteDuration();
  // Calls of the method that can start in its timeout: 1 without retries or
  // hedges; for retries, when every attempt fails at once and when every
  // attempt times out (RetryFit); for hedges, the copies sent before the
  // timeout. 0 when unfit, except for the seeds' incident (every attempt
  // when they fail fast, 1 when each times out).
  int attempts_configured = 1;
  int attempts_if_fast_failures = 1;
  int attempts_if_all_time_out = 1;
  // The seeds' incident: retries configured under a timeout that fires
  // during the first attempt.
  bool retries_never_run = false;
  // Unfit: why, as ValidateMethodPolicy says it.
  std::string problem;
  // Worth knowing though it fits ("an attempt that times out uses the whole
  // timeout: only fast failures are retried").
  std::vector<std::string> warnings;
};

struct Report {
  std::vector<MethodReport> methods;  // in the order the config names them
  std::vector<std::string> notes;     // ServiceConfigEntries::notes
  bool AllFit() const;
};

Report LintServiceConfig(const ServiceConfigEntries& config);

// One paragraph per method, then the notes, then a last line
// ("3 methods: 2 fit, 1 unfit"). `file` names the input ("-" for stdin).
std::string FormatText(absl::string_view file, const Report& report);
// {"file": ..., "fits": bool, "methods": [...], "notes": [...]}, one line.
std::string FormatJson(absl::string_view file, const Report& report);
// {"file": ..., "error": ...} for a config that could not be read.
std::string FormatJsonError(absl::string_view file, absl::string_view error);

}  // namespace hopbudget::lint

#endif  // HOPBUDGET_CLIENT_LINT_LINT_H_
