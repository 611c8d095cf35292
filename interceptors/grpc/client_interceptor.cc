// Copyright hopbudget authors.
//
// The client interceptor: fail fast, exact budget header, enforcement of
// budgets tighter than the context's deadline, and attribution.
#include <grpcpp/create_channel.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/client_interceptor.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/call_once.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/types/optional.h"
#include "attempt_result.h"
#include "attributed_status.h"
#include "backend_watch.h"
#include "call_mutex.h"
#include "channel_defaults.h"
#include "grpc_glue.h"
#include "hijacked_call.h"
#include "hopbudget/advanced/classify.h"
#include "hopbudget/advanced/wire.h"
#include "hopbudget/client.h"
#include "hopbudget/server.h"
#include "metrics_recorder.h"
#include "sync.h"
#include "timer_service.h"
#include "transit.h"

namespace hopbudget {
namespace {

using grpc::experimental::InterceptionHookPoints;
using grpc::experimental::InterceptorBatchMethods;

// Logs each leaking method once per process: a leak repeats on every call and
// one line is enough to find it; the metric counts them all.
void LogLeakOnce(const char* method, LeakKind kind) {
  static internal::Mutex mu(absl::kConstInit);
  static auto* seen = new absl::flat_hash_set<std::string>();
  internal::MutexLock lock(&mu);
  if (!seen->insert(method).second) return;
  gpr_log(
      GPR_ERROR,
      "hopbudget: deadline leak on %s: downstream call made inside a handler with %s; "
      "use hopbudget::NewDownstreamContext(). Bounded by the inbound budget.",
      method,
      kind == LeakKind::kNoDeadline ? "no deadline" : "a deadline later than the inbound call's");
}

struct ClientShared {
  std::string hop;
  absl::Duration min_call_budget;
  bool send_budget_header;
  absl::Duration stream_idle_budget;
  BackendWait backend_wait;
  Clock* clock;
  Metrics* metrics;
  internal::TimerService* timers;
  const Hop* hop_config;  // the channel's Hop; nullptr: none
};

bool IsStreaming(grpc::experimental::ClientRpcInfo::Type type) {
  using Type = grpc::experimental::ClientRpcInfo::Type;
  return type == Type::CLIENT_STREAMING || type == Type::SERVER_STREAMING ||
         type == Type::BIDI_STREAMING;
}

// What the caller's metadata held of ours: the helpers' in-process keys,
// read and removed, and any budget or attempt header, removed (ours alone
// decides what the server is told).
struct OwnMetadata {
  absl::optional<std::string> source;        // kInternalSourceKey
  absl::optional<std::string> idle;          // kInternalIdleKey
  absl::optional<std::string> backend_wait;  // kInternalBackendWaitKey
};

// All our keys start with kKeyPrefix: one descent of the sorted map finds
// them, and a call that set none (the common one) builds no key string to
// look them up, as find() and erase() with a literal would, three times.
static_assert(HasKeyPrefix(internal::kInternalSourceKey) &&
              HasKeyPrefix(internal::kInternalIdleKey) &&
              HasKeyPrefix(internal::kInternalBackendWaitKey) && HasKeyPrefix(kBudgetHeader) &&
              HasKeyPrefix(kSentHeader) && HasKeyPrefix(kPreviousAttemptsHeader));
OwnMetadata TakeOwnMetadata(std::multimap<std::string, std::string>& md) {
  static const std::string* const kPrefix = new std::string(kKeyPrefix);
  OwnMetadata own;
  auto it = md.lower_bound(*kPrefix);
  while (it != md.end() && absl::StartsWith(it->first, *kPrefix)) {
    const std::string& key = it->first;
    if (key == internal::kInternalSourceKey) {
      if (!own.source.has_value()) own.source = std::move(it->second);
    } else if (key == internal::kInternalIdleKey) {
      if (!own.idle.has_value()) own.idle = std::move(it->second);
    } else if (key == internal::kInternalBackendWaitKey) {
      if (!own.backend_wait.has_value()) own.backend_wait = std::move(it->second);
    } else if (key != kBudgetHeader && key != kSentHeader && key != kPreviousAttemptsHeader) {
      ++it;  // not ours to remove (the trace request, say)
      continue;
    }
    it = md.erase(it);
  }
  return own;
}

// gRPC core removes grpc-previous-rpc-attempts from every call below the
// interceptors while its retries are on, as they are for its transparent
// retries: the count also goes out under our own name (wire.h), which a
// hopbudget server puts back. Only attempts after the first carry it.
void CopyAttemptCount(std::multimap<std::string, std::string>& md) {
  static const std::string* const kGrpcKey = new std::string(internal::kGrpcPreviousAttemptsHeader);
  if (auto it = md.find(*kGrpcKey); it != md.end()) md.emplace(kPreviousAttemptsHeader, it->second);
}

class ClientBudgetInterceptor final : public grpc::experimental::Interceptor {
 public:
  ClientBudgetInterceptor(const ClientShared* shared, grpc::experimental::ClientRpcInfo* info)
      : shared_(*shared), info_(info), method_(shared->metrics->Method(info->method())) {
    // gRPC creates interceptors inside the stub call, on its thread: a tag
    // handed over in process is read here, not from the metadata.
    if (const internal::SourceTag* tag = internal::HandedAttemptTag(info->client_context())) {
      handed_tag_ = *tag;
    }
  }

  ~ClientBudgetInterceptor() override { StopTimer(); }

  void Intercept(InterceptorBatchMethods* m) override {
    if (hijacked_) {
      ServeHijacked(m);
      return;
    }
    if (m->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      const BackendCheck check = OnStart(m) ? CheckBackend(m) : BackendCheck::kFailed;
      if (check == BackendCheck::kFailed) {
        hijacked_ = true;
        m->Hijack();
        return;
      }
      // Held until a backend is ready: the watch (or a cancel) proceeds it,
      // and may have already; nothing of this call may be touched here.
      if (check == BackendCheck::kHeld) return;
    }
    if (m->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_CANCEL)) {
      ReleaseOnCancel();
    }
    if (m->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_MESSAGE) ||
        m->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE)) {
      last_activity_ns_.store(absl::ToUnixNanos(shared_.clock->Now()), std::memory_order_relaxed);
    }
    if (m->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_STATUS)) {
      OnStatus(m);
    }
    m->Proceed();
  }

 private:
  // Decides the call's budget. Returns false when the call must fail fast.
  bool OnStart(InterceptorBatchMethods* m) {
    auto* md = m->GetSendInitialMetadata();
    const OwnMetadata own = TakeOwnMetadata(*md);
    CopyAttemptCount(*md);
    internal::SourceTag tagged;
    bool from_helper = false;
    if (handed_tag_.has_value()) {
      tagged = *handed_tag_;
      from_helper = true;
    } else if (own.source.has_value()) {
      if (auto parsed = internal::ParseSourceTag(*own.source)) {
        tagged = *parsed;
        from_helper = true;
      }
    }
    const MethodPolicy* called = shared_.hop_config != nullptr
                                     ? &shared_.hop_config->PolicyFor(method_, info_->method())
                                     : nullptr;
    // A stream's idle budget: the call's own (SetStreamIdleBudget), else its
    // method's entry in the Hop's table (streamIdleBudget), else the
    // channel's.
    absl::Duration idle = absl::InfiniteDuration();
    if (IsStreaming(info_->type())) {
      idle = called != nullptr && called->stream_idle_budget != absl::InfiniteDuration()
                 ? called->stream_idle_budget
                 : shared_.stream_idle_budget;
    }
    if (own.idle.has_value()) {
      ParsedBudget p = ParseBudgetHeader(*own.idle);
      if (p.result == HeaderParse::kOk && p.budget > absl::ZeroDuration()) idle = p.budget;
      if (p.result == HeaderParse::kEmpty) idle = absl::InfiniteDuration();
    }
    backend_wait_ = internal::BackendWaitOfCall(
        shared_.backend_wait, called != nullptr ? called->wait_for_ready : absl::nullopt,
        internal::CallBackendWait(own.backend_wait));
    // A called method in shadow mode: gRPC alone decides whether the call
    // waits for a backend (its waitForReady), as without hopbudget.
    shadow_ = called != nullptr && called->shadow;
    if (shadow_) backend_wait_ = BackendWait::kFailFast;
    if (from_helper && tagged.inbound_key != 0) {
      inbound_key_ = tagged.inbound_key;
      inbound_id_ = tagged.inbound_id;
      shadow_ = shadow_ || tagged.shadow;
    } else if (const InboundBudget* inbound = internal::CurrentInbound()) {
      inbound_key_ = internal::InboundKey(*inbound, &inbound_id_);
      shadow_ = shadow_ || inbound->shadow();
    }
    if (from_helper) call_kind_ = tagged.call_kind;

    const absl::Time now = shared_.clock->Now();
    start_ = now;
    steady_start_ = shared_.clock->Steady();
    deadline_ = internal::DeadlineOf(info_->client_context()->raw_deadline(), now);
    deadline_source_ = from_helper                           ? tagged.source
                       : deadline_ == absl::InfiniteFuture() ? DeadlineSource::kNone
                                                             : DeadlineSource::kClient;
    deadline_budget_ = from_helper && tagged.budget != absl::InfiniteDuration()
                           ? tagged.budget
                           : deadline_ - start_;
    budget_start_ =
        from_helper && tagged.budget_start != absl::InfinitePast() ? tagged.budget_start : start_;
    absl::Time enforce = absl::InfiniteFuture();
    if (!from_helper) CheckLeak(now, &enforce);
    // A unary call of a Hop's method on a channel that does not retry it is
    // one attempt: the method's attempt cap (perAttemptRecvTimeout) bounds
    // it. The retrying channel caps its own attempts; a stream may last as
    // long as its request (DownstreamScope::kRequest), and its silence is
    // what its idle budget bounds.
    if (called != nullptr && !shadow_ && call_kind_ != ClientCallKind::kRetryAttempt &&
        !IsStreaming(info_->type())) {
      const absl::Time cap = now + called->budget.attempt_cap;  // saturates
      if (cap < std::min(deadline_, enforce)) {
        enforce = cap;
        enforce_source_ = DeadlineSource::kAttempt;
        enforce_budget_ = called->budget.attempt_cap;
      }
    }
    const absl::Time effective = std::min(deadline_, enforce);
    effective_deadline_ = effective;
    const absl::Duration remaining = effective - now;

    const bool fail_fast =
        deadline_source_ == DeadlineSource::kExhaustedBeforeCall ||
        (effective != absl::InfiniteFuture() && remaining < shared_.min_call_budget);
    if (shadow_) {
      // A request in shadow mode: the call goes out as it came, and gRPC
      // alone ends it (at its deadline, even one already passed).
      if (fail_fast || tagged.shadow_would_fail_fast) {
        internal::Record(*shared_.metrics).CountShadow(ShadowAction::kFailFast);
      }
      if (deadline_source_ == DeadlineSource::kExhaustedBeforeCall) {
        deadline_source_ = tagged.logical_source;
      }
      return true;
    }
    if (fail_fast) {
      FailFast(remaining);
      return false;
    }
    if (shared_.send_budget_header && effective != absl::InfiniteFuture()) {
      std::string header = FormatBudgetHeader(remaining);
      if (!header.empty()) {
        md->emplace(kBudgetHeader, std::move(header));
        // Stamped with the budget: the server takes whatever the call waits
        // from here on off it (transit.h).
        md->emplace(kSentHeader, FormatSentHeader(internal::ProcessClockId(), steady_start_));
      }
    }
    if (enforce != absl::InfiniteFuture() || idle != absl::InfiniteDuration()) {
      enforce_deadline_ = enforce;
      idle_ = idle;
      last_activity_ns_.store(absl::ToUnixNanos(now), std::memory_order_relaxed);
      internal::Record(*shared_.metrics).CountTimerArmed();
      ArmTimer(NextTimerAt());
    }
    return true;
  }

  // What a held call needs, shared by the interceptor and the watch: the
  // watch may still fire after a cancel released the call and the call
  // ended. Only the thread that clears `held` touches `self` and `batch`.
  //
  // The wait is measured on the steady clock, as gRPC measures the call's
  // own deadline once the call has started: a step of the wall clock (NTP,
  // a resumed VM) must not end a wait gRPC would still let run.
  struct BackendHold {
    std::atomic<bool> held{true};
    ClientBudgetInterceptor* self = nullptr;
    InterceptorBatchMethods* batch = nullptr;
    std::shared_ptr<grpc::Channel> channel;
    absl::Time deadline;  // steady
    absl::Duration min_call_budget;
    Clock* clock = nullptr;
    absl::Time since;  // steady: when the wait began
  };

  enum class BackendCheck { kGo, kHeld, kFailed };

  // Decides with DecideBackendWait whether the call goes now, waits for a
  // ready backend (held) or ends with no-backend at once (failed: hijacked).
  BackendCheck CheckBackend(InterceptorBatchMethods* m) {
    if (backend_wait_ != BackendWait::kWithinBudget) return BackendCheck::kGo;
    grpc::ChannelInterface* channel = info_->channel();
    grpc_connectivity_state state = channel->GetState(false);
    // An idle channel connects for a call that is sent; one that is held
    // must ask it to.
    if (state == GRPC_CHANNEL_IDLE) state = channel->GetState(true);
    const absl::Time now = shared_.clock->Now();
    const BackendWaitStep step = DecideBackendWait(
        internal::BackendStateOf(state), effective_deadline_, shared_.min_call_budget, now);
    if (step.outcome == BackendWaitOutcome::kGo) return BackendCheck::kGo;
    if (step.outcome == BackendWaitOutcome::kGiveUp) {
      internal::Record(*shared_.metrics).ObserveBackendWait(absl::ZeroDuration());
      internal::Record(*shared_.metrics)
          .CountDeadlineExceeded(Side::kClient, DeadlineSource::kNoBackend, shared_.hop);
      internal::Record(*shared_.metrics)
          .EndClientAttempt(method_, absl::StatusCode::kDeadlineExceeded, absl::ZeroDuration(),
                            call_kind_);
      SetHijackAttribution(
          {DeadlineSource::kNoBackend, shared_.hop, deadline_budget_, now - budget_start_});
      return BackendCheck::kFailed;
    }
    auto* concrete = dynamic_cast<grpc::Channel*>(channel);
    std::shared_ptr<grpc::Channel> owned =
        concrete != nullptr ? concrete->weak_from_this().lock() : nullptr;
    if (owned == nullptr) return BackendCheck::kGo;  // not one we can watch: gRPC decides
    auto hold = std::make_shared<BackendHold>();
    hold->self = this;
    hold->batch = m;
    hold->channel = std::move(owned);
    const absl::Time steady = shared_.clock->Steady();
    hold->deadline = steady + (effective_deadline_ - now);
    hold->min_call_budget = shared_.min_call_budget;
    hold->clock = shared_.clock;
    hold->since = steady;
    hold_elapsed_before_ = now - budget_start_;
    hold_ = hold;
    hold_ptr_.store(hold.get(), std::memory_order_release);
    WatchBackend(std::move(hold), state, step.until - now);
    return BackendCheck::kHeld;
  }

  static void WatchBackend(std::shared_ptr<BackendHold> hold, grpc_connectivity_state last,
                           absl::Duration timeout) {
    std::shared_ptr<grpc::Channel> channel = hold->channel;
    internal::BackendWatch::Shared().Watch(
        std::move(channel), last, timeout,
        [hold = std::move(hold)](bool) mutable { OnBackendChange(std::move(hold)); });
  }

  // On the watch thread: the state changed, or the give-up time came.
  static void OnBackendChange(std::shared_ptr<BackendHold> hold) {
    if (!hold->held.load(std::memory_order_acquire)) return;  // a cancel released it
    const grpc_connectivity_state state = hold->channel->GetState(true);
    const absl::Time now = hold->clock->Steady();
    const BackendWaitStep step = DecideBackendWait(internal::BackendStateOf(state), hold->deadline,
                                                   hold->min_call_budget, now);
    if (step.outcome == BackendWaitOutcome::kWait) {
      WatchBackend(std::move(hold), state, step.until - now);
      return;
    }
    if (!hold->held.exchange(false, std::memory_order_acq_rel)) return;
    hold->self->EndHold(step.outcome == BackendWaitOutcome::kGiveUp, now - hold->since,
                        hold->batch);
  }

  // Sends the held call, or ends it as no-backend: our own cancel, turned
  // into DEADLINE_EXCEEDED by Classify(). Proceed() is the last touch: the
  // call may end and free this at once.
  void EndHold(bool give_up, absl::Duration waited, InterceptorBatchMethods* batch) {
    internal::Record(*shared_.metrics).ObserveBackendWait(waited);
    // A stream's idle budget counts from when it is sent.
    last_activity_ns_.store(absl::ToUnixNanos(shared_.clock->Now()), std::memory_order_relaxed);
    if (give_up) {
      fired_elapsed_ns_.store(absl::ToInt64Nanoseconds(hold_elapsed_before_ + waited),
                              std::memory_order_relaxed);
      fired_.store(DeadlineSource::kNoBackend, std::memory_order_release);
      info_->client_context()->TryCancel();
    }
    batch->Proceed();
  }

  bool WaitingForBackend() const {
    const BackendHold* hold = hold_ptr_.load(std::memory_order_acquire);
    return hold != nullptr && hold->held.load(std::memory_order_acquire);
  }

  // A cancel (the caller's TryCancel, or our own timer's) ends the wait at
  // once: the held batch goes on to fail, and Classify() reports CANCELLED
  // (or our timer's budget) whatever gRPC answers a call sent with no ready
  // backend. The batch is proceeded from the shared timer's thread, not
  // here: this runs inside ClientContext::TryCancel(), under its lock, and
  // a completion run inline from Proceed() may call TryCancel() again.
  void ReleaseOnCancel() {
    BackendHold* hold = hold_ptr_.load(std::memory_order_acquire);
    if (hold == nullptr || !hold->held.exchange(false, std::memory_order_acq_rel)) return;
    released_by_cancel_.store(true, std::memory_order_release);
    internal::Record(*shared_.metrics).ObserveBackendWait(shared_.clock->Steady() - hold->since);
    InterceptorBatchMethods* batch = hold->batch;
    internal::TimerService::Shared().Schedule(absl::InfinitePast(), [batch] { batch->Proceed(); });
  }

  // A plain ClientContext used inside an InboundScope must not outlive the
  // inbound budget. gRPC will not let us shorten its deadline, so the timer
  // enforces the derived one.
  void CheckLeak(absl::Time now, absl::Time* enforce) {
    const InboundBudget* inbound = internal::CurrentInbound();
    if (inbound == nullptr || inbound->deadline() == absl::InfiniteFuture()) return;
    // In shadow mode a leak is counted, and the call left as it is.
    const bool enforce_it = !inbound->shadow();
    const CallDeadline derived =
        DeriveCallDeadline(inbound->policy(), inbound->deadline(), inbound->source(), now);
    if (deadline_ == absl::InfiniteFuture()) {
      Leak(LeakKind::kNoDeadline);
    } else if (deadline_ > inbound->deadline()) {
      Leak(LeakKind::kLaterThanInbound);
    }
    if (enforce_it && derived.deadline < deadline_) {
      *enforce = derived.deadline;
      enforce_source_ = derived.outcome == CallOutcome::kExhausted
                            ? DeadlineSource::kExhaustedBeforeCall
                            : derived.source;
      if (enforce_source_ == DeadlineSource::kExhaustedBeforeCall) {
        deadline_source_ = DeadlineSource::kExhaustedBeforeCall;
      }
      enforce_budget_ = derived.budget;
    }
  }

  void Leak(LeakKind kind) {
    internal::Record(*shared_.metrics).CountLeak(kind);
    LogLeakOnce(info_->method(), kind);
  }

  void FailFast(absl::Duration remaining) {
    internal::Record(*shared_.metrics)
        .CountDeadlineExceeded(Side::kClient, DeadlineSource::kExhaustedBeforeCall, shared_.hop);
    internal::Record(*shared_.metrics)
        .EndClientAttempt(method_, absl::StatusCode::kDeadlineExceeded,
                          shared_.clock->Now() - start_, call_kind_);
    SetHijackAttribution({DeadlineSource::kExhaustedBeforeCall, shared_.hop,
                          std::max(remaining, absl::ZeroDuration()), absl::ZeroDuration()});
  }

  void SetHijackAttribution(const Attribution& a) {
    hijack_status_ = internal::AttributedStatus(a);
    for (internal::TrailerPair& p : internal::AttributionTrailerPairs(a)) {
      hijack_trailers_.emplace_back(p.key, std::move(p.value));
    }
  }

  // After Hijack() nothing reaches the network: answer every later batch
  // here, as the retrying channel answers its hijacked calls (no message:
  // sends and reads fail).
  void ServeHijacked(InterceptorBatchMethods* m) {
    internal::HijackedAnswer answer;
    answer.status = &hijack_status_;
    answer.trailing_metadata = &hijack_trailers_;
    internal::AnswerHijackedBatch(m, answer);
  }

  absl::Time NextTimerAt() const {
    absl::Time at = enforce_deadline_;
    if (idle_ != absl::InfiniteDuration()) {
      at = std::min(at,
                    absl::FromUnixNanos(last_activity_ns_.load(std::memory_order_relaxed)) + idle_);
    }
    return at;
  }

  // The lock orders the id stores: a callback that fires at once and re-arms
  // must not have its newer id overwritten by the older one.
  void ArmTimer(absl::Time at) {
    armed_.store(true, std::memory_order_release);
    internal::CallMutexLock lock(&timer_mu_);
    timer_ = shared_.timers->Schedule(at, [this] { OnTimer(); });
  }

  internal::TimerService::TimerId CurrentTimer() {
    internal::CallMutexLock lock(&timer_mu_);
    return timer_;
  }

  // Runs on the timer thread. Either a budget is spent, or stream activity
  // moved the idle horizon and the timer is re-armed for it.
  void OnTimer() {
    if (done_.load(std::memory_order_acquire)) return;
    const absl::Time now = shared_.clock->Now();
    DeadlineSource fire = DeadlineSource::kNone;
    if (now >= enforce_deadline_) {
      fire = enforce_source_;
    } else if (idle_ != absl::InfiniteDuration() && WaitingForBackend()) {
      // A stream held for a backend has not started: it cannot be idle.
      last_activity_ns_.store(absl::ToUnixNanos(now), std::memory_order_relaxed);
    } else if (idle_ != absl::InfiniteDuration() &&
               now - absl::FromUnixNanos(last_activity_ns_.load(std::memory_order_relaxed)) >=
                   idle_) {
      fire = DeadlineSource::kIdle;
    }
    if (fire == DeadlineSource::kNone) {
      ArmTimer(NextTimerAt());
      return;
    }
    // Measured now: the failed read that the cancel causes counts as
    // activity too.
    fired_elapsed_ns_.store(
        absl::ToInt64Nanoseconds(
            fire == DeadlineSource::kIdle
                ? now - absl::FromUnixNanos(last_activity_ns_.load(std::memory_order_relaxed))
                : now - start_),
        std::memory_order_relaxed);
    fired_.store(fire, std::memory_order_release);
    info_->client_context()->TryCancel();
  }

  void StopTimer() {
    done_.store(true, std::memory_order_release);
    // Most calls never arm one. Only OnStart() arms a first timer, before
    // any status, and only a timer re-arms: none can appear after this.
    if (!armed_.load(std::memory_order_acquire)) return;
    // Cancel waits for a running callback; that callback may have re-armed,
    // so cancel until the id stops changing.
    for (;;) {
      const auto id = CurrentTimer();
      if (id == 0) return;
      shared_.timers->Cancel(id);
      if (CurrentTimer() == id) return;
    }
  }

  // The wall time now as the call measures it: its start plus the steady
  // time since, as gRPC measures the call's deadline once it has started.
  // A step of the wall clock since then (NTP, a resumed VM) does not make
  // the answer of a call that still had time look like its own deadline's.
  absl::Time CallNow() const { return start_ + (shared_.clock->Steady() - steady_start_); }

  void OnStatus(InterceptorBatchMethods* m) {
    StopTimer();
    Classify(m);
    internal::Record(*shared_.metrics)
        .EndClientAttempt(method_, static_cast<absl::StatusCode>(m->GetRecvStatus()->error_code()),
                          shared_.clock->Steady() - steady_start_, call_kind_);
    if (inbound_key_ != 0) ReportToInbound(*m->GetRecvTrailingMetadata());
  }

  // Tells the inbound call this one serves that it ended, with the callee's
  // trace when it sent a usable one.
  void ReportToInbound(const std::multimap<grpc::string_ref, grpc::string_ref>& trailers) {
    auto it = trailers.find(kTraceTrailer);
    if (it == trailers.end()) {
      internal::RecordDownstreamCall(inbound_key_, inbound_id_, nullptr);
      return;
    }
    absl::StatusOr<BudgetTrace> trace =
        DecodeTrace(absl::string_view(it->second.data(), it->second.size()));
    if (!trace.ok())
      internal::Record(*shared_.metrics).CountTraceDropped(DropReason(trace.status()));
    internal::RecordDownstreamCall(inbound_key_, inbound_id_, trace.ok() ? &*trace : nullptr);
  }

  // Attributes a DEADLINE_EXCEEDED answer (and turns our own cancel into one).
  void Classify(InterceptorBatchMethods* m) {
    grpc::Status* status = m->GetRecvStatus();
    const absl::Time now = CallNow();
    const DeadlineSource fired = fired_.load(std::memory_order_acquire);
    if (released_by_cancel_.load(std::memory_order_acquire) &&
        status->error_code() != grpc::StatusCode::CANCELLED) {
      // Sent with no ready backend because a cancel ended its wait: gRPC may
      // answer UNAVAILABLE before the cancel lands.
      *status =
          grpc::Status(grpc::StatusCode::CANCELLED, "cancelled while waiting for a ready backend");
    }
    // A give-up that came late (the watch's timer is coarser than the 1 ms
    // of min_call_budget it leaves) finds gRPC's own deadline answering:
    // still ours.
    const bool own_end = status->error_code() == grpc::StatusCode::CANCELLED ||
                         (fired == DeadlineSource::kNoBackend &&
                          status->error_code() == grpc::StatusCode::DEADLINE_EXCEEDED);
    if (fired != DeadlineSource::kNone && own_end) {
      // Our own cancel: convert it. Budget = the one that fired, elapsed
      // from its start (the last stream activity for an idle budget) until
      // it fired. gRPC's "CANCELLED" says nothing the callee said: dropped.
      *status = internal::AttributedStatus(
          {fired, shared_.hop,
           fired == DeadlineSource::kIdle        ? idle_
           : fired == DeadlineSource::kNoBackend ? deadline_budget_
                                                 : enforce_budget_,
           absl::Nanoseconds(fired_elapsed_ns_.load(std::memory_order_relaxed))});
      internal::Record(*shared_.metrics).CountDeadlineExceeded(Side::kClient, fired, shared_.hop);
      return;
    }
    if (status->error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) return;

    // The decision is ClassifyClientDeadline (classify.h); this reads its
    // inputs off the call and applies the verdict.
    ClientCall call;
    call.start = start_;
    call.deadline = deadline_;
    call.deadline_source = deadline_source_;
    call.budget = deadline_budget_;
    call.budget_start = budget_start_;
    call.hop = shared_.hop;
    const ReceivedAttribution received{
        ReadStatusDetails(status->error_details()),
        ReadAttributionMessage(status->error_message()),
        ReadAttributionTrailers(internal::AttributionTrailersOf(*m->GetRecvTrailingMetadata())),
    };
    const ClientVerdict v = ClassifyClientDeadline(call, received, now);
    for (int i = 0; i < v.malformed_forms; ++i)
      internal::Record(*shared_.metrics).CountBadAttribution();
    if (v.rewrite) Rewrite(status, v);
    internal::Record(*shared_.metrics)
        .CountDeadlineExceeded(Side::kClient, v.counted_source, v.counted_hop);
  }

  // What the callee said (its message's text, its own details) stays beside
  // the attribution. When this call's own budget fired, the text is gRPC's
  // local "Deadline Exceeded" (or the callee's account of the same
  // deadline), which the attribution already says: only the details stay.
  static void Rewrite(grpc::Status* status, const ClientVerdict& v) {
    const bool own = v.kind == ClientVerdictKind::kOwnBudget;
    *status = internal::AttributedStatus(v.attribution,
                                         own ? absl::string_view() : status->error_message(),
                                         status->error_details());
  }

  const ClientShared& shared_;
  grpc::experimental::ClientRpcInfo* const info_;
  const MethodId method_;
  // The source tag a typed retry loop handed over in process (see the
  // constructor); when none, OnStart reads the metadata form.
  absl::optional<internal::SourceTag> handed_tag_;
  // The inbound call this one serves (0: none), set in OnStart().
  uintptr_t inbound_key_ = 0;
  uint64_t inbound_id_ = 0;
  // Set in OnStart(), before any timer is armed; read-only afterwards.
  absl::Time start_;
  absl::Time steady_start_;  // Clock::Steady() at start_
  ClientCallKind call_kind_ = ClientCallKind::kPlainCall;
  absl::Time deadline_ = absl::InfiniteFuture();
  DeadlineSource deadline_source_ = DeadlineSource::kNone;
  absl::Duration deadline_budget_ = absl::InfiniteDuration();  // length, for attribution
  absl::Time budget_start_;  // when that budget started: elapsed is measured from it
  absl::Time enforce_deadline_ = absl::InfiniteFuture();
  DeadlineSource enforce_source_ = DeadlineSource::kNone;
  absl::Duration enforce_budget_ = absl::ZeroDuration();
  absl::Duration idle_ = absl::InfiniteDuration();
  absl::Time effective_deadline_ = absl::InfiniteFuture();  // min(deadline_, enforce)
  BackendWait backend_wait_ = BackendWait::kWithinBudget;   // the channel's, or the call's

  // Set while the call waits for a ready backend (CheckBackend).
  std::shared_ptr<BackendHold> hold_;
  absl::Duration hold_elapsed_before_;           // of the budget, when the wait began
  std::atomic<BackendHold*> hold_ptr_{nullptr};  // for a cancel on another thread
  std::atomic<bool> released_by_cancel_{false};

  std::atomic<int64_t> last_activity_ns_{0};
  internal::CallMutex timer_mu_;
  internal::TimerService::TimerId timer_ ABSL_GUARDED_BY(timer_mu_) = 0;
  std::atomic<bool> armed_{false};  // a timer was ever armed
  std::atomic<bool> done_{false};
  std::atomic<DeadlineSource> fired_{DeadlineSource::kNone};
  std::atomic<int64_t> fired_elapsed_ns_{0};  // written before fired_

  bool hijacked_ = false;
  // Made for a request in shadow mode: counted, left as it is (OnStart).
  bool shadow_ = false;
  grpc::Status hijack_status_;
  internal::MetadataPairs hijack_trailers_;  // lives as long as the call
};

class ClientFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit ClientFactory(ClientShared shared)
      : own_timers_(shared.clock == &Clock::Real()
                        ? nullptr
                        : std::make_unique<internal::TimerService>(*shared.clock)),
        shared_(WithTimers(std::move(shared), own_timers_.get())) {}

  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* info) override {
    return new ClientBudgetInterceptor(&shared_, info);
  }

 private:
  static ClientShared WithTimers(ClientShared shared, internal::TimerService* own) {
    shared.timers = own != nullptr ? own : &internal::TimerService::Shared();
    return shared;
  }
  const std::unique_ptr<internal::TimerService> own_timers_;
  const ClientShared shared_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
MakeClientInterceptorFactory(ClientOptions options) {
  return internal::MakeClientInterceptorFactory(std::move(options), nullptr);
}

namespace internal {

BackendWait BackendWaitOfCall(BackendWait channel, absl::optional<bool> method_wait_for_ready,
                              absl::optional<BackendWait> call) {
  if (call.has_value()) return *call;
  if (method_wait_for_ready.has_value()) {
    return *method_wait_for_ready ? BackendWait::kWithinBudget : BackendWait::kFailFast;
  }
  return channel;
}

absl::optional<BackendWait> CallBackendWait(const absl::optional<std::string>& value) {
  if (!value.has_value()) return absl::nullopt;
  return *value == BackendWaitName(BackendWait::kFailFast) ? BackendWait::kFailFast
                                                           : BackendWait::kWithinBudget;
}

absl::StatusOr<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
MakeClientInterceptorFactory(ClientOptions options, const Hop* hop) {
  if (absl::Status s = ValidateHopName(options.hop); !s.ok()) return s;
  if (options.min_call_budget < absl::ZeroDuration() ||
      options.min_call_budget == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("hopbudget client options: min_call_budget (",
                                                   FormatBudget(options.min_call_budget),
                                                   ") must be finite and >= 0"));
  }
  if (options.stream_idle_budget <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hopbudget client options: stream_idle_budget (", FormatBudget(options.stream_idle_budget),
        ") must be > 0 (InfiniteDuration() turns it off)"));
  }
  ClientShared shared{std::move(options.hop),
                      options.min_call_budget,
                      options.send_budget_header,
                      options.stream_idle_budget,
                      options.backend_wait,
                      options.clock != nullptr ? options.clock : &Clock::Real(),
                      options.metrics != nullptr ? options.metrics : &Metrics::Default(),
                      nullptr,
                      hop};
  return std::make_unique<ClientFactory>(std::move(shared));
}

}  // namespace internal

namespace {

absl::StatusOr<std::shared_ptr<grpc::Channel>> BuildChannel(
    const std::string& target, const std::shared_ptr<grpc::ChannelCredentials>& creds,
    ClientOptions options, const grpc::ChannelArguments& args, const Hop* hop) {
  auto factory = internal::MakeClientInterceptorFactory(std::move(options), hop);
  if (!factory.ok()) return factory.status();
  absl::StatusOr<grpc::ChannelArguments> channel_args = internal::WithChannelDefaults(args);
  if (!channel_args.ok()) return channel_args.status();
  // After the defaults: the Hop's config for core keeps the retries of its
  // methods in shadow mode, which WithChannelDefaults would remove.
  if (hop != nullptr) *channel_args = internal::WithHopServiceConfig(*hop, *channel_args);
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> creators;
  creators.push_back(*std::move(factory));
  return grpc::experimental::CreateCustomChannelWithInterceptors(target, creds, *channel_args,
                                                                 std::move(creators));
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::Channel>> CreateChannel(
    const std::string& target, const std::shared_ptr<grpc::ChannelCredentials>& creds,
    ClientOptions options, const grpc::ChannelArguments& args) {
  return BuildChannel(target, creds, std::move(options), args, nullptr);
}

ClientOptions ClientOptionsFor(const Hop& hop) {
  ClientOptions options = internal::WithHopIdentity(hop, ClientOptions{});
  options.min_call_budget = hop.policies().Default().budget.min_attempt_budget;
  return options;
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> CreateChannel(
    const Hop& hop, const std::string& target,
    const std::shared_ptr<grpc::ChannelCredentials>& creds, const grpc::ChannelArguments& args) {
  return CreateChannel(hop, ClientOptionsFor(hop), target, creds, args);
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> CreateChannel(
    const Hop& hop, ClientOptions options, const std::string& target,
    const std::shared_ptr<grpc::ChannelCredentials>& creds, const grpc::ChannelArguments& args) {
  return BuildChannel(target, creds, internal::WithHopIdentity(hop, std::move(options)), args,
                      &hop);
}

absl::string_view BackendWaitName(BackendWait value) {
  switch (value) {
    case BackendWait::kWithinBudget:
      return "within_budget";
    case BackendWait::kFailFast:
      return "fail_fast";
  }
  return "unknown";
}

void SetBackendWait(grpc::ClientContext& ctx, BackendWait wait) {
  ctx.AddMetadata(internal::kInternalBackendWaitKey, std::string(BackendWaitName(wait)));
}

void SetStreamIdleBudget(grpc::ClientContext& ctx, absl::Duration idle) {
  // Infinite is sent as an empty value (FormatBudgetHeader gives "" for it).
  ctx.AddMetadata(internal::kInternalIdleKey,
                  idle == absl::InfiniteDuration() ? "" : FormatBudgetHeader(idle));
}

absl::optional<Attribution> AttributionOf(const grpc::Status& status) {
  if (status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) return absl::nullopt;
  if (auto a = DecodeStatusDetails(status.error_details())) return a;
  return ParseAttributionMessage(status.error_message());
}

void RequestTrace(grpc::ClientContext& ctx) { ctx.AddMetadata(kTraceRequestHeader, "1"); }

BudgetTrace TraceOf(const grpc::ClientContext& finished_call) {
  const auto& trailers = finished_call.GetServerTrailingMetadata();
  auto it = trailers.find(kTraceTrailer);
  if (it == trailers.end()) return {};
  absl::StatusOr<BudgetTrace> trace =
      DecodeTrace(absl::string_view(it->second.data(), it->second.size()));
  return trace.ok() ? *std::move(trace) : BudgetTrace{};
}

}  // namespace hopbudget
