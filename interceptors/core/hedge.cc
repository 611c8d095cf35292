// Copyright hopbudget authors.
#include "hopbudget/advanced/hedge.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace hopbudget {

absl::Status ValidateHedgePolicy(const HedgePolicy& p) {
  auto bad = [](auto... parts) {
    return absl::InvalidArgumentError(absl::StrCat("hedge policy: ", parts...));
  };
  if (p.max_attempts < 1 || p.max_attempts > 3) {
    return bad("max_attempts must be 1..3, got ", p.max_attempts);
  }
  if (p.delay <= absl::ZeroDuration() || p.delay == absl::InfiniteDuration()) {
    return bad("delay must be > 0 and finite, got ", FormatBudget(p.delay));
  }
  if (!(p.quantile >= 0 && p.quantile < 1)) {
    return bad("quantile must be 0 (fixed delay) or in (0, 1), got ", p.quantile);
  }
  if (p.window < 1 || p.window > 65536) return bad("window must be 1..65536, got ", p.window);
  if (p.min_samples < 1 || p.min_samples > p.window) {
    return bad("min_samples must be 1..window (", p.window, "), got ", p.min_samples);
  }
  if (p.min_delay < absl::ZeroDuration()) {
    return bad("min_delay must be >= 0, got ", FormatBudget(p.min_delay));
  }
  if (!(p.max_extra_load > 0 && p.max_extra_load <= 1)) {
    return bad("max_extra_load must be in (0, 1], got ", p.max_extra_load);
  }
  if (!(p.burst >= 1 && std::isfinite(p.burst))) return bad("burst must be >= 1, got ", p.burst);
  for (absl::StatusCode c : p.non_fatal_codes) {
    const int i = static_cast<int>(c);
    if (i < 1 || i > 16) return bad("non_fatal_codes: ", i, " is not an error code");
  }
  return absl::OkStatus();
}

LatencyWindow::LatencyWindow(int window) : window_(static_cast<size_t>(std::max(window, 1))) {
  ring_.reserve(window_);
}

void LatencyWindow::Add(absl::Duration latency) {
  if (ring_.size() < window_) {
    ring_.push_back(latency);
  } else {
    ring_[next_] = latency;
    next_ = (next_ + 1) % window_;
  }
  ++since_compute_;
}

absl::Duration LatencyWindow::Quantile(double q) {
  if (ring_.empty()) return absl::ZeroDuration();
  const int recompute_every = static_cast<int>(std::max<size_t>(window_ / 8, 1));
  if (q == cached_q_ && since_compute_ < recompute_every) return cached_;
  std::vector<absl::Duration> copy = ring_;
  const size_t rank =
      std::min(copy.size() - 1, static_cast<size_t>(std::ceil(q * copy.size())) - (q > 0 ? 1 : 0));
  std::nth_element(copy.begin(), copy.begin() + rank, copy.end());
  cached_ = copy[rank];
  cached_q_ = q;
  since_compute_ = 0;
  return cached_;
}

absl::Duration HedgeDelay(const HedgePolicy& policy, LatencyWindow& latencies) {
  if (policy.quantile <= 0 || latencies.samples() < policy.min_samples) return policy.delay;
  return std::max(latencies.Quantile(policy.quantile), policy.min_delay);
}

const char* HedgeOutcomeName(HedgeOutcome o) {
  switch (o) {
    case HedgeOutcome::kSend:
      return "send";
    case HedgeOutcome::kMaxAttempts:
      return "max_attempts";
    case HedgeOutcome::kStopped:
      return "stopped";
    case HedgeOutcome::kNoBudget:
      return "no_budget";
    case HedgeOutcome::kExtraLoad:
      return "extra_load";
  }
  return "unknown";
}

HedgeOutcome DecideHedge(const BudgetPolicy& budget, const HedgePolicy& policy, int sent,
                         bool stopped, absl::Time logical_deadline, absl::Time now,
                         bool extra_load_available) {
  if (sent >= policy.max_attempts) return HedgeOutcome::kMaxAttempts;
  if (stopped) return HedgeOutcome::kStopped;
  if (logical_deadline != absl::InfiniteFuture() &&
      logical_deadline - now < budget.min_attempt_budget) {
    return HedgeOutcome::kNoBudget;
  }
  if (!extra_load_available) return HedgeOutcome::kExtraLoad;
  return HedgeOutcome::kSend;
}

HedgeVerdict HedgeVerdictOf(const HedgePolicy& policy, const AttemptResult& result) {
  if (result.code == absl::StatusCode::kOk) return HedgeVerdict::kWon;
  if (result.pushback.kind != PushbackKind::kAbsent) return HedgeVerdict::kFatal;
  // This attempt's own cap fired, or it waited for a ready backend of its
  // own target until then and sent nothing: another attempt may still answer
  // in time (as DecideRetry retries both). Any other budget that fired ends
  // the call.
  if (result.code == absl::StatusCode::kDeadlineExceeded) {
    return result.fired == DeadlineSource::kAttempt || result.fired == DeadlineSource::kNoBackend
               ? HedgeVerdict::kNonFatal
               : HedgeVerdict::kFatal;
  }
  for (absl::StatusCode c : policy.non_fatal_codes) {
    if (c == result.code) return HedgeVerdict::kNonFatal;
  }
  return HedgeVerdict::kFatal;
}

}  // namespace hopbudget
