// Copyright hopbudget authors.
//
// slots_grpc.h: bounded concurrency towards one downstream (a channel or a
// target), with the wait for a slot inside the call's budget.
//
// Make one DownstreamSlots per downstream you want to protect and run every
// call to it through Call() (sync) or Start() (callback). At most
// `max_in_flight` attempts run at once; a call that finds no free slot
// waits in FIFO order (SlotQueue, slots.h):
//   - the callback form waits without a thread: the call is resumed by the
//     completion of the call whose slot it takes, or failed by one shared
//     timer; the sync form blocks its caller;
//   - the attempt's grpc::ClientContext is built when the slot is granted
//     (as RetryLoop builds its attempts: deadline from what remains of the
//     logical call, child of the inbound call, source tag), so the wait is
//     spent from the call's budget;
//   - a call that cannot get a slot before its deadline minus
//     min_attempt_budget fails with DEADLINE_EXCEEDED, source `slot-wait`,
//     hop `hop`, attributed in the status message and details, without
//     touching the network; budget is the logical call's, elapsed counts
//     from its start;
//   - a full queue (max_waiters) answers RESOURCE_EXHAUSTED at once.
// Queue waits and refusals are counted in Metrics (slot waits histogram,
// slot refusals by reason).
//
// The stub's channel should carry hopbudget's client interceptor (as for
// RetryLoop): it attributes the attempt's own DEADLINE_EXCEEDED and fails an
// attempt that cannot start with min_attempt_budget.
//
// Edge cases: a logical call without a deadline waits as long as it takes;
// a call already past its give-up time still takes a free slot (its attempt
// then fails fast with exhausted-before-call in the interceptor) but never
// queues; a handler's call that is cancelled while it waits is answered
// CANCELLED when its turn or its give-up time comes (the callback form's
// TryCancel() answers at once).
//
// Lifetime: the DownstreamSlots must outlive every call started on it.
// Thread safety: all methods may be called concurrently.
//
// Example, in a callback handler:
//   hopbudget::DownstreamSlotsOptions o;
//   o.hop = "orders"; o.max_in_flight = 32; o.budget = policy;
//   auto slots = hopbudget::DownstreamSlots::Create(o);          // at start-up
//   // or, the budget from the method's entry in a Hop's table:
//   // auto slots = hopbudget::DownstreamSlots::Create(hop, "/demo.Ledger/Commit", 32);
//   (*slots)->Start(hopbudget::LogicalCall::Of(*ctx),
//       [&](grpc::ClientContext* c, std::function<void(grpc::Status)> done) {
//         ledger->async()->Commit(c, &req, &resp, std::move(done));
//       },
//       [reactor](grpc::Status s) { reactor->Finish(s); });
#ifndef HOPBUDGET_ADVANCED_SLOTS_GRPC_H_
#define HOPBUDGET_ADVANCED_SLOTS_GRPC_H_

#include <grpcpp/client_context.h>
#include <grpcpp/support/status.h>

#include <cstddef>
#include <memory>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "hopbudget/advanced/budget.h"
#include "hopbudget/advanced/clock.h"
#include "hopbudget/advanced/metrics.h"
#include "hopbudget/advanced/retry_loop.h"
#include "hopbudget/advanced/slots.h"
#include "hopbudget/hop.h"

namespace hopbudget {

struct DownstreamSlotsOptions {
  // This hop's name, for the slot-wait attribution. Required.
  std::string hop;
  // Attempts in flight at most (>= 1), and callers waiting at most (>= 1).
  int max_in_flight = 0;
  size_t max_waiters = 1 << 20;
  // min_attempt_budget sets the give-up time; attempt_cap shapes the
  // attempt; hop_reserve applies to handlers whose call did not pass
  // through hopbudget's server interceptor. Must pass ValidatePolicy.
  BudgetPolicy budget;
  // Not owned; must outlive the object. Defaults: Clock::Real(),
  // Metrics::Default().
  Clock* clock = nullptr;
  Metrics* metrics = nullptr;
};

// One call of the callback form.
class SlotCall {
 public:
  virtual ~SlotCall() = default;
  // Waiting: leaves the queue and `on_done` runs at once with CANCELLED.
  // In its attempt: cancels it (its completion ends the call). Safe from
  // any thread, any number of times.
  virtual void TryCancel() = 0;
};

class DownstreamSlots {
 public:
  using SyncAttempt = RetryLoop::SyncAttempt;
  using AsyncAttempt = RetryLoop::AsyncAttempt;

  // InvalidArgument for a bad hop name, max_in_flight < 1, max_waiters < 1
  // or a policy ValidatePolicy refuses.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<DownstreamSlots>> Create(
      DownstreamSlotsOptions options);
  // The same for `hop` (hop.h): its name, clock and metrics, whatever
  // `options` says. `hop` is not owned and must outlive the slots.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<DownstreamSlots>> Create(
      const Hop& hop, DownstreamSlotsOptions options);
  // Slots for calls of `method` ("/pkg.Service/Method") made by `hop`
  // (hop.h): the hop's name, clock and metrics are the Hop's, as on its
  // channels. Each call takes the method's entry in the Hop's table in
  // force when it starts, for its wait and its attempt (a reload applies
  // from the next call): min_attempt_budget sets the give-up time,
  // attempt_cap (a service config's perAttemptRecvTimeout) caps the
  // attempt, hop_reserve is the entry's. A method the table does not name
  // gets the table's default entry; a method in shadow mode gets no cap,
  // reserve or minimum: its calls still take a slot, may wait for one until
  // the logical call's own deadline, and their attempt takes that deadline.
  // `hop` is not owned and must outlive the slots; a reload may run on any
  // thread while calls run. InvalidArgument for a `method` that is not
  // "/pkg.Service/Method", max_in_flight < 1 or max_waiters < 1.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<DownstreamSlots>> Create(
      const Hop& hop, std::string method, int max_in_flight, size_t max_waiters = 1 << 20);
  ~DownstreamSlots();
  DownstreamSlots(const DownstreamSlots&) = delete;
  DownstreamSlots& operator=(const DownstreamSlots&) = delete;

  // Sync: waits (blocking the caller) for a slot, runs `attempt` on the
  // calling thread and returns its status; or the slot-wait refusal.
  grpc::Status Call(const LogicalCall& call, SyncAttempt attempt);
  // Callback. Threads: `attempt` runs on the caller's thread when a slot is
  // free (inside Start), else on the thread of the call that hands its slot
  // on: another call's completion, before that call's `on_done`. `on_done`
  // runs exactly once, on a gRPC or timer thread (or on the caller's when
  // refused at once), and never while `attempt` is still running: `attempt`
  // may touch what `on_done` frees until it returns, but must not block.
  // `attempt` and what it refers to must stay valid until `on_done` has
  // run. The handle may be dropped.
  std::shared_ptr<SlotCall> Start(const LogicalCall& call, AsyncAttempt attempt,
                                  absl::AnyInvocable<void(grpc::Status)> on_done);

  int in_flight() const;
  size_t waiting() const;

  class State;  // internal

 private:
  explicit DownstreamSlots(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

}  // namespace hopbudget

#endif  // HOPBUDGET_ADVANCED_SLOTS_GRPC_H_
