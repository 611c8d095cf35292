// Copyright hopbudget authors.
//
// Hedger: one HedgeCall per logical call, its decisions from hedge.h. The
// per-method state (latency window, extra-load bucket) lives in Shared,
// under its own lock, which is only ever taken inside a call's lock or
// alone, never the other way round.
#include "hopbudget/advanced/hedge_grpc.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "attempt_context.h"
#include "attempt_result.h"
#include "call_mutex.h"
#include "completion_gate.h"
#include "grpc_glue.h"
#include "hopbudget/advanced/attribution.h"
#include "metrics_recorder.h"
#include "sync.h"
#include "timer_service.h"

namespace hopbudget {

class Hedger::Shared {
 public:
  Shared(const HedgerOptions& o, const Hop* hop)
      : options(o),
        hop(hop),
        clock(o.clock != nullptr ? *o.clock : Clock::Real()),
        metrics(o.metrics != nullptr ? *o.metrics : Metrics::Default()),
        own_timers(&clock == &Clock::Real() ? nullptr
                                            : std::make_unique<internal::TimerService>(clock)),
        timers(own_timers != nullptr ? *own_timers : internal::TimerService::Shared()),
        latencies_(o.hedge.window),
        bucket_(o.hedge.max_extra_load, o.hedge.burst),
        method_(hop != nullptr ? metrics.Method(o.method) : MethodId{}) {}

  // The budget and hedging policy one logical call runs under: the options,
  // or the method's entry in the Hop's table in force now. The Hop keeps
  // every table it made, so the references outlive the call.
  struct Policy {
    const BudgetPolicy& budget;
    const HedgePolicy& hedge;
  };
  Policy PolicyNow() const {
    if (hop == nullptr) return {options.budget, options.hedge};
    const MethodPolicy& entry = hop->PolicyFor(method_, options.method);
    if (entry.shadow) return {PassThroughPolicy(), NoHedging()};
    return {entry.budget, entry.hedge.has_value() ? *entry.hedge : NoHedging()};
  }
  static const HedgePolicy& NoHedging() {
    static const HedgePolicy* const once = [] {
      auto* p = new HedgePolicy;
      p->max_attempts = 1;
      return p;
    }();
    return *once;
  }

  // A call starts: it earns its share of extra load; its first hedge delay.
  absl::Duration OnCall(const HedgePolicy& hedge) {
    internal::CallMutexLock lock(&mu_);
    ++calls_;
    bucket_.OnCall();
    return HedgeDelay(hedge, latencies_);
  }
  bool LoadAvailable() const {
    internal::CallMutexLock lock(&mu_);
    return bucket_.Available();
  }
  // Takes a token if one is still there: two calls may both have seen the
  // last one available.
  bool TryTakeLoad() {
    internal::CallMutexLock lock(&mu_);
    if (!bucket_.Available()) return false;
    bucket_.Take();
    ++hedges_;
    return true;
  }
  void AddLatencies(const absl::Duration* ds, int n) {
    internal::CallMutexLock lock(&mu_);
    for (int i = 0; i < n; ++i) latencies_.Add(ds[i]);
  }
  double extra_load() const {
    internal::CallMutexLock lock(&mu_);
    return calls_ == 0 ? 0.0 : static_cast<double>(hedges_) / static_cast<double>(calls_);
  }
  absl::Duration current_delay() {
    internal::CallMutexLock lock(&mu_);
    return HedgeDelay(options.hedge, latencies_);
  }

  const HedgerOptions options;  // a copy: timers may keep this past the Hedger
  const Hop* const hop;         // the table each call takes its entry from; nullptr: options
  Clock& clock;
  Metrics& metrics;
  std::unique_ptr<internal::TimerService> own_timers;  // only for a non-real clock
  internal::TimerService& timers;

 private:
  mutable internal::CallMutex mu_;
  LatencyWindow latencies_ ABSL_GUARDED_BY(mu_);
  ExtraLoadBucket bucket_ ABSL_GUARDED_BY(mu_);
  uint64_t calls_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t hedges_ ABSL_GUARDED_BY(mu_) = 0;
  const MethodId method_;
};

namespace {

class HedgeCall final : public HedgingCall, public std::enable_shared_from_this<HedgeCall> {
 public:
  HedgeCall(std::shared_ptr<Hedger::Shared> shared, const LogicalCall& call,
            Hedger::AsyncAttempt attempt, absl::AnyInvocable<void(HedgeResult)> on_done)
      : shared_(std::move(shared)),
        policy_(shared_->PolicyNow()),
        logical_(policy_.budget, call, shared_->clock.Now()),
        attempt_(std::move(attempt)),
        gate_(std::move(on_done)) {}

  void Begin() {
    delay_ = shared_->OnCall(policy_.hedge);
    grpc::ClientContext* ctx;
    {
      internal::CallMutexLock lock(&mu_);
      ctx = StartAttemptLocked();
      ArmLocked();
    }
    Launch(0, ctx);
  }

  void TryCancel() override {
    std::vector<std::shared_ptr<grpc::ClientContext>> running;
    internal::TimerService::TimerId timer = 0;
    bool finish = false;
    {
      internal::CallMutexLock lock(&mu_);
      if (decided_) return;
      decided_ = true;
      final_ = grpc::Status(grpc::StatusCode::CANCELLED, "hopbudget: hedged call cancelled");
      running = RunningLocked(-1);
      timer = timer_;
      timer_ = 0;
      finish = running.empty() && !finished_;
      if (finish) finished_ = true;
    }
    if (timer != 0) shared_->timers.Cancel(timer);
    CancelAll(std::move(running));
    if (finish) Finish();
  }

 private:
  struct Attempt {
    std::shared_ptr<grpc::ClientContext> ctx;
    absl::Time start;
    bool running = false;
  };

  grpc::ClientContext* StartAttemptLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const absl::Time now = shared_->clock.Now();
    Attempt& a = attempts_[sent_];
    ++sent_;
    // Hedges carry grpc-previous-rpc-attempts: 1, 2.
    a.ctx = logical_.NewAttemptContext(sent_, now);
    a.start = now;
    a.running = true;
    return a.ctx.get();
  }

  void ArmLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (sent_ >= policy_.hedge.max_attempts) return;
    timer_ = shared_->timers.Schedule(shared_->clock.Now() + delay_,
                                      [self = shared_from_this()] { self->OnTimer(); });
  }

  // Asks DecideHedge; on kSend starts the next attempt's context and returns
  // its index (-1 otherwise).
  int TryHedgeLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    HedgeOutcome o =
        DecideHedge(logical_.attempt_policy(), policy_.hedge, sent_, decided_ || stopped_,
                    logical_.deadline(), shared_->clock.Now(), shared_->LoadAvailable());
    if (o == HedgeOutcome::kSend && !shared_->TryTakeLoad()) o = HedgeOutcome::kExtraLoad;
    if (o != HedgeOutcome::kSend) {
      // A hedge held back by the bucket again is still the one hedge: count it once.
      if (o != HedgeOutcome::kMaxAttempts && o != skipped_) {
        skipped_ = o;
        internal::Record(shared_->metrics).CountHedgeSkipped(o);
      }
      return -1;
    }
    skipped_ = HedgeOutcome::kSend;
    const int i = sent_;
    StartAttemptLocked();
    return i;
  }

  // A hedge is launched from the timer's thread or another attempt's
  // completion: the call may be decided, and every attempt end, before
  // attempt_ returns. The gate holds `on_done` until it has.
  void Launch(int i, grpc::ClientContext* ctx) {
    gate_.Run([&] {
      attempt_(i, ctx,
               [self = shared_from_this(), i](grpc::Status s) { self->OnEnd(i, std::move(s)); });
    });
  }

  void OnTimer() {
    int next = -1;
    grpc::ClientContext* ctx = nullptr;
    {
      internal::CallMutexLock lock(&mu_);
      timer_ = 0;
      if (decided_) return;
      next = TryHedgeLocked();
      if (next < 0) {
        // The bucket holds a hedge back, it does not drop it: the first
        // attempt is still out, and the longer it stays out the likelier it
        // is one of the slow ones the hedge is for. Ask again after another
        // delay, until a token is there or the budget runs out (kNoBudget).
        if (skipped_ == HedgeOutcome::kExtraLoad) ArmLocked();
        return;
      }
      ctx = attempts_[next].ctx.get();
      ArmLocked();
    }
    Launch(next, ctx);
  }

  // References, so that a completion that runs inside TryCancel() cannot
  // free the context under it; released through CancelAll.
  std::vector<std::shared_ptr<grpc::ClientContext>> RunningLocked(int except)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<std::shared_ptr<grpc::ClientContext>> out;
    for (int i = 0; i < sent_; ++i) {
      if (i != except && attempts_[i].running) out.push_back(attempts_[i].ctx);
    }
    return out;
  }

  static void CancelAll(std::vector<std::shared_ptr<grpc::ClientContext>> ctxs) {
    for (auto& c : ctxs) {
      c->TryCancel();
      internal::DestroyLater(std::move(c));
    }
  }

  // The winner's latency, and each attempt it superseded at what it had
  // taken so far (a lower bound of its latency), as Finagle's
  // BackupRequestFilter does. Recording the winner alone would leave out
  // exactly the slow first attempts that a hedge cut short: the quantile
  // would fall below the method's real latency, and hedges would go out
  // for more calls than max_extra_load allows, to be refused by the bucket
  // when a slow call needs one.
  void RecordLatenciesLocked(int winner, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    absl::Duration ds[3];
    int n = 0;
    ds[n++] = now - attempts_[winner].start;
    for (int j = 0; j < sent_; ++j) {
      if (j != winner && attempts_[j].running) ds[n++] = now - attempts_[j].start;
    }
    shared_->AddLatencies(ds, n);
  }

  bool AnyRunningLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (int i = 0; i < sent_; ++i) {
      if (attempts_[i].running) return true;
    }
    return false;
  }

  void OnEnd(int i, grpc::Status status) {
    std::vector<std::shared_ptr<grpc::ClientContext>> cancel;
    internal::TimerService::TimerId timer = 0;
    int next = -1;
    grpc::ClientContext* next_ctx = nullptr;
    bool finish = false;
    {
      internal::CallMutexLock lock(&mu_);
      Attempt& a = attempts_[i];
      a.running = false;
      const absl::Time now = shared_->clock.Now();
      if (decided_) {
        // Cancelled because another answered first or a fatal answer came;
        // not when the logical call itself was cancelled.
        if ((winner_ >= 0 && winner_ != i) || stopped_) ++losers_;
      } else {
        const AttemptResult result = internal::AttemptResultOf(
            status, a.ctx->GetServerTrailingMetadata(), shared_->options.hop);
        switch (HedgeVerdictOf(policy_.hedge, result)) {
          case HedgeVerdict::kWon:
            decided_ = true;
            winner_ = i;
            final_ = std::move(status);
            RecordLatenciesLocked(i, now);
            break;
          case HedgeVerdict::kFatal:
            decided_ = true;
            stopped_ = true;
            final_ = std::move(status);
            break;
          case HedgeVerdict::kNonFatal:
            last_failure_ = std::move(status);
            next = TryHedgeLocked();  // A6: the next hedge goes at once
            if (next >= 0) {
              next_ctx = attempts_[next].ctx.get();
            } else if (!AnyRunningLocked()) {
              decided_ = true;
              final_ = last_failure_;
            }
            break;
        }
        if (decided_) {
          cancel = RunningLocked(i);
          timer = timer_;
          timer_ = 0;
        }
      }
      finish = decided_ && !AnyRunningLocked() && !finished_;
      if (finish) finished_ = true;
    }
    if (timer != 0) shared_->timers.Cancel(timer);
    CancelAll(std::move(cancel));
    if (next >= 0) Launch(next, next_ctx);
    if (finish) Finish();
  }

  void Finish() {
    HedgeResult r;
    std::shared_ptr<grpc::ClientContext> ended[3];
    {
      internal::CallMutexLock lock(&mu_);
      // Every attempt has ended: their contexts go to DestroyLater before
      // `on_done` (attempt_context.h).
      for (int i = 0; i < 3; ++i) ended[i] = std::move(attempts_[i].ctx);
      r.status = final_;
      r.winner = winner_;
      r.sent = sent_;
      r.losers = losers_;
      r.skipped = skipped_;
    }
    for (auto& c : ended) internal::DestroyLater(std::move(c));
    internal::Record(shared_->metrics).CountHedgedCall(r.sent, r.winner, r.losers);
    gate_.Complete(std::move(r));
  }

  const std::shared_ptr<Hedger::Shared> shared_;
  const Hedger::Shared::Policy policy_;
  const internal::LogicalBudget logical_;
  const Hedger::AsyncAttempt attempt_;
  internal::CompletionGate<HedgeResult> gate_;  // holds `on_done`
  absl::Duration delay_;
  internal::CallMutex mu_;
  Attempt attempts_[3] ABSL_GUARDED_BY(mu_);
  int sent_ ABSL_GUARDED_BY(mu_) = 0;
  internal::TimerService::TimerId timer_ ABSL_GUARDED_BY(mu_) = 0;
  bool decided_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  int winner_ ABSL_GUARDED_BY(mu_) = -1;
  int losers_ ABSL_GUARDED_BY(mu_) = 0;
  HedgeOutcome skipped_ ABSL_GUARDED_BY(mu_) = HedgeOutcome::kSend;
  grpc::Status final_ ABSL_GUARDED_BY(mu_);
  grpc::Status last_failure_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<Hedger>> Hedger::Create(HedgerOptions options) {
  if (absl::Status s = ValidateHopName(options.hop); !s.ok()) return s;
  if (absl::Status s = ValidatePolicy(options.budget); !s.ok()) return s;
  if (absl::Status s = ValidateHedgePolicy(options.hedge); !s.ok()) return s;
  return std::unique_ptr<Hedger>(new Hedger(std::move(options), nullptr));
}

absl::StatusOr<std::unique_ptr<Hedger>> Hedger::Create(const Hop& hop, std::string method) {
  if (!internal::IsFullMethodName(method)) {
    return absl::InvalidArgumentError(
        absl::StrCat("hopbudget: Hedger of ", hop.name(), ": method \"", method,
                     "\" is not a full method name (\"/pkg.Service/Method\")"));
  }
  HedgerOptions options;
  options.hop = hop.name();
  options.method = std::move(method);
  options.clock = &hop.clock();
  options.metrics = &hop.metrics();
  // What options() shows, and the bucket and window; each call reads the
  // table in force (Shared::PolicyNow).
  const MethodPolicy& entry = hop.PolicyFor(hop.metrics().Method(options.method), options.method);
  options.budget = entry.budget;
  if (entry.hedge.has_value() && !entry.shadow) {
    options.hedge = *entry.hedge;
  } else {
    options.hedge.max_attempts = 1;
  }
  // Every entry was validated when the Hop read its config.
  return std::unique_ptr<Hedger>(new Hedger(std::move(options), &hop));
}

Hedger::Hedger(HedgerOptions options, const Hop* hop)
    : options_(std::move(options)), shared_(std::make_shared<Shared>(options_, hop)) {}
Hedger::~Hedger() = default;

double Hedger::extra_load() const { return shared_->extra_load(); }
absl::Duration Hedger::current_delay() const { return shared_->current_delay(); }

std::shared_ptr<HedgingCall> Hedger::Start(const LogicalCall& call, AsyncAttempt attempt,
                                           absl::AnyInvocable<void(HedgeResult)> on_done) {
  auto c = std::make_shared<HedgeCall>(shared_, call, std::move(attempt), std::move(on_done));
  c->Begin();
  return c;
}

HedgeResult Hedger::Call(const LogicalCall& call, AsyncAttempt attempt) {
  HedgeResult result;
  internal::Notification done;
  Start(call, std::move(attempt), [&](HedgeResult r) {
    result = std::move(r);
    done.Notify();
  });
  done.WaitForNotification();
  return result;
}

}  // namespace hopbudget
