// Copyright hopbudget authors.
//
// shield_grpc.h: shield plus bound (shield.h) inside a gRPC service.
//
//   hopbudget::Shield shield;   // one per server, destroyed after it
//
//   grpc::Status Commit(grpc::ServerContext* ctx, const Req* req, Resp* resp) {
//     auto commit = shield.Run("commit", absl::Seconds(2),
//         [this, req = *req](hopbudget::ShieldContext& work) {
//           auto call = hopbudget::NewShieldedContext(work);  // the shield's budget
//           return ToAbsl(ledger_->Commit(call.get(), req, &reply));
//         });
//     if (!commit.ok()) return hopbudget::ToGrpcStatus(commit.status());
//     return hopbudget::AwaitShielded(*ctx, *commit);  // the caller may leave; the work stays
//   }
//
//   // at exit: stop taking calls, then let shielded work finish, bounded
//   hopbudget::DrainReport r = hopbudget::ShutdownAndDrain(*server, shield, absl::Seconds(5));
//
// Thread safety: the functions are safe to call concurrently.
#ifndef HOPBUDGET_ADVANCED_SHIELD_GRPC_H_
#define HOPBUDGET_ADVANCED_SHIELD_GRPC_H_

#include <grpcpp/client_context.h>
#include <grpcpp/server.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/server_callback.h>
#include <grpcpp/support/status.h>

#include <memory>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "hopbudget/advanced/shield.h"

namespace hopbudget {

// The ClientContext for a downstream call made inside shielded work. Its
// deadline is the shield's (ShieldContext::deadline()), not the inbound
// call's, and it is not a child of the inbound call: cancelling the caller
// does not cancel it. A DEADLINE_EXCEEDED at that deadline is attributed to
// source "shield" by hopbudget's client interceptor. The work still owns
// stopping early: register a stop callback that TryCancel()s the context if
// Drain() may give up on it before its bound.
std::unique_ptr<grpc::ClientContext> NewShieldedContext(const ShieldContext& work);

// Waits for shielded work on behalf of the inbound call `inbound`:
//   - the work ended: its status (OK, or its error; an exceeded bound is
//     DEADLINE_EXCEEDED attributed to "shield");
//   - the inbound budget ran out first (hopbudget's request deadline, or the
//     call's own deadline without the server interceptor): DEADLINE_EXCEEDED
//     attributed to this hop's budget;
//   - the caller cancelled first: CANCELLED.
// In the last two cases the work goes on, bounded; the Shield records its
// outcome (and counts it unobserved if nobody else reads the handle).
// gRPC's sync API tells a handler of a cancel only through IsCancelled(),
// which this polls every few milliseconds while it waits.
grpc::Status AwaitShielded(grpc::ServerContextBase& inbound, const ShieldHandle& handle);

// The callback API's AwaitShielded(): the reactor a unary handler returns to
// answer from shielded work without holding a thread while it runs.
//   - the work ends first: `fill` (if any) runs with its record, on the
//     shield's pool thread, to write the response; then the call finishes
//     with the work's status (an exceeded bound is DEADLINE_EXCEEDED
//     attributed to "shield");
//   - the call ends first (the caller cancelled, its deadline passed, or
//     hopbudget's request cap fired: gRPC cancels the call and tells the
//     reactor): it finishes at once with CANCELLED or DEADLINE_EXCEEDED
//     attributed to this hop's budget. The work goes on, bounded; `fill`
//     does not run (the response may be gone); the outcome is recorded and,
//     since nobody took it, logged and counted unobserved unless a handle
//     reads it.
// Example:
//   grpc::ServerUnaryReactor* Commit(grpc::CallbackServerContext* ctx,
//                                    const Req* req, Resp* resp) override {
//     auto commit = shield.Run("commit", absl::Seconds(2), Work(*req));
//     if (!commit.ok()) {
//       auto* r = ctx->DefaultReactor();
//       r->Finish(hopbudget::ToGrpcStatus(commit.status()));
//       return r;
//     }
//     return hopbudget::AnswerWhenShieldedDone(ctx, *commit,
//         [resp](const hopbudget::ShieldRecord& r) { resp->set_outcome(...); });
//   }
grpc::ServerUnaryReactor* AnswerWhenShieldedDone(
    grpc::CallbackServerContext* inbound, const ShieldHandle& handle,
    absl::AnyInvocable<void(const ShieldRecord&)> fill = nullptr);

// What AwaitShielded() and AnswerWhenShieldedDone() answer, for a reactor
// that answers from shielded work itself (one that also does other work
// before or after it). Once the work ended with `record`: OK, the work's
// error, or for an exceeded bound DEADLINE_EXCEEDED attributed to "shield"
// at this hop. When the inbound call ended first: DEADLINE_EXCEEDED
// attributed to this hop's budget once that ran out, else CANCELLED.
grpc::Status StatusOfShieldRecord(const ShieldRecord& record,
                                  const grpc::ServerContextBase& inbound);
grpc::Status StatusWhenShieldCallerLeft(const grpc::ServerContextBase& inbound);

// Stops `server` accepting calls and waits for running handlers, then drains
// `shield`, all within `max_wait` overall: Server::Shutdown(deadline) cancels
// the handlers still running at the deadline, and shielded work gets what is
// left (each also stops at its own bound). Returns the drain's report.
DrainReport ShutdownAndDrain(grpc::Server& server, Shield& shield, absl::Duration max_wait);

// absl::Status <-> grpc::Status at the boundary (codes are numerically equal).
grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status ToAbslStatus(const grpc::Status& status);

}  // namespace hopbudget

#endif  // HOPBUDGET_ADVANCED_SHIELD_GRPC_H_
