// Copyright hopbudget authors.
//
// metrics.h: counters of what hopbudget observes.
//
// Increments are relaxed atomic adds on fixed arrays: no lock, no allocation
// on the hot path. Every interceptor writes to the `Metrics` named in its
// options, or to `Metrics::Default()` when none is named. `Snapshot()` copies
// the counters for tests and exporters.
//
// Thread safety: all methods may be called concurrently.
//
// Example:
//   hopbudget::Metrics metrics;
//   ... options.metrics = &metrics; ...
//   auto s = metrics.Snapshot();
//   s.deadline_exceeded(hopbudget::Side::kClient, hopbudget::DeadlineSource::kAttempt);
#ifndef HOPBUDGET_METRICS_H_
#define HOPBUDGET_METRICS_H_

#include <array>
#include <atomic>
#include <cstdint>

#include "hopbudget/deadline_source.h"
#include "hopbudget/retry_policy.h"
#include "hopbudget/wire.h"

namespace hopbudget {

enum class Side : uint8_t { kClient = 0, kServer = 1 };
inline constexpr int kSideCount = 2;
inline constexpr int kHeaderParseCount = 6;

enum class LeakKind : uint8_t {
  kNoDeadline = 0,    // a call inside a handler with no deadline at all
  kLaterThanInbound,  // a call whose deadline is later than the inbound one
};
inline constexpr int kLeakKindCount = 2;
// Attempts per logical call are counted in buckets 1..kMaxAttemptBuckets.
inline constexpr int kMaxAttemptBuckets = 10;

struct MetricsSnapshot {
  std::array<uint64_t, kSideCount> calls{};
  std::array<std::array<uint64_t, kDeadlineSourceCount>, kSideCount> deadline_exceeded_by_source{};
  std::array<uint64_t, kHeaderParseCount> bad_budget_header{};  // index: HeaderParse
  uint64_t bad_attribution = 0;      // inbound attribution detail refused
  std::array<uint64_t, kLeakKindCount> deadline_leaks{};
  uint64_t timers_armed = 0;         // calls that needed hopbudget's own timer
  // Retrying channels: one decision per ended attempt, by outcome; attempts
  // per logical call (index = attempts - 1).
  std::array<uint64_t, kRetryOutcomeCount> retry_decisions{};
  std::array<uint64_t, kMaxAttemptBuckets> attempts_per_call{};
  uint64_t backoff_clipped = 0;      // backoffs shortened to fit the deadline
  uint64_t pushback_honoured = 0;    // waits taken from grpc-retry-pushback-ms
  uint64_t unfit_policy_calls = 0;   // calls on a policy that validation rejected

  uint64_t retry_decision(RetryOutcome o) const {
    return retry_decisions[static_cast<int>(o)];
  }
  uint64_t calls_with_attempts(int n) const { return attempts_per_call[n - 1]; }

  uint64_t deadline_exceeded(Side side, DeadlineSource source) const {
    return deadline_exceeded_by_source[static_cast<int>(side)][static_cast<int>(source)];
  }
  uint64_t bad_header(HeaderParse kind) const {
    return bad_budget_header[static_cast<int>(kind)];
  }
  uint64_t leaks(LeakKind kind) const { return deadline_leaks[static_cast<int>(kind)]; }
};

class Metrics {
 public:
  Metrics() = default;
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // The process-wide instance used when options name none. Never destroyed.
  static Metrics& Default();

  void CountCall(Side side) { Add(calls_[static_cast<int>(side)]); }
  void CountDeadlineExceeded(Side side, DeadlineSource source) {
    Add(deadline_exceeded_[static_cast<int>(side)][static_cast<int>(source)]);
  }
  void CountBadBudgetHeader(HeaderParse kind) { Add(bad_budget_header_[static_cast<int>(kind)]); }
  void CountBadAttribution() { Add(bad_attribution_); }
  void CountLeak(LeakKind kind) { Add(deadline_leaks_[static_cast<int>(kind)]); }
  void CountTimerArmed() { Add(timers_armed_); }
  void CountRetryDecision(RetryOutcome o) { Add(retry_decisions_[static_cast<int>(o)]); }
  void CountAttemptsPerCall(int attempts) {
    const int i = attempts < 1 ? 0 : attempts > kMaxAttemptBuckets ? kMaxAttemptBuckets - 1
                                                                   : attempts - 1;
    Add(attempts_per_call_[i]);
  }
  void CountBackoffClipped() { Add(backoff_clipped_); }
  void CountPushbackHonoured() { Add(pushback_honoured_); }
  void CountUnfitPolicyCall() { Add(unfit_policy_calls_); }

  MetricsSnapshot Snapshot() const;

 private:
  static void Add(std::atomic<uint64_t>& c) { c.fetch_add(1, std::memory_order_relaxed); }

  std::array<std::atomic<uint64_t>, kSideCount> calls_{};
  std::array<std::array<std::atomic<uint64_t>, kDeadlineSourceCount>, kSideCount>
      deadline_exceeded_{};
  std::array<std::atomic<uint64_t>, kHeaderParseCount> bad_budget_header_{};
  std::atomic<uint64_t> bad_attribution_{0};
  std::array<std::atomic<uint64_t>, kLeakKindCount> deadline_leaks_{};
  std::atomic<uint64_t> timers_armed_{0};
  std::array<std::atomic<uint64_t>, kRetryOutcomeCount> retry_decisions_{};
  std::array<std::atomic<uint64_t>, kMaxAttemptBuckets> attempts_per_call_{};
  std::atomic<uint64_t> backoff_clipped_{0};
  std::atomic<uint64_t> pushback_honoured_{0};
  std::atomic<uint64_t> unfit_policy_calls_{0};
};

}  // namespace hopbudget

#endif  // HOPBUDGET_METRICS_H_
