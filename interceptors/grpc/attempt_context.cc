// Copyright hopbudget authors.
#include "attempt_context.h"

#include "absl/strings/str_cat.h"
#include "attempt_result.h"
#include "grpc_glue.h"
#include "hopbudget/server.h"
#include "timer_service.h"

namespace hopbudget {
namespace internal {

LogicalBudget::LogicalBudget(const BudgetPolicy& policy, const LogicalCall& call, absl::Time now)
    : inbound_(call.inbound), attempt_policy_(policy) {
  // The logical deadline already keeps the reserve.
  attempt_policy_.hop_reserve = absl::ZeroDuration();
  const InboundBudget* budget = inbound_ != nullptr ? InboundBudget::Of(*inbound_) : nullptr;
  if (budget != nullptr) {
    // As NewDownstreamContext(): the request deadline less this hop's
    // reserve, attributed to the request's budget from its arrival.
    deadline_ = budget->deadline() == absl::InfiniteFuture()
                    ? absl::InfiniteFuture()
                    : budget->deadline() - budget->policy().hop_reserve;
    source_ = budget->source();
    budget_ = budget->budget_on_arrival();
    start_ = budget->arrival();
    exhausted_ = budget->refused();
    trace_requested_ = budget->trace_requested();
    inbound_key_ = InboundKey(*budget, &inbound_id_);
    return;
  }
  deadline_ = inbound_ != nullptr ? ToAbslTime(inbound_->deadline()) : call.deadline;
  if (inbound_ != nullptr && deadline_ != absl::InfiniteFuture()) {
    deadline_ -= policy.hop_reserve;
  }
  source_ = deadline_ == absl::InfiniteFuture() ? DeadlineSource::kNone : DeadlineSource::kClient;
  budget_ = deadline_ - now;
  start_ = now;
}

LogicalBudget::LogicalBudget(const BudgetPolicy& policy, const SourceTag& tag, absl::Time deadline,
                             absl::Time now)
    : inbound_(nullptr), attempt_policy_(policy) {
  attempt_policy_.hop_reserve = absl::ZeroDuration();
  exhausted_ = tag.source == DeadlineSource::kExhaustedBeforeCall;
  inbound_key_ = tag.inbound_key;
  inbound_id_ = tag.inbound_id;
  if (tag.has_logical) {
    deadline_ = tag.logical_deadline;
    source_ = tag.logical_source;
    budget_ = tag.logical_budget;
    start_ = tag.logical_start != absl::InfinitePast() ? tag.logical_start : now;
    return;
  }
  deadline_ = deadline;
  source_ = deadline_ == absl::InfiniteFuture() ? DeadlineSource::kNone : DeadlineSource::kClient;
  budget_ = deadline_ - now;
  start_ = now;
}

std::unique_ptr<grpc::ClientContext> LogicalBudget::NewAttemptContext(int attempt, absl::Time now,
                                                                      ClientCallKind kind,
                                                                      SourceTag* handed_tag) const {
  const CallDeadline call = DeriveCallDeadline(attempt_policy_, deadline_, source_, now);
  // A child of the inbound call, so that its cancel reaches the attempt at
  // once, as it reaches any propagated call.
  std::unique_ptr<grpc::ClientContext> ctx;
  if (inbound_ != nullptr) {
    ctx = grpc::ClientContext::FromServerContext(*inbound_);
  } else if (inbound_key_ != 0) {
    ctx = NewChildOfInbound(inbound_key_, inbound_id_);  // nullptr: the inbound call is gone
  }
  if (ctx == nullptr) ctx = std::make_unique<grpc::ClientContext>();
  if (call.deadline != absl::InfiniteFuture()) {
    ctx->set_deadline(absl::ToChronoTime(call.deadline));
  }
  if (attempt > 1) {
    ctx->AddMetadata(kGrpcPreviousAttemptsHeader, absl::StrCat(attempt - 1));
  }
  if (handed_tag != nullptr) {
    *handed_tag = AttemptTag(call, now, kind);
  } else {
    ctx->AddMetadata(kInternalSourceKey, FormatSourceTag(AttemptTag(call, now, kind)));
  }
  if (trace_requested_) ctx->AddMetadata(kTraceRequestHeader, "1");
  return ctx;
}

SourceTag LogicalBudget::AttemptTag(const CallDeadline& call, absl::Time now,
                                    ClientCallKind kind) const {
  // For the budget interceptor on the channel: which budget the deadline
  // is (for attribution), and an attempt that cannot start is failed there
  // without the network.
  SourceTag tag;
  tag.call_kind = kind;
  tag.source = call.outcome == CallOutcome::kExhausted || exhausted_
                   ? DeadlineSource::kExhaustedBeforeCall
                   : call.source;
  const bool attempt_budget = call.source == DeadlineSource::kAttempt;
  tag.budget = attempt_budget ? call.budget : budget_;
  tag.budget_start = attempt_budget ? now : start_;
  // The logical part is carried for the inbound call's identity: the budget
  // interceptor reports each attempt to it.
  tag.has_logical = true;
  tag.logical_deadline = deadline_;
  tag.logical_source = source_;
  tag.logical_budget = budget_;
  tag.logical_start = start_;
  tag.inbound_key = inbound_key_;
  tag.inbound_id = inbound_id_;
  return tag;
}

void DestroyLater(std::shared_ptr<grpc::ClientContext> ended) {
  if (ended == nullptr) return;
  TimerService::Shared().Schedule(absl::InfinitePast(),
                                  [ctx = std::move(ended)]() mutable { ctx.reset(); });
}

}  // namespace internal
}  // namespace hopbudget
