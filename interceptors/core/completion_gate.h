// Copyright hopbudget authors.
//
// completion_gate.h (internal): holds a call's completion back while code
// the call runs for its user is still running.
//
// The callback forms (RetryLoop::Start, DownstreamSlots::Start,
// Hedger::Start, Race::Start) run the user's attempt functions on whatever
// thread resumes the call: the caller's, the shared timer's, or another
// call's completion (a slot handed on). The attempt they start can end on a
// gRPC thread before the attempt function has returned, and with it the
// whole call. Were `on_done` to run then, it could free what the attempt
// function still touches: its caller's reactor (orders' slot grant wrote to
// a CreateOrderCall that its own answer had deleted). A CompletionGate rules
// that out for every user of a primitive: each user function runs inside
// Run(), and Complete() calls `on_done` only once no Run() is in progress,
// on the thread of the last one to return.
//
// Not in `on_done`'s way otherwise: with nothing running, Complete() calls
// it at once, on the completing thread, with no lock held.
//
// Thread safety: Run() and Complete() may be called from any threads at
// once. The owner keeps the gate alive across every Run() and Complete()
// (the call objects hold a reference to themselves while they run).
#ifndef HOPBUDGET_INTERNAL_COMPLETION_GATE_H_
#define HOPBUDGET_INTERNAL_COMPLETION_GATE_H_

#include <utility>

#include "absl/functional/any_invocable.h"
#include "absl/types/optional.h"
#include "call_mutex.h"

namespace hopbudget {
namespace internal {

template <typename Result>
class CompletionGate {
 public:
  explicit CompletionGate(absl::AnyInvocable<void(Result)> on_done)
      : on_done_(std::move(on_done)) {}
  CompletionGate(const CompletionGate&) = delete;
  CompletionGate& operator=(const CompletionGate&) = delete;

  // Runs `fn()`; a Complete() that comes meanwhile, from any thread, waits
  // for it (and for every other Run() in progress) to return.
  template <typename Fn>
  void Run(Fn&& fn) {
    {
      CallMutexLock lock(&mu_);
      ++running_;
    }
    std::forward<Fn>(fn)();
    absl::optional<Result> held;
    {
      CallMutexLock lock(&mu_);
      if (--running_ > 0 || !held_.has_value()) return;
      held.swap(held_);
    }
    Deliver(*std::move(held));
  }

  // Completes the call with `result`, the first time only: `on_done` runs
  // now, or when the last Run() in progress returns.
  void Complete(Result result) {
    {
      CallMutexLock lock(&mu_);
      if (completed_) return;
      completed_ = true;
      if (running_ > 0) {
        held_.emplace(std::move(result));
        return;
      }
    }
    Deliver(std::move(result));
  }

 private:
  void Deliver(Result result) {
    // Moved out first: `on_done` may drop the last reference to the owner.
    auto on_done = std::move(on_done_);
    on_done(std::move(result));
  }

  CallMutex mu_;
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  bool completed_ ABSL_GUARDED_BY(mu_) = false;
  absl::optional<Result> held_ ABSL_GUARDED_BY(mu_);
  absl::AnyInvocable<void(Result)> on_done_;  // taken once, by Deliver()
};

}  // namespace internal
}  // namespace hopbudget

#endif  // HOPBUDGET_INTERNAL_COMPLETION_GATE_H_
