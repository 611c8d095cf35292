// Copyright hopbudget authors.
#include "hopbudget/advanced/admission.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "sync.h"

namespace hopbudget {

namespace {

template <typename T>
absl::Status Bad(absl::string_view field, absl::string_view why, const T& value) {
  return absl::InvalidArgumentError(absl::StrCat("admission: ", field, " (", value, ") ", why));
}

}  // namespace

absl::Status ValidateAdmissionPolicy(const AdmissionPolicy& p) {
  if (p.max_in_flight <= 0) return Bad("max_in_flight", "must be > 0", p.max_in_flight);
  if (p.max_queue < 0) return Bad("max_queue", "must be >= 0", p.max_queue);
  if (!(p.queue_per_limit > 0.0)) {
    return Bad("queue_per_limit", "must be > 0 (infinity: no such bound)", p.queue_per_limit);
  }
  if (p.lifo_after < absl::ZeroDuration()) {
    return Bad("lifo_after", "must be >= 0", absl::FormatDuration(p.lifo_after));
  }
  if (p.overload_wait <= absl::ZeroDuration()) {
    return Bad("overload_wait", "must be > 0", absl::FormatDuration(p.overload_wait));
  }
  if (p.max_wait <= absl::ZeroDuration()) {
    return Bad("max_wait", "must be > 0", absl::FormatDuration(p.max_wait));
  }
  if (p.pushback < absl::ZeroDuration()) {
    return Bad("pushback", "must be >= 0", absl::FormatDuration(p.pushback));
  }
  if (!(p.quantile > 0.0 && p.quantile < 1.0)) {
    return Bad("quantile", "must be in (0, 1)", p.quantile);
  }
  if (p.predict_window <= 0 || p.predict_window > 65536) {
    return Bad("predict_window", "must be in [1, 65536]", p.predict_window);
  }
  if (p.predict_min_samples <= 0) {
    return Bad("predict_min_samples", "must be > 0", p.predict_min_samples);
  }
  if (p.predict_min_samples > p.predict_window) {
    return Bad("predict_min_samples", "must be <= predict_window", p.predict_min_samples);
  }
  if (p.predict_stale_after <= absl::ZeroDuration() ||
      p.predict_stale_after == absl::InfiniteDuration()) {
    return Bad("predict_stale_after", "must be > 0 and finite",
               absl::FormatDuration(p.predict_stale_after));
  }
  if (p.limit == LimitKind::kAdaptive) {
    if (p.min_limit <= 0) return Bad("min_limit", "must be > 0", p.min_limit);
    if (p.max_limit < p.min_limit) {
      return Bad("max_limit", absl::StrCat("must be >= min_limit (", p.min_limit, ")"),
                 p.max_limit);
    }
    if (p.max_in_flight < p.min_limit || p.max_in_flight > p.max_limit) {
      return Bad("max_in_flight",
                 absl::StrCat("must be in [min_limit, max_limit] = [", p.min_limit, ", ",
                              p.max_limit, "]"),
                 p.max_in_flight);
    }
    if (!(p.latency_tolerance > 1.0) || !std::isfinite(p.latency_tolerance)) {
      return Bad("latency_tolerance", "must be > 1", p.latency_tolerance);
    }
    if (p.window_samples <= 0) return Bad("window_samples", "must be > 0", p.window_samples);
    if (!(p.window_handler_times >= 0) || !std::isfinite(p.window_handler_times)) {
      return Bad("window_handler_times", "must be >= 0", p.window_handler_times);
    }
    if (p.slow_start_windows < 0) {
      return Bad("slow_start_windows", "must be >= 0", p.slow_start_windows);
    }
  }
  return absl::OkStatus();
}

absl::string_view ArrivalDecisionName(ArrivalDecision decision) {
  switch (decision) {
    case ArrivalDecision::kAdmit:
      return "admit";
    case ArrivalDecision::kQueue:
      return "queue";
    case ArrivalDecision::kShedCannotFinish:
      return "cannot_finish";
    case ArrivalDecision::kShedQueueFull:
      return "queue_full";
    case ArrivalDecision::kShedOverLimit:
      return "over_limit";
    case ArrivalDecision::kShedQueueExpired:
      return "queue_expired";
    case ArrivalDecision::kShedQueueTimeout:
      return "queue_timeout";
    case ArrivalDecision::kShedOverloadWait:
      return "overload_wait";
  }
  return "unknown";
}

absl::string_view QueueOrderName(QueueOrder order) {
  switch (order) {
    case QueueOrder::kEarliestDeadlineFirst:
      return "earliest_deadline_first";
    case QueueOrder::kNewestFirst:
      return "newest_first";
  }
  return "unknown";
}

int QueueBound(int max_queue, double queue_per_limit, int limit) {
  if (max_queue <= 0) return 0;
  const double per_limit = std::ceil(queue_per_limit * std::max(limit, 0));
  if (!(per_limit < static_cast<double>(max_queue))) return max_queue;  // also inf, nan
  return std::max(1, static_cast<int>(per_limit));
}

ArrivalDecision DecideArrival(const AdmissionState& s, absl::Duration remaining,
                              absl::optional<absl::Duration> predicted) {
  if (predicted.has_value() && remaining < *predicted) return ArrivalDecision::kShedCannotFinish;
  if (s.in_flight < s.limit && s.queued == 0) return ArrivalDecision::kAdmit;
  if (s.queued < s.max_queue) return ArrivalDecision::kQueue;
  return s.max_queue == 0 ? ArrivalDecision::kShedOverLimit : ArrivalDecision::kShedQueueFull;
}

QueueOrder PickQueueOrder(absl::Time nonempty_since, absl::Time now, absl::Duration lifo_after) {
  if (nonempty_since == absl::InfiniteFuture()) return QueueOrder::kEarliestDeadlineFirst;
  return now - nonempty_since >= lifo_after ? QueueOrder::kNewestFirst
                                            : QueueOrder::kEarliestDeadlineFirst;
}

AdaptiveLimitState NextAdaptiveLimit(const AdmissionPolicy& policy, const AdaptiveLimitState& state,
                                     const LimitWindow& window) {
  AdaptiveLimitState next = state;
  const double recent = absl::ToDoubleSeconds(window.mean_handler_time);
  if (!(recent > 0.0)) return next;  // nothing measured
  const bool slow_start = state.windows < policy.slow_start_windows;
  if (slow_start) next.windows = state.windows + 1;
  if (next.long_seconds <= 0.0 || recent < next.long_seconds / 2) {
    next.long_seconds = recent;  // first window, or the hop got much faster
  } else if (recent > next.long_seconds) {
    // Slowness is learned slowly: a long-run average that followed a
    // sustained overload within a second (5 % a window, as before) took the
    // overload's latency for normal, and the limit grew to its maximum
    // while handler time had tripled (the demo gateway at 2x capacity).
    // 0.2 % held the limit too low for the chain's own latency under load
    // (goodput 706/s against 940-986/s with 1 %, one run each).
    next.long_seconds = 0.99 * next.long_seconds + 0.01 * recent;
  } else {
    next.long_seconds = 0.9 * next.long_seconds + 0.1 * recent;
  }
  const double gradient =
      std::clamp(policy.latency_tolerance * next.long_seconds / recent, 0.5, 1.0);
  const auto clamped = [&policy](double limit) {
    return std::clamp(limit, static_cast<double>(policy.min_limit),
                      static_cast<double>(policy.max_limit));
  };
  if (window.max_in_flight < state.limit / 2) {
    // A hop that never used half its limit was not what held calls back:
    // the window says nothing about its capacity (Netflix's Gradient2
    // leaves such a limit alone too). Its slowness came from below (a slow
    // or restarting callee), so the limit does not shrink; nor does it grow
    // past where it started. A limit that an earlier slowdown lowered goes
    // straight back to its start: at light load no window uses half of it,
    // so it would never grow back, and each restart of a callee would take
    // another tenth off it until a restart's held calls were shed (demo
    // chain, 40 calls/s: the gateway's limit fell 33 -> 16 in six ledger
    // restarts; docs/grpc-1.51.md, "Restarts"). Raised 20 % of the way per window, it
    // still lost to a restart every 3 s.
    next.limit =
        clamped(gradient < 1.0 ? state.limit
                               : std::max(state.limit, static_cast<double>(policy.max_in_flight)));
    return next;
  }
  // A hop that starts below what its load needs grows as TCP's slow start
  // does, until its handler time first rises beyond the tolerance; growing
  // by sqrt(limit), smoothed, a demo gateway took 4 s from 32 to the 128 it
  // needed at its capacity, shedding meanwhile.
  if (slow_start && gradient >= 1.0) {
    next.limit = clamped(2 * state.limit);
    return next;
  }
  if (slow_start) next.windows = policy.slow_start_windows;  // over
  // Probe upwards only while handler time holds: a hop that is slowing down
  // shrinks without a floor of headroom.
  const double target =
      gradient < 1.0 ? state.limit * gradient : state.limit + std::sqrt(state.limit);
  next.limit = clamped(0.8 * state.limit + 0.2 * target);
  return next;
}

bool AdaptiveWindowCloses(const AdmissionPolicy& policy, int samples, absl::Duration lasted,
                          double long_seconds) {
  if (samples < policy.window_samples) return false;
  if (!(long_seconds > 0.0)) return true;  // the first window: nothing to wait for
  return absl::ToDoubleSeconds(lasted) >= policy.window_handler_times * long_seconds;
}

LatencyPredictor::LatencyPredictor(const AdmissionPolicy& policy)
    : enabled_(policy.predict),
      quantile_(policy.quantile),
      min_samples_(policy.predict_min_samples),
      stale_after_ns_(absl::ToInt64Nanoseconds(policy.predict_stale_after)),
      ring_(new std::atomic<int64_t>[static_cast<size_t>(policy.predict_window)]),
      size_(policy.predict_window) {
  for (int i = 0; i < size_; ++i) ring_[i].store(0, std::memory_order_relaxed);
}

void LatencyPredictor::Record(absl::Duration handler_time, absl::Time now) {
  if (!enabled_) return;
  const int64_t now_ns = absl::ToUnixNanos(now);
  const int64_t last = last_record_ns_.exchange(now_ns, std::memory_order_relaxed);
  if (last != 0 && now_ns - last > stale_after_ns_) {
    // What the ring holds describes another time: start again.
    predicted_ns_.store(-1, std::memory_order_relaxed);
    count_.store(0, std::memory_order_relaxed);
  }
  const uint64_t n = count_.fetch_add(1, std::memory_order_relaxed);
  ring_[n % static_cast<uint64_t>(size_)].store(absl::ToInt64Nanoseconds(handler_time),
                                                std::memory_order_relaxed);
  const uint64_t have = n + 1;
  // Recomputed as soon as there are enough samples, then every 16: the
  // prediction trails the ring by at most 16 calls.
  if (have == static_cast<uint64_t>(min_samples_) ||
      (have > static_cast<uint64_t>(min_samples_) && have % 16 == 0)) {
    Recompute(have);
  }
}

void LatencyPredictor::Recompute(uint64_t count) {
  const int n = static_cast<int>(std::min<uint64_t>(count, static_cast<uint64_t>(size_)));
  // On the stack for the usual window sizes: Record() allocates nothing.
  int64_t small[256];
  std::unique_ptr<int64_t[]> large;
  int64_t* v = small;
  if (n > 256) {
    large.reset(new int64_t[static_cast<size_t>(n)]);
    v = large.get();
  }
  for (int i = 0; i < n; ++i) v[i] = ring_[i].load(std::memory_order_relaxed);
  const int k = std::min(n - 1, static_cast<int>(std::ceil(quantile_ * n)) - 1);
  std::nth_element(v, v + std::max(k, 0), v + n);
  predicted_ns_.store(v[std::max(k, 0)], std::memory_order_relaxed);
}

absl::optional<absl::Duration> LatencyPredictor::Predicted(absl::Time now) const {
  const int64_t ns = predicted_ns_.load(std::memory_order_relaxed);
  if (ns < 0) return absl::nullopt;
  if (absl::ToUnixNanos(now) - last_record_ns_.load(std::memory_order_relaxed) > stale_after_ns_) {
    return absl::nullopt;
  }
  return absl::Nanoseconds(ns);
}

// The queue, ordered three ways (deadline, arrival, give-up time), and the
// adaptive limit's state.
struct Admission::Locked {
  using Key = std::pair<absl::Time, uint64_t>;
  mutable internal::Mutex mu;
  uint64_t next_seq ABSL_GUARDED_BY(mu) = 0;
  std::set<Key> by_deadline ABSL_GUARDED_BY(mu);
  std::map<uint64_t, Waiter*> by_seq ABSL_GUARDED_BY(mu);
  std::set<Key> by_expiry ABSL_GUARDED_BY(mu);
  absl::Time nonempty_since ABSL_GUARDED_BY(mu) = absl::InfiniteFuture();
  std::atomic<int>* queued;  // the Admission's count, kept in step

  internal::Mutex window_mu;
  AdaptiveLimitState adaptive ABSL_GUARDED_BY(window_mu);
  absl::Time window_start ABSL_GUARDED_BY(window_mu);

  void Push(Waiter* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    w->seq = next_seq++;
    if (by_seq.empty()) nonempty_since = w->enqueued;
    by_deadline.emplace(w->deadline, w->seq);
    by_expiry.emplace(w->expiry, w->seq);
    by_seq.emplace(w->seq, w);
    queued->fetch_add(1, std::memory_order_seq_cst);
  }
  void Erase(Waiter* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    by_deadline.erase(Key(w->deadline, w->seq));
    by_expiry.erase(Key(w->expiry, w->seq));
    by_seq.erase(w->seq);
    queued->fetch_sub(1, std::memory_order_seq_cst);
    if (by_seq.empty()) nonempty_since = absl::InfiniteFuture();
  }
  Waiter* Pop(absl::Time now, absl::Duration lifo_after) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (by_seq.empty()) return nullptr;
    Waiter* w;
    if (PickQueueOrder(nonempty_since, now, lifo_after) == QueueOrder::kNewestFirst) {
      w = std::prev(by_seq.end())->second;
    } else {
      w = by_seq.at(by_deadline.begin()->second);
    }
    Erase(w);
    return w;
  }
};

absl::StatusOr<std::unique_ptr<Admission>> Admission::Create(const AdmissionPolicy& policy,
                                                             absl::Duration min_attempt_budget,
                                                             Clock* clock) {
  if (absl::Status s = ValidateAdmissionPolicy(policy); !s.ok()) return s;
  if (min_attempt_budget < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("admission: min_attempt_budget must be >= 0");
  }
  return std::unique_ptr<Admission>(
      new Admission(policy, min_attempt_budget, clock != nullptr ? clock : &Clock::Real()));
}

Admission::Admission(const AdmissionPolicy& policy, absl::Duration min_attempt_budget, Clock* clock)
    : policy_(policy),
      min_attempt_budget_(min_attempt_budget),
      clock_(*clock),
      limit_(policy.max_in_flight),
      locked_(std::make_unique<Locked>()) {
  locked_->queued = &queued_;
  internal::MutexLock lock(&locked_->window_mu);
  locked_->adaptive.limit = policy.max_in_flight;
  locked_->window_start = clock_.Now();
}

Admission::~Admission() = default;

bool Admission::TryAcquire() {
  int n = in_flight_.load(std::memory_order_seq_cst);
  while (n < limit_.load(std::memory_order_relaxed)) {
    if (in_flight_.compare_exchange_weak(n, n + 1, std::memory_order_seq_cst)) {
      // The most seen in this window, for the adaptive limit.
      int seen = window_max_in_flight_.load(std::memory_order_relaxed);
      while (n + 1 > seen &&
             !window_max_in_flight_.compare_exchange_weak(seen, n + 1, std::memory_order_relaxed)) {
      }
      return true;
    }
  }
  return false;
}

ArrivalDecision Admission::Arrive(Waiter* w, absl::Time deadline, const LatencyPredictor* predictor,
                                  Ready* others) {
  const absl::Time now = clock_.Now();
  const absl::optional<absl::Duration> predicted =
      predictor != nullptr ? predictor->Predicted(now) : absl::nullopt;
  others->admitted.clear();
  others->shed.clear();
  const absl::Duration remaining =
      deadline == absl::InfiniteFuture() ? absl::InfiniteDuration() : deadline - now;
  auto shed = [&](ArrivalDecision d) {
    shed_[static_cast<int>(d)].fetch_add(1, std::memory_order_relaxed);
    return d;
  };
  if (predicted.has_value() && remaining < *predicted) {
    return shed(ArrivalDecision::kShedCannotFinish);
  }
  // Fast path: nobody waits and there is room.
  if (queued_.load(std::memory_order_seq_cst) == 0 && TryAcquire()) {
    admitted_.fetch_add(1, std::memory_order_relaxed);
    return ArrivalDecision::kAdmit;
  }
  internal::MutexLock lock(&locked_->mu);
  AdmissionState state;
  state.in_flight = in_flight_.load(std::memory_order_seq_cst);
  state.limit = limit_.load(std::memory_order_relaxed);
  state.queued = queued_.load(std::memory_order_relaxed);
  state.max_queue = QueueBound(policy_.max_queue, policy_.queue_per_limit, state.limit);
  const ArrivalDecision d = DecideArrival(state, remaining, predicted);
  switch (d) {
    case ArrivalDecision::kAdmit:
      if (TryAcquire()) {
        admitted_.fetch_add(1, std::memory_order_relaxed);
        return d;
      }
      break;  // lost the place to a concurrent arrival: wait
    case ArrivalDecision::kQueue:
      break;
    default:
      return shed(d);
  }
  if (queued_.load(std::memory_order_relaxed) >= state.max_queue) {
    return shed(policy_.max_queue == 0 ? ArrivalDecision::kShedOverLimit
                                       : ArrivalDecision::kShedQueueFull);
  }
  w->deadline = deadline;
  w->enqueued = now;
  w->predictor = predictor;
  w->expiry = std::min(
      deadline == absl::InfiniteFuture() ? absl::InfiniteFuture() : deadline - min_attempt_budget_,
      now + policy_.max_wait);
  w->timeout = ArrivalDecision::kShedQueueTimeout;
  if (policy_.overload_wait != absl::InfiniteDuration()) {
    // While this waiter is queued the queue is not empty, so the sustained
    // overload it may meet begins at a time known now: lifo_after after the
    // queue last became non-empty (now, if it is empty). From then on it
    // waits at most overload_wait.
    const absl::Time nonempty_since = locked_->by_seq.empty() ? now : locked_->nonempty_since;
    const absl::Time overload =
        std::max(nonempty_since + policy_.lifo_after, now + policy_.overload_wait);
    if (overload < w->expiry) {
      w->expiry = overload;
      w->timeout = ArrivalDecision::kShedOverloadWait;
    }
  }
  locked_->Push(w);
  // A release that ran between our look at in_flight and the push saw an
  // empty queue and admitted nobody (and a grown adaptive limit admits
  // nobody by itself): look again, now that we are queued. The drain may
  // reach waiters ahead of us; they go to `others`.
  DrainLocked(now, others);
  ArrivalDecision mine = ArrivalDecision::kQueue;
  auto& admitted = others->admitted;
  for (auto it = admitted.begin(); it != admitted.end(); ++it) {
    if (*it == w) {
      admitted.erase(it);
      mine = ArrivalDecision::kAdmit;
      break;
    }
  }
  auto& shed_list = others->shed;
  for (auto it = shed_list.begin(); it != shed_list.end(); ++it) {
    if (it->first == w) {
      mine = it->second;
      shed_list.erase(it);
      break;
    }
  }
  return mine;
}

void Admission::DrainLocked(absl::Time now, Ready* ready) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  while (!locked_->by_seq.empty() && TryAcquire()) {
    Waiter* w = locked_->Pop(now, policy_.lifo_after);
    const absl::Duration remaining =
        w->deadline == absl::InfiniteFuture() ? absl::InfiniteDuration() : w->deadline - now;
    ArrivalDecision shed_as = ArrivalDecision::kAdmit;
    if (remaining < min_attempt_budget_) {
      shed_as = ArrivalDecision::kShedQueueExpired;
    } else if (const absl::optional<absl::Duration> predicted =
                   w->predictor != nullptr ? w->predictor->Predicted(now) : absl::nullopt;
               predicted.has_value() && remaining < *predicted) {
      shed_as = ArrivalDecision::kShedCannotFinish;
    }
    if (shed_as == ArrivalDecision::kAdmit) {
      admitted_after_wait_.fetch_add(1, std::memory_order_relaxed);
      ready->admitted.push_back(w);
    } else {
      in_flight_.fetch_sub(1, std::memory_order_seq_cst);  // the place goes to the next
      shed_[static_cast<int>(shed_as)].fetch_add(1, std::memory_order_relaxed);
      ready->shed.emplace_back(w, shed_as);
    }
  }
}

void Admission::Release(absl::optional<absl::Duration> finished_in, Ready* ready) {
  ready->admitted.clear();
  ready->shed.clear();
  in_flight_.fetch_sub(1, std::memory_order_seq_cst);
  if (policy_.limit == LimitKind::kAdaptive && finished_in.has_value()) Sample(*finished_in);
  if (queued_.load(std::memory_order_seq_cst) == 0) return;
  internal::MutexLock lock(&locked_->mu);
  DrainLocked(clock_.Now(), ready);
}

void Admission::Sample(absl::Duration handler_time) {
  window_sum_ns_.fetch_add(absl::ToInt64Nanoseconds(handler_time), std::memory_order_relaxed);
  const int n = window_count_.fetch_add(1, std::memory_order_acq_rel) + 1;
  // Each multiple of window_samples is seen by one completion, which checks
  // whether the window has lasted long enough to close.
  if (n % policy_.window_samples != 0) return;
  internal::MutexLock lock(&locked_->window_mu);
  const absl::Time now = clock_.Now();
  if (!AdaptiveWindowCloses(policy_, n, now - locked_->window_start,
                            locked_->adaptive.long_seconds)) {
    return;
  }
  // This completion closes the window. Samples that land between the reads
  // and the resets count in the next window.
  locked_->window_start = now;
  LimitWindow window;
  window.mean_handler_time =
      absl::Nanoseconds(window_sum_ns_.exchange(0, std::memory_order_relaxed) / n);
  window.max_in_flight = window_max_in_flight_.exchange(0, std::memory_order_relaxed);
  window_count_.store(0, std::memory_order_release);
  locked_->adaptive = NextAdaptiveLimit(policy_, locked_->adaptive, window);
  limit_.store(static_cast<int>(std::lround(locked_->adaptive.limit)), std::memory_order_relaxed);
}

void Admission::Expire(Ready* ready) {
  ready->admitted.clear();
  ready->shed.clear();
  const absl::Time now = clock_.Now();
  Locked& q = *locked_;
  internal::MutexLock lock(&q.mu);
  while (!q.by_expiry.empty() && q.by_expiry.begin()->first <= now) {
    Waiter* w = q.by_seq.at(q.by_expiry.begin()->second);
    q.Erase(w);
    const ArrivalDecision why =
        w->deadline != absl::InfiniteFuture() && w->deadline - now < min_attempt_budget_
            ? ArrivalDecision::kShedQueueExpired
            : w->timeout;
    shed_[static_cast<int>(why)].fetch_add(1, std::memory_order_relaxed);
    ready->shed.emplace_back(w, why);
  }
}

absl::Time Admission::NextExpiry() const {
  internal::MutexLock lock(&locked_->mu);
  return locked_->by_expiry.empty() ? absl::InfiniteFuture() : locked_->by_expiry.begin()->first;
}

bool Admission::Leave(Waiter* w) {
  internal::MutexLock lock(&locked_->mu);
  auto it = locked_->by_seq.find(w->seq);
  if (it == locked_->by_seq.end() || it->second != w) return false;
  locked_->Erase(w);
  return true;
}

AdmissionStats Admission::Stats() const {
  AdmissionStats s;
  s.admitted = admitted_.load(std::memory_order_relaxed);
  s.admitted_after_wait = admitted_after_wait_.load(std::memory_order_relaxed);
  for (int i = 0; i < kArrivalDecisionCount; ++i)
    s.shed[i] = shed_[i].load(std::memory_order_relaxed);
  s.in_flight = in_flight_.load(std::memory_order_relaxed);
  s.queued = queued_.load(std::memory_order_relaxed);
  s.limit = limit_.load(std::memory_order_relaxed);
  internal::MutexLock lock(&locked_->mu);
  s.order = PickQueueOrder(locked_->nonempty_since, clock_.Now(), policy_.lifo_after);
  return s;
}

}  // namespace hopbudget
