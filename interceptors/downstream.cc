// Copyright hopbudget authors.
//
// Handler-side helpers: the ClientContext of a downstream call, and the
// thread binding used to catch deadline leaks.
#include <grpcpp/client_context.h>

#include "absl/strings/str_cat.h"
#include "grpc_glue.h"
#include "hopbudget/wire.h"
#include "hopbudget/server.h"

namespace hopbudget {
namespace {

thread_local const InboundBudget* tls_inbound = nullptr;

}  // namespace

namespace internal {

const InboundBudget* CurrentInbound() { return tls_inbound; }

std::string FormatSourceTag(DeadlineSource source, absl::Duration budget) {
  return absl::StrCat(DeadlineSourceName(source), "/", FormatBudgetHeader(budget));
}

SourceTag ParseSourceTag(absl::string_view tag) {
  SourceTag out;
  const size_t slash = tag.find('/');
  auto source = ParseDeadlineSource(tag.substr(0, slash));
  if (!source.has_value()) return out;
  out.source = *source;
  if (slash == absl::string_view::npos) return out;
  ParsedBudget budget = ParseBudgetHeader(tag.substr(slash + 1));
  if (budget.result == HeaderParse::kOk) out.budget = budget.budget;
  return out;
}

}  // namespace internal

InboundScope::InboundScope(const grpc::ServerContextBase& inbound)
    : previous_(tls_inbound) {
  if (const InboundBudget* b = InboundBudget::Of(inbound)) tls_inbound = b;
}

InboundScope::~InboundScope() { tls_inbound = previous_; }

std::unique_ptr<grpc::ClientContext> NewDownstreamContext(
    const grpc::ServerContextBase& inbound, const DownstreamOptions& options) {
  std::unique_ptr<grpc::ClientContext> ctx = grpc::ClientContext::FromServerContext(inbound);

  static const BudgetPolicy kDefaultPolicy;
  const InboundBudget* budget = InboundBudget::Of(inbound);
  BudgetPolicy policy = budget != nullptr ? budget->policy() : kDefaultPolicy;
  policy.attempt_cap = std::min(policy.attempt_cap, options.attempt_cap);
  Clock& clock = budget != nullptr ? budget->clock() : Clock::Real();
  absl::Time parent = absl::InfiniteFuture();
  DeadlineSource parent_source = DeadlineSource::kNone;
  if (budget != nullptr) {
    parent = budget->deadline();
    parent_source = budget->source();
  } else {
    parent = internal::ToAbslTime(inbound.deadline());
    if (parent != absl::InfiniteFuture()) parent_source = DeadlineSource::kClient;
  }

  const CallDeadline call = DeriveCallDeadline(policy, parent, parent_source, clock.Now());
  if (call.deadline != absl::InfiniteFuture()) {
    ctx->set_deadline(absl::ToChronoTime(call.deadline));
  }
  const bool exhausted =
      call.outcome == CallOutcome::kExhausted || (budget != nullptr && budget->refused());
  // Attribution reports the length of the budget that fires: the attempt cap
  // for an attempt budget, the whole request budget when the parent's
  // deadline is the binding one (not this call's share of it).
  const absl::Duration fired_budget = call.source != DeadlineSource::kAttempt && budget != nullptr
                                          ? budget->budget_on_arrival()
                                          : call.budget;
  ctx->AddMetadata(internal::kInternalSourceKey,
                   internal::FormatSourceTag(
                       exhausted ? DeadlineSource::kExhaustedBeforeCall : call.source,
                       fired_budget));
  return ctx;
}

}  // namespace hopbudget
