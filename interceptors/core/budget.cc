// Copyright hopbudget authors.
#include "hopbudget/advanced/budget.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace hopbudget {
namespace {

bool IsFinite(absl::Duration d) { return d != absl::InfiniteDuration(); }

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("hopbudget policy: ", what));
}

}  // namespace

BackendWaitStep DecideBackendWait(BackendState state, absl::Time deadline,
                                  absl::Duration min_call_budget, absl::Time now) {
  if (state == BackendState::kReady || state == BackendState::kShutdown ||
      deadline == absl::InfiniteFuture()) {
    return {};
  }
  const absl::Time give_up = deadline - std::max(min_call_budget, absl::ZeroDuration());
  if (now >= give_up) return {BackendWaitOutcome::kGiveUp, give_up};
  return {BackendWaitOutcome::kWait, give_up};
}

std::string FormatBudget(absl::Duration d) {
  if (d == absl::InfiniteDuration()) return "inf";
  if (d == -absl::InfiniteDuration()) return "-inf";
  const double ms = absl::ToDoubleMilliseconds(d);
  if (ms >= 1000.0 || ms <= -1000.0) {
    return absl::StrFormat("%gs", ms / 1000.0);
  }
  return absl::StrFormat("%gms", ms);
}

absl::Status ValidatePolicy(const BudgetPolicy& p) {
  struct Field {
    const char* name;
    absl::Duration value;
    bool must_be_positive;
  };
  const Field fields[] = {
      {"request_cap", p.request_cap, true},
      {"attempt_cap", p.attempt_cap, true},
      {"hop_reserve", p.hop_reserve, false},
      {"min_attempt_budget", p.min_attempt_budget, false},
      {"max_inbound_budget", p.max_inbound_budget, true},
  };
  for (const Field& f : fields) {
    if (f.value < absl::ZeroDuration()) {
      return Invalid(absl::StrCat(f.name, " is negative (", FormatBudget(f.value), ")"));
    }
    if (f.must_be_positive && f.value == absl::ZeroDuration()) {
      return Invalid(absl::StrCat(f.name, " is zero: no call could ever run"));
    }
  }
  if (!IsFinite(p.hop_reserve) || !IsFinite(p.min_attempt_budget)) {
    return Invalid("hop_reserve and min_attempt_budget must be finite");
  }
  if (p.min_attempt_budget > p.attempt_cap) {
    return Invalid(absl::StrCat("min_attempt_budget (", FormatBudget(p.min_attempt_budget),
                                ") > attempt_cap (", FormatBudget(p.attempt_cap),
                                "): no downstream call could ever start"));
  }
  if (IsFinite(p.request_cap) && p.min_attempt_budget + p.hop_reserve >= p.request_cap) {
    return Invalid(absl::StrCat("min_attempt_budget (", FormatBudget(p.min_attempt_budget),
                                ") + hop_reserve (", FormatBudget(p.hop_reserve),
                                ") >= request_cap (", FormatBudget(p.request_cap),
                                "): every downstream call would fail before it starts"));
  }
  if (IsFinite(p.request_cap) && IsFinite(p.attempt_cap) &&
      p.attempt_cap + p.hop_reserve >= p.request_cap) {
    return Invalid(
        absl::StrCat("attempt_cap (", FormatBudget(p.attempt_cap), ") + hop_reserve (",
                     FormatBudget(p.hop_reserve), ") >= request_cap (", FormatBudget(p.request_cap),
                     "): budgets must nest strictly; the request budget would always fire first, "
                     "so the attempt budget could never fire and no retry could ever run"));
  }
  if (p.request_cap > p.max_inbound_budget) {
    return Invalid(absl::StrCat("request_cap (", FormatBudget(p.request_cap),
                                ") > max_inbound_budget (", FormatBudget(p.max_inbound_budget),
                                "): the request cap could never apply"));
  }
  return absl::OkStatus();
}

RequestBudget DeriveRequestBudget(const BudgetPolicy& policy, absl::Time inbound_deadline,
                                  absl::Time now) {
  RequestBudget out;
  out.arrival = now;
  const absl::Duration cap = std::min(policy.request_cap, policy.max_inbound_budget);
  const absl::Time capped = now + cap;  // saturates to InfiniteFuture()
  if (inbound_deadline <= capped) {
    out.deadline = inbound_deadline;
    out.source = inbound_deadline == absl::InfiniteFuture() ? DeadlineSource::kNone
                                                            : DeadlineSource::kClient;
  } else {
    out.deadline = capped;
    out.source = DeadlineSource::kRequest;
  }
  if (out.deadline == absl::InfiniteFuture()) {
    out.budget_on_arrival = absl::InfiniteDuration();
    return out;
  }
  out.budget_on_arrival = out.deadline - now;
  if (out.budget_on_arrival <= absl::ZeroDuration()) {
    out.outcome = ArrivalOutcome::kExpired;
  } else if (out.budget_on_arrival < policy.min_attempt_budget) {
    out.outcome = ArrivalOutcome::kBelowMinimum;
  }
  return out;
}

RequestBudget PassThroughRequestBudget(absl::Time caller_deadline, absl::Time now) {
  RequestBudget out;
  out.arrival = now;
  out.deadline = caller_deadline;
  if (caller_deadline == absl::InfiniteFuture()) return out;  // kNone, infinite
  out.source = DeadlineSource::kClient;
  out.budget_on_arrival = caller_deadline - now;
  return out;
}

const BudgetPolicy& PassThroughPolicy() {
  static const BudgetPolicy kPolicy = [] {
    BudgetPolicy p;
    p.hop_reserve = absl::ZeroDuration();
    p.min_attempt_budget = absl::ZeroDuration();
    return p;
  }();
  return kPolicy;
}

ShadowAction ShadowActionAt(const RequestBudget& would, absl::Time now) {
  if (would.outcome != ArrivalOutcome::kAccepted) return ShadowAction::kRefuse;
  if (would.source == DeadlineSource::kRequest && now > would.deadline) return ShadowAction::kCut;
  return ShadowAction::kNone;
}

CallDeadline DeriveCallDeadline(const BudgetPolicy& policy, absl::Time parent_deadline,
                                DeadlineSource parent_source, absl::Time now) {
  CallDeadline out;
  const absl::Time from_parent = parent_deadline - policy.hop_reserve;
  const absl::Time from_attempt = now + policy.attempt_cap;
  if (from_parent <= from_attempt) {
    out.deadline = from_parent;
    out.source = parent_source;
  } else {
    out.deadline = from_attempt;
    out.source = DeadlineSource::kAttempt;
  }
  if (out.deadline == absl::InfiniteFuture()) {
    out.source = DeadlineSource::kNone;
    out.budget = absl::InfiniteDuration();
    return out;
  }
  out.budget = out.deadline - now;
  if (out.budget < policy.min_attempt_budget || out.budget <= absl::ZeroDuration()) {
    out.outcome = CallOutcome::kExhausted;
  }
  return out;
}

}  // namespace hopbudget
