// Copyright hopbudget authors.
//
// hedge_grpc.h: hedged requests of real gRPC calls under one deadline (the
// pure decisions are in hedge.h).
//
// Use one Hedger per idempotent method (its latency window is that
// method's). Hedger::Start() sends attempt 0 at once; after the hedge delay
// (fixed, or the method's recent latency quantile) it asks DecideHedge and
// sends attempt 1, then attempt 2 after another delay when max_attempts is
// 3. `attempt(index, ctx, done)` picks the target by index ("to another
// target where one is given"). Each attempt's context is built as RetryLoop
// builds its attempts (deadline from what remains of the logical call,
// child of the inbound call, source tag), and a hedge carries
// `grpc-previous-rpc-attempts` (1, 2). Then:
//   - the first OK wins and every other attempt is cancelled at once;
//   - a non-fatal code (HedgePolicy::non_fatal_codes), or an attempt cut by
//     its own attempt_cap, lets the next hedge go at once, if DecideHedge
//     allows it, and the other attempts keep running;
//   - any other failure, or a pushback, ends the call with that answer and
//     cancels the rest (gRFC A6);
//   - a hedge is never sent when less than min_attempt_budget remains, nor
//     beyond max_extra_load hedges per call (one bucket per Hedger); one
//     the empty bucket holds back is asked for again after another delay
//     (the first attempt still out is likelier than ever to be a slow one)
//     and goes out once a later call has earned the token;
//   - when every attempt has failed, the last failure is the answer.
// `on_done` runs once every attempt has ended (the cancelled ones complete
// locally right after the winner), so no completion outlives the caller's
// response objects. Counted in Metrics: hedged calls, hedges sent, won and
// skipped by reason (hedge.h HedgeOutcome), and cancelled losers.
//
// The stubs' channels should carry hopbudget's client interceptor with
// ClientOptions::hop == HedgerOptions::hop (CreateChannel; a hedger and a
// channel made from one Hop always agree): it also sends
// the hedge's count as hopbudget-previous-attempts, which gRPC core's
// transparent retries leave alone (wire.h). Only hedge methods that are
// idempotent: a hedge runs the method twice whenever both copies reach a
// server.
//
// Thread safety: a Hedger may be used from any number of threads at once.
//
// Example:
//   hopbudget::HedgerOptions o;
//   o.hop = "orders"; o.budget = policy; o.hedge.quantile = 0.95;
//   auto hedger = hopbudget::Hedger::Create(o);                 // at start-up
//   echo::Reply replies[2];
//   (*hedger)->Start(hopbudget::LogicalCall::Of(*ctx),
//       [&](int i, grpc::ClientContext* c, std::function<void(grpc::Status)> done) {
//         replicas[i % 2]->async()->Get(c, &req, &replies[i], std::move(done));
//       },
//       [reactor](hopbudget::HedgeResult r) { reactor->Finish(r.status); });
#ifndef HOPBUDGET_ADVANCED_HEDGE_GRPC_H_
#define HOPBUDGET_ADVANCED_HEDGE_GRPC_H_

#include <grpcpp/client_context.h>
#include <grpcpp/support/status.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "hopbudget/advanced/budget.h"
#include "hopbudget/advanced/clock.h"
#include "hopbudget/advanced/hedge.h"
#include "hopbudget/advanced/metrics.h"
#include "hopbudget/advanced/retry_loop.h"
#include "hopbudget/hop.h"

namespace hopbudget {

namespace internal {
class TimerService;
}  // namespace internal

struct HedgerOptions {
  // This hop's name, as its channels' ClientOptions::hop. Required.
  std::string hop;
  // The method hedged, "/pkg.Service/Method": Create(hop, method) sets it
  // and resolves the method's entry by it; unused otherwise.
  std::string method;
  BudgetPolicy budget;  // must pass ValidatePolicy
  HedgePolicy hedge;    // must pass ValidateHedgePolicy
  // Not owned; must outlive the Hedger. Defaults: Clock::Real(),
  // Metrics::Default().
  Clock* clock = nullptr;
  Metrics* metrics = nullptr;
};

struct HedgeResult {
  grpc::Status status;
  int winner = -1;  // index of the attempt that answered OK, or -1
  int sent = 0;     // attempts sent, the first included
  int losers = 0;   // attempts cancelled because another answered first
  // Why the next hedge was not sent, when one was considered and refused;
  // kSend when none was refused.
  HedgeOutcome skipped = HedgeOutcome::kSend;
};

class HedgingCall {
 public:
  virtual ~HedgingCall() = default;
  // Cancels every attempt and any hedge still to come. Safe from any
  // thread, any number of times.
  virtual void TryCancel() = 0;
};

class Hedger {
 public:
  using AsyncAttempt = std::function<void(int index, grpc::ClientContext* ctx,
                                          std::function<void(grpc::Status)> done)>;

  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Hedger>> Create(HedgerOptions options);
  // A hedger for calls of `method` ("/pkg.Service/Method") made by `hop`
  // (hop.h): the hop's name, clock and metrics are the Hop's, as on its
  // channels. Each logical call takes the method's entry in the Hop's table
  // in force when it starts, for the whole call (a reload applies from the
  // next call): a method with a hedging policy (a service config's
  // hedgingPolicy: maxAttempts, a fixed hedgingDelay, nonFatalStatusCodes)
  // is hedged under it, each attempt capped by the entry's attempt cap; a
  // method without one gets one attempt; a method in shadow mode gets one
  // attempt under the logical deadline itself. The extra-load bucket and the
  // latency window are the entry's when the hedger is made (a service
  // config cannot say them: HedgePolicy's defaults, at most 5 % extra load).
  // `hop` is not owned and must outlive the hedger. A `method` that is not
  // "/pkg.Service/Method" is InvalidArgument.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Hedger>> Create(const Hop& hop,
                                                                      std::string method);
  ~Hedger();
  Hedger(const Hedger&) = delete;
  Hedger& operator=(const Hedger&) = delete;

  // Sync: blocks the caller until every attempt has ended.
  HedgeResult Call(const LogicalCall& call, AsyncAttempt attempt);
  // Callback: the hedge delay waits on the shared timer service, holding no
  // thread. `attempt` runs on the caller's thread (the first, inside
  // Start), the timer's (a hedge after the delay) or a failed attempt's
  // completion thread (the next hedge at once). `on_done` runs exactly once,
  // on the thread that ends the last attempt, and never while an `attempt`
  // is still running: an `attempt` may touch what `on_done` frees until it
  // returns.
  std::shared_ptr<HedgingCall> Start(const LogicalCall& call, AsyncAttempt attempt,
                                     absl::AnyInvocable<void(HedgeResult)> on_done);

  // Hedges sent / calls started, since creation (the extra load).
  double extra_load() const;
  // The delay the next call would wait before its first hedge.
  absl::Duration current_delay() const;

  // What the hedger was made with; for a Hop's hedger, its method's entry
  // when it was made (max_attempts 1: no hedging), filled in as options.
  const HedgerOptions& options() const { return options_; }

  class Shared;  // internal

 private:
  Hedger(HedgerOptions options, const Hop* hop);
  const HedgerOptions options_;
  std::shared_ptr<Shared> shared_;
};

}  // namespace hopbudget

#endif  // HOPBUDGET_ADVANCED_HEDGE_GRPC_H_
