// Copyright hopbudget authors.
//
// shield.h: must-complete work that outlives its caller's cancellation, but
// is never unbounded and never orphaned. Pure core, no gRPC types.
//
// Work that costs more to abandon than to finish (a commit already sent)
// goes on when its caller leaves, but never unbounded and never orphaned
// (why: docs/shield.md). A Shield runs it with three parts:
//   - shield: the work runs on the Shield's own pool, not on the caller's
//     thread or under its deadline; the caller may give up waiting at any time
//     (ShieldHandle::WaitUntil) without touching the work;
//   - bound: every operation has a finite bound, counted from Run(). When it
//     passes, the work is asked to stop (ShieldContext::stop_requested(),
//     stop callbacks, e.g. to TryCancel a downstream call) and the operation
//     ends as kExceededBound;
//   - handle: Run() returns a ShieldHandle. Every operation ends with exactly
//     one ShieldRecord; an outcome that no Wait()/WaitUntil() returned before
//     the last copy of its handle was destroyed is logged once to stderr
//     ("hopbudget: shield: ...") and counted in ShieldStats::unobserved.
//
// A bound only *asks* (C++ cannot interrupt a thread): work that ignores
// stop_requested() keeps its pool thread, and delays Drain() and ~Shield,
// until it returns; it still ends kExceededBound. Check stop_requested() or
// register a stop callback at every wait. A work function must not throw.
//
// Time: bounds and records are read on ShieldOptions::clock; waits that
// block a thread (WaitUntil, Drain's max_wait) are in real time, whatever the
// clock (a FakeClock does not move while a thread waits on it).
//
// Thread safety: all methods of Shield, ShieldHandle and ShieldContext may be
// called concurrently. A ShieldHandle (and every copy of it) may outlive the
// Shield. Stop callbacks run on the Shield's timer thread (or the thread of
// RunDueTimers(), Drain(), or AddStopCallback() when stop was already
// requested) without any lock held: they must be short and must not block.
// Work must not Drain() or destroy its own Shield, nor Wait() on another
// operation of the same Shield (the pool could starve).
//
// Example (a handler that must not lose a commit):
//   hopbudget::Shield shield;  // one per process or component
//   absl::StatusOr<hopbudget::ShieldHandle> commit = shield.Run(
//       "commit-ledger", absl::Seconds(2),
//       [stub, request](hopbudget::ShieldContext& ctx) {  // owns its inputs: it may
//         grpc::ClientContext call;                        // outlive this handler
//         call.set_deadline(ctx.deadline());
//         const uint64_t id = ctx.AddStopCallback([&call] { call.TryCancel(); });
//         CommitReply reply;
//         grpc::Status s = stub->Commit(&call, request, &reply);
//         ctx.RemoveStopCallback(id);  // before `call` goes
//         return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
//       });
//   if (!commit.ok()) return commit.status();  // refused: at capacity, or draining
//   absl::optional<hopbudget::ShieldRecord> r = commit->WaitUntil(caller_deadline);
//   if (!r.has_value()) {  // the caller gave up; the commit goes on, bounded
//     reconciler.Adopt(*commit);  // someone keeps the handle and reads the outcome
//     return absl::DeadlineExceededError("commit still running");
//   }
//   return r->status;
#ifndef HOPBUDGET_ADVANCED_SHIELD_H_
#define HOPBUDGET_ADVANCED_SHIELD_H_

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "hopbudget/advanced/clock.h"
#include "hopbudget/advanced/metrics.h"

namespace hopbudget {

class Hop;  // hop.h

namespace internal {
class ShieldHandleToken;
class ShieldOp;
}  // namespace internal

struct ShieldOptions {
  // Operations in flight (queued or running) at most; >= 1. Beyond it Run()
  // refuses with RESOURCE_EXHAUSTED: work is never queued without bound.
  int max_in_flight = 64;
  // Threads of the pool that runs the work; >= 1. No thread per operation:
  // with all threads busy, work waits in the queue, and its bound runs.
  int threads = 2;
  // Where bounds are read; default (nullptr) Clock::Real(). Not owned; must
  // outlive the Shield.
  Clock* clock = nullptr;
  // Where the shield events are counted (hopbudget_shield_* metrics); default
  // (nullptr) Metrics::Default(). Not owned; must outlive the Shield and
  // every handle.
  Metrics* metrics = nullptr;
  // Test hook: when true no thread runs the bound timers; after advancing a
  // FakeClock, call Shield::RunDueTimers(). With a FakeClock, use it: a timer
  // thread would sleep in real time.
  bool manual_timers = false;
};

// Checks the ranges above. Returns InvalidArgument naming the field and its
// value. The Shield constructor raises a value below 1 to 1.
absl::Status ValidateShieldOptions(const ShieldOptions& options);

enum class ShieldOutcome {
  kCompleted,      // the work returned OK before its bound passed
  kFailed,         // the work returned an error before its bound passed
  kExceededBound,  // the bound passed before the work returned (or started),
                   // or the work returned the DEADLINE_EXCEEDED of a downstream
                   // call that carried this bound (NewShieldedContext): that
                   // callee's clock may see the bound pass a little before ours
};

inline constexpr int kShieldOutcomeCount = 3;

// Stable names for metric labels and logs: "completed", "failed",
// "exceeded_bound". Unknown values: "unknown".
absl::string_view ShieldOutcomeName(ShieldOutcome outcome);
// For absl::StrCat and absl::StrFormat("%v") (Abseil releases that read
// AbslStringify), and for GoogleTest and streams: the name above.
template <typename Sink>
void AbslStringify(Sink& sink, ShieldOutcome value) {
  sink.Append(ShieldOutcomeName(value));
}
inline std::ostream& operator<<(std::ostream& os, ShieldOutcome value) {
  return os << ShieldOutcomeName(value);
}

// How one shielded operation ended. Every operation ends with exactly one.
struct ShieldRecord {
  std::string name;
  ShieldOutcome outcome = ShieldOutcome::kCompleted;
  // kCompleted: OK. kFailed: the work's status. kExceededBound:
  // DEADLINE_EXCEEDED "shield bound of 2s exceeded by commit-ledger: ..."
  // with how long it ran and the work's own status in the message (or that
  // it never started, when its bound passed while it was queued).
  absl::Status status;
  absl::Time started;  // when Run() accepted it: the bound counts from here
  absl::Time ended;    // when the work returned (or was dropped unstarted)
  absl::Duration bound = absl::ZeroDuration();
};

// What the work sees. Valid only during the call of the work function.
//
// A stop is requested once: when the bound passes, or when Drain() gives up
// waiting for this operation, whichever comes first. Neither ends the work;
// the work ends when it returns.
class ShieldContext {
 public:
  ShieldContext(const ShieldContext&) = delete;
  ShieldContext& operator=(const ShieldContext&) = delete;

  const std::string& name() const;
  // The bound given to Run().
  absl::Duration bound() const;
  // started + bound: give a downstream call this deadline (or an earlier one).
  absl::Time deadline() const;
  // deadline() - clock.Now(); <= 0 once the bound has passed.
  absl::Duration remaining() const;
  // True once a stop was requested (see above). Never goes back to false.
  bool stop_requested() const;

  // Registers `fn` to run once when a stop is requested, on the thread that
  // requests it. If a stop was already requested, runs `fn` at once on this
  // thread before returning. Returns an id for RemoveStopCallback (never 0).
  // Callbacks still registered when the work returns are destroyed unrun: a
  // callback may refer to the work's locals.
  uint64_t AddStopCallback(absl::AnyInvocable<void()> fn);
  // After it returns, the callback `id` is not running and will not run: it
  // waits if the callback is running on another thread (not when called from
  // inside that callback). Unknown or already-run ids are ignored.
  void RemoveStopCallback(uint64_t id);

 private:
  friend class internal::ShieldOp;
  explicit ShieldContext(internal::ShieldOp& op) : op_(op) {}
  internal::ShieldOp& op_;
};

// The caller's side of one operation. Copyable and cheap (shared state); a
// moved-from handle is still a valid copy. May outlive the Shield.
class ShieldHandle {
 public:
  ShieldHandle(const ShieldHandle&) = default;
  ShieldHandle& operator=(const ShieldHandle&) = default;
  ~ShieldHandle() = default;

  // Whether the operation has ended. Does not count as observing it.
  bool done() const;
  // Waits until the operation ended or `until` passed (real time, see top),
  // whichever is first. Returns its record if it ended, and then marks the
  // outcome observed. InfinitePast() (or any past time) polls without
  // blocking; giving up does not affect the work.
  absl::optional<ShieldRecord> WaitUntil(absl::Time until) const;
  // Waits until the operation ends; always returns its record. This can wait
  // as long as the work ignores its stop request.
  absl::optional<ShieldRecord> Wait() const;
  // Runs `fn` with the record once the operation ends, without blocking the
  // caller: at once on this thread if it already ended, else on the thread
  // that ends it, a pool thread or, for work whose bound passed while it was
  // queued, the Shield's timer thread (so `fn` must be short and must not block, like a
  // gRPC reactor's Finish()). `fn` returns whether someone took the outcome
  // (answered a caller with it, stored it); if no callback did and no handle
  // read it, the outcome is logged and counted unobserved, as for a handle
  // dropped unread. Every `fn` runs exactly once: a Shield drains before it
  // is destroyed, so every operation ends.
  void OnDone(absl::AnyInvocable<bool(const ShieldRecord&)> fn) const;
  const std::string& name() const;

 private:
  friend class Shield;
  explicit ShieldHandle(std::shared_ptr<const internal::ShieldHandleToken> token)
      : token_(std::move(token)) {}
  std::shared_ptr<const internal::ShieldHandleToken> token_;
};

// Counters since the Shield was constructed.
struct ShieldStats {
  uint64_t started = 0;    // accepted by Run()
  uint64_t in_flight = 0;  // accepted and not ended (queued or running)
  uint64_t completed = 0;
  uint64_t failed = 0;
  uint64_t exceeded_bound = 0;
  uint64_t refused = 0;     // Run() refused for max_in_flight
  uint64_t joined = 0;      // RunOnce() calls that joined an operation in flight
  uint64_t unobserved = 0;  // ended and nobody observed the outcome
  bool draining = false;    // Drain() has started; Run() refuses
};

struct DrainReport {
  // Operations that ended while Drain() waited, by outcome.
  int completed = 0;
  int failed = 0;
  int exceeded_bound = 0;
  // Operations still in flight when Drain() gave up, in Run() order; they
  // have been asked to stop. Empty when everything ended in time.
  std::vector<std::string> still_running;
  absl::Duration waited = absl::ZeroDuration();  // real time
};

class Shield {
 public:
  explicit Shield(ShieldOptions options = {});
  // The same with `hop`'s clock and metrics (hop.h), whatever `options`
  // says, and its policy table for RunFor's bounds. `hop` is not owned; it
  // must outlive the Shield and every handle.
  explicit Shield(const Hop& hop, ShieldOptions options = {});
  // Drain(InfiniteDuration()), then joins the pool. Every operation has been
  // asked to stop at its bound, so this ends as soon as the work honours that
  // request; work that never returns keeps this waiting (there is no way to
  // end a thread, and leaving it running would orphan it).
  ~Shield();

  Shield(const Shield&) = delete;
  Shield& operator=(const Shield&) = delete;

  // Runs `work` on the pool, bounded by `bound` counted from now (time spent
  // queued counts). Returns the handle, or:
  //   - InvalidArgument when `bound` is not > 0 and finite (the message names
  //     it: there is no way to shield without a bound), `name` is not 1..64
  //     characters, or `work` is empty;
  //   - RESOURCE_EXHAUSTED when max_in_flight operations are in flight
  //     (counted in ShieldStats::refused);
  //   - FAILED_PRECONDITION once Drain() has started.
  // Work whose bound passes while it is queued is never started: it ends as
  // kExceededBound when the bound passes, without waiting for a pool thread
  // (behind a backlog that wait would have no bound), and what it captured
  // is destroyed then. Other `work` (and what it captured) is destroyed
  // after it returns, before its outcome is recorded.
  [[nodiscard]] absl::StatusOr<ShieldHandle> Run(
      std::string name, absl::Duration bound,
      absl::AnyInvocable<absl::Status(ShieldContext&)> work);

  // Like Run(), with the bound `full_method`'s entry gives in the policy
  // table in force (MethodPolicy::shield_bound, a service config's
  // `shieldBound`): the method whose handler shields the work
  // ("/pkg.Service/Method", as gRPC names a call). When the entry sets no
  // bound, or the Shield was not made from a Hop, `default_bound` (the
  // bound the code would give Run()). The table is read at each call: a
  // reload of the Hop's config reaches work shielded after it.
  // Errors as Run()'s, the bound being whichever applies.
  //
  //   auto commit = shield.RunFor("/demo.Orders/PlaceOrder", "commit",
  //                               absl::Seconds(2), std::move(work));
  [[nodiscard]] absl::StatusOr<ShieldHandle> RunFor(
      absl::string_view full_method, std::string name, absl::Duration default_bound,
      absl::AnyInvocable<absl::Status(ShieldContext&)> work);
  // The bound RunFor(full_method, ..., default_bound, ...) would use now.
  absl::Duration BoundFor(absl::string_view full_method, absl::Duration default_bound) const;

  // Single flight: like Run(), unless an operation started by RunOnce() with
  // the same `key` is still in flight; then `work` is dropped unrun and the
  // handle is that operation's (a copy: every holder may wait on it and
  // read its record), `*joined` is set, and ShieldStats::joined counts it.
  // For retries and duplicates of one request (an idempotency key): a
  // retry that arrives while the first attempt's shielded work still runs
  // waits for that work instead of starting it again. `joined` may be null.
  // The key is forgotten when the operation ends: a later RunOnce() starts
  // afresh (the work must itself be idempotent, as for any retry).
  [[nodiscard]] absl::StatusOr<ShieldHandle> RunOnce(
      std::string key, std::string name, absl::Duration bound,
      absl::AnyInvocable<absl::Status(ShieldContext&)> work, bool* joined = nullptr);

  // Stops accepting work (Run() refuses from now on, for good) and waits
  // until every operation in flight has ended, but at most `max_wait` in all
  // (real time; <= 0 does not wait, InfiniteDuration() waits until the end).
  // Work past its own bound has already been asked to stop. Reports what
  // ended while it waited and the names still in flight when it gave up;
  // those are asked to stop now (work still queued will start, with
  // stop_requested() true). Their outcomes are still recorded when they end.
  DrainReport Drain(absl::Duration max_wait);

  ShieldStats stats() const;

  // With manual_timers: runs the bound timers due at clock.Now() on this
  // thread (their stop callbacks too). Returns how many ran.
  int RunDueTimers();

 private:
  class Impl;
  struct Flights;
  std::unique_ptr<Impl> impl_;
  // Shared with the end-of-operation callbacks that forget keys, which may
  // run while impl_ drains in the destructor.
  std::shared_ptr<Flights> flights_;
  const Hop* hop_ = nullptr;  // RunFor's table; nullptr: not made from a Hop
};

}  // namespace hopbudget

#endif  // HOPBUDGET_ADVANCED_SHIELD_H_
