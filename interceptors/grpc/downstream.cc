// Copyright hopbudget authors.
//
// Handler-side helpers: the ClientContext of a downstream call, and the
// thread binding used to catch deadline leaks.
#include <grpcpp/client_context.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "grpc_glue.h"
#include "hopbudget/server.h"
#include "hopbudget/wire.h"

namespace hopbudget {
namespace {

thread_local const InboundBudget* tls_inbound = nullptr;

std::string UnixMicrosOrEmpty(absl::Time t) {
  if (t == absl::InfinitePast() || t == absl::InfiniteFuture()) return std::string();
  return absl::StrCat(absl::ToUnixMicros(t));
}

// "" (unknown) and anything unparseable give InfinitePast().
absl::Time ParseUnixMicros(absl::string_view v) {
  int64_t us = 0;
  if (v.empty() || !absl::SimpleAtoi(v, &us)) return absl::InfinitePast();
  return absl::FromUnixMicros(us);
}

}  // namespace

namespace internal {

const InboundBudget* CurrentInbound() { return tls_inbound; }

std::string FormatSourceTag(const SourceTag& tag) {
  std::string out =
      absl::StrCat(DeadlineSourceName(tag.source), "/", FormatBudgetHeader(tag.budget));
  if (tag.has_logical) {
    absl::StrAppend(&out, "/",
                    tag.logical_deadline == absl::InfiniteFuture()
                        ? std::string()
                        : absl::StrCat(absl::ToUnixMicros(tag.logical_deadline)),
                    "/", DeadlineSourceName(tag.logical_source), "/",
                    FormatBudgetHeader(tag.logical_budget), "/", tag.inbound_key, "/",
                    tag.inbound_id);
    if (tag.budget_start != absl::InfinitePast() || tag.logical_start != absl::InfinitePast()) {
      absl::StrAppend(&out, "/", UnixMicrosOrEmpty(tag.budget_start), "/",
                      UnixMicrosOrEmpty(tag.logical_start));
    }
  }
  return out;
}

SourceTag ParseSourceTag(absl::string_view tag) {
  SourceTag out;
  std::vector<absl::string_view> parts = absl::StrSplit(tag, '/');
  auto source = ParseDeadlineSource(parts[0]);
  if (!source.has_value()) return out;
  out.source = *source;
  if (parts.size() > 1) {
    ParsedBudget budget = ParseBudgetHeader(parts[1]);
    if (budget.result == HeaderParse::kOk) out.budget = budget.budget;
  }
  if (parts.size() == 7 || parts.size() == 9) {
    if (!absl::SimpleAtoi(parts[5], &out.inbound_key) ||
        !absl::SimpleAtoi(parts[6], &out.inbound_id)) {
      out.inbound_key = 0;
      out.inbound_id = 0;
    }
  }
  if (parts.size() == 9) {
    out.budget_start = ParseUnixMicros(parts[7]);
    out.logical_start = ParseUnixMicros(parts[8]);
  }
  if (parts.size() >= 5) {
    int64_t us = 0;
    auto logical_source = ParseDeadlineSource(parts[3]);
    if (!logical_source.has_value()) return out;
    if (parts[2].empty()) {
      out.logical_deadline = absl::InfiniteFuture();
    } else if (absl::SimpleAtoi(parts[2], &us)) {
      out.logical_deadline = absl::FromUnixMicros(us);
    } else {
      return out;
    }
    out.logical_source = *logical_source;
    ParsedBudget budget = ParseBudgetHeader(parts[4]);
    if (budget.result == HeaderParse::kOk) out.logical_budget = budget.budget;
    out.has_logical = true;
  }
  return out;
}

}  // namespace internal

InboundScope::InboundScope(const grpc::ServerContextBase& inbound) : previous_(tls_inbound) {
  if (const InboundBudget* b = InboundBudget::Of(inbound)) tls_inbound = b;
}

InboundScope::~InboundScope() { tls_inbound = previous_; }

std::unique_ptr<grpc::ClientContext> NewDownstreamContext(const grpc::ServerContextBase& inbound,
                                                          const DownstreamOptions& options) {
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

  const absl::Time now = clock.Now();
  const CallDeadline call = DeriveCallDeadline(policy, parent, parent_source, now);
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
  internal::SourceTag tag;
  tag.source = exhausted ? DeadlineSource::kExhaustedBeforeCall : call.source;
  tag.budget = fired_budget;
  tag.has_logical = true;
  tag.logical_deadline = parent - policy.hop_reserve;
  tag.logical_source = parent_source;
  tag.logical_budget = budget != nullptr ? budget->budget_on_arrival() : call.budget;
  if (budget != nullptr && budget->refused()) tag.logical_deadline = absl::InfinitePast();
  if (budget != nullptr) tag.inbound_key = internal::InboundKey(*budget, &tag.inbound_id);
  if (budget != nullptr && budget->trace_requested()) ctx->AddMetadata(kTraceRequestHeader, "1");
  // The inbound budget started when the call arrived; an attempt budget
  // starts now.
  const absl::Time arrival = budget != nullptr ? budget->arrival() : now;
  tag.logical_start = arrival;
  tag.budget_start = call.source == DeadlineSource::kAttempt ? now : arrival;
  ctx->AddMetadata(internal::kInternalSourceKey, internal::FormatSourceTag(tag));
  return ctx;
}

}  // namespace hopbudget
