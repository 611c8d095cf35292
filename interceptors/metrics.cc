// Copyright hopbudget authors.
#include "hopbudget/metrics.h"

namespace hopbudget {
namespace {

template <typename T, size_t N>
void Copy(const std::array<std::atomic<T>, N>& from, std::array<T, N>& to) {
  for (size_t i = 0; i < N; ++i) to[i] = from[i].load(std::memory_order_relaxed);
}

}  // namespace

Metrics& Metrics::Default() {
  static Metrics* const metrics = new Metrics();
  return *metrics;
}

MetricsSnapshot Metrics::Snapshot() const {
  MetricsSnapshot s;
  Copy(calls_, s.calls);
  for (int side = 0; side < kSideCount; ++side) {
    Copy(deadline_exceeded_[side], s.deadline_exceeded_by_source[side]);
  }
  Copy(bad_budget_header_, s.bad_budget_header);
  s.bad_attribution = bad_attribution_.load(std::memory_order_relaxed);
  Copy(deadline_leaks_, s.deadline_leaks);
  s.timers_armed = timers_armed_.load(std::memory_order_relaxed);
  Copy(retry_decisions_, s.retry_decisions);
  Copy(attempts_per_call_, s.attempts_per_call);
  s.backoff_clipped = backoff_clipped_.load(std::memory_order_relaxed);
  s.pushback_honoured = pushback_honoured_.load(std::memory_order_relaxed);
  s.unfit_policy_calls = unfit_policy_calls_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace hopbudget
