// Copyright hopbudget authors.
//
// outgoing.h: the contexts of the calls a demo hop makes downstream, and
// the channels it makes them on. This is the only place where the two modes
// differ in what a handler does:
//   kHopbudget: NewDownstreamContext(inbound): the deadline derived from the
//     inbound budget (less this hop's reserve, capped), cancellation
//     propagated, the trace and attribution carried by the interceptors;
//   kBaseline: a fresh context with a constant deadline, now +
//     --baseline-timeout, per attempt, nothing propagated: what most code
//     does today.
// In both modes the demo-only header x-demo-client-deadline-us is forwarded
// (accounting only, never acted on).
//
//   OutgoingContexts outgoing(common.mode, common.baseline_timeout);
//   std::unique_ptr<grpc::ClientContext> out = outgoing.NewContext(*ctx);
//   grpc::Status s = stub->Call(out.get(), request, &reply);
//
// Thread safety: const methods, callable from any handler thread.
#ifndef HOPBUDGET_DEMO_OUTGOING_H_
#define HOPBUDGET_DEMO_OUTGOING_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "service_flags.h"

namespace hopbudget::demo {

// The baseline's retry loop marks its retries with this header (demo only:
// grpc-* keys are reserved to gRPC itself).
inline constexpr char kBaselineAttemptHeader[] = "x-demo-previous-attempts";

// The value of the inbound metadata `key`, "" when absent.
std::string InboundMetadata(const grpc::ServerContextBase& ctx, absl::string_view key);

class OutgoingContexts {
 public:
  // `wait_for_backend`: hopbudget mode's calls wait for a ready backend
  // inside their budgets (not --fail-fast-without-backend).
  OutgoingContexts(Mode mode, absl::Duration baseline_timeout, bool wait_for_backend)
      : mode_(mode), baseline_timeout_(baseline_timeout), wait_for_backend_(wait_for_backend) {}

  // The context of an outgoing call made while serving `inbound`, with the
  // demo header forwarded. Hopbudget: NewDownstreamContext(inbound);
  // baseline: NewBaselineContext(inbound, 0).
  std::unique_ptr<grpc::ClientContext> NewContext(const grpc::ServerContextBase& inbound) const;
  // The context of a streaming call (a relayed WatchOrder) made while
  // serving `inbound`. Like NewContext, except that in hopbudget mode a
  // stream is not an attempt (DownstreamScope::kRequest): it gets what is
  // left of the request (its deadline less this hop's reserve, the caller's
  // cancel propagated), never this hop's attempt cap (orders' 300 ms, sized
  // for commit attempts, would end every watch after 300 ms), and its end
  // is attributed to the budget that set the request deadline. What a
  // stream's silence may last is its idle budget (the channel's
  // ClientOptions::stream_idle_budget).
  std::unique_ptr<grpc::ClientContext> NewStreamContext(
      const grpc::ServerContextBase& inbound) const;
  // Adds the demo header of `inbound` to `out`, and in hopbudget mode, when
  // calls wait for a ready backend, sets wait_for_ready: for contexts made by
  // someone else (each attempt of orders' RetryLoop) and by NewContext.
  // hopbudget's channel holds a call while it has no ready backend; a call
  // it lets go a moment before the backend turns unhealthy (a lame duck)
  // would otherwise be failed fast by gRPC's pick (UNAVAILABLE "backend
  // unhealthy"). The budget still bounds the wait.
  void PrepareCall(const grpc::ServerContextBase& inbound, grpc::ClientContext& out) const;
  // Baseline contexts for a hand-written retry loop: one per attempt,
  // deadline now + baseline_timeout; `previous_attempts` > 0 is said in
  // kBaselineAttemptHeader.
  std::unique_ptr<grpc::ClientContext> NewBaselineContext(const grpc::ServerContextBase& inbound,
                                                          int previous_attempts) const;

 private:
  void ForwardDemoHeader(const grpc::ServerContextBase& inbound, grpc::ClientContext& out) const;

  Mode mode_;
  absl::Duration baseline_timeout_;
  bool wait_for_backend_;
};

// The arguments of the channels a demo hop calls downstream on (orders ->
// ledger, gateway -> orders), and what a client of the chain should use:
// round_robin with client-side health checking (gRFC A17; pick_first
// ignores health in gRPC 1.51). When the callee goes NOT_SERVING at the
// start of its shutdown (the lame duck), its subchannel leaves READY and
// calls fail fast with UNAVAILABLE here, a code the caller can retry
// elsewhere, instead of reaching a server that is shutting down: gRPC 1.51
// answers a call that reaches a server after Shutdown() began, before its
// GOAWAY reached the caller, with CANCELLED (grpc/grpc#41785).
grpc::ChannelArguments DownstreamChannelArguments();

}  // namespace hopbudget::demo

#endif  // HOPBUDGET_DEMO_OUTGOING_H_
