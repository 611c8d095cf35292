// Copyright hopbudget authors.
//
// retry.h: budget-aware retries for unary calls, as a drop-in channel.
//
// Every attempt is a real new call with its own ClientContext whose deadline
// is set before it starts:
//   attempt deadline = min(logical deadline, now + attempt_cap)
// where the logical deadline is what the caller has left (from
// NewDownstreamContext(): the inbound request deadline - hop reserve; at an
// edge client: the ClientContext's deadline). Retries therefore take their
// budget from what remains, a backoff never sleeps past the deadline, and an
// attempt that cannot get `min_attempt_budget` is not sent (the call fails
// with the attribution of the budget that ran out).
//
//   hopbudget::RetryOptions options;
//   options.client.hop = "orders";
//   options.budget.request_cap = absl::Seconds(2);      // for validation
//   options.budget.attempt_cap = absl::Milliseconds(300);
//   options.retry.max_attempts = 3;
//   auto channel = hopbudget::CreateRetryingChannel(
//       "ledger:50051", grpc::InsecureChannelCredentials(), options);
//   auto stub = Ledger::NewStub(*channel);   // unchanged stub code
//
// Each attempt passes through hopbudget's budget interceptor (fail fast,
// exact budget header, attribution), as any call does; gRPC core keeps only
// its transparent retries. How, and why it works in gRPC 1.51:
// docs/retries.md.
//
// What is retried: codes in RetryPolicy::retryable_codes (default
// UNAVAILABLE), and DEADLINE_EXCEEDED when the attempt's own attempt budget
// fired at this hop. Never: a DEADLINE_EXCEEDED of the request or client
// budget, or one that fired further down. The server may push back
// (grpc-retry-pushback-ms); attempts after the first carry
// grpc-previous-rpc-attempts. A token bucket per channel (gRFC A6
// retryThrottling) stops retries to a target that fails more than it
// succeeds; the original error is then returned.
//
// Limits in gRPC 1.51 (docs/grpc-1.51.md): a hijacking interceptor must write
// the response into the application's typed message, so only methods whose
// types are protobuf messages linked into the program (the generated stubs)
// are retried; other calls (generic stubs, streaming calls) pass through
// untouched. The logical call's TryCancel() cancels the attempt in flight at
// once. When the logical context came from NewDownstreamContext(), every
// attempt is itself a child of the inbound call (FromServerContext), so an
// inbound cancel reaches the attempt in flight as it reaches any propagated
// call: the attempts are new calls, not children of the logical one.
//
// Each call is two gRPC calls in the client (the application's, hijacked,
// and its attempt's). Where call sites can change, RetryLoop (retry_loop.h)
// makes one real call per attempt.
//
// Thread safety: the channel is safe for concurrent use like any channel.
#ifndef HOPBUDGET_ADVANCED_RETRY_H_
#define HOPBUDGET_ADVANCED_RETRY_H_

#include <grpcpp/channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "hopbudget/advanced/budget.h"
#include "hopbudget/advanced/retry_policy.h"
#include "hopbudget/client.h"
#include "hopbudget/hop.h"

namespace hopbudget {

struct RetryOptions {
  // The budget interceptor every attempt passes through (hop, clock, metrics).
  // Its clock and metrics are not owned and must outlive the channel.
  ClientOptions client;
  // attempt_cap, hop_reserve and min_attempt_budget shape each attempt;
  // request_cap is what ValidateRetryPolicy checks the fit against.
  BudgetPolicy budget;
  RetryPolicy retry;
  RetryThrottleOptions throttle;
  // A policy that ValidateRetryPolicy rejects (retries that can never run) is
  // refused unless this is set; then a warning is logged once and every call
  // counts in Metrics::unfit_policy_calls.
  bool accept_unfit_policy = false;
};

// A channel to `target` whose unary calls are retried within their budget.
// Validates every part of `options`. The channel gets the same keepalive and
// reconnect-backoff defaults as CreateChannel (client.h: why, and what the
// servers called must permit); `args` overrides any of them.
[[nodiscard]] absl::StatusOr<std::shared_ptr<grpc::Channel>> CreateRetryingChannel(
    const std::string& target, const std::shared_ptr<grpc::ChannelCredentials>& creds,
    RetryOptions options, const grpc::ChannelArguments& args = grpc::ChannelArguments());

// A retrying channel to `target` for `hop` (hop.h): each call's method
// takes its entry in the Hop's table. A method with a retry policy (a
// service config's retryPolicy) is retried under it, each attempt capped by
// the entry's attempt cap (perAttemptRecvTimeout); a method without one is
// sent once, never retried (a write the config does not call retryable).
// The retry throttle is the config's retryThrottling (gRFC A6; its default
// without one), one per channel. The table in force when a call starts
// serves the whole call. `client` defaults to ClientOptionsFor(hop) (its
// hop, clock and metrics are the Hop's whatever it says); the
// service config goes to gRPC core as CreateChannel(hop, ...) hands it.
// `hop` is not owned and must outlive the channel.
[[nodiscard]] absl::StatusOr<std::shared_ptr<grpc::Channel>> CreateRetryingChannel(
    const Hop& hop, const std::string& target,
    const std::shared_ptr<grpc::ChannelCredentials>& creds,
    const grpc::ChannelArguments& args = grpc::ChannelArguments());
[[nodiscard]] absl::StatusOr<std::shared_ptr<grpc::Channel>> CreateRetryingChannel(
    const Hop& hop, ClientOptions client, const std::string& target,
    const std::shared_ptr<grpc::ChannelCredentials>& creds,
    const grpc::ChannelArguments& args = grpc::ChannelArguments());

}  // namespace hopbudget

#endif  // HOPBUDGET_ADVANCED_RETRY_H_
