#include "lint.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "hopbudget/advanced/budget.h"
#include "hopbudget/advanced/exposition.h"
#include "hopbudget/advanced/policy_table.h"
#include "hopbudget/advanced/retry_policy.h"

namespace hopbudget::lint {
namespace {

std::string Budgets(const MethodPolicy& p) {
  std::vector<std::string> parts;
  const BudgetPolicy& b = p.budget;
  parts.push_back(b.request_cap == absl::InfiniteDuration()
                      ? std::string("no timeout")
                      : absl::StrCat("timeout ", FormatBudget(b.request_cap)));
  if (p.retry.has_value()) {
    std::string retry = absl::StrCat(p.retry->max_attempts, " attempts");
    if (b.attempt_cap != absl::InfiniteDuration()) {
      absl::StrAppend(&retry, " of perAttemptRecvTimeout ", FormatBudget(b.attempt_cap));
    }
    absl::StrAppend(&retry, ", backoff ", FormatBudget(p.retry->initial_backoff), "..",
                    FormatBudget(p.retry->max_backoff), " x", p.retry->backoff_multiplier);
    parts.push_back(std::move(retry));
  }
  if (p.hedge.has_value()) {
    parts.push_back(
        absl::StrCat(p.hedge->max_attempts, " copies ", FormatBudget(p.hedge->delay), " apart"));
  }
  parts.push_back(absl::StrCat("reserve ", FormatBudget(b.hop_reserve)));
  parts.push_back(absl::StrCat("minBudget ", FormatBudget(b.min_attempt_budget)));
  if (p.shield_bound.has_value()) {
    parts.push_back(absl::StrCat("shieldBound ", FormatBudget(*p.shield_bound)));
  }
  if (!p.admission) parts.push_back("no admission");
  if (p.shadow) parts.push_back("shadow");
  return absl::StrJoin(parts, ", ");
}

// The seeds' incident: the timeout fires during the first attempt, before
// any attempt's own timeout can, so a retry after a timeout never runs.
bool RetriesNeverRun(const MethodPolicy& p) {
  const BudgetPolicy& b = p.budget;
  return p.retry.has_value() && p.retry->max_attempts > 1 &&
         b.request_cap != absl::InfiniteDuration() && b.attempt_cap != absl::InfiniteDuration() &&
         b.attempt_cap + b.hop_reserve + b.min_attempt_budget > b.request_cap;
}

// Hedged copies that go out before the timeout when no answer comes: copy
// k leaves (k - 1) * delay after the first and needs min_attempt_budget.
int HedgesBeforeTimeout(const MethodPolicy& p) {
  const BudgetPolicy& b = p.budget;
  if (b.request_cap == absl::InfiniteDuration()) return p.hedge->max_attempts;
  const absl::Duration room = b.request_cap - b.hop_reserve - b.min_attempt_budget;
  int copies = 1;
  while (copies < p.hedge->max_attempts && p.hedge->delay * copies < room) ++copies;
  return copies;
}

MethodReport LintOne(const std::string& name, const MethodPolicy& p) {
  MethodReport r;
  r.name = name;
  r.budgets = Budgets(p);
  r.timeout = p.budget.request_cap;
  r.per_attempt_timeout = p.budget.attempt_cap;
  r.retries_never_run = RetriesNeverRun(p);
  if (absl::Status s = ValidateMethodPolicy(p); !s.ok()) {
    r.verdict = Verdict::kUnfit;
    r.problem = std::string(s.message());
    r.attempts_configured = p.retry.has_value()   ? p.retry->max_attempts
                            : p.hedge.has_value() ? p.hedge->max_attempts
                                                  : 1;
    r.attempts_if_fast_failures = r.attempts_if_all_time_out = 0;
    if (r.retries_never_run) {
      // Fast failures are still retried; an attempt that times out is cut
      // by the timeout, and nothing follows it.
      r.attempts_if_fast_failures = p.retry->max_attempts;
      r.attempts_if_all_time_out = 1;
      r.problem = absl::StrCat("retries after a timeout never run: the timeout (",
                               FormatBudget(p.budget.request_cap),
                               ") fires during the first attempt (perAttemptRecvTimeout ",
                               FormatBudget(p.budget.attempt_cap), "). ", r.problem);
    }
    return r;
  }
  if (p.retry.has_value()) {
    const RetryFit fit = ValidateRetryPolicy(p.budget, *p.retry).value();
    r.attempts_configured = p.retry->max_attempts;
    r.attempts_if_fast_failures = fit.attempts_if_fast_failures;
    r.attempts_if_all_time_out = fit.attempts_if_all_time_out;
    if (p.budget.request_cap == absl::InfiniteDuration()) {
      r.warnings.push_back("no timeout: how many attempts fit is up to each caller's deadline");
    } else if (p.budget.attempt_cap == absl::InfiniteDuration()) {
      r.warnings.push_back(
          "no perAttemptRecvTimeout: an attempt that hangs uses the whole timeout, so only fast "
          "failures are retried");
    } else if (fit.attempts_if_all_time_out < p.retry->max_attempts) {
      r.warnings.push_back(absl::StrCat("only ", fit.attempts_if_all_time_out, " of ",
                                        p.retry->max_attempts,
                                        " attempts fit when each one times out"));
    }
  } else if (p.hedge.has_value()) {
    r.attempts_configured = p.hedge->max_attempts;
    r.attempts_if_fast_failures = p.hedge->max_attempts;
    r.attempts_if_all_time_out = HedgesBeforeTimeout(p);
    if (r.attempts_if_all_time_out == 1) {
      r.warnings.push_back(absl::StrCat("hedgingDelay (", FormatBudget(p.hedge->delay),
                                        ") leaves no time for a hedge before the timeout"));
    }
  }
  return r;
}

std::string Millis(absl::Duration d) {
  return d == absl::InfiniteDuration() ? std::string("null")
                                       : absl::StrCat(absl::ToDoubleMilliseconds(d));
}

std::string JsonList(const std::vector<std::string>& items) {
  std::vector<std::string> quoted;
  for (const std::string& s : items) quoted.push_back(JsonString(s));
  return absl::StrCat("[", absl::StrJoin(quoted, ","), "]");
}

}  // namespace

bool Report::AllFit() const {
  return std::all_of(methods.begin(), methods.end(),
                     [](const MethodReport& m) { return m.verdict == Verdict::kFits; });
}

Report LintServiceConfig(const ServiceConfigEntries& config) {
  Report report;
  for (const PolicyTable::Entry& e : config.entries) {
    report.methods.push_back(LintOne(e.first, e.second));
  }
  report.notes = config.notes;
  return report;
}

std::string FormatText(absl::string_view file, const Report& report) {
  std::string out;
  for (const MethodReport& m : report.methods) {
    absl::StrAppend(&out, m.verdict == Verdict::kFits ? "fits   " : "UNFIT  ", m.name, "\n",
                    "       ", m.budgets, "\n");
    if (m.verdict == Verdict::kUnfit) absl::StrAppend(&out, "       ", m.problem, "\n");
    if (m.attempts_configured > 1 && m.attempts_if_fast_failures > 0) {
      absl::StrAppend(&out, "       attempts that fit: ", m.attempts_if_fast_failures,
                      " when they fail fast, ", m.attempts_if_all_time_out,
                      " when each times out\n");
    }
    for (const std::string& w : m.warnings) absl::StrAppend(&out, "       warning: ", w, "\n");
  }
  for (const std::string& n : report.notes) absl::StrAppend(&out, "note: ", n, "\n");
  const size_t unfit =
      std::count_if(report.methods.begin(), report.methods.end(),
                    [](const MethodReport& m) { return m.verdict != Verdict::kFits; });
  if (report.methods.empty()) {
    absl::StrAppend(&out, file, ": names no method (no methodConfig, no hopbudget section)\n");
  } else {
    absl::StrAppend(&out, file, ": ", report.methods.size(),
                    report.methods.size() == 1 ? " entry: " : " entries: ",
                    report.methods.size() - unfit, " fit, ", unfit, " unfit\n");
  }
  return out;
}

std::string FormatJson(absl::string_view file, const Report& report) {
  std::vector<std::string> methods;
  for (const MethodReport& m : report.methods) {
    methods.push_back(absl::StrCat(
        "{\"name\":", JsonString(m.name), ",\"verdict\":", JsonString(VerdictName(m.verdict)),
        ",\"budgets\":", JsonString(m.budgets), ",\"timeout_ms\":", Millis(m.timeout),
        ",\"per_attempt_timeout_ms\":", Millis(m.per_attempt_timeout), ",\"attempts_configured\":",
        m.attempts_configured, ",\"attempts_if_fast_failures\":", m.attempts_if_fast_failures,
        ",\"attempts_if_all_time_out\":", m.attempts_if_all_time_out,
        ",\"retries_never_run\":", m.retries_never_run ? "true" : "false",
        ",\"problem\":", m.problem.empty() ? std::string("null") : JsonString(m.problem),
        ",\"warnings\":", JsonList(m.warnings), "}"));
  }
  return absl::StrCat("{\"file\":", JsonString(file),
                      ",\"fits\":", report.AllFit() ? "true" : "false", ",\"methods\":[",
                      absl::StrJoin(methods, ","), "],\"notes\":", JsonList(report.notes), "}\n");
}

std::string FormatJsonError(absl::string_view file, absl::string_view error) {
  return absl::StrCat("{\"file\":", JsonString(file), ",\"error\":", JsonString(error), "}\n");
}

}  // namespace hopbudget::lint
