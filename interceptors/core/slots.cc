// Copyright hopbudget authors.
#include "hopbudget/advanced/slots.h"

#include "absl/strings/str_cat.h"

namespace hopbudget {

absl::Time GiveUpTime(absl::Time deadline, absl::Duration min_attempt_budget) {
  if (deadline == absl::InfiniteFuture()) return deadline;
  return deadline - min_attempt_budget;
}

absl::StatusOr<SlotQueue> SlotQueue::Create(SlotQueueOptions options) {
  if (options.capacity < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("SlotQueueOptions.capacity must be >= 1, got ", options.capacity));
  }
  if (options.max_waiters < 1) {
    return absl::InvalidArgumentError("SlotQueueOptions.max_waiters must be >= 1, got 0");
  }
  return SlotQueue(options);
}

SlotRequest SlotQueue::Acquire(absl::Time now, absl::Time give_up) {
  SlotRequest r;
  if (in_use_ < options_.capacity && waiters_.empty()) {
    ++in_use_;
    r.outcome = SlotOutcome::kGranted;
    return r;
  }
  if (give_up <= now) {
    r.refusal = SlotRefusal::kNoTimeToWait;
    return r;
  }
  if (waiters_.size() >= options_.max_waiters) {
    r.refusal = SlotRefusal::kQueueFull;
    return r;
  }
  r.outcome = SlotOutcome::kQueued;
  r.ticket = next_ticket_++;
  waiters_.emplace(r.ticket, Waiter{now, give_up});
  by_give_up_.emplace(give_up, r.ticket);
  return r;
}

void SlotQueue::Remove(std::map<uint64_t, Waiter>::iterator it) {
  by_give_up_.erase({it->second.give_up, it->first});
  waiters_.erase(it);
}

SlotHandoff SlotQueue::Release(absl::Time now) {
  SlotHandoff h;
  if (in_use_ == 0) return h;
  while (!waiters_.empty()) {
    auto it = waiters_.begin();
    const SlotWaiter w{it->first, now - it->second.enqueued};
    const bool expired = it->second.give_up <= now;
    Remove(it);
    if (expired) {
      h.expired.push_back(w);
      continue;
    }
    h.granted = w;  // the slot changes hands: in_use_ stays
    return h;
  }
  --in_use_;
  return h;
}

std::vector<SlotWaiter> SlotQueue::Expire(absl::Time now) {
  std::vector<SlotWaiter> out;
  while (!by_give_up_.empty() && by_give_up_.begin()->first <= now) {
    auto it = waiters_.find(by_give_up_.begin()->second);
    out.push_back(SlotWaiter{it->first, now - it->second.enqueued});
    Remove(it);
  }
  return out;
}

bool SlotQueue::Cancel(uint64_t ticket) {
  auto it = waiters_.find(ticket);
  if (it == waiters_.end()) return false;
  Remove(it);
  return true;
}

absl::Time SlotQueue::NextExpiry() const {
  return by_give_up_.empty() ? absl::InfiniteFuture() : by_give_up_.begin()->first;
}

}  // namespace hopbudget
