// Copyright hopbudget authors.
#include "hopbudget/advanced/remaining_grpc.h"

#include "grpc_glue.h"
#include "hopbudget/advanced/clock.h"
#include "hopbudget/server.h"

namespace hopbudget {

RemainingTime Remaining(const grpc::ServerContextBase& inbound) {
  if (const InboundBudget* budget = InboundBudget::Of(inbound); budget != nullptr) {
    return RemainingOf(budget->request_budget(), budget->policy().hop_reserve,
                       budget->clock().Now());
  }
  // No interceptor saw the call: its gRPC deadline is the whole story.
  RequestBudget plain;
  const absl::Time now = Clock::Real().Now();
  plain.arrival = now;
  plain.deadline = internal::ToAbslTime(inbound.deadline());
  plain.source =
      plain.deadline == absl::InfiniteFuture() ? DeadlineSource::kNone : DeadlineSource::kClient;
  return RemainingOf(plain, BudgetPolicy().hop_reserve, now);
}

}  // namespace hopbudget
