// Copyright hopbudget authors.
//
// grpc_glue.h (internal): the few conversions between gRPC's types and
// hopbudget's, shared by the interceptors.
#ifndef HOPBUDGET_INTERNAL_GRPC_GLUE_H_
#define HOPBUDGET_INTERNAL_GRPC_GLUE_H_

#include <grpc/support/time.h>
#include <grpcpp/client_context.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "hopbudget/advanced/metrics.h"
#include "hopbudget/advanced/retry_policy.h"
#include "hopbudget/advanced/trace.h"
#include "hopbudget/server.h"

namespace hopbudget {
namespace internal {

// Request metadata set by NewDownstreamContext() (and the retry loop, races,
// hedges, slots and the shield) for the client interceptor, which removes it
// before the headers are sent: which budget defines the call's deadline, and
// how long that budget is, so attribution reports the budget as configured
// rather than as measured from the interceptor's start.
//
// A tag may also carry the logical deadline the call derives from (the
// parent's remainder, request deadline - hop reserve) and its source: a
// retrying channel derives each attempt from it, since the context's own
// deadline is already one attempt's. And when each budget started, so that
// attribution reports the time elapsed since the start of the budget that
// fired (a request budget started when the inbound call arrived, not when
// the last attempt did).
//
// The value is a fixed-width binary record (FormatSourceTag): it is made and
// read in one process on every downstream call, where formatting and parsing
// text cost about a microsecond a call (perf, 2026-11-30). The key ends in
// "-bin", so a channel without hopbudget that sends it sends it base64'd:
// harmless.
inline constexpr char kInternalSourceKey[] = "hopbudget-internal-source-bin";

struct SourceTag {
  DeadlineSource source = DeadlineSource::kNone;
  absl::Duration budget = absl::InfiniteDuration();
  absl::Time logical_deadline = absl::InfiniteFuture();
  DeadlineSource logical_source = DeadlineSource::kNone;
  absl::Duration logical_budget = absl::InfiniteDuration();
  bool has_logical = false;
  // The inbound call the logical call serves (0: none).
  uintptr_t inbound_key = 0;
  uint64_t inbound_id = 0;
  // When `budget` and `logical_budget` started; InfinitePast() when unknown
  // (then the call's own start stands in).
  absl::Time budget_start = absl::InfinitePast();
  absl::Time logical_start = absl::InfinitePast();
  // kRetryAttempt on each attempt of a retrying layer's logical call: the
  // layer observes the logical call once, the budget interceptor each
  // attempt (metrics).
  ClientCallKind call_kind = ClientCallKind::kPlainCall;
  // Made for a request in shadow mode (InboundBudget::shadow()): the budget
  // interceptor changes nothing of the call; `shadow_would_fail_fast` says
  // hopbudget would not have started it (counted, not done).
  bool shadow = false;
  bool shadow_would_fail_fast = false;
};
// Durations and times are kept to the nanosecond; beyond the int64 range of
// nanoseconds (292 years) they read back as infinite.
std::string FormatSourceTag(const SourceTag& tag);
// A record of the wrong size or with an impossible field (a value someone
// else put under the key) gives nullopt: the call is treated as untagged.
absl::optional<SourceTag> ParseSourceTag(absl::string_view bytes);

// The same tag handed over in process, for a layer that starts the attempt's
// call itself on the thread that made its context (the typed retry loop):
// gRPC creates a call's interceptors on the thread of the stub call, before
// the stub call returns, so the tag need not travel as metadata. That saves
// what the metadata form costs on every attempt: the record's string, the
// copies of key and value into the context, a map node, and the
// interceptors' find and erase (callgrind: about 4 allocations a call).
//
// While a ScopedAttemptTag lives, HandedAttemptTag(ctx) on the same thread
// gives its tag for its context and nullptr for any other. Scopes nest (an
// inner one hides the outer until it ends). Not copyable; create it on the
// stack right around the stub call. An interceptor that is created on
// another thread, or after the scope ended, sees no tag: the call is then
// an untagged call with the context's deadline (attribution says "client"
// rather than "attempt"), never a wrong one.
class ScopedAttemptTag {
 public:
  ScopedAttemptTag(const grpc::ClientContext* ctx, const SourceTag& tag);
  ~ScopedAttemptTag();
  ScopedAttemptTag(const ScopedAttemptTag&) = delete;
  ScopedAttemptTag& operator=(const ScopedAttemptTag&) = delete;

 private:
  const ScopedAttemptTag* const previous_;
  const grpc::ClientContext* const ctx_;
  const SourceTag tag_;
  friend const SourceTag* HandedAttemptTag(const grpc::ClientContext* ctx);
};
// The tag a ScopedAttemptTag on this thread hands over for `ctx`, or
// nullptr. The pointer is valid until that scope ends: copy the tag.
const SourceTag* HandedAttemptTag(const grpc::ClientContext* ctx);
// Per-call stream idle budget in microseconds (SetStreamIdleBudget()).
inline constexpr char kInternalIdleKey[] = "hopbudget-internal-idle-us";
// Per-call backend wait (SetBackendWait()): BackendWaitName's value.
inline constexpr char kInternalBackendWaitKey[] = "hopbudget-internal-backend-wait";

// gRPC reports "no deadline" as time_point::max(); absl::FromChrono would turn
// that into a finite year-2262 time.
inline absl::Time ToAbslTime(std::chrono::system_clock::time_point tp) {
  if (tp == std::chrono::system_clock::time_point::max()) return absl::InfiniteFuture();
  if (tp == std::chrono::system_clock::time_point::min()) return absl::InfinitePast();
  return absl::FromChrono(tp);
}

// A context's deadline as gRPC keeps it (raw_deadline()), in `now`'s terms.
// A realtime deadline converts directly. Any other clock (gRPC keeps a
// server call's deadline on the monotonic one) is read once: what remains
// on it, from `now`, which the caller has just read from its own clock.
// ToAbslTime(ctx.deadline()) read both clocks and cost about 270
// instructions on every arrival.
inline absl::Time DeadlineOf(gpr_timespec raw, absl::Time now) {
  // gpr_inf_future() and gpr_inf_past() are these seconds on every clock;
  // compared inline, not through four library calls.
  if (raw.tv_sec == std::numeric_limits<int64_t>::max()) return absl::InfiniteFuture();
  if (raw.tv_sec == std::numeric_limits<int64_t>::min()) return absl::InfinitePast();
  if (raw.clock_type == GPR_CLOCK_REALTIME) {
    return absl::FromUnixSeconds(raw.tv_sec) + absl::Nanoseconds(raw.tv_nsec);
  }
  const gpr_timespec left = gpr_time_sub(raw, gpr_now(raw.clock_type));
  return now + absl::Seconds(left.tv_sec) + absl::Nanoseconds(left.tv_nsec);
}

// The InboundBudget bound to this thread by an InboundScope, or nullptr.
const InboundBudget* CurrentInbound();

// For a request in shadow mode (InboundBudget::shadow()): whether hopbudget
// would have refused to start a downstream call at `now` with `attempt_cap`
// (less than the request's min_attempt_budget left after its reserve).
// False when not in shadow mode, and for a request hopbudget would have
// refused on arrival (counted once, as a refusal).
bool ShadowWouldFailFast(const InboundBudget& budget, absl::Duration attempt_cap,
                         bool whole_request, absl::Time now);

// Identifies an inbound call for NewChildOfInbound(): its context's address
// and the budget's process-unique id (addresses are reused).
uintptr_t InboundKey(const InboundBudget& budget, uint64_t* id);
// A ClientContext that gRPC cancels with the inbound call `key`/`id`
// (ClientContext::FromServerContext), or nullptr once that call is gone. The
// retrying channel makes its attempts with it: new calls are not children of
// the logical call, and an inbound cancel reaches only children.
std::unique_ptr<grpc::ClientContext> NewChildOfInbound(uintptr_t key, uint64_t id);

// Reports a finished downstream call of the inbound call `key`/`id` to it:
// counts one attempt and appends `trace` (nullptr: the callee sent none) to
// the entries the inbound call will answer with. Does nothing once that call
// has answered.
void RecordDownstreamCall(uintptr_t key, uint64_t id, const BudgetTrace* trace);
// A retrying layer's logical call made for that inbound call ended after a
// failed attempt with no retry, for `outcome` (its /deadlinez entry says
// why); kSucceeded and kRetry are ignored. The last such outcome is kept.
void RecordRetrySkipped(uintptr_t key, uint64_t id, RetryOutcome outcome);

// "/pkg.Service/Method": what gRPC's ClientRpcInfo::method() gives, and
// what a Hop's table resolves; the method of a loop or hedger made from a
// Hop must be one.
inline bool IsFullMethodName(absl::string_view name) {
  if (name.size() < 4 || name[0] != '/') return false;
  const size_t slash = name.find('/', 1);
  return slash != absl::string_view::npos && slash > 1 && slash + 1 < name.size() &&
         name.find('/', slash + 1) == absl::string_view::npos;
}

}  // namespace internal
}  // namespace hopbudget

#endif  // HOPBUDGET_INTERNAL_GRPC_GLUE_H_
