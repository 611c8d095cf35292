// Copyright hopbudget authors.
//
// retry_loop.h: budget-aware retries around the generated stub call, one
// real gRPC call per attempt.
//
// CreateRetryingChannel (retry.h) retries without touching call sites, but an
// interceptor can only retry by hijacking every call and re-issuing it as a
// second, generic call, which costs a second call's CPU on every call. A
// RetryLoop is google-cloud-cpp's answer (its RetryLoop around a stub call)
// with hopbudget's budgets: it calls your stub method once per attempt, each
// attempt with a fresh grpc::ClientContext that the loop owns:
//   - its deadline is derived from what remains of the logical call:
//     min(logical deadline, now + attempt_cap) (DeriveCallDeadline); inside a
//     handler the logical deadline is the request deadline minus this hop's
//     reserve, as for NewDownstreamContext();
//   - inside a handler it is a child of the inbound call, so the inbound
//     cancel reaches the attempt at once;
//   - attempts after the first carry `grpc-previous-rpc-attempts`.
// Between attempts it decides with the same pure core as the retrying
// channel (DecideRetry, RetryThrottle, pushback) and counts the same metrics.
//
// The stub's channel must carry hopbudget's client interceptor
// (hopbudget::CreateChannel with ClientOptions::hop equal to
// RetryLoopOptions::hop; a loop and a channel made from one Hop always
// agree): it attributes each attempt's DEADLINE_EXCEEDED,
// which is how the loop tells its own attempt budget (retried) from any other
// (never retried), and it fails an attempt that cannot start with
// min_attempt_budget without touching the network. It also sends each
// attempt's count as `hopbudget-previous-attempts`, which survives gRPC
// core's transparent retries (wire.h).
//
// Edge cases: a logical call with no deadline gives attempts no deadline
// beyond attempt_cap (infinite attempt_cap: none at all); a logical deadline
// already passed, or an inbound call refused on arrival, gives one attempt
// that fails fast with exhausted-before-call; max_attempts 1 never retries.
//
// Thread safety: a RetryLoop may be used from any number of threads at once
// (one RetryThrottle per loop, lock-free). Each logical call is independent.
//
// Example, in a sync handler:
//   absl::StatusOr<std::unique_ptr<hopbudget::RetryLoop>> loop =
//       hopbudget::RetryLoop::Create(*hop, "/pkg.Ledger/Commit");  // at start-up
//   grpc::Status s = (*loop)->Call(hopbudget::LogicalCall::Of(*ctx),
//       [&](grpc::ClientContext* attempt) { return stub->Commit(attempt, req, &resp); });
// In a callback handler (no thread is held between attempts):
//   (*loop)->Start(hopbudget::LogicalCall::Of(*ctx),
//       [&](grpc::ClientContext* attempt, std::function<void(grpc::Status)> done) {
//         stub->async()->Commit(attempt, &req, &resp, std::move(done));
//       },
//       [reactor](grpc::Status s) { reactor->Finish(s); });
#ifndef HOPBUDGET_ADVANCED_RETRY_LOOP_H_
#define HOPBUDGET_ADVANCED_RETRY_LOOP_H_

#include <grpcpp/client_context.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "hopbudget/advanced/budget.h"
#include "hopbudget/advanced/clock.h"
#include "hopbudget/advanced/metrics.h"
#include "hopbudget/advanced/retry_policy.h"
#include "hopbudget/hop.h"

namespace hopbudget {

namespace internal {
class TimerService;
}  // namespace internal

struct RetryLoopOptions {
  // This hop's name, as its channel's ClientOptions::hop: an attempt budget
  // attributed to this hop is the only DEADLINE_EXCEEDED that is retried.
  std::string hop;
  // The method called, "/pkg.Service/Method", for metric labels only
  // ("" counts under "other").
  std::string method;
  // attempt_cap and min_attempt_budget shape each attempt; request_cap is
  // what ValidateRetryPolicy checks the fit against. hop_reserve is taken
  // off the inbound deadline of a handler whose call did not pass through
  // hopbudget's server interceptor (otherwise the inbound policy's reserve
  // applies); a deadline given at the edge is used as it is.
  BudgetPolicy budget;
  RetryPolicy retry;
  RetryThrottleOptions throttle;
  // A policy that ValidateRetryPolicy rejects (retries that can never run)
  // is refused unless this is set; then every call counts in
  // Metrics::unfit_policy_calls.
  bool accept_unfit_policy = false;
  // Not owned; must outlive the loop. Defaults: Clock::Real(),
  // Metrics::Default().
  Clock* clock = nullptr;
  Metrics* metrics = nullptr;
};

// The logical call the attempts serve: the inbound call of a handler, or a
// deadline at the edge.
struct LogicalCall {
  // The handler's inbound call; not owned. It must outlive the logical call
  // (in the callback form: until `on_done` has run). nullptr at the edge.
  const grpc::ServerContextBase* inbound = nullptr;
  // At the edge: the logical deadline (InfiniteFuture(): none). Ignored
  // when `inbound` is set.
  absl::Time deadline = absl::InfiniteFuture();

  static LogicalCall Of(const grpc::ServerContextBase& inbound) {
    LogicalCall c;
    c.inbound = &inbound;
    return c;
  }
  static LogicalCall WithDeadline(absl::Time deadline) {
    LogicalCall c;
    c.deadline = deadline;
    return c;
  }
};

// One logical call in the callback form; see RetryLoop::Start.
class RetryingCall {
 public:
  virtual ~RetryingCall() = default;
  // Cancels the attempt in flight and any attempt still to come; `on_done`
  // then runs with the attempt's CANCELLED (or at once with CANCELLED when
  // the loop is between attempts). Safe from any thread, any number of
  // times; does nothing once the call has ended.
  virtual void TryCancel() = 0;
};

class RetryLoop {
 public:
  // Starts one attempt with `attempt_ctx` (owned by the loop, valid until
  // the attempt ends) and returns its status.
  using SyncAttempt = absl::FunctionRef<grpc::Status(grpc::ClientContext* attempt_ctx)>;
  // Starts one attempt with `attempt_ctx` and arranges for `done` to be
  // called once with its status (a generated stub's async() method does).
  // Both forms: start the attempt's call before returning, on the calling
  // thread, as a stub call does. The loop hands the attempt's budget to
  // hopbudget's interceptors there (they are created inside the stub
  // call); a call started later or elsewhere still has the attempt's
  // deadline, but is attributed as a plain client deadline.
  using AsyncAttempt =
      std::function<void(grpc::ClientContext* attempt_ctx, std::function<void(grpc::Status)> done)>;

  // Validates `options` (hop name, ValidateRetryPolicy, the throttle).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<RetryLoop>> Create(RetryLoopOptions options);

  // A loop for calls of `method` ("/pkg.Service/Method") made by `hop`
  // (hop.h). The hop's name, clock and metrics are the Hop's, as on its
  // channels (CreateChannel(hop, ...)), so the loop and the channel agree on
  // whose attempt budget fired. Each logical call takes the method's entry
  // in the Hop's table in force when the call starts, for the whole call (a
  // reload applies from the next call):
  //   - a method with a retry policy (a service config's retryPolicy) is
  //     retried under it, each attempt capped by the entry's attempt cap
  //     (perAttemptRecvTimeout);
  //   - a method without one gets one attempt, never retried (a write the
  //     config does not call retryable);
  //   - a method in shadow mode gets one attempt under the logical deadline
  //     itself, no cap: core retries it as without hopbudget.
  // The retry throttle is the config's retryThrottling when the loop is
  // made (gRFC A6's default without one), one per loop. `hop` is not owned
  // and must outlive the loop. A `method` that is not "/pkg.Service/Method"
  // is InvalidArgument.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<RetryLoop>> Create(const Hop& hop,
                                                                         std::string method);

  ~RetryLoop();
  RetryLoop(const RetryLoop&) = delete;
  RetryLoop& operator=(const RetryLoop&) = delete;

  // The sync form: runs attempts on the calling thread until one succeeds or
  // no retry follows, and returns that attempt's status (a retryable error
  // with no room for another attempt says so in its message). Waits between
  // attempts on this thread.
  grpc::Status Call(const LogicalCall& call, SyncAttempt attempt);

  // The callback form: starts the first attempt and returns. Backoffs wait
  // on the shared timer service, holding no thread.
  // Threads: `attempt` runs on the caller's thread (the first attempt,
  // inside Start), on the timer's (after a backoff) or on the previous
  // attempt's completion thread. `on_done` runs exactly once, with the
  // status Call() would return, on whichever of those threads ends the
  // call, and never while an `attempt` is still running: an `attempt` may
  // touch what `on_done` frees until it returns. It may run inside Start()
  // (an attempt that ended at once): do not touch what it frees after
  // calling Start() unless something else holds it (a reactor's answer
  // deferred until the handler returns).
  // `attempt` and whatever it refers to (request, response) must stay valid
  // until `on_done` has run. The handle may be dropped at once.
  std::shared_ptr<RetryingCall> Start(const LogicalCall& call, AsyncAttempt attempt,
                                      absl::AnyInvocable<void(grpc::Status)> on_done);

  // What the loop was made with; for a Hop's loop, its method's entry when
  // the loop was made (max_attempts 1: no retries), filled in as options.
  const RetryLoopOptions& options() const { return options_; }

 private:
  friend class RetryLoopCall;
  RetryLoop(RetryLoopOptions options, bool unfit, const Hop* hop);

  const RetryLoopOptions options_;
  const bool unfit_;
  const Hop* const hop_;  // the table each call takes its entry from; nullptr: options_
  Clock& clock_;
  Metrics& metrics_;
  const MethodId method_;
  std::unique_ptr<internal::TimerService> own_timers_;  // only for a non-real clock
  internal::TimerService& timers_;
  RetryThrottle throttle_;
};

}  // namespace hopbudget

#endif  // HOPBUDGET_ADVANCED_RETRY_LOOP_H_
