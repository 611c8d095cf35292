// Copyright hopbudget authors.
//
// timer_service.h (internal): one thread, one ordered queue, for every timer
// hopbudget arms. No thread per call and no polling: the thread sleeps on a
// condition variable until the earliest timer is due or the queue changes.
//
// Timers read time from the injected Clock. With `start_thread = false` no
// thread runs and tests call RunDue() after advancing a FakeClock.
//
// A timer may carry slack: it may run up to that much after its time. One
// with slack that the thread will reach by its next wake-up anyway is
// queued without waking it, so a stream of imprecise timers (refusals'
// backstops) costs no context switch each.
//
// Thread safety: all methods may be called concurrently. Callbacks run on the
// service's thread (or the RunDue() caller) without the lock held; they must
// be short and must not block.
#ifndef HOPBUDGET_INTERNAL_TIMER_SERVICE_H_
#define HOPBUDGET_INTERNAL_TIMER_SERVICE_H_

#include <cstdint>
#include <map>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/time/time.h"
#include "hopbudget/advanced/clock.h"
#include "sync.h"

namespace hopbudget {
namespace internal {

class TimerService {
 public:
  using TimerId = uint64_t;  // never 0
  using Callback = absl::AnyInvocable<void() &&>;

  enum class CancelOutcome {
    kCancelled,  // the callback will never run
    kTooLate,    // the callback already ran (Cancel waited for it to finish)
  };

  struct Options {
    bool start_thread = true;
  };

  explicit TimerService(Clock& clock) : TimerService(clock, Options()) {}
  TimerService(Clock& clock, Options options);
  // Stops the thread. Timers still queued are dropped without running.
  ~TimerService();

  TimerService(const TimerService&) = delete;
  TimerService& operator=(const TimerService&) = delete;

  // Runs `fn` once at or after `when`. A `when` in the past runs at the next
  // opportunity; InfiniteFuture() never runs (but still returns an id).
  TimerId Schedule(absl::Time when, Callback fn) {
    return Schedule(when, absl::ZeroDuration(), std::move(fn));
  }
  // Runs `fn` once at or after `when`, and, while the thread runs, at most
  // `slack` (>= 0) after it (plus the scheduling delay every timer has).
  TimerId Schedule(absl::Time when, absl::Duration slack, Callback fn);

  // Cancels `id`. If its callback is running on another thread, waits for it
  // to return, so that after Cancel() the callback's captures may be freed.
  // Called from inside that very callback it does not wait.
  CancelOutcome Cancel(TimerId id);

  // Runs every timer due at clock.Now(), in deadline order. Returns how many
  // ran. Used by tests with start_thread = false.
  int RunDue();

  size_t pending() const;

  // For tests: how many times Schedule() woke the thread, and when the
  // thread next looks at the queue unwoken (InfinitePast: it is running or
  // has not started waiting; InfiniteFuture: it sleeps until woken).
  uint64_t wakeups() const;
  absl::Time next_wake() const;

  // The process-wide service on Clock::Real(). Never destroyed.
  static TimerService& Shared();

 private:
  using Key = std::pair<absl::Time, TimerId>;

  // Pops and runs the earliest timer if it is due. Called with mu_ held;
  // releases it while the callback runs.
  bool RunOneLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Loop();

  Clock& clock_;
  mutable internal::Mutex mu_;
  internal::CondVar changed_;        // the queue's front changed, or stop_
  internal::CondVar callback_done_;  // a callback returned
  std::map<Key, Callback> queue_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<TimerId, absl::Time> when_ ABSL_GUARDED_BY(mu_);
  TimerId next_id_ ABSL_GUARDED_BY(mu_) = 1;
  TimerId running_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread::id running_thread_ ABSL_GUARDED_BY(mu_);
  absl::Time wake_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  uint64_t wakeups_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace internal
}  // namespace hopbudget

#endif  // HOPBUDGET_INTERNAL_TIMER_SERVICE_H_
