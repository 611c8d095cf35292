// Copyright hopbudget authors.
//
// DownstreamSlots: a SlotQueue behind one mutex and one expiry timer. Waiters
// are resumed by whoever releases a slot or by the timer; neither holds a
// thread per waiter.
#include "hopbudget/advanced/slots_grpc.h"

#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "attempt_context.h"
#include "attributed_status.h"
#include "call_mutex.h"
#include "completion_gate.h"
#include "grpc_glue.h"
#include "hopbudget/advanced/attribution.h"
#include "metrics_recorder.h"
#include "sync.h"
#include "timer_service.h"

namespace hopbudget {

// What a waiter is told when its wait ends.
enum class WaitEnd { kGranted, kExpired };
using Resume = absl::AnyInvocable<void(WaitEnd end, absl::Duration waited) &&>;

class DownstreamSlots::State : public std::enable_shared_from_this<DownstreamSlots::State> {
 public:
  State(DownstreamSlotsOptions options, SlotQueue queue, const Hop* hop, std::string method)
      : options_(std::move(options)),
        hop_(hop),
        method_(std::move(method)),
        clock_(options_.clock != nullptr ? *options_.clock : Clock::Real()),
        metrics_(options_.metrics != nullptr ? *options_.metrics : Metrics::Default()),
        method_id_(hop_ != nullptr ? metrics_.Method(method_) : MethodId{}),
        own_timers_(&clock_ == &Clock::Real() ? nullptr
                                              : std::make_unique<internal::TimerService>(clock_)),
        timers_(own_timers_ != nullptr ? *own_timers_ : internal::TimerService::Shared()),
        queue_(std::move(queue)) {}

  const DownstreamSlotsOptions& options() const { return options_; }
  // The budget one call runs under: the options', or the method's entry in
  // the Hop's table in force now (kept alive as long as the Hop).
  const BudgetPolicy& BudgetNow() const {
    if (hop_ == nullptr) return options_.budget;
    const MethodPolicy& entry = hop_->PolicyFor(method_id_, method_);
    return entry.shadow ? PassThroughPolicy() : entry.budget;
  }
  Clock& clock() { return clock_; }
  Metrics& metrics() { return metrics_; }

  // Takes a free slot, queues `resume` (then *ticket is set), or refuses.
  SlotRequest Acquire(absl::Time give_up, Resume resume) {
    internal::CallMutexLock lock(&mu_);
    SlotRequest r = queue_.Acquire(clock_.Now(), give_up);
    if (r.outcome == SlotOutcome::kQueued) {
      waiters_.emplace(r.ticket, std::move(resume));
      ArmLocked();
    }
    return r;
  }

  // Gives a slot back; the slot goes to the next waiter in time.
  void Release() {
    std::vector<std::pair<Resume, absl::Duration>> expired;
    absl::optional<std::pair<Resume, absl::Duration>> granted;
    {
      internal::CallMutexLock lock(&mu_);
      SlotHandoff h = queue_.Release(clock_.Now());
      for (const SlotWaiter& w : h.expired) expired.emplace_back(Take(w.ticket), w.waited);
      if (h.granted.has_value()) granted.emplace(Take(h.granted->ticket), h.granted->waited);
    }
    for (auto& [resume, waited] : expired) std::move(resume)(WaitEnd::kExpired, waited);
    if (granted.has_value()) std::move(granted->first)(WaitEnd::kGranted, granted->second);
  }

  // True when `ticket` was still waiting: its resume will never run.
  bool Cancel(uint64_t ticket) {
    Resume dropped;
    internal::CallMutexLock lock(&mu_);
    if (!queue_.Cancel(ticket)) return false;
    dropped = Take(ticket);  // destroyed after the lock is released (declared before it)
    return true;
  }

  int in_flight() const {
    internal::CallMutexLock lock(&mu_);
    return queue_.in_use();
  }
  size_t waiting() const {
    internal::CallMutexLock lock(&mu_);
    return queue_.waiting();
  }

 private:
  Resume Take(uint64_t ticket) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = waiters_.find(ticket);
    Resume r = std::move(it->second);
    waiters_.erase(it);
    return r;
  }

  // One timer, for the earliest give-up time. A timer made stale by an
  // earlier waiter is not cancelled (Cancel may wait for a running callback
  // that wants this lock); it finds nothing due and re-arms.
  void ArmLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const absl::Time next = queue_.NextExpiry();
    if (next >= armed_for_) return;
    armed_for_ = next;
    timers_.Schedule(next, [self = shared_from_this(), next] { self->OnTimer(next); });
  }

  void OnTimer(absl::Time when) {
    std::vector<std::pair<Resume, absl::Duration>> expired;
    {
      internal::CallMutexLock lock(&mu_);
      if (when == armed_for_) armed_for_ = absl::InfiniteFuture();
      for (const SlotWaiter& w : queue_.Expire(clock_.Now())) {
        expired.emplace_back(Take(w.ticket), w.waited);
      }
      ArmLocked();
    }
    for (auto& [resume, waited] : expired) std::move(resume)(WaitEnd::kExpired, waited);
  }

  const DownstreamSlotsOptions options_;
  const Hop* const hop_;      // the table each call takes its entry from; nullptr: options_
  const std::string method_;  // "/pkg.Service/Method" when hop_ is set
  Clock& clock_;
  Metrics& metrics_;
  const MethodId method_id_;
  std::unique_ptr<internal::TimerService> own_timers_;  // only for a non-real clock
  internal::TimerService& timers_;
  mutable internal::CallMutex mu_;
  SlotQueue queue_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, Resume> waiters_ ABSL_GUARDED_BY(mu_);
  absl::Time armed_for_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
};

namespace {

// `policy`: the call's (DownstreamSlots::State::BudgetNow when it started).
grpc::Status SlotWaitStatus(DownstreamSlots::State& state, const BudgetPolicy& policy,
                            const internal::LogicalBudget& logical, SlotRefusal why) {
  const DownstreamSlotsOptions& o = state.options();
  internal::Record(state.metrics())
      .CountSlotRefusal(why == SlotRefusal::kQueueFull ? SlotRefusalReason::kQueueFull
                                                       : SlotRefusalReason::kNoTimeToWait);
  if (why == SlotRefusal::kQueueFull) {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        absl::StrCat("hopbudget: ", o.max_waiters,
                                     " calls already wait for a slot towards this downstream"));
  }
  internal::Record(state.metrics())
      .CountDeadlineExceeded(Side::kClient, DeadlineSource::kSlotWait, o.hop);
  Attribution a;
  a.source = DeadlineSource::kSlotWait;
  a.hop = o.hop;
  a.budget = logical.budget() == absl::InfiniteDuration() ? absl::ZeroDuration() : logical.budget();
  a.elapsed = state.clock().Now() - logical.start();
  return internal::AttributedStatus(
      a, absl::StrCat("no slot of ", o.max_in_flight, " free before the deadline less ",
                      FormatBudget(policy.min_attempt_budget)));
}

absl::Time GiveUpOf(const BudgetPolicy& policy, const internal::LogicalBudget& logical) {
  return GiveUpTime(logical.deadline(), policy.min_attempt_budget);
}

grpc::Status CancelledStatus() {
  return grpc::Status(grpc::StatusCode::CANCELLED,
                      "hopbudget: call cancelled while waiting for a slot");
}

class AsyncSlotCall final : public SlotCall, public std::enable_shared_from_this<AsyncSlotCall> {
 public:
  AsyncSlotCall(std::shared_ptr<DownstreamSlots::State> state, const LogicalCall& call,
                DownstreamSlots::AsyncAttempt attempt,
                absl::AnyInvocable<void(grpc::Status)> on_done)
      : state_(std::move(state)),
        policy_(state_->BudgetNow()),
        logical_(policy_, call, state_->clock().Now()),
        inbound_(call.inbound),
        attempt_(std::move(attempt)),
        gate_(std::move(on_done)) {}

  void Begin() {
    absl::optional<grpc::Status> refused;
    bool granted = false;
    {
      // Held across Acquire: a Release on another thread that hands us the
      // slot at once resumes us only after ticket_ is set.
      internal::CallMutexLock lock(&mu_);
      SlotRequest r =
          state_->Acquire(GiveUpOf(policy_, logical_),
                          [self = shared_from_this()](WaitEnd end, absl::Duration waited) {
                            self->OnWaitEnd(end, waited);
                          });
      switch (r.outcome) {
        case SlotOutcome::kGranted:
          granted = true;
          internal::Record(state_->metrics()).ObserveSlotWait(absl::ZeroDuration());
          break;
        case SlotOutcome::kQueued:
          ticket_ = r.ticket;
          waiting_ = true;
          break;
        case SlotOutcome::kRefused:
          refused = SlotWaitStatus(*state_, policy_, logical_, r.refusal);
          break;
      }
    }
    if (granted) {
      RunAttempt();
    } else if (refused.has_value()) {
      Done(*std::move(refused));
    }
  }

  void TryCancel() override {
    // A reference: the completion may run inside TryCancel() and must not
    // free the context under it.
    std::shared_ptr<grpc::ClientContext> attempt;
    bool left_queue = false;
    {
      internal::CallMutexLock lock(&mu_);
      if (done_ || cancelled_) return;
      cancelled_ = true;
      if (waiting_) {
        left_queue = state_->Cancel(ticket_);
        if (left_queue) waiting_ = false;
      } else {
        attempt = ctx_;
      }
    }
    if (left_queue) {
      Done(CancelledStatus());
    } else if (attempt != nullptr) {
      attempt->TryCancel();
      internal::DestroyLater(std::move(attempt));
    }  // else the grant or expiry is on its way and sees cancelled_
  }

 private:
  void OnWaitEnd(WaitEnd end, absl::Duration waited) {
    {
      internal::CallMutexLock lock(&mu_);
      waiting_ = false;
    }
    if (end == WaitEnd::kGranted) {
      internal::Record(state_->metrics()).ObserveSlotWait(waited);
      RunAttempt();
    } else {
      Done(SlotWaitStatus(*state_, policy_, logical_, SlotRefusal::kNoTimeToWait));
    }
  }

  void RunAttempt() {
    grpc::ClientContext* ctx = nullptr;
    {
      internal::CallMutexLock lock(&mu_);
      // A logical call cancelled while it waited does not start.
      if (!cancelled_ && !(inbound_ != nullptr && inbound_->IsCancelled())) {
        ctx_ = logical_.NewAttemptContext(1, state_->clock().Now());
        ctx = ctx_.get();
      }
    }
    if (ctx == nullptr) {
      state_->Release();
      Done(CancelledStatus());
      return;
    }
    // The attempt may end (and the slot go to the next waiter) before
    // attempt_ returns; the gate holds `on_done` until it has.
    gate_.Run([&] {
      attempt_(ctx, [self = shared_from_this()](grpc::Status s) {
        std::shared_ptr<grpc::ClientContext> ended;
        {
          // The context goes to DestroyLater before `on_done` lets the caller
          // tear its stub down (attempt_context.h).
          internal::CallMutexLock lock(&self->mu_);
          ended = std::move(self->ctx_);
        }
        internal::DestroyLater(std::move(ended));
        self->state_->Release();
        self->Done(std::move(s));
      });
    });
  }

  void Done(grpc::Status status) {
    {
      internal::CallMutexLock lock(&mu_);
      if (done_) return;
      done_ = true;
    }
    gate_.Complete(std::move(status));
  }

  const std::shared_ptr<DownstreamSlots::State> state_;
  const BudgetPolicy& policy_;  // the options' or a Hop's table's: outlives the call
  const internal::LogicalBudget logical_;
  const grpc::ServerContextBase* const inbound_;
  const DownstreamSlots::AsyncAttempt attempt_;
  internal::CompletionGate<grpc::Status> gate_;  // holds `on_done`
  internal::CallMutex mu_;
  std::shared_ptr<grpc::ClientContext> ctx_ ABSL_GUARDED_BY(mu_);
  uint64_t ticket_ ABSL_GUARDED_BY(mu_) = 0;
  bool waiting_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

// The queue of `max_in_flight` slots and `max_waiters` waiters, or
// InvalidArgument naming the bad one.
absl::StatusOr<SlotQueue> NewSlotQueue(int max_in_flight, size_t max_waiters) {
  absl::StatusOr<SlotQueue> queue = SlotQueue::Create({max_in_flight, max_waiters});
  if (!queue.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DownstreamSlotsOptions: ",
        max_in_flight < 1 ? absl::StrCat("max_in_flight must be >= 1, got ", max_in_flight)
                          : std::string("max_waiters must be >= 1, got 0")));
  }
  return queue;
}

}  // namespace

absl::StatusOr<std::unique_ptr<DownstreamSlots>> DownstreamSlots::Create(
    DownstreamSlotsOptions options) {
  if (absl::Status s = ValidateHopName(options.hop); !s.ok()) return s;
  if (absl::Status s = ValidatePolicy(options.budget); !s.ok()) return s;
  absl::StatusOr<SlotQueue> queue = NewSlotQueue(options.max_in_flight, options.max_waiters);
  if (!queue.ok()) return queue.status();
  return std::unique_ptr<DownstreamSlots>(new DownstreamSlots(
      std::make_shared<State>(std::move(options), *std::move(queue), nullptr, "")));
}

absl::StatusOr<std::unique_ptr<DownstreamSlots>> DownstreamSlots::Create(const Hop& hop,
                                                                         std::string method,
                                                                         int max_in_flight,
                                                                         size_t max_waiters) {
  if (!internal::IsFullMethodName(method)) {
    return absl::InvalidArgumentError(
        absl::StrCat("hopbudget: DownstreamSlots of ", hop.name(), ": method \"", method,
                     "\" is not a full method name (\"/pkg.Service/Method\")"));
  }
  absl::StatusOr<SlotQueue> queue = NewSlotQueue(max_in_flight, max_waiters);
  if (!queue.ok()) return queue.status();
  DownstreamSlotsOptions options;
  options.hop = hop.name();
  options.max_in_flight = max_in_flight;
  options.max_waiters = max_waiters;
  options.clock = &hop.clock();
  options.metrics = &hop.metrics();
  // For reference only; each call reads the table in force (State::BudgetNow).
  // Every entry was validated when the Hop read its config.
  options.budget = hop.PolicyFor(hop.metrics().Method(method), method).budget;
  return std::unique_ptr<DownstreamSlots>(new DownstreamSlots(
      std::make_shared<State>(std::move(options), *std::move(queue), &hop, std::move(method))));
}

absl::StatusOr<std::unique_ptr<DownstreamSlots>> DownstreamSlots::Create(
    const Hop& hop, DownstreamSlotsOptions options) {
  options.hop = hop.name();
  options.clock = &hop.clock();
  options.metrics = &hop.metrics();
  return Create(std::move(options));
}

DownstreamSlots::DownstreamSlots(std::shared_ptr<State> state) : state_(std::move(state)) {}
DownstreamSlots::~DownstreamSlots() = default;

int DownstreamSlots::in_flight() const { return state_->in_flight(); }
size_t DownstreamSlots::waiting() const { return state_->waiting(); }

grpc::Status DownstreamSlots::Call(const LogicalCall& call, SyncAttempt attempt) {
  const BudgetPolicy& policy = state_->BudgetNow();
  const internal::LogicalBudget logical(policy, call, state_->clock().Now());
  struct Wait {
    internal::Notification ended;
    WaitEnd end = WaitEnd::kExpired;
    absl::Duration waited;
  };
  auto wait = std::make_shared<Wait>();
  const SlotRequest r =
      state_->Acquire(GiveUpOf(policy, logical), [wait](WaitEnd end, absl::Duration waited) {
        wait->end = end;
        wait->waited = waited;
        wait->ended.Notify();
      });
  if (r.outcome == SlotOutcome::kRefused) {
    return SlotWaitStatus(*state_, policy, logical, r.refusal);
  }
  if (r.outcome == SlotOutcome::kQueued) {
    wait->ended.WaitForNotification();
    if (wait->end == WaitEnd::kExpired) {
      return SlotWaitStatus(*state_, policy, logical, SlotRefusal::kNoTimeToWait);
    }
  }
  internal::Record(state_->metrics()).ObserveSlotWait(wait->waited);  // zero when granted at once
  if (call.inbound != nullptr && call.inbound->IsCancelled()) {
    state_->Release();
    return CancelledStatus();
  }
  std::unique_ptr<grpc::ClientContext> ctx = logical.NewAttemptContext(1, state_->clock().Now());
  grpc::Status status = attempt(ctx.get());
  state_->Release();
  return status;
}

std::shared_ptr<SlotCall> DownstreamSlots::Start(const LogicalCall& call, AsyncAttempt attempt,
                                                 absl::AnyInvocable<void(grpc::Status)> on_done) {
  auto c = std::make_shared<AsyncSlotCall>(state_, call, std::move(attempt), std::move(on_done));
  c->Begin();
  return c;
}

}  // namespace hopbudget
