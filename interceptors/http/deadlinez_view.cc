// Copyright hopbudget authors.
#include "deadlinez_view.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "hopbudget/advanced/deadline_source.h"
#include "hopbudget/advanced/exposition.h"

namespace hopbudget::internal {
namespace {

constexpr const char* kSideKey[kSideCount] = {"client", "server"};  // index: Side

std::string SourceList() {
  std::vector<std::string> names;
  for (int s = 1; s < kDeadlineSourceCount; ++s) {
    names.emplace_back(DeadlineSourceName(static_cast<DeadlineSource>(s)));
  }
  return absl::StrJoin(names, ", ");
}

// Milliseconds as a JSON number; null for an infinite duration.
std::string Millis(absl::Duration d) {
  if (d == absl::InfiniteDuration() || d == -absl::InfiniteDuration()) return "null";
  return absl::StrFormat("%.3f", absl::ToDoubleMilliseconds(d));
}

std::string Seconds(absl::Duration d) { return absl::StrFormat("%.3f", absl::ToDoubleSeconds(d)); }

std::string WindowName(absl::Duration w) {
  if (w % absl::Minutes(1) == absl::ZeroDuration()) {
    return absl::StrCat(absl::ToInt64Minutes(w), "m");
  }
  return absl::StrCat(absl::ToInt64Seconds(w), "s");
}

std::string CountsObject(const std::vector<uint64_t>& values) {
  const std::vector<std::string>& names = SummaryCounterNames();
  std::string out = "{";
  for (size_t i = 0; i < names.size() && i < values.size(); ++i) {
    absl::StrAppend(&out, i == 0 ? "" : ",", JsonString(names[i]), ":", values[i]);
  }
  return out + "}";
}

std::string StringArray(const std::set<std::string>& values) {
  std::string out = "[";
  bool first = true;
  for (const std::string& v : values) {
    absl::StrAppend(&out, first ? "" : ",", JsonString(v));
    first = false;
  }
  return out + "]";
}

std::string PolicyJson(const std::optional<BudgetPolicy>& p) {
  if (!p.has_value()) return "null";
  return absl::StrCat("{\"request_cap_ms\":", Millis(p->request_cap),
                      ",\"attempt_cap_ms\":", Millis(p->attempt_cap),
                      ",\"hop_reserve_ms\":", Millis(p->hop_reserve),
                      ",\"min_attempt_budget_ms\":", Millis(p->min_attempt_budget),
                      ",\"max_inbound_budget_ms\":", Millis(p->max_inbound_budget), "}");
}

std::string RetryPolicyJson(const std::optional<RetryPolicy>& r,
                            const std::optional<BudgetPolicy>& budget) {
  if (!r.has_value()) return "null";
  std::vector<std::string> codes;
  for (absl::StatusCode c : r->retryable_codes) {
    codes.push_back(JsonString(absl::StatusCodeToString(c)));
  }
  std::string out = absl::StrCat(
      "{\"max_attempts\":", r->max_attempts, ",\"retryable_codes\":[", absl::StrJoin(codes, ","),
      "],\"initial_backoff_ms\":", Millis(r->initial_backoff),
      ",\"max_backoff_ms\":", Millis(r->max_backoff),
      ",\"backoff_multiplier\":", absl::StrFormat("%g", r->backoff_multiplier));
  // How many attempts fit in the request budget: what an operator needs to
  // tell "retries are configured" from "retries can run".
  if (budget.has_value()) {
    absl::StatusOr<RetryFit> fit = ValidateRetryPolicy(*budget, *r);
    if (fit.ok()) {
      absl::StrAppend(
          &out, ",\"fit\":{\"attempts_if_all_time_out\":", fit->attempts_if_all_time_out,
          ",\"attempts_if_fast_failures\":", fit->attempts_if_fast_failures,
          ",\"timeout_retry_possible\":", fit->timeout_retry_possible ? "true" : "false", "}");
    } else {
      absl::StrAppend(&out, ",\"unfit\":", JsonString(fit.status().message()));
    }
  }
  return out + "}";
}

}  // namespace

absl::StatusOr<DeadlinezFilter> ParseDeadlinezFilter(
    const std::vector<std::pair<std::string, std::string>>& params) {
  DeadlinezFilter f;
  std::set<std::string> seen;
  for (const auto& [key, value] : params) {
    if (!seen.insert(key).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("/deadlinez: parameter '", key, "' given more than once"));
    }
    if (key == "failed") {
      if (value == "1" || value == "true") {
        f.failed_only = true;
      } else if (value == "0" || value == "false") {
        f.failed_only = false;
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("/deadlinez: failed='", value, "' is not one of 1, 0, true, false"));
      }
    } else if (key == "method") {
      if (value != "other" &&
          (value.size() < 2 || value[0] != '/' || value.find('/', 1) == std::string::npos)) {
        return absl::InvalidArgumentError(
            absl::StrCat("/deadlinez: method='", value,
                         "' is not a full method name (/pkg.Service/Method) or 'other'"));
      }
      f.method = value;
    } else if (key == "source") {
      const absl::optional<DeadlineSource> s = ParseDeadlineSource(value);
      if (!s.has_value() || *s == DeadlineSource::kNone) {
        return absl::InvalidArgumentError(absl::StrCat(
            "/deadlinez: source='", value, "' is not a deadline source (", SourceList(), ")"));
      }
      f.source = value;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("/deadlinez: unknown parameter '", key,
                                                     "' (filters: failed, method, source)"));
    }
  }
  return f;
}

std::vector<RecentCall> OrderAndFilter(std::vector<RecentCall> calls,
                                       const DeadlinezFilter& filter) {
  std::stable_sort(calls.begin(), calls.end(),
                   [](const RecentCall& a, const RecentCall& b) { return a.start > b.start; });
  calls.erase(std::remove_if(calls.begin(), calls.end(),
                             [&](const RecentCall& c) {
                               if (filter.failed_only && c.code == absl::StatusCode::kOk) {
                                 return true;
                               }
                               if (!filter.method.empty() && c.method != filter.method) return true;
                               return !filter.source.empty() &&
                                      DeadlineSourceName(c.source) != filter.source;
                             }),
              calls.end());
  return calls;
}

const std::vector<std::string>& SummaryCounterNames() {
  static const std::vector<std::string>* names = [] {
    auto* n = new std::vector<std::string>;
    for (int side : {1, 0}) {
      n->push_back(absl::StrCat("calls.", kSideKey[side]));
      n->push_back(absl::StrCat("failed.", kSideKey[side]));
    }
    for (int side : {1, 0}) {
      for (int s = 1; s < kDeadlineSourceCount; ++s) {
        n->push_back(absl::StrCat("timeouts.", kSideKey[side], ".",
                                  DeadlineSourceName(static_cast<DeadlineSource>(s))));
      }
    }
    for (const char* o :
         {"started", "completed", "failed", "exceeded_bound", "refused", "unobserved"}) {
      n->push_back(absl::StrCat("shield.", o));
    }
    n->push_back("retries.started");
    n->push_back("retries.succeeded_after_retry");
    for (int o = 0; o < kRetryOutcomeCount; ++o) {
      const absl::string_view reason = RetrySkipReason(static_cast<RetryOutcome>(o));
      if (!reason.empty()) n->push_back(absl::StrCat("retries.skipped.", reason));
    }
    for (int a = 1; a < kShadowActionCount; ++a) {
      n->push_back(absl::StrCat("shadow.", ShadowActionName(static_cast<ShadowAction>(a))));
    }
    return n;
  }();
  return *names;
}

std::vector<uint64_t> SummaryCounters(const MetricsSnapshot& s) {
  std::vector<uint64_t> v;
  v.reserve(SummaryCounterNames().size());
  for (int side : {1, 0}) {
    uint64_t failed = 0;
    for (const MethodSnapshot& m : s.methods) {
      for (int code = 1; code < kStatusCodeCount; ++code) failed += m.calls[side][code];
    }
    v.push_back(s.calls[side]);
    v.push_back(failed);
  }
  for (int side : {1, 0}) {
    for (int src = 1; src < kDeadlineSourceCount; ++src) {
      v.push_back(s.deadline_exceeded_by_source[side][src]);
    }
  }
  for (ShieldEvent e :
       {ShieldEvent::kStarted, ShieldEvent::kCompleted, ShieldEvent::kFailed,
        ShieldEvent::kExceededBound, ShieldEvent::kRefused, ShieldEvent::kUnobserved}) {
    v.push_back(s.shield(e));
  }
  v.push_back(s.retry_decision(RetryOutcome::kRetry));
  uint64_t saved = 0;
  for (const MethodSnapshot& m : s.methods) saved += m.succeeded_after_retry;
  v.push_back(saved);
  for (int o = 0; o < kRetryOutcomeCount; ++o) {
    if (!RetrySkipReason(static_cast<RetryOutcome>(o)).empty()) v.push_back(s.retry_decisions[o]);
  }
  for (int a = 1; a < kShadowActionCount; ++a) v.push_back(s.shadow_actions[a]);
  return v;
}

RateRing::RateRing(absl::Duration step, absl::Duration longest)
    : step_(step), capacity_(static_cast<size_t>(longest / step) + 2) {}

RateRing::RecordOutcome RateRing::Record(absl::Time at, std::vector<uint64_t> values) {
  internal::MutexLock lock(&mu_);
  if (!samples_.empty() && at - samples_.back().at < step_) return RecordOutcome::kTooSoon;
  if (samples_.size() == capacity_) samples_.pop_front();
  samples_.push_back({at, std::move(values)});
  return RecordOutcome::kKept;
}

std::vector<WindowCounts> RateRing::Windows(absl::Time now, const std::vector<uint64_t>& current,
                                            const std::vector<absl::Duration>& windows) const {
  internal::MutexLock lock(&mu_);
  std::vector<WindowCounts> out;
  for (absl::Duration w : windows) {
    WindowCounts c;
    c.window = w;
    c.deltas.assign(current.size(), 0);
    const Sample* base = nullptr;
    for (const Sample& s : samples_) {  // oldest first: keep the newest old enough
      if (s.at <= now - w) base = &s;
    }
    if (base == nullptr && !samples_.empty() && samples_.front().at < now) {
      base = &samples_.front();
    }
    if (base != nullptr) {
      c.span = now - base->at;
      c.complete = c.span >= w;
      for (size_t i = 0; i < current.size() && i < base->values.size(); ++i) {
        // Counters only grow; a smaller value would be a registry swapped
        // under the exporter, shown as no change rather than a huge number.
        c.deltas[i] = current[i] >= base->values[i] ? current[i] - base->values[i] : 0;
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

size_t RateRing::size() const {
  internal::MutexLock lock(&mu_);
  return samples_.size();
}

std::string FormatDeadlinezDocument(const DeadlinezInputs& in) {
  std::set<std::string> methods, sources;
  for (const RecentCall& c : in.recent) {
    methods.insert(c.method);
    if (c.source != DeadlineSource::kNone) sources.emplace(DeadlineSourceName(c.source));
  }
  const std::vector<RecentCall> shown = OrderAndFilter(in.recent, in.filter);
  std::string out = FormatDeadlinezJson(in.snapshot, shown, in.hop, in.now);
  // core's document is one object: continue it with the http layer's fields.
  if (!out.empty() && out.back() == '}') out.pop_back();
  absl::StrAppend(
      &out, ",\"filter\":{\"failed\":", in.filter.failed_only ? "true" : "false",
      ",\"method\":", JsonString(in.filter.method), ",\"source\":", JsonString(in.filter.source),
      "}", ",\"recent_total\":", in.recent.size(), ",\"methods_seen\":", StringArray(methods),
      ",\"sources_seen\":", StringArray(sources),
      ",\"totals\":", CountsObject(SummaryCounters(in.snapshot)), ",\"windows\":[");
  for (size_t i = 0; i < in.windows.size(); ++i) {
    const WindowCounts& w = in.windows[i];
    absl::StrAppend(&out, i == 0 ? "" : ",", "{\"name\":", JsonString(WindowName(w.window)),
                    ",\"window_s\":", Seconds(w.window), ",\"span_s\":", Seconds(w.span),
                    ",\"complete\":", w.complete ? "true" : "false",
                    ",\"counts\":", CountsObject(w.deltas), "}");
  }
  absl::StrAppend(&out, "],\"policy\":", PolicyJson(in.policy),
                  ",\"retry_policy\":", RetryPolicyJson(in.retry_policy, in.policy),
                  ",\"peers\":[");
  for (size_t i = 0; i < in.peers.size(); ++i) {
    absl::StrAppend(&out, i == 0 ? "" : ",", "{\"name\":", JsonString(in.peers[i].name),
                    ",\"url\":", JsonString(in.peers[i].url), "}");
  }
  out += "]}";
  return out;
}

}  // namespace hopbudget::internal
