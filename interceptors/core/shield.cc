// Copyright hopbudget authors.
#include "hopbudget/advanced/shield.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <deque>
#include <map>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "hopbudget/advanced/attribution.h"
#include "hopbudget/advanced/budget.h"
#include "hopbudget/hop.h"
#include "metrics_recorder.h"
#include "sync.h"
#include "timer_service.h"

namespace hopbudget {
namespace internal {

constexpr size_t kMaxNameLength = 64;

enum class StopReason { kBound, kDrain };

// True when `work_status` is a DEADLINE_EXCEEDED attributed to a shield bound
// as long as `bound` (NewShieldedContext tags downstream calls that way; the
// wire carries whole milliseconds).
bool IsThisShieldsBound(const absl::Status& work_status, absl::Duration bound) {
  if (!absl::IsDeadlineExceeded(work_status)) return false;
  absl::optional<Attribution> a = ParseAttributionMessage(work_status.message());
  return a.has_value() && a->source == DeadlineSource::kShield &&
         absl::ToInt64Milliseconds(a->budget) == absl::ToInt64Milliseconds(bound);
}

// What outlives the Shield: the counters, and the end state of every
// operation, which handles read after the Shield is gone. One mutex guards it
// all, so that an end, its counters and the unobserved decision are one step.
class ShieldState {
 public:
  explicit ShieldState(Metrics* metrics) : metrics(metrics) {}
  Metrics* const metrics;  // counted beside `stats`; outlives the handles
  internal::Mutex mu;
  bool draining ABSL_GUARDED_BY(mu) = false;
  uint64_t next_seq ABSL_GUARDED_BY(mu) = 1;
  ShieldStats stats ABSL_GUARDED_BY(mu);
  // Operations accepted and not ended, in Run() order (Drain reports names).
  std::map<uint64_t, std::shared_ptr<ShieldOp>> in_flight ABSL_GUARDED_BY(mu);

  static bool Idle(ShieldState* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) {
    return s->in_flight.empty();
  }
};

// One operation. Owned jointly by the pool queue, its bound timer, the
// in-flight map and its handle token; the work function runs on a pool
// thread with a ShieldContext pointing here.
class ShieldOp {
 public:
  using Work = absl::AnyInvocable<absl::Status(ShieldContext&)>;

  ShieldOp(std::string name, absl::Duration bound, absl::Time started, Clock& clock,
           std::shared_ptr<ShieldState> state, Work work)
      : name(std::move(name)),
        bound(bound),
        started(started),
        deadline(started + bound),
        clock(clock),
        state(std::move(state)),
        work_(std::move(work)) {}

  const std::string name;
  const absl::Duration bound;
  const absl::Time started;
  const absl::Time deadline;
  Clock& clock;
  const std::shared_ptr<ShieldState> state;
  // Set by Run() before the operation is queued; read by the pool thread.
  uint64_t seq = 0;
  TimerService::TimerId timer_id = 0;

  // End state, guarded by state->mu (not annotated: the analysis cannot
  // name another object's mutex through a shared_ptr).
  bool ended = false;
  bool observed = false;      // a Wait()/WaitUntil() returned the record
  bool handles_gone = false;  // the last handle copy was destroyed
  ShieldRecord record;
  // ShieldHandle::OnDone() callbacks waiting for the end, and whether the
  // end is handing the record to them (the observed decision waits for it).
  std::vector<absl::AnyInvocable<bool(const ShieldRecord&)>> on_done;
  bool delivering = false;

  absl::Status RunWork() {
    ShieldContext context(*this);
    return work_(context);
  }
  // Frees what the work captured before anyone can see the end.
  void DropWork() { work_ = nullptr; }

  bool stop_requested() const { return stop_requested_.load(std::memory_order_acquire); }

  void RequestStop(StopReason reason) {
    if (MarkStopped(reason)) RunStopCallbacks();
  }

  // The first half of RequestStop: sets the flag the work polls. Returns
  // whether this call requested the stop (and so must run the callbacks).
  // Drain marks every operation before running any callback, so that none of
  // them can end and let a queued one start unaware in between.
  bool MarkStopped(StopReason reason) {
    internal::MutexLock lock(&mu_);
    if (closed_) return false;  // the work returned: its callbacks' captures may be gone
    if (reason == StopReason::kBound) bound_fired_ = true;
    if (stop_requested_.load(std::memory_order_relaxed)) return false;
    stop_requested_.store(true, std::memory_order_release);
    return true;
  }

  // Runs the callbacks registered before the stop was marked (later ones run
  // in AddStopCallback). One at a time without the lock, so that a callback
  // may add or remove callbacks, and RemoveStopCallback can wait for exactly
  // the one running.
  void RunStopCallbacks() {
    internal::MutexLock lock(&mu_);
    while (!closed_ && !callbacks_.empty()) {
      auto first = callbacks_.begin();
      const uint64_t id = first->first;
      absl::AnyInvocable<void()> fn = std::move(first->second);
      callbacks_.erase(first);
      running_ = id;
      running_thread_ = std::this_thread::get_id();
      mu_.Unlock();
      fn();
      fn = nullptr;  // its captures go before RemoveStopCallback may return
      mu_.Lock();
      running_ = 0;
      running_thread_ = std::thread::id();
      callback_done_.SignalAll();
    }
  }

  uint64_t AddStopCallback(absl::AnyInvocable<void()> fn) {
    uint64_t id;
    {
      internal::MutexLock lock(&mu_);
      id = next_callback_id_++;
      if (!stop_requested_.load(std::memory_order_relaxed) && !closed_) {
        callbacks_.emplace(id, std::move(fn));
        return id;
      }
    }
    if (fn != nullptr) fn();
    return id;
  }

  void RemoveStopCallback(uint64_t id) {
    internal::MutexLock lock(&mu_);
    if (callbacks_.erase(id) > 0) return;
    if (running_thread_ == std::this_thread::get_id()) return;  // from inside it
    while (running_ == id) callback_done_.Wait(&mu_);
  }

  // Called once the work returned (or was dropped unstarted): no callback
  // runs after this, and none is running. Returns whether the bound timer
  // fired before.
  bool CloseStopCallbacks() {
    std::map<uint64_t, absl::AnyInvocable<void()>> unrun;
    bool bound_fired;
    {
      internal::MutexLock lock(&mu_);
      closed_ = true;
      bound_fired = bound_fired_;
      while (running_ != 0) callback_done_.Wait(&mu_);
      unrun.swap(callbacks_);
    }
    return bound_fired;  // `unrun` is destroyed without the lock
  }

  bool bound_fired() const {
    internal::MutexLock lock(&mu_);
    return bound_fired_;
  }

 private:
  Work work_;  // only the pool thread touches it

  mutable internal::Mutex mu_;
  internal::CondVar callback_done_;
  std::atomic<bool> stop_requested_{false};
  bool bound_fired_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_callback_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, absl::AnyInvocable<void()>> callbacks_ ABSL_GUARDED_BY(mu_);
  uint64_t running_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread::id running_thread_ ABSL_GUARDED_BY(mu_);
};

namespace {

void LogUnobserved(const ShieldRecord& r) {
  const std::string status = r.status.ToString();
  std::fprintf(stderr,
               "hopbudget: shield: nobody observed how %s ended: %s (%s); keep its "
               "ShieldHandle and Wait() on it\n",
               r.name.c_str(), std::string(ShieldOutcomeName(r.outcome)).c_str(), status.c_str());
}

}  // namespace

// Held by every copy of one ShieldHandle (through a shared_ptr): its
// destructor is the moment the last copy went.
class ShieldHandleToken {
 public:
  explicit ShieldHandleToken(std::shared_ptr<ShieldOp> op) : op(std::move(op)) {}
  ShieldHandleToken(const ShieldHandleToken&) = delete;
  ShieldHandleToken& operator=(const ShieldHandleToken&) = delete;

  ~ShieldHandleToken() {
    ShieldState& state = *op->state;
    bool unobserved = false;
    {
      internal::MutexLock lock(&state.mu);
      op->handles_gone = true;
      if (op->ended && !op->observed && !op->delivering) {
        unobserved = true;
        ++state.stats.unobserved;
        internal::Record(*state.metrics).CountShield(ShieldEvent::kUnobserved);
      }
    }
    if (unobserved) LogUnobserved(op->record);
  }

  const std::shared_ptr<ShieldOp> op;
};

}  // namespace internal

using internal::ShieldOp;
using internal::ShieldState;
using internal::StopReason;

absl::Status ValidateShieldOptions(const ShieldOptions& options) {
  if (options.max_in_flight < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("shield options: max_in_flight (", options.max_in_flight, ") must be >= 1"));
  }
  if (options.threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("shield options: threads (", options.threads, ") must be >= 1"));
  }
  return absl::OkStatus();
}

absl::string_view ShieldOutcomeName(ShieldOutcome outcome) {
  switch (outcome) {
    case ShieldOutcome::kCompleted:
      return "completed";
    case ShieldOutcome::kFailed:
      return "failed";
    case ShieldOutcome::kExceededBound:
      return "exceeded_bound";
  }
  return "unknown";
}

// ---- ShieldContext ----

const std::string& ShieldContext::name() const { return op_.name; }
absl::Duration ShieldContext::bound() const { return op_.bound; }
absl::Time ShieldContext::deadline() const { return op_.deadline; }
absl::Duration ShieldContext::remaining() const { return op_.deadline - op_.clock.Now(); }
bool ShieldContext::stop_requested() const { return op_.stop_requested(); }
uint64_t ShieldContext::AddStopCallback(absl::AnyInvocable<void()> fn) {
  return op_.AddStopCallback(std::move(fn));
}
void ShieldContext::RemoveStopCallback(uint64_t id) { op_.RemoveStopCallback(id); }

// ---- ShieldHandle ----

bool ShieldHandle::done() const {
  const ShieldOp& op = *token_->op;
  internal::MutexLock lock(&op.state->mu);
  return op.ended;
}

absl::optional<ShieldRecord> ShieldHandle::WaitUntil(absl::Time until) const {
  ShieldOp& op = *token_->op;
  internal::MutexLock lock(&op.state->mu);
  op.state->mu.AwaitWithDeadline(internal::Condition(&op.ended), until);
  if (!op.ended) return absl::nullopt;
  op.observed = true;
  return op.record;
}

void ShieldHandle::OnDone(absl::AnyInvocable<bool(const ShieldRecord&)> fn) const {
  ShieldOp& op = *token_->op;
  {
    internal::MutexLock lock(&op.state->mu);
    if (!op.ended) {
      op.on_done.push_back(std::move(fn));
      return;
    }
  }
  if (fn(op.record)) {  // the record does not change once ended
    internal::MutexLock lock(&op.state->mu);
    op.observed = true;
  }
}

absl::optional<ShieldRecord> ShieldHandle::Wait() const {
  return WaitUntil(absl::InfiniteFuture());
}

const std::string& ShieldHandle::name() const { return token_->op->name; }

// ---- Shield ----

class Shield::Impl {
 public:
  explicit Impl(const ShieldOptions& options)
      : clock_(options.clock != nullptr ? *options.clock : Clock::Real()),
        max_in_flight_(static_cast<uint64_t>(std::max(1, options.max_in_flight))),
        state_(std::make_shared<ShieldState>(options.metrics != nullptr ? options.metrics
                                                                        : &Metrics::Default())),
        timers_(clock_, internal::TimerService::Options{!options.manual_timers}) {
    const int threads = std::max(1, options.threads);
    threads_.reserve(threads);
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
  }

  ~Impl() {
    Drain(absl::InfiniteDuration());
    {
      internal::MutexLock lock(&pool_mu_);
      stop_ = true;
      work_ready_.SignalAll();
    }
    for (std::thread& t : threads_) t.join();
  }

  absl::StatusOr<ShieldHandle> Run(std::string name, absl::Duration bound, ShieldOp::Work work) {
    if (name.empty() || name.size() > internal::kMaxNameLength) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shield name must be 1..", internal::kMaxNameLength, " characters, got ", name.size()));
    }
    if (bound <= absl::ZeroDuration() || bound == absl::InfiniteDuration()) {
      return absl::InvalidArgumentError(
          absl::StrCat("shield bound of ", name, " is ", FormatBudget(bound),
                       ": it must be > 0 and finite; there is no way to shield without a bound"));
    }
    if (work == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("shield work of ", name, " is empty"));
    }
    const absl::Time now = clock_.Now();
    auto op =
        std::make_shared<ShieldOp>(std::move(name), bound, now, clock_, state_, std::move(work));
    bool draining = false;
    bool full = false;
    {
      internal::MutexLock lock(&state_->mu);
      draining = state_->draining;
      full = !draining && state_->in_flight.size() >= max_in_flight_;
      if (full) ++state_->stats.refused;
      if (draining || full) internal::Record(*state_->metrics).CountShield(ShieldEvent::kRefused);
      if (!draining && !full) {
        op->seq = state_->next_seq++;
        state_->in_flight.emplace(op->seq, op);
        ++state_->stats.started;
        internal::Record(*state_->metrics).CountShield(ShieldEvent::kStarted);
        internal::Record(*state_->metrics).AddShieldInFlight(1);
      }
    }
    // Refused: `op`, and what the work captured (a handle, say, whose
    // destructor takes the lock), go after the lock is released.
    if (draining) {
      return absl::FailedPreconditionError(
          absl::StrCat("shield is draining: ", op->name, " not started"));
    }
    if (full) {
      return absl::ResourceExhaustedError(
          absl::StrCat("shield has ", max_in_flight_,
                       " operations in flight (max_in_flight): ", op->name, " refused"));
    }
    // The token exists before the work can end, so that an end is never
    // judged "no handle left" while Run() is still returning one.
    std::shared_ptr<const internal::ShieldHandleToken> token =
        std::make_shared<internal::ShieldHandleToken>(op);
    op->timer_id = timers_.Schedule(op->deadline, [this, op] {
      op->RequestStop(StopReason::kBound);
      EndIfQueued(op);
    });
    {
      internal::MutexLock lock(&pool_mu_);
      queue_.push_back(op);
      work_ready_.Signal();
    }
    return ShieldHandle(std::move(token));
  }

  DrainReport Drain(absl::Duration max_wait) {
    // Real time, like the wait itself (internal::Mutex::AwaitWithTimeout).
    const absl::Time began = absl::Now();
    DrainReport report;
    std::vector<std::shared_ptr<ShieldOp>> to_stop;
    {
      internal::MutexLock lock(&state_->mu);
      state_->draining = true;
      const ShieldStats before = state_->stats;
      const internal::Condition idle(&ShieldState::Idle, state_.get());
      if (max_wait == absl::InfiniteDuration()) {
        state_->mu.Await(idle);
      } else if (max_wait > absl::ZeroDuration()) {
        state_->mu.AwaitWithTimeout(idle, max_wait);
      }
      const ShieldStats after = state_->stats;
      report.completed = static_cast<int>(after.completed - before.completed);
      report.failed = static_cast<int>(after.failed - before.failed);
      report.exceeded_bound = static_cast<int>(after.exceeded_bound - before.exceeded_bound);
      for (const auto& entry : state_->in_flight) {
        report.still_running.push_back(entry.second->name);
        to_stop.push_back(entry.second);
      }
      internal::Record(*state_->metrics)
          .CountShield(report.still_running.empty() ? ShieldEvent::kDrained
                                                    : ShieldEvent::kDrainTimedOut);
    }
    std::vector<std::shared_ptr<ShieldOp>> marked;
    for (std::shared_ptr<ShieldOp>& op : to_stop) {
      if (op->MarkStopped(StopReason::kDrain)) marked.push_back(std::move(op));
    }
    for (const std::shared_ptr<ShieldOp>& op : marked) op->RunStopCallbacks();
    report.waited = absl::Now() - began;
    return report;
  }

  ShieldStats stats() const {
    internal::MutexLock lock(&state_->mu);
    ShieldStats s = state_->stats;
    s.in_flight = state_->in_flight.size();
    s.draining = state_->draining;
    return s;
  }

  int RunDueTimers() { return timers_.RunDue(); }

 private:
  void Loop() {
    for (;;) {
      std::shared_ptr<ShieldOp> op;
      {
        internal::MutexLock lock(&pool_mu_);
        while (!stop_ && queue_.empty()) work_ready_.Wait(&pool_mu_);
        if (queue_.empty()) return;  // stop_, and nothing left
        op = std::move(queue_.front());
        queue_.pop_front();
      }
      Execute(*op);
    }
  }

  // The bound of an operation still in the queue ends it at once, on the
  // timer's thread: its caller must not wait for a pool thread to come free
  // (behind a backlog that wait has no bound), nor what its work captured
  // live on past the bound. One that a pool thread took first ends there.
  void EndIfQueued(const std::shared_ptr<ShieldOp>& op) {
    {
      internal::MutexLock lock(&pool_mu_);
      auto it = std::find(queue_.begin(), queue_.end(), op);
      if (it == queue_.end()) return;
      queue_.erase(it);
    }
    Execute(*op);
  }

  void Execute(ShieldOp& op) {
    absl::Status work_status;
    // Starting work whose bound already passed would make the bound a lie.
    const bool start = !op.bound_fired() && clock_.Now() < op.deadline;
    if (start) work_status = op.RunWork();
    // Callbacks may refer to what the work captured: close them first.
    const bool bound_fired = op.CloseStopCallbacks();
    const absl::Time ended = clock_.Now();
    op.DropWork();
    timers_.Cancel(op.timer_id);  // drops the timer's reference to `op`

    ShieldRecord record;
    record.name = op.name;
    record.started = op.started;
    record.ended = ended;
    record.bound = op.bound;
    // The clock decides even when the timer has not run yet (it is late under
    // load, or manual in tests): returning at the deadline is too late. A
    // downstream call that carried the bound as its deadline may end a little
    // before our clock reaches it (the callee's timer runs on its own clock):
    // its attributed DEADLINE_EXCEEDED says the bound fired all the same.
    if (!start || bound_fired || ended >= op.deadline ||
        internal::IsThisShieldsBound(work_status, op.bound)) {
      record.outcome = ShieldOutcome::kExceededBound;
      const std::string detail =
          start ? absl::StrCat("returned after ", FormatBudget(ended - op.started),
                               ", work status: ", work_status.ToString())
                : absl::StrCat("never started (waited ", FormatBudget(ended - op.started),
                               " in the queue)");
      record.status = absl::DeadlineExceededError(absl::StrCat(
          "shield bound of ", FormatBudget(op.bound), " exceeded by ", op.name, ": ", detail));
    } else if (work_status.ok()) {
      record.outcome = ShieldOutcome::kCompleted;
    } else {
      record.outcome = ShieldOutcome::kFailed;
      record.status = std::move(work_status);
    }

    ShieldState& state = *op.state;
    bool unobserved = false;
    std::vector<absl::AnyInvocable<bool(const ShieldRecord&)>> on_done;
    {
      internal::MutexLock lock(&state.mu);
      switch (record.outcome) {
        case ShieldOutcome::kCompleted:
          ++state.stats.completed;
          internal::Record(*state.metrics).CountShield(ShieldEvent::kCompleted);
          break;
        case ShieldOutcome::kFailed:
          ++state.stats.failed;
          internal::Record(*state.metrics).CountShield(ShieldEvent::kFailed);
          break;
        case ShieldOutcome::kExceededBound:
          ++state.stats.exceeded_bound;
          internal::Record(*state.metrics).CountShield(ShieldEvent::kExceededBound);
          break;
      }
      internal::Record(*state.metrics).AddShieldInFlight(-1);
      op.record = std::move(record);
      op.ended = true;
      on_done.swap(op.on_done);
      op.delivering = !on_done.empty();
      if (op.handles_gone && !op.observed && !op.delivering) {
        unobserved = true;
        ++state.stats.unobserved;
        internal::Record(*state.metrics).CountShield(ShieldEvent::kUnobserved);
      }
      // With callbacks to run the operation stays in flight until they
      // did: Drain() must not report it done before its outcome is placed.
      if (!op.delivering) state.in_flight.erase(op.seq);  // may drop the last reference but ours
    }
    if (unobserved) internal::LogUnobserved(op.record);
    if (on_done.empty()) return;
    bool taken = false;
    for (auto& fn : on_done) taken = fn(op.record) || taken;
    on_done.clear();  // captures go before the end is final
    {
      internal::MutexLock lock(&state.mu);
      op.delivering = false;
      if (taken) op.observed = true;
      unobserved = op.handles_gone && !op.observed;
      if (unobserved) {
        ++state.stats.unobserved;
        internal::Record(*state.metrics).CountShield(ShieldEvent::kUnobserved);
      }
      state.in_flight.erase(op.seq);
    }
    if (unobserved) internal::LogUnobserved(op.record);
  }

  Clock& clock_;
  const uint64_t max_in_flight_;
  const std::shared_ptr<ShieldState> state_;
  internal::TimerService timers_;

  internal::Mutex pool_mu_;
  internal::CondVar work_ready_;
  std::deque<std::shared_ptr<ShieldOp>> queue_ ABSL_GUARDED_BY(pool_mu_);
  bool stop_ ABSL_GUARDED_BY(pool_mu_) = false;
  std::vector<std::thread> threads_;  // last: started once the rest exists
};

struct Shield::Flights {
  internal::Mutex mu;
  absl::flat_hash_map<std::string, ShieldHandle> by_key ABSL_GUARDED_BY(mu);
  std::atomic<uint64_t> joined{0};
};

Shield::Shield(ShieldOptions options)
    : impl_(std::make_unique<Impl>(options)), flights_(std::make_shared<Flights>()) {}

namespace {
ShieldOptions WithHopClockAndMetrics(const Hop& hop, ShieldOptions options) {
  options.clock = &hop.clock();
  options.metrics = &hop.metrics();
  return options;
}
}  // namespace

Shield::Shield(const Hop& hop, ShieldOptions options)
    : Shield(WithHopClockAndMetrics(hop, std::move(options))) {
  hop_ = &hop;
}

Shield::~Shield() = default;

absl::StatusOr<ShieldHandle> Shield::Run(std::string name, absl::Duration bound,
                                         absl::AnyInvocable<absl::Status(ShieldContext&)> work) {
  return impl_->Run(std::move(name), bound, std::move(work));
}

absl::Duration Shield::BoundFor(absl::string_view full_method, absl::Duration default_bound) const {
  if (hop_ == nullptr) return default_bound;
  const MethodPolicy& entry = hop_->PolicyFor(hop_->metrics().Method(full_method), full_method);
  return entry.shield_bound.value_or(default_bound);
}

absl::StatusOr<ShieldHandle> Shield::RunFor(absl::string_view full_method, std::string name,
                                            absl::Duration default_bound,
                                            absl::AnyInvocable<absl::Status(ShieldContext&)> work) {
  return impl_->Run(std::move(name), BoundFor(full_method, default_bound), std::move(work));
}

DrainReport Shield::Drain(absl::Duration max_wait) { return impl_->Drain(max_wait); }

absl::StatusOr<ShieldHandle> Shield::RunOnce(std::string key, std::string name,
                                             absl::Duration bound,
                                             absl::AnyInvocable<absl::Status(ShieldContext&)> work,
                                             bool* joined) {
  if (joined != nullptr) *joined = false;
  absl::StatusOr<ShieldHandle> handle;
  {
    internal::MutexLock lock(&flights_->mu);
    auto it = flights_->by_key.find(key);
    if (it != flights_->by_key.end() && !it->second.done()) {
      flights_->joined.fetch_add(1, std::memory_order_relaxed);
      if (joined != nullptr) *joined = true;
      return it->second;
    }
    // Started under the lock, so that two first arrivals cannot both start.
    handle = impl_->Run(std::move(name), bound, std::move(work));
    if (!handle.ok()) return handle;
    flights_->by_key.insert_or_assign(key, *handle);
  }
  // Forget the key when the operation ends. Not an observation: returns
  // false, so an outcome nobody read is still reported unobserved. Runs at
  // once if the work has already ended; registered outside the lock for that.
  std::weak_ptr<const internal::ShieldHandleToken> mine = handle->token_;
  handle->OnDone([flights = flights_, key = std::move(key), mine](const ShieldRecord&) {
    internal::MutexLock lock(&flights->mu);
    auto it = flights->by_key.find(key);
    if (it != flights->by_key.end() && it->second.token_ == mine.lock()) {
      flights->by_key.erase(it);
    }
    return false;
  });
  return handle;
}

ShieldStats Shield::stats() const {
  ShieldStats s = impl_->stats();
  s.joined = flights_->joined.load(std::memory_order_relaxed);
  return s;
}

int Shield::RunDueTimers() { return impl_->RunDueTimers(); }

}  // namespace hopbudget
