// Copyright hopbudget authors.
//
// The typed retry loop: one real call per attempt, decisions from the pure
// retry core. RetryLoopCall holds what one logical call needs between
// attempts; the sync form loops on it, the callback form chains attempts and
// backoff timers on it.
#include "hopbudget/advanced/retry_loop.h"

#include <grpc/support/log.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "attempt_context.h"
#include "attempt_result.h"
#include "call_mutex.h"
#include "completion_gate.h"
#include "grpc_glue.h"
#include "hopbudget/advanced/attribution.h"
#include "hopbudget/server.h"
#include "metrics_recorder.h"
#include "retry_step.h"
#include "sync.h"
#include "timer_service.h"

namespace hopbudget {
// What one logical call carries from attempt to attempt. Not thread-safe:
// the callback form serializes its use.
class RetryLoopCall {
 public:
  RetryLoopCall(RetryLoop& loop, const LogicalCall& call)
      : RetryLoopCall(loop, call, PolicyOf(loop)) {}

  // The context of the next attempt, with its deadline and headers. Its
  // source tag is tag(): start the attempt's call inside a ScopedAttemptTag.
  std::unique_ptr<grpc::ClientContext> NextAttempt() {
    ++attempt_;
    // An attempt: the loop observes the logical call once (Final), the
    // budget interceptor each attempt.
    return logical_.NewAttemptContext(attempt_, loop_.clock_.Now(), ClientCallKind::kRetryAttempt,
                                      &tag_);
  }
  const internal::SourceTag& tag() const { return tag_; }

  // After an attempt ended with `status` on `ctx`: feeds the throttle and
  // the metrics, and decides.
  RetryDecision AfterAttempt(const grpc::Status& status, const grpc::ClientContext& ctx) {
    return step_.AfterAttempt(
        internal::AttemptResultOf(status, ctx.GetServerTrailingMetadata(), loop_.options_.hop),
        attempt_, logical_.deadline());
  }

  // The logical call's status, once `d` says no retry follows `status`.
  grpc::Status Final(grpc::Status status, const RetryDecision& d) {
    internal::RecordRetrySkipped(logical_.inbound_key(), logical_.inbound_id(), d.outcome);
    internal::Record(loop_.metrics_)
        .EndRetryingCall(loop_.method_, static_cast<absl::StatusCode>(status.error_code()),
                         attempt_, loop_.clock_.Now() - started_);
    return internal::NotRetried(std::move(status), d);
  }

  int attempts() const { return attempt_; }

 private:
  // The budget and retry policy one logical call runs under: the loop's
  // options, or its method's entry in the Hop's table in force now. The
  // Hop keeps every table it made, so the references outlive the call.
  struct Policy {
    const BudgetPolicy& budget;
    const RetryPolicy& retry;
  };
  static Policy PolicyOf(const RetryLoop& loop) {
    if (loop.hop_ == nullptr) return {loop.options_.budget, loop.options_.retry};
    const MethodPolicy& entry = loop.hop_->PolicyFor(loop.method_, loop.options_.method);
    if (entry.shadow) return {PassThroughPolicy(), NoRetries()};
    return {entry.budget, entry.retry.has_value() ? *entry.retry : NoRetries()};
  }
  static const RetryPolicy& NoRetries() {
    static const RetryPolicy* const once = [] {
      auto* p = new RetryPolicy;
      p->max_attempts = 1;
      return p;
    }();
    return *once;
  }
  RetryLoopCall(RetryLoop& loop, const LogicalCall& call, Policy policy)
      : loop_(loop),
        logical_(policy.budget, call, loop.clock_.Now()),
        step_(logical_.attempt_policy(), policy.retry, loop.throttle_, loop.metrics_, loop.method_,
              loop.clock_) {
    if (loop.unfit_) internal::Record(loop.metrics_).CountUnfitPolicyCall();
  }

  RetryLoop& loop_;
  const internal::LogicalBudget logical_;
  internal::RetryStep step_;
  int attempt_ = 0;
  internal::SourceTag tag_;                  // the current attempt's
  absl::Time started_ = loop_.clock_.Now();  // the logical call's, for its latency
};

namespace {

// One logical call of the callback form. Keeps itself alive (shared_ptr
// captured by the attempt's completion and the backoff timer) until
// `on_done` has run.
class AsyncRetryingCall final : public RetryingCall,
                                public std::enable_shared_from_this<AsyncRetryingCall> {
 public:
  AsyncRetryingCall(RetryLoop& loop, internal::TimerService& timers, const LogicalCall& call,
                    RetryLoop::AsyncAttempt attempt, absl::AnyInvocable<void(grpc::Status)> on_done)
      : state_(loop, call),
        clock_(*(loop.options().clock != nullptr ? loop.options().clock : &Clock::Real())),
        timers_(timers),
        attempt_(std::move(attempt)),
        gate_(std::move(on_done)) {}

  void StartAttempt() {
    grpc::ClientContext* ctx = nullptr;
    internal::SourceTag tag;
    {
      internal::CallMutexLock lock(&mu_);
      timer_ = 0;
      if (!cancelled_) {
        // The previous attempt's context, if any, ended on a callback
        // thread that may be inside its completion (attempt_context.h).
        if (ctx_ != nullptr) internal::DestroyLater(std::move(ctx_));
        ctx_ = state_.NextAttempt();
        ctx = ctx_.get();
        tag = state_.tag();
        in_attempt_ = true;
        // The attempt's completion owns the call until it runs; the
        // callback itself captures only `this`, which std::function keeps
        // without allocating (a captured shared_ptr cost an allocation a
        // call, two when the caller copies the callback into the stub).
        self_ = shared_from_this();
      }
    }
    if (ctx == nullptr) {
      Done(grpc::Status(grpc::StatusCode::CANCELLED, "hopbudget: retrying call cancelled"));
      return;
    }
    // The attempt may end, and the loop with it, before attempt_ returns;
    // the gate holds `on_done` until it has.
    gate_.Run([&] {
      internal::ScopedAttemptTag handed(ctx, tag);
      attempt_(ctx, [this](grpc::Status s) { OnAttemptDone(std::move(s)); });
    });
  }

  void TryCancel() override {
    std::shared_ptr<grpc::ClientContext> attempt;
    internal::TimerService::TimerId timer = 0;
    {
      internal::CallMutexLock lock(&mu_);
      if (done_ || cancelled_) return;
      cancelled_ = true;
      if (in_attempt_) {
        attempt = ctx_;  // its completion may end the call inside TryCancel()
      } else {
        timer = timer_;
      }
    }
    if (attempt != nullptr) {
      attempt->TryCancel();  // its completion ends the call
      internal::DestroyLater(std::move(attempt));
    } else if (timer != 0 &&
               timers_.Cancel(timer) == internal::TimerService::CancelOutcome::kCancelled) {
      Done(grpc::Status(grpc::StatusCode::CANCELLED, "hopbudget: retrying call cancelled"));
    }  // else the timer ran: StartAttempt() saw the cancel
  }

 private:
  void OnAttemptDone(grpc::Status status) {
    absl::optional<grpc::Status> final;
    bool retry_now = false;
    std::shared_ptr<AsyncRetryingCall> self;  // keeps the call until this returns
    {
      internal::CallMutexLock lock(&mu_);
      self = std::move(self_);
      in_attempt_ = false;
      const RetryDecision d = state_.AfterAttempt(status, *ctx_);
      if (d.outcome != RetryOutcome::kRetry || cancelled_) {
        final = state_.Final(std::move(status), d);
      } else if (d.backoff <= absl::ZeroDuration()) {
        retry_now = true;
      } else {
        timer_ = timers_.Schedule(clock_.Now() + d.backoff,
                                  [self = shared_from_this()] { self->StartAttempt(); });
      }
    }
    if (final.has_value()) {
      Done(*std::move(final));
    } else if (retry_now) {
      StartAttempt();
    }
  }

  void Done(grpc::Status status) {
    std::shared_ptr<grpc::ClientContext> ended;
    {
      internal::CallMutexLock lock(&mu_);
      if (done_) return;
      done_ = true;
      ended = std::move(ctx_);
    }
    // No attempt runs now: the last one's context goes to DestroyLater
    // before `on_done`, so the caller may drop its channel there
    // (attempt_context.h).
    if (ended != nullptr) internal::DestroyLater(std::move(ended));
    gate_.Complete(std::move(status));
  }

  internal::CallMutex mu_;
  RetryLoopCall state_ ABSL_GUARDED_BY(mu_);
  Clock& clock_;
  internal::TimerService& timers_;
  const RetryLoop::AsyncAttempt attempt_;
  internal::CompletionGate<grpc::Status> gate_;  // holds `on_done`
  std::shared_ptr<grpc::ClientContext> ctx_ ABSL_GUARDED_BY(mu_);
  // Set while an attempt is in flight: the owner its completion releases.
  std::shared_ptr<AsyncRetryingCall> self_ ABSL_GUARDED_BY(mu_);
  internal::TimerService::TimerId timer_ ABSL_GUARDED_BY(mu_) = 0;
  bool in_attempt_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<RetryLoop>> RetryLoop::Create(RetryLoopOptions options) {
  if (absl::Status s = ValidateHopName(options.hop); !s.ok()) return s;
  absl::StatusOr<RetrySetup> setup = ValidateRetrySetup(
      options.budget, options.retry, options.throttle, options.accept_unfit_policy);
  if (!setup.ok()) return setup.status();
  const bool unfit = *setup == RetrySetup::kUnfitAccepted;
  if (unfit) {
    gpr_log(GPR_ERROR, "hopbudget: retry policy of %s for %s accepted although it does not fit",
            options.hop.c_str(), options.method.c_str());
  }
  return std::unique_ptr<RetryLoop>(new RetryLoop(std::move(options), unfit, nullptr));
}

absl::StatusOr<std::unique_ptr<RetryLoop>> RetryLoop::Create(const Hop& hop, std::string method) {
  if (!internal::IsFullMethodName(method)) {
    return absl::InvalidArgumentError(
        absl::StrCat("hopbudget: RetryLoop of ", hop.name(), ": method \"", method,
                     "\" is not a full method name (\"/pkg.Service/Method\")"));
  }
  RetryLoopOptions options;
  options.hop = hop.name();
  options.method = std::move(method);
  options.throttle = hop.retry_throttling().value_or(RetryThrottleOptions{});
  options.clock = &hop.clock();
  options.metrics = &hop.metrics();
  // What options() shows; each call reads the table in force (RetryLoopCall).
  const MethodPolicy& entry = hop.PolicyFor(hop.metrics().Method(options.method), options.method);
  options.budget = entry.budget;
  if (entry.retry.has_value() && !entry.shadow) {
    options.retry = *entry.retry;
  } else {
    options.retry.max_attempts = 1;
  }
  // Every entry was validated when the Hop read its config: none is unfit.
  return std::unique_ptr<RetryLoop>(new RetryLoop(std::move(options), false, &hop));
}

RetryLoop::RetryLoop(RetryLoopOptions options, bool unfit, const Hop* hop)
    : options_(std::move(options)),
      unfit_(unfit),
      hop_(hop),
      clock_(options_.clock != nullptr ? *options_.clock : Clock::Real()),
      metrics_(options_.metrics != nullptr ? *options_.metrics : Metrics::Default()),
      method_(metrics_.Method(options_.method)),
      // Timers must read the clock the budgets are derived from.
      own_timers_(&clock_ == &Clock::Real() ? nullptr
                                            : std::make_unique<internal::TimerService>(clock_)),
      timers_(own_timers_ != nullptr ? *own_timers_ : internal::TimerService::Shared()),
      throttle_(options_.throttle) {}

RetryLoop::~RetryLoop() = default;

grpc::Status RetryLoop::Call(const LogicalCall& call, SyncAttempt attempt) {
  RetryLoopCall state(*this, call);
  for (;;) {
    std::unique_ptr<grpc::ClientContext> ctx = state.NextAttempt();
    grpc::Status status;
    {
      internal::ScopedAttemptTag handed(ctx.get(), state.tag());
      status = attempt(ctx.get());
    }
    const RetryDecision d = state.AfterAttempt(status, *ctx);
    if (d.outcome != RetryOutcome::kRetry) return state.Final(std::move(status), d);
    if (d.backoff > absl::ZeroDuration()) {
      internal::Notification waited;
      timers_.Schedule(clock_.Now() + d.backoff, [&waited] { waited.Notify(); });
      waited.WaitForNotification();
    }
  }
}

std::shared_ptr<RetryingCall> RetryLoop::Start(const LogicalCall& call, AsyncAttempt attempt,
                                               absl::AnyInvocable<void(grpc::Status)> on_done) {
  auto retrying = std::make_shared<AsyncRetryingCall>(*this, timers_, call, std::move(attempt),
                                                      std::move(on_done));
  retrying->StartAttempt();
  return retrying;
}

}  // namespace hopbudget
