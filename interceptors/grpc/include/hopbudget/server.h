// Copyright hopbudget authors.
//
// server.h: the server side of hopbudget.
//
// Install one interceptor on the server; it works for sync, callback and
// async services alike:
//
//   absl::StatusOr<std::unique_ptr<hopbudget::Hop>> hop = hopbudget::Hop::Create(options);
//   if (!hop.ok()) return hop.status();   // a budget did not validate
//   if (absl::Status s = hopbudget::InstallServerInterceptor(**hop, builder); !s.ok()) return s;
//
// For every call the interceptor:
//   - reads the inbound deadline when the call arrives, narrowed by the exact
//     `hopbudget-budget-us` header less what the call waited on its way
//     (`hopbudget-sent-us`; both can only shrink it; docs/transit.md), and
//     derives the request budget (budget.h); a call that waited more than
//     20 ms is ended by this hop 10 ms after its caller's deadline, since
//     gRPC's own comes about the wait later;
//   - refuses a call that arrived below `min_attempt_budget`:
//     `InboundBudget::refused()` is true, and whatever the handler answers
//     goes out as DEADLINE_EXCEEDED (source arrived-expired) with the
//     attribution in every form (details, trailers, message, trace). A gRPC
//     interceptor cannot skip the handler, so the handler must check
//     refused() first and return at once; its downstream calls fail fast
//     anyway. A handler that has not answered halfway to the caller's
//     deadline is cut by a cancel, which carries the status message alone (for
//     a call that arrived with its deadline already passed: 100 ms after its
//     arrival);
//   - when the per-request cap is tighter than the caller's deadline, cancels
//     the call with DEADLINE_EXCEEDED (source request) when the cap expires,
//     on the shared timer service. A cancel carries the status message
//     alone (gRPC core sends no custom trailers with it); a handler blocked
//     on a downstream call answers first with every form, since that call's
//     deadline is the request deadline minus the reserve. gRPC's own
//     services ("/grpc.": a caller's health watch, reflection) have no cap
//     unless the Hop's table names them (InboundPolicy, policy_table.h);
//   - when the handler answers DEADLINE_EXCEEDED, attaches the attribution
//     (attribution.h): the origin relayed from downstream if the status holds
//     it, else this hop's own budget if it has run out, else "downstream,
//     origin unknown".
//
// In a handler:
//
//   grpc::Status Place(grpc::ServerContext* ctx, const Req* req, Resp* resp) {
//     if (auto refusal = hopbudget::Refusal(*ctx)) return *refusal;
//     std::unique_ptr<grpc::ClientContext> call = hopbudget::NewDownstreamContext(*ctx);
//     return ledger_->Commit(call.get(), ...);
//   }
//
// Thread safety: the factory and InboundBudget are safe for concurrent use.
#ifndef HOPBUDGET_SERVER_H_
#define HOPBUDGET_SERVER_H_

#include <grpcpp/client_context.h>
#include <grpcpp/server_builder.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/server_interceptor.h>

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "hopbudget/advanced/admission.h"
#include "hopbudget/advanced/budget.h"
#include "hopbudget/advanced/clock.h"
#include "hopbudget/advanced/deadline_source.h"
#include "hopbudget/advanced/metrics.h"
#include "hopbudget/hop.h"

namespace hopbudget {

namespace internal {
struct InboundBudgetAccess;
}  // namespace internal

// When a hop answers with its per-hop trace (`hopbudget-trace-bin`).
enum class TraceMode {
  // On every answer that is not OK, and on any answer whose caller asked
  // (RequestTrace(), client.h). Costs nothing on the common path.
  kOnFailureOrRequest,
  // On every answer: the server builds and serializes the trace on every
  // call, and each hopbudget caller decodes it.
  kAlways,
};
// Stable names for logs and test failures: "on_failure_or_request", "always".
// AbslStringify and operator<< print them (GoogleTest, streams).
inline absl::string_view TraceModeName(TraceMode value) {
  switch (value) {
    case TraceMode::kOnFailureOrRequest:
      return "on_failure_or_request";
    case TraceMode::kAlways:
      return "always";
  }
  return "unknown";
}
template <typename Sink>
void AbslStringify(Sink& sink, TraceMode value) {
  sink.Append(TraceModeName(value));
}
inline std::ostream& operator<<(std::ostream& os, TraceMode value) {
  return os << TraceModeName(value);
}

// Who runs the handlers of calls admitted after waiting (AdmissionOptions).
enum class HandlerThreads {
  // Sync services: the handler runs on the thread that starts it, and
  // blocks it. hopbudget starts admitted calls on its own pool of at most
  // as many threads as the limit can reach (max_in_flight, or max_limit
  // when adaptive).
  kBlocking,
  // Callback and async services: starting a call returns at once; two
  // threads start them all.
  kNonBlocking,
};

// Deadline-aware admission (admission.h), off by default. When on, every
// covered call that arrives with room under the limit starts at once; over
// the limit it waits without holding a thread (its first interception batch
// is not proceeded until it is admitted), earliest deadline first (newest
// first under sustained overload); it is refused when its remaining budget
// is below the predicted handler time, when it waits until less than
// min_attempt_budget + hop_reserve is left (no downstream attempt could
// start, and the refusal must reach the caller before its own deadline
// fires) (DEADLINE_EXCEEDED, sources cannot-finish and
// queue-wait, with the attribution in every form), or when the queue is
// full, there is none, or it waited max_wait (RESOURCE_EXHAUSTED with
// `grpc-retry-pushback-ms` and `hopbudget-shed: <reason>`). A refused
// call's handler still runs, as for every refusal (InboundBudget::refused()
// is true: return at once). gRPC's own services (/grpc.*: health,
// reflection, channelz) are never held back.
//
// What gRPC 1.51 does not allow: a server interceptor learns nothing of a
// caller's cancel before the handler starts (the call's completion op is
// begun then), so a queued call whose caller cancels stays in the queue
// until its turn, its deadline, or max_wait.
struct AdmissionOptions {
  bool enabled = false;
  AdmissionPolicy policy;
  // Full method names ("/package.Service/Method") held to admission; empty:
  // every method of the server. On a Hop's server interceptor, a method
  // whose entry says `admission = false` (MethodPolicy) is left out too.
  std::vector<std::string> methods;
  HandlerThreads handlers = HandlerThreads::kBlocking;
};

struct ServerOptions {
  // Name of this service in attribution and metrics. Required; 1..64 chars of
  // [A-Za-z0-9._-].
  std::string hop;
  BudgetPolicy policy;
  AdmissionOptions admission;
  TraceMode trace = TraceMode::kOnFailureOrRequest;
  // Not owned; each must outlive the server the factory is installed in
  // (its last call). Defaults (nullptr): Clock::Real(), Metrics::Default().
  Clock* clock = nullptr;
  Metrics* metrics = nullptr;
};

// Validates `options` (hop name, ValidatePolicy, and the admission policy
// and method names when admission is on) and returns the factory to pass to
// ServerBuilder::experimental().SetInterceptorCreators().
[[nodiscard]] absl::StatusOr<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
MakeServerInterceptorFactory(ServerOptions options);

// The server interceptor of `hop` (hop.h): its name, clock and metrics, and
// each method's own budgets from its policy table. A call of a method takes
// that method's entry (its service config `timeout` is the request cap, its
// hopReserve, minBudget and maxInboundBudget apply), resolved once when the
// call arrives: a reload of the table reaches calls that arrive after it.
// Downstream calls take the attempt cap of the table's default entry (an
// entry describes calls of its method; a downstream call is a call of
// another one). Admission, when `admission.enabled`, is one gate for the
// server, with the default entry's give-up margin. `hop` is not owned and
// must outlive the server.
[[nodiscard]] absl::StatusOr<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
MakeServerInterceptorFactory(const Hop& hop, const AdmissionOptions& admission = {},
                             TraceMode trace = TraceMode::kOnFailureOrRequest);

// Installs the server interceptor of `hop` (MakeServerInterceptorFactory
// above) on `builder`: its interceptor creators become hopbudget's alone. A
// server with interceptors of its own puts MakeServerInterceptorFactory's
// factory in its own list instead. InvalidArgument, and `builder` left
// alone, when the admission options do not validate. `hop` is not owned and
// must outlive the server.
//
//   absl::StatusOr<std::unique_ptr<hopbudget::Hop>> hop = hopbudget::Hop::Create(options);
//   if (!hop.ok()) return hop.status();
//   if (absl::Status s = hopbudget::InstallServerInterceptor(**hop, builder); !s.ok()) return s;
[[nodiscard]] absl::Status InstallServerInterceptor(const Hop& hop, grpc::ServerBuilder& builder,
                                                    const AdmissionOptions& admission = {});

// The admission counters of a factory made by MakeServerInterceptorFactory,
// or nullopt when admission is off (or `factory` is not hopbudget's).
// Keep a pointer before handing the factory to ServerBuilder: the server
// owns it then, and it lives as long as the server.
absl::optional<AdmissionStats> AdmissionStatsOf(
    const grpc::experimental::ServerInterceptorFactoryInterface& factory);

// The budget of one inbound call, as the server interceptor derived it when
// the call arrived. Lives as long as the call.
class InboundBudget {
 public:
  // The budget of the call served with `context`, or nullptr when the call
  // did not pass through hopbudget's server interceptor.
  static const InboundBudget* Of(const grpc::ServerContextBase& context);

  // Effective request deadline (InfiniteFuture() when nothing bounds it).
  absl::Time deadline() const { return budget_.deadline; }
  // kClient, kRequest, or kNone when infinite.
  DeadlineSource source() const { return budget_.source; }
  absl::Time arrival() const { return budget_.arrival; }
  absl::Duration budget_on_arrival() const { return budget_.budget_on_arrival; }
  ArrivalOutcome arrival_outcome() const { return budget_.outcome; }
  // True when the call was refused on arrival: do no work, return at once.
  bool refused() const { return budget_.outcome != ArrivalOutcome::kAccepted; }
  // True when the call's method is in shadow mode (MethodPolicy::shadow,
  // policy_table.h): deadline() is the caller's own, refused() is false and
  // policy() has no cap, reserve or minimum, as if hopbudget were not
  // there; what it would have done is counted (hopbudget_shadow_total), not
  // done.
  bool shadow() const { return shadowed_policy_ != nullptr; }
  // deadline() - now (InfiniteDuration() when infinite; may be negative).
  absl::Duration remaining() const;
  const std::string& hop() const { return *hop_; }
  const BudgetPolicy& policy() const { return *policy_; }
  Clock& clock() const { return *clock_; }
  const RequestBudget& request_budget() const { return budget_; }
  // The caller asked for the per-hop trace (RequestTrace(), client.h):
  // downstream calls made with NewDownstreamContext() or a RetryLoop ask too.
  bool trace_requested() const { return trace_requested_; }

 private:
  friend struct internal::InboundBudgetAccess;  // the server interceptor builds these
  InboundBudget(const RequestBudget& budget, const std::string* hop, const BudgetPolicy* policy,
                Clock* clock, uint64_t id, uintptr_t key, bool trace_requested)
      : budget_(budget),
        hop_(hop),
        policy_(policy),
        clock_(clock),
        id_(id),
        key_(key),
        trace_requested_(trace_requested) {}

  RequestBudget budget_;
  const std::string* hop_;
  const BudgetPolicy* policy_;
  Clock* clock_;
  uint64_t id_;    // unique per process: tells calls apart when a context's address is reused
  uintptr_t key_;  // the call's context address, with id_ the key of internal lookups
  bool trace_requested_;
  // Shadow mode: the method's real policy and the budget it would have
  // given (nullptr: not in shadow mode).
  const BudgetPolicy* shadowed_policy_ = nullptr;
  RequestBudget shadowed_;
};

// What a downstream call is to the request that makes it.
enum class DownstreamScope {
  // One attempt: its deadline is min(request deadline - hop_reserve,
  // now + attempt cap). The default, for unary calls and short streams.
  kAttempt,
  // A call that may last as long as the request: a stream relayed for the
  // whole request (a watch). The policy's attempt cap, sized for attempts
  // (a 300 ms commit), does not apply: its deadline is the request deadline
  // - hop_reserve, and a DEADLINE_EXCEEDED of it is attributed to the budget
  // that set the request deadline (this hop's request cap, or the caller's
  // deadline), with that budget's length. What its silence may last is its
  // stream idle budget (ClientOptions::stream_idle_budget,
  // SetStreamIdleBudget()), not its deadline.
  kRequest,
};

struct DownstreamOptions {
  // A tighter attempt cap for this one call. Under kAttempt the policy's
  // cap still applies too; under kRequest only this one (infinite: none).
  absl::Duration attempt_cap = absl::InfiniteDuration();
  DownstreamScope scope = DownstreamScope::kAttempt;
};

// What a handler returns at once when hopbudget refused its call on
// arrival (InboundBudget::refused(): too little budget left, or shed by
// admission); nullopt for a call it accepted, and for one that did not pass
// through hopbudget's server interceptor. The server interceptor sends the
// refusal with its attribution whatever the status says.
//
//   if (auto refusal = hopbudget::Refusal(*ctx)) return *refusal;
[[nodiscard]] absl::optional<grpc::Status> Refusal(const grpc::ServerContextBase& inbound);

// The ClientContext for a downstream call made while serving `inbound`:
//   - cancellation of the inbound call propagates to it
//     (ClientContext::FromServerContext);
//   - its deadline is min(request deadline - hop_reserve, now + attempt cap),
//     set explicitly, because FromServerContext's deadline() reports infinite;
//   - it tells hopbudget's client interceptor which budget that deadline is,
//     so a DEADLINE_EXCEEDED is attributed to it, and that the budget was
//     already exhausted if so (the interceptor then fails the call without
//     touching the network).
// When `inbound` did not pass through the server interceptor, the inbound
// deadline is used as the request deadline with a default BudgetPolicy.
std::unique_ptr<grpc::ClientContext> NewDownstreamContext(const grpc::ServerContextBase& inbound,
                                                          const DownstreamOptions& options = {});

// Binds an inbound call to the current thread for as long as it lives, so
// that hopbudget's client interceptor can check downstream calls made with a
// plain ClientContext (not from NewDownstreamContext) on this thread:
//   - a call with no deadline, or with a deadline later than the inbound
//     call's, is a deadline leak: it is counted (Metrics, by kind), logged once
//     per method, and still bounded: the interceptor sends the derived budget
//     in `hopbudget-budget-us` and cancels the call at the derived deadline
//     on its shared timer (attributed to the inbound budget's source).
// Scopes nest; the innermost wins. Does nothing when `inbound` did not pass
// through hopbudget's server interceptor.
//
//   grpc::Status Get(grpc::ServerContext* ctx, ...) {
//     hopbudget::InboundScope scope(*ctx);
//     legacy_client.Fetch();  // makes its own ClientContext internally
//   }
class InboundScope {
 public:
  explicit InboundScope(const grpc::ServerContextBase& inbound);
  ~InboundScope();
  InboundScope(const InboundScope&) = delete;
  InboundScope& operator=(const InboundScope&) = delete;

 private:
  const InboundBudget* const previous_;
};

}  // namespace hopbudget

#endif  // HOPBUDGET_SERVER_H_
