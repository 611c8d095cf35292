// Copyright hopbudget authors.
//
// client.h: the client side of hopbudget.
//
// Install the interceptor on every channel a service calls out on:
//
//   hopbudget::ClientOptions options;
//   options.hop = "orders";                       // who is calling
//   auto channel = hopbudget::CreateChannel("localhost:50052",
//       grpc::InsecureChannelCredentials(), options);
//   if (!channel.ok()) return channel.status();
//   auto stub = Ledger::NewStub(*channel);
//
// gRPC fixes a call's deadline before any interceptor runs, so the deadline
// itself comes from the ClientContext: NewDownstreamContext() (server.h)
// inside a handler, or ClientContext::set_deadline() at the edge. For every
// call the interceptor then:
//   - fails fast, without touching the network, when the budget left is below
//     `min_call_budget` or NewDownstreamContext() found it exhausted: the call
//     ends with DEADLINE_EXCEEDED, source exhausted-before-call (it hijacks
//     the call; no connection is made);
//   - when the channel has no ready backend (connecting, reconnecting to a
//     restarting server, every backend's health NOT_SERVING) and
//     `backend_wait` is kWithinBudget, holds the call, without a thread,
//     until one is ready, and ends it with DEADLINE_EXCEEDED, source
//     no-backend, when only `min_call_budget` is left (the wait is spent from
//     the call's budget and observed in hopbudget_backend_wait_seconds);
//   - sends the exact remaining budget in `hopbudget-budget-us` (unless
//     `send_budget_header` is off);
//   - when it must enforce a budget tighter than the context's deadline (a
//     deadline leak inside an InboundScope, or a stream's idle budget), arms
//     the one shared timer, cancels the call when it fires and turns its own
//     cancel into DEADLINE_EXCEEDED. A cancel it did not issue stays
//     CANCELLED. On the common path it arms no timer;
//   - attributes every DEADLINE_EXCEEDED: the origin named by the server's
//     attribution when the deadline fired further down (counted locally as
//     downstream), else the budget that defined this call's deadline
//     (client, request or attempt) at this hop. The final grpc::Status
//     carries the attribution (AttributionOf()).
//   - counts the call's end by method and code and, for a call made for an
//     inbound call (NewDownstreamContext or an InboundScope), hands the
//     callee's per-hop trace to that inbound call (TraceOf(), trace.h).
//
// Thread safety: the factory is safe for concurrent use; helpers are pure or
// act on the ClientContext they are given.
#ifndef HOPBUDGET_CLIENT_H_
#define HOPBUDGET_CLIENT_H_

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>
#include <grpcpp/support/client_interceptor.h>
#include <grpcpp/support/status.h>

#include <memory>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "hopbudget/advanced/attribution.h"
#include "hopbudget/advanced/clock.h"
#include "hopbudget/advanced/metrics.h"
#include "hopbudget/advanced/trace.h"
#include "hopbudget/hop.h"

namespace hopbudget {

// What a call does when its channel has no ready backend.
enum class BackendWait {
  // Waits for one inside its budget (see the top of this file). A call
  // without a deadline does not wait (it has no budget to wait in). A
  // cancel through ClientContext::TryCancel() ends the wait at once; a
  // cancel that reaches the call only through gRPC core (a parent server
  // call's) ends it at the give-up time. A call that waited goes on, and
  // may complete, on hopbudget's one watch thread or its timer thread:
  // completion callbacks must not block, as on gRPC's own threads. Each
  // call reads the channel's state once: one it lets go a moment before
  // the backend turns unhealthy (a server's lame duck) is still failed fast
  // by gRPC's pick (UNAVAILABLE "backend unhealthy") unless its context has
  // set_wait_for_ready(true), which the retrying channel sets on its
  // attempts; the budget bounds that wait too.
  kWithinBudget,
  // gRPC's default for a call without wait_for_ready: UNAVAILABLE at once
  // once the channel is in TRANSIENT_FAILURE.
  kFailFast,
};
// Stable names: "within_budget", "fail_fast". AbslStringify and operator<<
// print them (GoogleTest, streams).
absl::string_view BackendWaitName(BackendWait value);
template <typename Sink>
void AbslStringify(Sink& sink, BackendWait value) {
  sink.Append(BackendWaitName(value));
}
inline std::ostream& operator<<(std::ostream& os, BackendWait value) {
  return os << BackendWaitName(value);
}

struct ClientOptions {
  // Name of the calling service in attribution and metrics. Required; 1..64
  // characters of [A-Za-z0-9._-].
  std::string hop;
  // A call with less budget than this left is not started. >= 0.
  absl::Duration min_call_budget = absl::Milliseconds(1);
  // Most silence allowed between two messages of a streaming call, in either
  // direction; InfiniteDuration() turns it off. > 0. Per call:
  // SetStreamIdleBudget().
  absl::Duration stream_idle_budget = absl::InfiniteDuration();
  // Whether to send `hopbudget-budget-us`, and `hopbudget-sent-us` with it
  // (wire.h). With them the server reads the exact budget, less what the call
  // waited on its way (docs/transit.md); without it, grpc-timeout alone, which gRPC 1.51 rounds
  // up and may reuse from an earlier call up to 3 % longer, so a server may
  // take up to about 3 % more than the caller has left (and its downstream
  // calls with it). The header is a large part of what hopbudget costs a
  // call, since gRPC parses an unknown header's name literally on every call:
  // measured in docs/benchmarks.md.
  bool send_budget_header = true;
  // No ready backend: wait for one inside the budget, or fail fast.
  BackendWait backend_wait = BackendWait::kWithinBudget;
  // Not owned; each must outlive every channel made with these options (and
  // every call on them). Defaults (nullptr): Clock::Real(), Metrics::Default().
  Clock* clock = nullptr;
  Metrics* metrics = nullptr;
};

// Validates `options` and returns the interceptor factory for
// grpc::experimental::CreateCustomChannelWithInterceptors().
[[nodiscard]] absl::StatusOr<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
MakeClientInterceptorFactory(ClientOptions options);

// A channel to `target` with hopbudget's client interceptor installed.
//
// Channel defaults: unless `args` sets them (the caller's value always
// wins), the channel gets
//   GRPC_ARG_KEEPALIVE_TIME_MS               10000  ping every 10 s,
//   GRPC_ARG_KEEPALIVE_TIMEOUT_MS             3000  3 s to answer (also the
//                                                   socket's TCP_USER_TIMEOUT),
//   GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS      1  also when idle,
//   GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA        0  pings not capped,
//   GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS      200  reconnect after 0.2 s,
//   GRPC_ARG_MAX_RECONNECT_BACKOFF_MS         2000  x1.6 up to 2 s (+-20 %),
//   GRPC_ARG_MIN_RECONNECT_BACKOFF_MS         2000  gRPC's minimum connect
//                                                   timeout (default 20 s).
// Why: without keepalive a call sent on a connection whose peer vanished
// (a blackholed link, a frozen host) waits for the kernel's retransmissions,
// not for gRPC; with it the dead connection is dropped within ~3 s of
// unanswered traffic (~13 s when idle) and calls wait for a ready backend
// (`backend_wait`) instead of on it.
// gRPC's reconnect backoff (1 s x1.6 up to 120 s, 20 s per connect attempt)
// leaves a healed partition unused for up to minutes; with these values the
// next attempt starts within ~2.4 s and an attempt lost in the partition
// is abandoned after 2 s. In gRPC 1.51 a connect attempt whose handshake
// fails (the peer resets) also lasts until that timeout.
// The servers called must permit the pings: a gRPC server's default policy
// answers pings more often than every 5 min (2 h without calls) with GOAWAY
// too_many_pings (seen after ~40 s on an idle channel), after which gRPC
// doubles the channel's keepalive time. Set
// GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS <= 10000 and
// GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS = 1 on them (the demo's servers
// do), or pass a longer GRPC_ARG_KEEPALIVE_TIME_MS here.
// gRPC core retries stay on (gRPC's default) for its transparent retries: a
// call that raced a server's GOAWAY and never reached it is sent again. Keep
// retryPolicy and hedgingPolicy out of a service config given in `args`:
// core would then retry answers too, under hopbudget's attempts.
[[nodiscard]] absl::StatusOr<std::shared_ptr<grpc::Channel>> CreateChannel(
    const std::string& target, const std::shared_ptr<grpc::ChannelCredentials>& creds,
    ClientOptions options, const grpc::ChannelArguments& args = grpc::ChannelArguments());

// The ClientOptions of `hop` (hop.h): its name, clock and metrics, and its
// default entry's minimum budget as min_call_budget; the other fields keep
// their defaults, for the caller to change.
ClientOptions ClientOptionsFor(const Hop& hop);

// A channel to `target` for `hop`: CreateChannel with `options` (make them
// with ClientOptionsFor(hop), which the short form does; their hop, clock
// and metrics are the Hop's whatever they say), and the Hop's service
// config handed to gRPC core without retryPolicy, hedgingPolicy and
// retryThrottling, but for methods in shadow mode
// (Hop::core_service_config(): core applies each method's timeout to a
// call made without a deadline, and its waitForReady) unless `args` sets a
// service config of its own. A unary call is one attempt: its method's
// attempt cap (perAttemptRecvTimeout) bounds it when tighter than its
// deadline (DEADLINE_EXCEEDED, source attempt); streams are not capped. A method's `waitForReady`
// also decides whether hopbudget holds its calls for a ready backend (true: kWithinBudget, false:
// kFailFast; unset: `backend_wait`), read from the table in force when each call starts;
// SetBackendWait on a call wins over it. gRPC core keeps the config of the table in force when the
// channel is made: a later reload reaches hopbudget's decisions, not core's copy. `hop` is not
// owned and must outlive the channel.
[[nodiscard]] absl::StatusOr<std::shared_ptr<grpc::Channel>> CreateChannel(
    const Hop& hop, const std::string& target,
    const std::shared_ptr<grpc::ChannelCredentials>& creds,
    const grpc::ChannelArguments& args = grpc::ChannelArguments());
[[nodiscard]] absl::StatusOr<std::shared_ptr<grpc::Channel>> CreateChannel(
    const Hop& hop, ClientOptions options, const std::string& target,
    const std::shared_ptr<grpc::ChannelCredentials>& creds,
    const grpc::ChannelArguments& args = grpc::ChannelArguments());

// Overrides ClientOptions::backend_wait, and on a Hop's channel its method's
// `waitForReady`, for the call made with `ctx` (a call that must fail fast
// on a channel that waits, or the reverse). Call
// before the call starts; the value never reaches the network.
void SetBackendWait(grpc::ClientContext& ctx, BackendWait wait);

// Overrides ClientOptions::stream_idle_budget for the call made with `ctx`.
// `idle` must be > 0; InfiniteDuration() turns the idle budget off.
void SetStreamIdleBudget(grpc::ClientContext& ctx, absl::Duration idle);

// The attribution carried by a finished call's status: from
// grpc-status-details-bin, else from a "hopbudget: ..." status message.
// nullopt for any other status, including non-hopbudget DEADLINE_EXCEEDED.
absl::optional<Attribution> AttributionOf(const grpc::Status& status);

// Asks the hops of the call made with `ctx` for their per-hop trace even when
// the call succeeds (a failed call carries it anyway). Each hop passes the
// request on to the downstream calls it makes with NewDownstreamContext()
// or a RetryLoop. Call before the call starts.
void RequestTrace(grpc::ClientContext& ctx);

// The per-hop budget trace (trace.h) the callee answered with, caller first.
// Call it after the call finished. Empty when the callee sent none (a
// successful call whose trace was not asked for with RequestTrace(), a hop
// without hopbudget, a cancel) or sent one that does not decode (it is a
// report: a bad one is not an error).
BudgetTrace TraceOf(const grpc::ClientContext& finished_call);

}  // namespace hopbudget

// The rest of a service's client side, so that hop.h, server.h and this
// header are all a service includes: the retrying channel
// (CreateRetryingChannel) and the retry loop (RetryLoop). Included last:
// retry.h builds on the declarations above.
#include "hopbudget/advanced/retry.h"       // IWYU pragma: export
#include "hopbudget/advanced/retry_loop.h"  // IWYU pragma: export

#endif  // HOPBUDGET_CLIENT_H_
