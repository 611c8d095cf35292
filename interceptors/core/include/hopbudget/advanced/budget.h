// Copyright hopbudget authors.
//
// budget.h: the budget engine. Pure arithmetic, no gRPC types.
//
// One absolute deadline shrinks as a request travels. Each hop:
//   1. derives its request budget from the inbound deadline, capped by its own
//      per-request budget (`DeriveRequestBudget`), and refuses the call if what
//      is left is already below the minimum useful budget;
//   2. derives every downstream call's deadline from what remains of the
//      request budget, minus a per-hop reserve, capped by the per-attempt
//      budget (`DeriveCallDeadline`); a call that cannot get the minimum
//      useful budget is not started at all.
// Budgets therefore nest strictly: attempt < request - reserve <= client.
// `ValidatePolicy` checks at start-up that a policy lets this happen.
//
// Infinite values: `absl::InfiniteDuration()` in a policy field means "no cap";
// `absl::InfiniteFuture()` as a deadline means "no deadline". Arithmetic
// saturates (absl::Time semantics): InfiniteFuture() - reserve is still
// InfiniteFuture(), and Now() + InfiniteDuration() is InfiniteFuture().
// `absl::InfinitePast()` as an inbound deadline is treated as expired.
//
// Thread safety: pure functions on values; BudgetPolicy is a plain struct.
//
// Example:
//   hopbudget::BudgetPolicy policy;
//   policy.request_cap = absl::Seconds(2);
//   policy.attempt_cap = absl::Milliseconds(600);
//   policy.hop_reserve = absl::Milliseconds(5);
//   assert(hopbudget::ValidatePolicy(policy).ok());
//   hopbudget::RequestBudget req =
//       hopbudget::DeriveRequestBudget(policy, inbound_deadline, clock.Now());
//   if (req.outcome != hopbudget::ArrivalOutcome::kAccepted) return;  // refused
//   hopbudget::CallDeadline call =
//       hopbudget::DeriveCallDeadline(policy, req.deadline, req.source, clock.Now());
//   if (call.outcome == hopbudget::CallOutcome::kExhausted) { /* fail fast */ }
#ifndef HOPBUDGET_ADVANCED_BUDGET_H_
#define HOPBUDGET_ADVANCED_BUDGET_H_

#include <cstdint>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "hopbudget/advanced/deadline_source.h"

namespace hopbudget {

// The budgets of one service. All fields are durations >= 0.
struct BudgetPolicy {
  // Most time this service spends on one request, whatever the caller allows.
  absl::Duration request_cap = absl::InfiniteDuration();
  // Most time one downstream attempt may take.
  absl::Duration attempt_cap = absl::InfiniteDuration();
  // Time kept back from every downstream call for this hop's own work after
  // the call returns (building the reply, sending it upstream). It is also
  // what lets a hop's attribution reach its caller before the caller's own
  // deadline fires: gRPC's timers fire a few ms late under load, so keep it
  // above that.
  absl::Duration hop_reserve = absl::Milliseconds(5);
  // Below this, an inbound call is refused on arrival and a downstream call is
  // not started: there is no point in work that cannot finish.
  absl::Duration min_attempt_budget = absl::Milliseconds(1);
  // Inbound budgets larger than this are clamped to it (an untrusted or buggy
  // caller cannot make this service work for an hour). Fires as kRequest.
  absl::Duration max_inbound_budget = absl::InfiniteDuration();
};

// Checks that the budgets of `policy` can nest strictly:
//   - no field is negative; request_cap, attempt_cap and max_inbound_budget
//     are > 0;
//   - min_attempt_budget <= attempt_cap (else no call could ever start);
//   - min_attempt_budget + hop_reserve < request_cap (else every downstream
//     call would fail before it starts);
//   - attempt_cap + hop_reserve < request_cap when both are finite (else the
//     request budget always fires first and the attempt budget, and any retry
//     that depends on it, can never run);
//   - request_cap <= max_inbound_budget (else the request cap never applies).
// Returns InvalidArgument with a message naming the fields and their values.
absl::Status ValidatePolicy(const BudgetPolicy& policy);

enum class ArrivalOutcome {
  kAccepted,
  kExpired,       // the deadline had already passed on arrival
  kBelowMinimum,  // time was left, but less than min_attempt_budget
  // Set by admission (admission.h), never by DeriveRequestBudget:
  kShedCannotFinish,  // less budget than the predicted handler time
  kShedQueueExpired,  // waited for admission until less than min_attempt_budget was left
  kShedOverload,      // over the limit: queue full, no queue, or waited max_wait
};
// Stable names for logs and test failures: "accepted", "expired", "below_minimum".
// AbslStringify and operator<< print them (GoogleTest, streams).
inline absl::string_view ArrivalOutcomeName(ArrivalOutcome value) {
  switch (value) {
    case ArrivalOutcome::kAccepted:
      return "accepted";
    case ArrivalOutcome::kExpired:
      return "expired";
    case ArrivalOutcome::kBelowMinimum:
      return "below_minimum";
    case ArrivalOutcome::kShedCannotFinish:
      return "shed_cannot_finish";
    case ArrivalOutcome::kShedQueueExpired:
      return "shed_queue_expired";
    case ArrivalOutcome::kShedOverload:
      return "shed_overload";
  }
  return "unknown";
}
template <typename Sink>
void AbslStringify(Sink& sink, ArrivalOutcome value) {
  sink.Append(ArrivalOutcomeName(value));
}
inline std::ostream& operator<<(std::ostream& os, ArrivalOutcome value) {
  return os << ArrivalOutcomeName(value);
}

// The request budget of one inbound call.
struct RequestBudget {
  ArrivalOutcome outcome = ArrivalOutcome::kAccepted;
  absl::Time arrival;
  // Effective request deadline: min(inbound deadline, arrival + request cap,
  // arrival + max inbound budget). InfiniteFuture() when nothing bounds it.
  absl::Time deadline = absl::InfiniteFuture();
  // Which budget defines `deadline`: kClient when the caller's deadline is the
  // tightest (ties go to the caller), kRequest when this service's cap is,
  // kNone when the deadline is infinite.
  DeadlineSource source = DeadlineSource::kNone;
  // deadline - arrival (InfiniteDuration() when infinite, <= 0 when expired).
  absl::Duration budget_on_arrival = absl::InfiniteDuration();
};

// Derives the request budget of a call that arrived at `now` with deadline
// `inbound_deadline` (InfiniteFuture() when the caller set none).
RequestBudget DeriveRequestBudget(const BudgetPolicy& policy, absl::Time inbound_deadline,
                                  absl::Time now);

enum class CallOutcome {
  kProceed,    // start the call with `deadline`
  kExhausted,  // less than min_attempt_budget left: do not touch the network
};
// Stable names for logs and test failures: "proceed", "exhausted".
// AbslStringify and operator<< print them (GoogleTest, streams).
inline absl::string_view CallOutcomeName(CallOutcome value) {
  switch (value) {
    case CallOutcome::kProceed:
      return "proceed";
    case CallOutcome::kExhausted:
      return "exhausted";
  }
  return "unknown";
}
template <typename Sink>
void AbslStringify(Sink& sink, CallOutcome value) {
  sink.Append(CallOutcomeName(value));
}
inline std::ostream& operator<<(std::ostream& os, CallOutcome value) {
  return os << CallOutcomeName(value);
}

// The deadline of one downstream call (one attempt).
struct CallDeadline {
  CallOutcome outcome = CallOutcome::kProceed;
  // min(parent_deadline - hop_reserve, now + attempt_cap).
  absl::Time deadline = absl::InfiniteFuture();
  // Which budget defines `deadline`: kAttempt when the attempt cap is the
  // tightest, otherwise the parent's source (ties go to the parent, since a
  // retry cannot help there). kNone when infinite.
  DeadlineSource source = DeadlineSource::kNone;
  // deadline - now (InfiniteDuration() when infinite).
  absl::Duration budget = absl::InfiniteDuration();
};

// Derives the deadline of a downstream call started at `now` from the parent
// deadline (normally RequestBudget::deadline) and the parent's source.
CallDeadline DeriveCallDeadline(const BudgetPolicy& policy, absl::Time parent_deadline,
                                DeadlineSource parent_source, absl::Time now);

// Shadow mode (MethodPolicy::shadow, policy_table.h): hopbudget works out
// what it would do to a call and does none of it, so that an operator can
// see, on a service that already runs, what turning it on would change.
//
// What hopbudget would have done, and did not.
enum class ShadowAction : uint8_t {
  kNone = 0,
  kRefuse,    // the call arrived with less than min_attempt_budget (or expired)
  kCut,       // the call ran past this hop's request cap
  kFailFast,  // a downstream call would not have been started (too little left)
};
inline constexpr int kShadowActionCount = 4;
// Stable names: "none", "refuse", "cut", "fail_fast" (the `action` label of
// hopbudget_shadow_total). AbslStringify and operator<< print them.
inline absl::string_view ShadowActionName(ShadowAction value) {
  switch (value) {
    case ShadowAction::kNone:
      return "none";
    case ShadowAction::kRefuse:
      return "refuse";
    case ShadowAction::kCut:
      return "cut";
    case ShadowAction::kFailFast:
      return "fail_fast";
  }
  return "unknown";
}
template <typename Sink>
void AbslStringify(Sink& sink, ShadowAction value) {
  sink.Append(ShadowActionName(value));
}
inline std::ostream& operator<<(std::ostream& os, ShadowAction value) {
  return os << ShadowActionName(value);
}

// The budget a call in shadow mode runs under: the caller's own deadline
// (`caller_deadline`, InfiniteFuture() for none), accepted whatever is left
// (even expired: without hopbudget the handler runs, and gRPC ends the call
// at that deadline), source kClient (kNone when infinite).
RequestBudget PassThroughRequestBudget(absl::Time caller_deadline, absl::Time now);

// The policy of a request in shadow mode: no caps, no reserve, no minimum,
// so a downstream call takes the request's own deadline, as gRPC's deadline
// propagation gives it. Lives for the whole program.
const BudgetPolicy& PassThroughPolicy();

// What hopbudget would have done to a call whose budget would have been
// `would` (DeriveRequestBudget with the method's real policy), seen at `now`:
// kRefuse when `would` was refused; kCut once `now` is past a deadline this
// hop's own cap set (source kRequest); else kNone. Called when the call
// arrives (a refusal) and when it ends (a cut).
ShadowAction ShadowActionAt(const RequestBudget& would, absl::Time now);

// Waiting for a ready backend (ClientOptions::backend_wait, client.h).
//
// What a channel can say of its backends, as gRPC's connectivity states.
enum class BackendState { kIdle, kConnecting, kReady, kTransientFailure, kShutdown };
enum class BackendWaitOutcome {
  kGo,      // send the call now
  kWait,    // hold it until the channel's state changes, at most until `until`
  kGiveUp,  // end it: DEADLINE_EXCEEDED, source no-backend
};
// Stable names for logs and test failures: "go", "wait", "give_up".
// AbslStringify and operator<< print them (GoogleTest, streams).
inline absl::string_view BackendWaitOutcomeName(BackendWaitOutcome value) {
  switch (value) {
    case BackendWaitOutcome::kGo:
      return "go";
    case BackendWaitOutcome::kWait:
      return "wait";
    case BackendWaitOutcome::kGiveUp:
      return "give_up";
  }
  return "unknown";
}
template <typename Sink>
void AbslStringify(Sink& sink, BackendWaitOutcome value) {
  sink.Append(BackendWaitOutcomeName(value));
}
inline std::ostream& operator<<(std::ostream& os, BackendWaitOutcome value) {
  return os << BackendWaitOutcomeName(value);
}

struct BackendWaitStep {
  BackendWaitOutcome outcome = BackendWaitOutcome::kGo;
  // kWait: the give-up time, deadline - min_call_budget.
  absl::Time until = absl::InfiniteFuture();
};

// Decides, for a call with `deadline` that may start with `min_call_budget`
// left, at `now`, with the channel in `state`:
//   - kReady: kGo. kShutdown: kGo too (nothing will come; gRPC fails it);
//   - no deadline (InfiniteFuture()): kGo, as gRPC would (no budget to wait
//     in: such a call fails fast with UNAVAILABLE);
//   - otherwise, before the give-up time (deadline - min_call_budget): kWait
//     until then; at or after it: kGiveUp.
// Called again on every state change of the channel while the call waits.
BackendWaitStep DecideBackendWait(BackendState state, absl::Time deadline,
                                  absl::Duration min_call_budget, absl::Time now);

// Renders a duration for messages and logs: "250ms", "1.5s", "inf".
std::string FormatBudget(absl::Duration d);

}  // namespace hopbudget

#endif  // HOPBUDGET_ADVANCED_BUDGET_H_
