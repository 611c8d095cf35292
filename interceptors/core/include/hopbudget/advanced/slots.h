// Copyright hopbudget authors.
//
// slots.h: bounded concurrency towards one downstream, as a pure queue.
//
// A SlotQueue holds `capacity` slots. A call that finds one free takes it; a
// call that finds none waits in FIFO order, each waiter with its own give-up
// time: the latest instant at which a slot is still worth having (its
// deadline minus min_attempt_budget, GiveUpTime()). The wait is part of the
// call's budget: a waiter still queued at its give-up time is expired, and a
// call whose give-up time has already passed when it finds no slot is
// refused at once. Either way the caller fails it with source `slot-wait`
// without touching the network. The gRPC adapter is DownstreamSlots
// (slots_grpc.h); it drives this queue from one lock and one timer.
//
// Semantics:
//   - Acquire grants a free slot only when nobody is waiting (no barging:
//     waiters are served first, in arrival order);
//   - Release hands the slot to the oldest waiter whose give-up time is
//     after `now`; waiters passed over on the way are expired and returned,
//     so the caller can fail them in the same step;
//   - Expire removes every waiter whose give-up time is at or before `now`;
//     NextExpiry says when the next one falls due (arm one timer for it);
//   - Cancel removes a waiter that no longer wants a slot.
// A grant reports how long the waiter waited (queue wait is measured).
//
// Cost: O(log n) per operation in the number of waiters; no allocation
// beyond the waiter's two tree nodes.
//
// Thread safety: none; the owner serializes access (DownstreamSlots holds one
// mutex around it).
//
// Example:
//   hopbudget::SlotQueueOptions o;
//   o.capacity = 2;
//   absl::StatusOr<hopbudget::SlotQueue> q = hopbudget::SlotQueue::Create(o);
//   hopbudget::SlotRequest r = q->Acquire(now, hopbudget::GiveUpTime(deadline, min_budget));
//   if (r.outcome == hopbudget::SlotOutcome::kQueued) { remember r.ticket; arm q->NextExpiry(); }
//   ... when a call ends: hopbudget::SlotHandoff h = q->Release(clock.Now());
#ifndef HOPBUDGET_ADVANCED_SLOTS_H_
#define HOPBUDGET_ADVANCED_SLOTS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <ostream>
#include <set>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"

namespace hopbudget {

struct SlotQueueOptions {
  // Calls in flight at most; >= 1.
  int capacity = 0;
  // Waiters at most; beyond it a call is refused at once (kRefused with
  // SlotRefusal::kQueueFull). >= 1.
  size_t max_waiters = 1 << 20;
};

enum class SlotOutcome {
  kGranted,  // a slot is the caller's now
  kQueued,   // wait for Release/Expire to name `ticket`
  kRefused,  // no slot, and none can come in time (see `refusal`)
};
// Stable names for logs and test failures: "granted", "queued", "refused".
// AbslStringify and operator<< print them (GoogleTest, streams).
inline absl::string_view SlotOutcomeName(SlotOutcome value) {
  switch (value) {
    case SlotOutcome::kGranted:
      return "granted";
    case SlotOutcome::kQueued:
      return "queued";
    case SlotOutcome::kRefused:
      return "refused";
  }
  return "unknown";
}
template <typename Sink>
void AbslStringify(Sink& sink, SlotOutcome value) {
  sink.Append(SlotOutcomeName(value));
}
inline std::ostream& operator<<(std::ostream& os, SlotOutcome value) {
  return os << SlotOutcomeName(value);
}

enum class SlotRefusal {
  kNone,
  kNoTimeToWait,  // give-up time already at or before now
  kQueueFull,     // max_waiters already waiting
};
// Stable names for logs and test failures: "none", "no_time_to_wait", "queue_full".
// AbslStringify and operator<< print them (GoogleTest, streams).
inline absl::string_view SlotRefusalName(SlotRefusal value) {
  switch (value) {
    case SlotRefusal::kNone:
      return "none";
    case SlotRefusal::kNoTimeToWait:
      return "no_time_to_wait";
    case SlotRefusal::kQueueFull:
      return "queue_full";
  }
  return "unknown";
}
template <typename Sink>
void AbslStringify(Sink& sink, SlotRefusal value) {
  sink.Append(SlotRefusalName(value));
}
inline std::ostream& operator<<(std::ostream& os, SlotRefusal value) {
  return os << SlotRefusalName(value);
}

struct SlotRequest {
  SlotOutcome outcome = SlotOutcome::kRefused;
  SlotRefusal refusal = SlotRefusal::kNone;
  uint64_t ticket = 0;  // kQueued only; never 0
};

// A waiter handed a slot, or expired.
struct SlotWaiter {
  uint64_t ticket = 0;
  absl::Duration waited;  // from Acquire to the grant or expiry
};

struct SlotHandoff {
  absl::optional<SlotWaiter> granted;  // the slot moved to this waiter
  std::vector<SlotWaiter> expired;     // passed over: their give-up time came
};

// deadline - min_attempt_budget; InfiniteFuture() for no deadline.
absl::Time GiveUpTime(absl::Time deadline, absl::Duration min_attempt_budget);

class SlotQueue {
 public:
  // InvalidArgument for capacity < 1 or max_waiters < 1.
  [[nodiscard]] static absl::StatusOr<SlotQueue> Create(SlotQueueOptions options);

  SlotRequest Acquire(absl::Time now, absl::Time give_up);
  // Gives back one slot taken by a grant. A release with no slot in use is
  // ignored (returns an empty handoff).
  SlotHandoff Release(absl::Time now);
  std::vector<SlotWaiter> Expire(absl::Time now);
  // True when `ticket` was waiting (it is removed); false otherwise.
  bool Cancel(uint64_t ticket);
  // The earliest give-up time of a waiter; InfiniteFuture() when none.
  absl::Time NextExpiry() const;

  int in_use() const { return in_use_; }
  size_t waiting() const { return waiters_.size(); }
  int capacity() const { return options_.capacity; }

 private:
  struct Waiter {
    absl::Time enqueued;
    absl::Time give_up;
  };
  explicit SlotQueue(SlotQueueOptions options) : options_(options) {}
  void Remove(std::map<uint64_t, Waiter>::iterator it);

  SlotQueueOptions options_;
  int in_use_ = 0;
  uint64_t next_ticket_ = 1;
  std::map<uint64_t, Waiter> waiters_;                    // by ticket: arrival order
  std::set<std::pair<absl::Time, uint64_t>> by_give_up_;  // expiry order
};

}  // namespace hopbudget

#endif  // HOPBUDGET_ADVANCED_SLOTS_H_
