// Copyright hopbudget authors.
//
// remaining.h: how much of a request budget is left, and which budget bounds
// it, for a handler that wants to decide (skip optional work, pick a cheaper
// path, size a fan-out) before it calls downstream. Pure arithmetic; the
// gRPC adapter is hopbudget::Remaining() in remaining_grpc.h.
//
// Edge cases: an infinite request deadline gives kUnbounded with infinite
// `left` and `usable`; a deadline at or before `now`, or a call refused on
// arrival, gives kExhausted with `usable` zero (`left` keeps the signed
// value, so a log can say by how much). `usable` is `left` less the hop
// reserve, never negative: what a downstream call started now could get.
//
// Thread safety: pure functions on values.
//
// Example:
//   hopbudget::RemainingTime r =
//       hopbudget::RemainingOf(budget.request_budget(), policy.hop_reserve, clock.Now());
//   if (r.usable < absl::Milliseconds(50)) return CheapAnswer();
#ifndef HOPBUDGET_ADVANCED_REMAINING_H_
#define HOPBUDGET_ADVANCED_REMAINING_H_

#include <ostream>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "hopbudget/advanced/budget.h"
#include "hopbudget/advanced/deadline_source.h"

namespace hopbudget {

enum class RemainingOutcome {
  kOpen,       // a finite budget with time left
  kUnbounded,  // no deadline bounds the request
  kExhausted,  // the budget has run out, or the call was refused on arrival
};
// Stable names for logs and test failures: "open", "unbounded", "exhausted".
// AbslStringify and operator<< print them (GoogleTest, streams).
inline absl::string_view RemainingOutcomeName(RemainingOutcome value) {
  switch (value) {
    case RemainingOutcome::kOpen:
      return "open";
    case RemainingOutcome::kUnbounded:
      return "unbounded";
    case RemainingOutcome::kExhausted:
      return "exhausted";
  }
  return "unknown";
}
template <typename Sink>
void AbslStringify(Sink& sink, RemainingOutcome value) {
  sink.Append(RemainingOutcomeName(value));
}
inline std::ostream& operator<<(std::ostream& os, RemainingOutcome value) {
  return os << RemainingOutcomeName(value);
}

struct RemainingTime {
  RemainingOutcome outcome = RemainingOutcome::kUnbounded;
  // deadline - now: InfiniteDuration() when unbounded; may be negative.
  absl::Duration left = absl::InfiniteDuration();
  // max(left - hop_reserve, 0): what a downstream call started now could get.
  absl::Duration usable = absl::InfiniteDuration();
  // The budget that bounds the request: kClient (the caller's deadline),
  // kRequest (this hop's cap), kArrivedExpired (refused on arrival), kNone
  // when unbounded.
  DeadlineSource source = DeadlineSource::kNone;
  absl::Time deadline = absl::InfiniteFuture();
};

// What is left at `now` of the request budget `budget` (as derived on
// arrival), keeping `hop_reserve` back for this hop's own work.
RemainingTime RemainingOf(const RequestBudget& budget, absl::Duration hop_reserve, absl::Time now);

}  // namespace hopbudget

#endif  // HOPBUDGET_ADVANCED_REMAINING_H_
