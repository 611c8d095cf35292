// Copyright hopbudget authors.
#include "hopbudget/advanced/remaining.h"

#include <algorithm>

namespace hopbudget {

RemainingTime RemainingOf(const RequestBudget& budget, absl::Duration hop_reserve, absl::Time now) {
  RemainingTime r;
  r.deadline = budget.deadline;
  r.source = budget.source;
  if (budget.outcome != ArrivalOutcome::kAccepted) {
    r.outcome = RemainingOutcome::kExhausted;
    r.source = DeadlineSource::kArrivedExpired;
    r.left =
        budget.deadline == absl::InfiniteFuture() ? absl::ZeroDuration() : budget.deadline - now;
    r.usable = absl::ZeroDuration();
    return r;
  }
  if (budget.deadline == absl::InfiniteFuture()) {
    r.source = DeadlineSource::kNone;
    return r;  // kUnbounded, infinite left and usable
  }
  r.left = budget.deadline - now;
  r.usable = std::max(r.left - std::max(hop_reserve, absl::ZeroDuration()), absl::ZeroDuration());
  r.outcome =
      r.left > absl::ZeroDuration() ? RemainingOutcome::kOpen : RemainingOutcome::kExhausted;
  return r;
}

}  // namespace hopbudget
