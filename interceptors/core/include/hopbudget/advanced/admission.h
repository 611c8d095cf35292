// Copyright hopbudget authors.
//
// admission.h: deadline-aware admission and shedding at one hop.
//
// Admission decides, for each call that arrives, whether it may start now,
// wait, or be refused at once (why, and the sources of each rule:
// docs/admission.md):
//   - a limit of calls in progress (admitted, handler not yet answered):
//     fixed, or adaptive (AdaptiveLimit: it follows measured handler time);
//   - calls over the limit wait in a bounded queue (at most `queue_per_limit`
//     times the limit: QueueBound), earliest deadline first; newest first
//     once the queue has not been empty for `lifo_after`;
//   - a waiting call leaves the queue at once, answered without starting,
//     when its remaining budget falls below `min_attempt_budget`, or after
//     `max_wait` (`overload_wait` under sustained overload) (Expire());
//   - a call whose remaining budget is below the predicted time to finish
//     (the `quantile` of this method's recent handler times, LatencyPredictor)
//     is refused on arrival, and again when it leaves the queue.
//
// The decisions are pure functions of values (DecideArrival, PickQueueOrder,
// NextAdaptiveLimit), tested table-style; Admission is the thread-safe state
// that applies them, on an injected clock, and knows nothing of gRPC: the
// server interceptor (server.h, AdmissionOptions) translates.
//
// Edge cases:
//   - an infinite deadline never expires in the queue and never fails a
//     prediction; it is served last in deadline order;
//   - a call whose remaining budget is already below min_attempt_budget is
//     refused by the budget engine before it reaches admission (budget.h);
//   - `max_queue` 0: a call over the limit is shed at once (kShedOverLimit).
//
// Example (what the interceptor does):
//
//   auto admission = hopbudget::Admission::Create(policy, min_attempt, &clock);
//   hopbudget::Admission::Waiter w;  // lives until admitted, shed or Leave()
//   hopbudget::Admission::Ready others;  // start or refuse these too
//   switch (admission->Arrive(&w, deadline, &predictor, &others)) {
//     case hopbudget::ArrivalDecision::kAdmit: /* start the handler */ break;
//     case hopbudget::ArrivalDecision::kQueue: /* wait for Release/Expire */ break;
//     default: /* answer the refusal */ break;
//   }
//   ... when an admitted call answers:
//   admission->Release(handler_time, &ready);  // start ready.admitted, shed ready.shed
//                                                // (nullopt: it failed, no latency sample)
//
// Thread safety: the free functions are pure; LatencyPredictor and Admission
// are safe for concurrent use. The path of a call admitted while nothing
// waits takes no lock (two atomic operations).
#ifndef HOPBUDGET_ADVANCED_ADMISSION_H_
#define HOPBUDGET_ADVANCED_ADMISSION_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <ostream>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "hopbudget/advanced/clock.h"

namespace hopbudget {

enum class LimitKind {
  kFixed,     // max_in_flight, always
  kAdaptive,  // starts at max_in_flight, moves within [min_limit, max_limit]
};

struct AdmissionPolicy {
  LimitKind limit = LimitKind::kFixed;
  // The limit of calls in progress (kFixed), or where it starts (kAdaptive).
  int max_in_flight = 64;
  // kAdaptive only: the range the limit moves in.
  int min_limit = 2;
  int max_limit = 512;
  // kAdaptive only: how far the recent handler time may rise above its
  // long-run average before the limit shrinks (Gradient2's tolerance), > 1.
  double latency_tolerance = 1.5;
  // kAdaptive only: completions per measurement window.
  int window_samples = 50;
  // kAdaptive only: how long a window lasts at least, in the hop's long-run
  // handler times; 0: a window is `window_samples` completions, however
  // short. >= 0. See AdaptiveWindowCloses().
  double window_handler_times = 2;
  // kAdaptive only: a slow start, as TCP's: in the hop's first
  // `slow_start_windows` windows, a busy window whose handler time holds
  // doubles the limit, and the first whose handler time rises beyond the
  // tolerance ends the slow start (docs/admission.md, "Cold start"). >= 0;
  // 0: none.
  int slow_start_windows = 20;

  // Calls waiting for admission at most; 0: over the limit is shed at once.
  int max_queue = 1024;
  // And at most this many per call the limit lets in at once, > 0;
  // std::numeric_limits<double>::infinity(): max_queue alone bounds it. A
  // waiter behind `limit` others waits at least one handler time of each
  // call in progress; a queue much deeper than the limit holds calls that
  // cannot be reached in time, and the work of turning them away comes on
  // top of the overload itself. See QueueBound().
  double queue_per_limit = 1;
  // A queue that has not been empty for this long is sustained overload:
  // serve newest first instead of earliest deadline first.
  absl::Duration lifo_after = absl::Milliseconds(100);
  // The longest a call waits, whatever its deadline (a call with no
  // deadline would otherwise wait forever), > 0.
  absl::Duration max_wait = absl::Seconds(1);
  // The longest a call waits once the queue has not been empty for
  // `lifo_after` (sustained overload), > 0; InfiniteDuration(): no such
  // bound. Such a call is refused as one that waited max_wait is, with its
  // own reason (kShedOverloadWait: RESOURCE_EXHAUSTED with pushback), early enough for
  // its caller to hear it. Measured on the demo chain at 4x its capacity:
  // held until its deadline, a call's caller gave up first and cancelled,
  // and the cancellations (gRPC's stream teardown) took most of the
  // entry hop's CPU.
  absl::Duration overload_wait = absl::Milliseconds(10);

  // Refuse calls whose remaining budget is below the predicted handler time.
  bool predict = true;
  // Which quantile of recent handler times is the prediction, in (0, 1).
  double quantile = 0.9;
  // Recent handler times kept per method (bounded memory: 8 bytes each).
  int predict_window = 128;
  // No prediction until a method has this many samples.
  int predict_min_samples = 20;
  // A method with no sample for this long has no prediction, and its old
  // samples are dropped at the next one, > 0. A hop that refuses every call
  // as cannot-finish records no handler time, so without this a prediction
  // made during an overload (hundreds of ms) would refuse every later call
  // for good.
  absl::Duration predict_stale_after = absl::Seconds(1);

  // The `grpc-retry-pushback-ms` sent with a RESOURCE_EXHAUSTED shed (queue
  // full or over the limit): how long a caller should wait before it tries
  // this hop again. Zero: no pushback header.
  absl::Duration pushback = absl::Milliseconds(100);
};

// OK, or InvalidArgument naming the first bad field and its value:
// non-positive limits or windows, min_limit > max_limit, a start outside
// [min_limit, max_limit] (adaptive), negative max_queue, a queue_per_limit
// that is not > 0, negative lifo_after or pushback, a quantile outside
// (0, 1), latency_tolerance <= 1, negative slow_start_windows.
absl::Status ValidateAdmissionPolicy(const AdmissionPolicy& policy);

// What happens to a call that arrives (or leaves the queue).
enum class ArrivalDecision {
  kAdmit,             // start it now
  kQueue,             // wait for a free place
  kShedCannotFinish,  // its remaining budget is below the predicted handler time
  kShedQueueFull,     // over the limit, and the queue is full
  kShedOverLimit,     // over the limit, and there is no queue (max_queue 0)
  kShedQueueExpired,  // waited until less than min_attempt_budget was left
  kShedQueueTimeout,  // waited max_wait with budget still left
  kShedOverloadWait,  // waited overload_wait in a sustained overload, budget left
};
inline constexpr int kArrivalDecisionCount = 8;

// "admit", "queue", "cannot_finish", "queue_full", "over_limit",
// "queue_expired", "queue_timeout", "overload_wait": the `reason` label of
// the shed metrics.
absl::string_view ArrivalDecisionName(ArrivalDecision decision);
template <typename Sink>
void AbslStringify(Sink& sink, ArrivalDecision value) {
  sink.Append(ArrivalDecisionName(value));
}
inline std::ostream& operator<<(std::ostream& os, ArrivalDecision value) {
  return os << ArrivalDecisionName(value);
}

// The state an arrival is decided on.
struct AdmissionState {
  int in_flight = 0;
  int limit = 0;
  int queued = 0;
  int max_queue = 0;  // the queue's bound at this limit: QueueBound()
};

// How many calls may wait for admission under `limit`:
// min(max_queue, ceil(queue_per_limit * limit)), and at least 1 unless
// max_queue is 0 (a limit that has fallen to 0 still lets one wait). An
// infinite queue_per_limit gives max_queue.
int QueueBound(int max_queue, double queue_per_limit, int limit);

// Decides one arrival with `remaining` budget (InfiniteDuration() when
// unbounded) and the method's `predicted` handler time (nullopt while
// unknown). In order: remaining < predicted -> kShedCannotFinish; room
// under the limit and nobody waiting -> kAdmit; room in the queue -> kQueue;
// max_queue 0 -> kShedOverLimit; else kShedQueueFull. Nobody jumps the
// queue: while calls wait, a newcomer waits too, even under the limit.
ArrivalDecision DecideArrival(const AdmissionState& state, absl::Duration remaining,
                              absl::optional<absl::Duration> predicted);

enum class QueueOrder {
  kEarliestDeadlineFirst,
  kNewestFirst,  // sustained overload
};

absl::string_view QueueOrderName(QueueOrder order);
template <typename Sink>
void AbslStringify(Sink& sink, QueueOrder value) {
  sink.Append(QueueOrderName(value));
}
inline std::ostream& operator<<(std::ostream& os, QueueOrder value) {
  return os << QueueOrderName(value);
}

// kNewestFirst when the queue has been non-empty since `nonempty_since`
// for at least `lifo_after`; kEarliestDeadlineFirst otherwise (and when the
// queue is empty: nonempty_since InfiniteFuture()).
QueueOrder PickQueueOrder(absl::Time nonempty_since, absl::Time now, absl::Duration lifo_after);

// One measurement window of the adaptive limit.
struct LimitWindow {
  absl::Duration mean_handler_time;  // of the window's completions
  int max_in_flight = 0;             // the most calls in progress seen in it
};

// The adaptive limit's state between windows.
struct AdaptiveLimitState {
  double limit = 0;
  // Long-run average handler time (exponentially weighted, seconds); 0
  // before the first window.
  double long_seconds = 0;
  // Windows closed so far, counted up to the policy's slow_start_windows
  // (set to it when the slow start ends early).
  int windows = 0;
};

// Gradient2: gradient = clamp(tolerance * long / recent, 0.5, 1); the new
// limit is limit * gradient while handler time rises beyond the tolerance,
// limit + sqrt(limit) (room to probe upwards) while it holds, smoothed
// (20 % per window) and clamped to [min_limit, max_limit]. A window that
// never used half the limit held nothing back, so it says nothing about the
// hop's capacity: it does not shrink the limit, whatever its handler time
// (a slow or restarting callee); at a healthy handler time, a limit below
// where it started (max_in_flight) goes back to it, and one above stays.
// The long-run average is the hop's unloaded handler time: it
// rises by 1 % of a slower window (a time constant of 100 windows, so a
// sustained overload keeps the limit down rather than becoming the new
// normal), falls by 10 % of a faster one, and is pulled down at once when
// the recent time is less than half of it. In the slow start, a busy window
// whose handler time holds doubles the limit instead.
AdaptiveLimitState NextAdaptiveLimit(const AdmissionPolicy& policy, const AdaptiveLimitState& state,
                                     const LimitWindow& window);

// Whether a window of the adaptive limit that has `samples` completions and
// has lasted `lasted` closes: it needs `window_samples` completions and, once
// the long-run handler time is known (`long_seconds` > 0), to have lasted
// `window_handler_times` of it. A window shorter than the handler time is
// made of calls admitted under the limit before the last change, so acting
// on it again overshoots: with 50 completions a window (60 windows a second),
// the demo ledger's limit fell from 128 to 15 within two seconds of a
// slowdown and starved the chain for seconds (bench 4x rounds). Netflix's
// concurrency-limits closes its windows on time as well.
bool AdaptiveWindowCloses(const AdmissionPolicy& policy, int samples, absl::Duration lasted,
                          double long_seconds);

// The `quantile` of a method's recent handler times, from a ring of the last
// `predict_window` samples. Record() is lock-free and allocation-free; the
// quantile is recomputed (a partial sort of the ring) once every 16 samples,
// and Predicted() reads the cached value. Samples go stale: `now` more than
// `predict_stale_after` after the last Record() there is no prediction, and
// the next Record() starts the ring afresh (a Record() racing that restart
// may keep one sample of before it).
class LatencyPredictor {
 public:
  // `policy` must have passed ValidateAdmissionPolicy.
  explicit LatencyPredictor(const AdmissionPolicy& policy);
  LatencyPredictor(const LatencyPredictor&) = delete;
  LatencyPredictor& operator=(const LatencyPredictor&) = delete;

  // A handler time that ended at `now`.
  void Record(absl::Duration handler_time, absl::Time now);
  // nullopt until predict_min_samples were recorded, when the last was
  // recorded more than predict_stale_after before `now`, or when `predict`
  // is off.
  absl::optional<absl::Duration> Predicted(absl::Time now) const;

 private:
  void Recompute(uint64_t count);

  const bool enabled_;
  const double quantile_;
  const int min_samples_;
  const int64_t stale_after_ns_;
  std::atomic<int64_t> last_record_ns_{0};        // unix ns of the last Record()
  std::unique_ptr<std::atomic<int64_t>[]> ring_;  // nanoseconds
  const int size_;
  std::atomic<uint64_t> count_{0};
  std::atomic<int64_t> predicted_ns_{-1};  // -1: unknown
};

// Counters of one Admission, for metrics and /deadlinez.
struct AdmissionStats {
  uint64_t admitted = 0;  // started at once
  uint64_t admitted_after_wait = 0;
  std::array<uint64_t, kArrivalDecisionCount> shed{};  // by ArrivalDecision (shed ones)
  int in_flight = 0;
  int queued = 0;
  int limit = 0;
  QueueOrder order = QueueOrder::kEarliestDeadlineFirst;
};

// The admission state of one service (or one method): thread-safe.
class Admission {
 public:
  // A call's place in the queue. Owned by the caller; must stay alive (and
  // not move) from Arrive() until it is returned by Release()/Expire(), or
  // Leave() returned true, or Arrive() did not return kQueue.
  struct Waiter {
    absl::Time deadline;
    absl::Time enqueued;
    // The method's predictor, asked again when the waiter's turn comes
    // (it may have learnt since); nullptr: no prediction.
    const LatencyPredictor* predictor = nullptr;
    // min(deadline - min_attempt_budget, enqueued + max_wait,
    //     max(the overload's start, enqueued + overload_wait)): the queue
    // stays non-empty while the waiter is in it, so the sustained overload
    // it may meet starts lifo_after after the queue last became non-empty.
    absl::Time expiry;
    // Why it leaves at `expiry` if its deadline is still far: max_wait
    // (kShedQueueTimeout) or the overload (kShedOverloadWait).
    ArrivalDecision timeout = ArrivalDecision::kShedQueueTimeout;
    uint64_t seq = 0;
    void* user = nullptr;  // for the caller: its call
  };

  // What a Release() or an Expire() hands back: waiters to start now (each
  // already counted in progress) and waiters to answer with a refusal (with
  // why).
  struct Ready {
    std::vector<Waiter*> admitted;
    std::vector<std::pair<Waiter*, ArrivalDecision>> shed;
  };

  // `clock` must outlive the Admission (nullptr: Clock::Real()).
  // `min_attempt_budget`: the least budget worth starting a call with; the
  // server interceptor passes the hop's min_attempt_budget + hop_reserve.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Admission>> Create(
      const AdmissionPolicy& policy, absl::Duration min_attempt_budget, Clock* clock = nullptr);

  ~Admission();
  Admission(const Admission&) = delete;
  Admission& operator=(const Admission&) = delete;

  // Decides the call that arrives now with `deadline` (InfiniteFuture():
  // none). kAdmit counts it in progress; kQueue keeps `waiter` until a
  // Release() or Expire() returns it (or Leave()). `waiter->user` is kept.
  // Rarely, queueing finds room that no release handed out (a race with a
  // release, or a grown adaptive limit): the waiters ahead of this one that
  // it admits or sheds go to `others` (cleared first), to be handled like a
  // Release()'s.
  // `predictor` (may be null; must outlive the waiter) is the method's.
  ArrivalDecision Arrive(Waiter* waiter, absl::Time deadline, const LatencyPredictor* predictor,
                         Ready* others);

  // An admitted call has answered: it no longer counts in progress. Fills
  // `ready` (cleared first) with the waiters that take its place, in queue
  // order, and with those found unable to finish on the way.
  // `finished_in` is its handler time when it finished its work (answered
  // OK), the adaptive limit's latency sample; nullopt when it failed or was
  // cancelled. A failure's time says nothing of how long the work takes, and
  // under overload failures come fast (callers gone, budgets spent): taken
  // as samples, a window of them read as a hop that got much faster, reset
  // the long-run latency, and then held the limit at its minimum for
  // seconds after the overload (the demo gateway, at 8 in flight with its
  // chain idle). Netflix's concurrency-limits samples successes the same way.
  void Release(absl::optional<absl::Duration> finished_in, Ready* ready);

  // Moves every waiter whose remaining budget is below min_attempt_budget
  // into `ready->shed` (kShedQueueExpired), and every one that waited
  // max_wait, or overload_wait while the queue is in sustained overload
  // (kShedQueueTimeout, kShedOverloadWait). Call at NextExpiry().
  void Expire(Ready* ready);

  // The earliest time a waiter will need Expire(); InfiniteFuture() when
  // none.
  absl::Time NextExpiry() const;

  // Removes a waiter whose caller went away. False when it had already left
  // the queue (admitted or shed by a Release/Expire running concurrently).
  bool Leave(Waiter* waiter);

  int limit() const { return limit_.load(std::memory_order_relaxed); }
  int in_flight() const { return in_flight_.load(std::memory_order_relaxed); }
  int queued() const { return queued_.load(std::memory_order_relaxed); }
  AdmissionStats Stats() const;
  const AdmissionPolicy& policy() const { return policy_; }

 private:
  struct Locked;  // the queue and the adaptive window, under their locks

  Admission(const AdmissionPolicy& policy, absl::Duration min_attempt_budget, Clock* clock);
  void Sample(absl::Duration handler_time);
  bool TryAcquire();
  // Admits waiters while there is room; sheds those that cannot finish.
  // Requires the queue's lock.
  void DrainLocked(absl::Time now, Ready* ready);

  const AdmissionPolicy policy_;
  const absl::Duration min_attempt_budget_;
  Clock& clock_;

  std::atomic<int> in_flight_{0};
  std::atomic<int> queued_{0};
  std::atomic<int> limit_;
  std::atomic<uint64_t> admitted_{0};
  std::atomic<uint64_t> admitted_after_wait_{0};
  std::array<std::atomic<uint64_t>, kArrivalDecisionCount> shed_{};
  // Adaptive limit: the current window, filled lock-free; closed under the
  // window's lock by the completion that fills it.
  std::atomic<int64_t> window_sum_ns_{0};
  std::atomic<int> window_count_{0};
  std::atomic<int> window_max_in_flight_{0};
  const std::unique_ptr<Locked> locked_;
};

}  // namespace hopbudget

#endif  // HOPBUDGET_ADVANCED_ADMISSION_H_
