// Copyright hopbudget authors.
//
// Handler-side helpers: the ClientContext of a downstream call, and the
// thread binding used to catch deadline leaks.
#include <grpcpp/client_context.h>

#include <cstring>
#include <limits>

#include "grpc_glue.h"
#include "hopbudget/advanced/wire.h"
#include "hopbudget/server.h"

namespace hopbudget {
namespace {

thread_local const InboundBudget* tls_inbound = nullptr;

// The source tag's codec: fixed-width integers in the byte order of this
// process (the tag never leaves it: the interceptor erases it before the
// headers go out), times and durations in nanoseconds with the int64
// extremes for the infinite ones.
constexpr size_t kTagSize = 3 + 7 * sizeof(int64_t);

void PutInt(char*& at, int64_t v) {
  std::memcpy(at, &v, sizeof v);
  at += sizeof v;
}
int64_t GetInt(const char*& at) {
  int64_t v;
  std::memcpy(&v, at, sizeof v);
  at += sizeof v;
  return v;
}
int64_t DurationBits(absl::Duration d) { return absl::ToInt64Nanoseconds(d); }
absl::Duration DurationOf(int64_t v) {
  if (v == std::numeric_limits<int64_t>::max()) return absl::InfiniteDuration();
  if (v == std::numeric_limits<int64_t>::min()) return -absl::InfiniteDuration();
  return absl::Nanoseconds(v);
}
int64_t TimeBits(absl::Time t) { return absl::ToUnixNanos(t); }
absl::Time TimeOf(int64_t v) {
  if (v == std::numeric_limits<int64_t>::max()) return absl::InfiniteFuture();
  if (v == std::numeric_limits<int64_t>::min()) return absl::InfinitePast();
  return absl::FromUnixNanos(v);
}
bool IsSource(unsigned char c) { return c < kDeadlineSourceCount; }

}  // namespace

namespace internal {

const InboundBudget* CurrentInbound() { return tls_inbound; }

std::string FormatSourceTag(const SourceTag& tag) {
  std::string out(kTagSize, '\0');
  char* at = out.data();
  *at++ = static_cast<char>(tag.source);
  *at++ = static_cast<char>(tag.logical_source);
  *at++ = static_cast<char>((tag.has_logical ? 1 : 0) |
                            (tag.call_kind == ClientCallKind::kRetryAttempt ? 2 : 0) |
                            (tag.shadow ? 4 : 0) | (tag.shadow_would_fail_fast ? 8 : 0));
  PutInt(at, DurationBits(tag.budget));
  PutInt(at, TimeBits(tag.logical_deadline));
  PutInt(at, DurationBits(tag.logical_budget));
  PutInt(at, static_cast<int64_t>(tag.inbound_key));
  PutInt(at, static_cast<int64_t>(tag.inbound_id));
  PutInt(at, TimeBits(tag.budget_start));
  PutInt(at, TimeBits(tag.logical_start));
  return out;
}

absl::optional<SourceTag> ParseSourceTag(absl::string_view bytes) {
  if (bytes.size() != kTagSize) return absl::nullopt;
  const auto source = static_cast<unsigned char>(bytes[0]);
  const auto logical_source = static_cast<unsigned char>(bytes[1]);
  // has_logical, retry attempt, shadow, shadow_would_fail_fast
  const auto flags = static_cast<unsigned char>(bytes[2]);
  if (!IsSource(source) || !IsSource(logical_source) || flags > 15) {
    return absl::nullopt;
  }
  SourceTag out;
  out.source = static_cast<DeadlineSource>(source);
  out.logical_source = static_cast<DeadlineSource>(logical_source);
  out.has_logical = (flags & 1) != 0;
  out.call_kind = (flags & 2) != 0 ? ClientCallKind::kRetryAttempt : ClientCallKind::kPlainCall;
  out.shadow = (flags & 4) != 0;
  out.shadow_would_fail_fast = (flags & 8) != 0;
  const char* at = bytes.data() + 3;
  out.budget = DurationOf(GetInt(at));
  out.logical_deadline = TimeOf(GetInt(at));
  out.logical_budget = DurationOf(GetInt(at));
  out.inbound_key = static_cast<uintptr_t>(GetInt(at));
  out.inbound_id = static_cast<uint64_t>(GetInt(at));
  out.budget_start = TimeOf(GetInt(at));
  out.logical_start = TimeOf(GetInt(at));
  return out;
}

namespace {
thread_local const ScopedAttemptTag* tls_attempt_tag = nullptr;
}  // namespace

ScopedAttemptTag::ScopedAttemptTag(const grpc::ClientContext* ctx, const SourceTag& tag)
    : previous_(tls_attempt_tag), ctx_(ctx), tag_(tag) {
  tls_attempt_tag = this;
}

ScopedAttemptTag::~ScopedAttemptTag() { tls_attempt_tag = previous_; }

const SourceTag* HandedAttemptTag(const grpc::ClientContext* ctx) {
  const ScopedAttemptTag* scope = tls_attempt_tag;
  return scope != nullptr && scope->ctx_ == ctx ? &scope->tag_ : nullptr;
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
  policy.attempt_cap = options.scope == DownstreamScope::kRequest
                           ? options.attempt_cap
                           : std::min(policy.attempt_cap, options.attempt_cap);
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
  if (budget != nullptr && budget->shadow()) {
    tag.shadow = true;
    tag.shadow_would_fail_fast = internal::ShadowWouldFailFast(
        *budget, options.attempt_cap, options.scope == DownstreamScope::kRequest, now);
  }
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
