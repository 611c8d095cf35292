// Copyright hopbudget authors.
//
// The server interceptor: derives each inbound call's request budget when the
// call arrives, refuses calls that cannot be served in time, enforces the
// per-request cap, and attributes DEADLINE_EXCEEDED answers.
#include <grpc/grpc.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_interceptor.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <functional>
#include <map>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "admission_gate.h"
#include "attempt_result.h"
#include "attributed_status.h"
#include "call_mutex.h"
#include "grpc_glue.h"
#include "hopbudget/advanced/attribution.h"
#include "hopbudget/advanced/classify.h"
#include "hopbudget/advanced/policy_table.h"
#include "hopbudget/advanced/wire.h"
#include "hopbudget/server.h"
#include "metrics_recorder.h"
#include "timer_service.h"
#include "transit.h"

namespace hopbudget {

namespace internal {
struct InboundBudgetAccess {
  static InboundBudget Make(const RequestBudget& budget, const std::string* hop,
                            const BudgetPolicy* policy, Clock* clock,
                            const grpc::ServerContextBase* ctx, bool trace_requested) {
    return InboundBudget(budget, hop, policy, clock, NextId(), reinterpret_cast<uintptr_t>(ctx),
                         trace_requested);
  }
  // Unique per process. Each thread takes ids from a block of its own: one
  // counter shared by every call moved its cache line between cores on
  // every arrival.
  static uint64_t NextId() {
    constexpr uint64_t kBlock = 1024;
    static std::atomic<uint64_t> next_block{1};
    thread_local uint64_t next = 0;
    thread_local uint64_t end = 0;
    if (next == end) {
      next = next_block.fetch_add(kBlock, std::memory_order_relaxed);
      end = next + kBlock;
    }
    return next++;
  }
  static uint64_t Id(const InboundBudget& b) { return b.id_; }
  // Admission's refusals, decided before the handler starts (which reads it
  // after the Proceed() that starts it).
  static void SetOutcome(InboundBudget& b, ArrivalOutcome outcome) { b.budget_.outcome = outcome; }
  static uintptr_t Key(const InboundBudget& b) { return b.key_; }
  // Shadow mode: the real policy and the budget it would have given.
  static void SetShadowed(InboundBudget& b, const BudgetPolicy* policy,
                          const RequestBudget& would) {
    b.shadowed_policy_ = policy;
    b.shadowed_ = would;
  }
  static const BudgetPolicy* ShadowedPolicy(const InboundBudget& b) { return b.shadowed_policy_; }
  static const RequestBudget& Shadowed(const InboundBudget& b) { return b.shadowed_; }
};
}  // namespace internal

namespace {

using grpc::experimental::InterceptionHookPoints;

// What the downstream calls of one inbound call reported: their number and
// their traces, gathered for the inbound call's own answer.
class DownstreamLog {
 public:
  void Record(const BudgetTrace* trace) {
    internal::CallMutexLock lock(&mu_);
    ++calls_;
    if (trace != nullptr) AppendTrace(trace_, *trace);
  }
  int calls() const {
    internal::CallMutexLock lock(&mu_);
    return calls_;
  }
  // Appends what was gathered after `into`'s entries.
  void AppendTo(BudgetTrace& into) const {
    internal::CallMutexLock lock(&mu_);
    AppendTrace(into, trace_);
  }
  void RetrySkipped(RetryOutcome outcome) {
    internal::CallMutexLock lock(&mu_);
    retry_skipped_ = outcome;
  }
  RetryOutcome retry_skipped() const {
    internal::CallMutexLock lock(&mu_);
    return retry_skipped_;
  }

 private:
  mutable internal::CallMutex mu_;
  RetryOutcome retry_skipped_ ABSL_GUARDED_BY(mu_) = RetryOutcome::kSucceeded;  // none
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
  BudgetTrace trace_ ABSL_GUARDED_BY(mu_);
};

struct InboundEntry {
  const InboundBudget* budget;
  DownstreamLog* downstream;
};

// Maps a ServerContext to the budget of its call, so that a handler can find
// what the interceptor derived. Sharded so that calls on different contexts
// rarely meet on a lock; an entry lives exactly as long as its interceptor.
class InboundRegistry {
 public:
  static InboundRegistry& Get() {
    static InboundRegistry* const registry = new InboundRegistry();
    return *registry;
  }
  void Insert(const grpc::ServerContextBase* ctx, InboundEntry entry) {
    Shard& s = ShardFor(ctx);
    internal::CallMutexLock lock(&s.mu);
    s.map[ctx] = entry;
  }
  void Remove(const grpc::ServerContextBase* ctx, const InboundBudget* budget) {
    Shard& s = ShardFor(ctx);
    internal::CallMutexLock lock(&s.mu);
    auto it = s.map.find(ctx);
    if (it != s.map.end() && it->second.budget == budget) s.map.erase(it);
  }
  const InboundBudget* Find(const grpc::ServerContextBase* ctx) {
    Shard& s = ShardFor(ctx);
    internal::CallMutexLock lock(&s.mu);
    auto it = s.map.find(ctx);
    return it == s.map.end() ? nullptr : it->second.budget;
  }
  // Under the shard's lock, so the entry cannot go while it is written.
  void RecordDownstream(uintptr_t key, uint64_t id, const BudgetTrace* trace) {
    const auto* ctx = reinterpret_cast<const grpc::ServerContextBase*>(key);
    Shard& s = ShardFor(ctx);
    internal::CallMutexLock lock(&s.mu);
    auto it = s.map.find(ctx);
    if (it == s.map.end() || internal::InboundBudgetAccess::Id(*it->second.budget) != id) return;
    it->second.downstream->Record(trace);
  }
  void RecordRetrySkipped(uintptr_t key, uint64_t id, RetryOutcome outcome) {
    const auto* ctx = reinterpret_cast<const grpc::ServerContextBase*>(key);
    Shard& s = ShardFor(ctx);
    internal::CallMutexLock lock(&s.mu);
    auto it = s.map.find(ctx);
    if (it == s.map.end() || internal::InboundBudgetAccess::Id(*it->second.budget) != id) return;
    it->second.downstream->RetrySkipped(outcome);
  }
  // `key` is an address taken from a tag: only compared, and used as a
  // context only while it is registered with the same id. The child keeps
  // the inbound core call alive (gRPC child calls hold a ref on the parent).
  std::unique_ptr<grpc::ClientContext> NewChild(uintptr_t key, uint64_t id) {
    const auto* ctx = reinterpret_cast<const grpc::ServerContextBase*>(key);
    Shard& s = ShardFor(ctx);
    internal::CallMutexLock lock(&s.mu);
    auto it = s.map.find(ctx);
    if (it == s.map.end() || internal::InboundBudgetAccess::Id(*it->second.budget) != id) {
      return nullptr;
    }
    return grpc::ClientContext::FromServerContext(*ctx);
  }

 private:
  struct Shard {
    internal::CallMutex mu;
    absl::flat_hash_map<const grpc::ServerContextBase*, InboundEntry> map ABSL_GUARDED_BY(mu);
  };
  Shard& ShardFor(const grpc::ServerContextBase* ctx) {
    // absl::Hash mixes the bits: std::hash of a pointer is the address, whose
    // low bits (alignment) are zero, which would use a few shards only.
    return shards_[absl::Hash<const void*>()(ctx) % shards_.size()];
  }
  std::array<Shard, 32> shards_;
};

struct ServerShared {
  std::string hop;
  BudgetPolicy policy;  // every call's, unless `hop_config` resolves it per method
  const Hop* hop_config = nullptr;
  TraceMode trace;
  Clock* clock;
  Metrics* metrics;
  internal::TimerService* timers;
  internal::AdmissionGate* gate;  // nullptr: admission off
  internal::TransitDelays* transit;
};

// What a call of one method is served under.
struct ServedPolicy {
  BudgetPolicy budget;
  bool shadow = false;    // MethodPolicy::shadow: count what `budget` would do, do none of it
  bool admission = true;  // MethodPolicy::admission: held to the gate, when there is one
};

// The budgets of a call of `full_method`: the server's one policy, or its
// Hop's entry for the method, whose timeout caps the request; gRPC's own
// services uncapped unless an entry names them (InboundPolicy). Downstream
// attempts take the attempt cap of the table's default entry: the entry of
// a method describes calls of that method, and a downstream call is a call
// of another one.
ServedPolicy PolicyOf(const ServerShared& shared, MethodId method, const char* full_method) {
  if (shared.hop_config == nullptr) {
    return {InboundPolicy(shared.policy, full_method, nullptr), false, true};
  }
  const Hop::Resolved r = shared.hop_config->Resolve(method, full_method);  // one table
  BudgetPolicy p = r.method->budget;
  p.attempt_cap = r.table_default->budget.attempt_cap;
  return {InboundPolicy(p, full_method, &shared.hop_config->policies()), r.method->shadow,
          r.method->admission};
}

// A waiting call gives up with this much left: no downstream attempt could
// start in less (min_attempt_budget after the hop's reserve), and the
// refusal must still reach the caller before its own deadline fires.
absl::Duration GiveUpMargin(const BudgetPolicy& policy) {
  return policy.min_attempt_budget + policy.hop_reserve;
}

// The budget header gives the caller's deadline earlier than gRPC does,
// always: gRPC rounds grpc-timeout up (by up to ~3 %), and stamps it when the
// call is written, later than the header. gRPC's later deadline is close
// enough for a call that came straight here, which needs no timer of ours
// (the common path arms none), and for jitter of a few ms; one that waited
// on its way longer than this (transit.h) is ended by this hop, a little
// after its caller's deadline: the caller's own timer fires at that
// deadline, and its cut, with its own attribution, must win the race.
constexpr absl::Duration kOwnTimerTransit = absl::Milliseconds(20);
constexpr absl::Duration kCallerCutsFirst = absl::Milliseconds(10);
// The backstop's span for a call that arrived with its deadline passed:
// its handler has nothing to do but return.
constexpr absl::Duration kExpiredBackstop = absl::Milliseconds(200);

ArrivalOutcome OutcomeOf(ArrivalDecision d) {
  switch (d) {
    case ArrivalDecision::kShedCannotFinish:
      return ArrivalOutcome::kShedCannotFinish;
    case ArrivalDecision::kShedQueueExpired:
      return ArrivalOutcome::kShedQueueExpired;
    default:
      return ArrivalOutcome::kShedOverload;
  }
}

// The headers of ours that a call brought.
struct OwnHeaders {
  const grpc::string_ref* budget = nullptr;    // the first kBudgetHeader; points into the map
  const grpc::string_ref* sent = nullptr;      // the first kSentHeader; likewise
  const grpc::string_ref* attempts = nullptr;  // the first kPreviousAttemptsHeader; likewise
  bool trace_requested = false;                // kTraceRequestHeader, whatever its value
};

// All our headers start with kKeyPrefix: one descent of the sorted map
// finds them, where a find() per header compared every key on its path.
static_assert(HasKeyPrefix(kBudgetHeader) && HasKeyPrefix(kTraceRequestHeader) &&
              HasKeyPrefix(kPreviousAttemptsHeader) && HasKeyPrefix(kSentHeader));
OwnHeaders FindOwnHeaders(const std::multimap<grpc::string_ref, grpc::string_ref>& md) {
  static const grpc::string_ref kPrefix(kKeyPrefix);
  OwnHeaders own;
  for (auto it = md.lower_bound(kPrefix); it != md.end() && it->first.starts_with(kPrefix); ++it) {
    // string_view's == compares the sizes first; string_ref's always calls
    // memcmp().
    const absl::string_view key(it->first.data(), it->first.size());
    if (own.budget == nullptr && key == kBudgetHeader) own.budget = &it->second;
    if (own.sent == nullptr && key == kSentHeader) own.sent = &it->second;
    if (own.attempts == nullptr && key == kPreviousAttemptsHeader) own.attempts = &it->second;
    if (key == kTraceRequestHeader) own.trace_requested = true;
  }
  return own;
}

// A hopbudget caller's gRPC core drops grpc-previous-rpc-attempts while its
// retries are on; the count came under our own name too (wire.h). The
// handler reads it where gRFC A6 puts it. The map holds views into the
// call's own metadata, which outlives it.
void RestoreAttemptCount(std::multimap<grpc::string_ref, grpc::string_ref>& md,
                         const grpc::string_ref& attempts) {
  static const grpc::string_ref kGrpcKey(internal::kGrpcPreviousAttemptsHeader);
  if (md.find(kGrpcKey) == md.end()) md.emplace(kGrpcKey, attempts);
}

class ServerBudgetInterceptor final : public grpc::experimental::Interceptor,
                                      public internal::AdmissionClient {
 public:
  ServerBudgetInterceptor(const ServerShared* shared, grpc::experimental::ServerRpcInfo* info)
      : shared_(*shared),
        ctx_(info->server_context()),
        method_name_(info->method()),
        method_(shared->metrics->Method(method_name_)),
        served_(PolicyOf(*shared, method_, method_name_)),
        arrival_(shared->clock->Now()) {}

  ~ServerBudgetInterceptor() override {
    CancelTimer();
    ReleaseAdmission(absl::StatusCode::kCancelled);
    if (budget_.has_value()) {
      InboundRegistry::Get().Remove(ctx_, &*budget_);
      // Answered without our PRE_SEND_STATUS hook: cancelled by gRPC, by a
      // deadline, or by our own refusal or request cap.
      if (!answered_) {
        const absl::Time now = shared_.clock->Now();
        const ServerVerdict v = ClassifyServerEnd(Call(), now);
        if (v.count) {
          internal::Record(*shared_.metrics)
              .CountDeadlineExceeded(Side::kServer, v.counted_source, v.counted_hop);
        }
        Finish(v.code, v.fired, now);
      }
    }
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* m) override {
    if (m->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      // Held for admission: Admitted() or Shed() proceeds, on another
      // thread, and may already have.
      if (OnArrival(*m->GetRecvInitialMetadata(), m) == Arrival::kWaiting) return;
    }
    if (m->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      OnSendStatus(m);
    }
    m->Proceed();
  }

 private:
  enum class Arrival { kGoOn, kWaiting };

  Arrival OnArrival(std::multimap<grpc::string_ref, grpc::string_ref>& md,
                    grpc::experimental::InterceptorBatchMethods* m) {
    if (budget_.has_value()) return Arrival::kGoOn;
    const absl::Time grpc_deadline = internal::DeadlineOf(ctx_->raw_deadline(), arrival_);
    absl::Time inbound = grpc_deadline;
    absl::Duration transit = absl::ZeroDuration();
    const OwnHeaders own = FindOwnHeaders(md);
    if (own.attempts != nullptr) RestoreAttemptCount(md, *own.attempts);
    if (own.budget != nullptr) {
      ParsedBudget parsed =
          ParseBudgetHeader(absl::string_view(own.budget->data(), own.budget->size()));
      if (parsed.result == HeaderParse::kOk) {
        // Only ever shrinks: by what the call waited on its way, which
        // gRPC's relative grpc-timeout does not see.
        transit = TransitDelay(own.sent);
        inbound = std::min(inbound, arrival_ + parsed.budget - transit);
      } else {
        internal::Record(*shared_.metrics).CountBadBudgetHeader(parsed.result);
      }
    }
    const RequestBudget would = DeriveRequestBudget(served_.budget, inbound, arrival_);
    // Shadow mode: the call runs under gRPC's own deadline, as without
    // hopbudget; what `would` does is counted, now (a refusal) or when the
    // call ends (a cut).
    const RequestBudget rb =
        served_.shadow ? PassThroughRequestBudget(grpc_deadline, arrival_) : would;
    if (served_.shadow) transit = absl::ZeroDuration();
    const bool caller_wants_trace = own.trace_requested;
    send_trace_ = caller_wants_trace || shared_.trace == TraceMode::kAlways;
    // A call kept for /deadlinez asks its downstream calls for their traces,
    // so that its waterfall is whole.
    sampled_ = internal::Record(*shared_.metrics).SampleOnArrival(arrival_);
    budget_.emplace(internal::InboundBudgetAccess::Make(
        rb, &shared_.hop, served_.shadow ? &PassThroughPolicy() : &served_.budget, shared_.clock,
        ctx_, caller_wants_trace || sampled_));
    if (served_.shadow) {
      internal::InboundBudgetAccess::SetShadowed(*budget_, &served_.budget, would);
      if (ShadowActionAt(would, arrival_) == ShadowAction::kRefuse) {
        internal::Record(*shared_.metrics).CountShadow(ShadowAction::kRefuse);
      }
    }
    InboundRegistry::Get().Insert(ctx_, InboundEntry{&*budget_, &downstream_});
    // What the caller brought, before this hop's caps; then what this hop
    // allows itself.
    internal::Record(*shared_.metrics)
        .ObserveArrivalBudgets(
            method_,
            inbound == absl::InfiniteFuture() ? absl::InfiniteDuration() : inbound - arrival_,
            rb.budget_on_arrival);

    if (rb.outcome != ArrivalOutcome::kAccepted) {
      internal::Record(*shared_.metrics)
          .CountDeadlineExceeded(Side::kServer, DeadlineSource::kArrivedExpired, shared_.hop);
      // The handler sees refused() and returns; its answer goes out through
      // OnSendStatus with the attribution in every form. Only a cancel can
      // answer for a handler that does not return, and a cancel carries the
      // message form alone: it is the backstop, halfway to the deadline.
      // A call whose deadline has passed too is answered the same way, not
      // cancelled at once: gRPC's cancel costs the server more than an
      // answer (docs/overload.md), and such calls are most of what an
      // overloaded hop reads.
      ArmBackstop(arrival_, rb.budget_on_arrival > absl::ZeroDuration() ? rb.budget_on_arrival
                                                                        : kExpiredBackstop);
      return Arrival::kGoOn;
    }
    if (rb.source == DeadlineSource::kRequest) {
      // The cap is tighter than the caller's deadline: gRPC will not enforce
      // it, so the shared timer service does.
      ArmTimer(rb.deadline);
    } else if (transit > kOwnTimerTransit && rb.deadline + kCallerCutsFirst < grpc_deadline) {
      // gRPC's deadline is later than the caller's by about the wait.
      ArmTimer(rb.deadline + kCallerCutsFirst);
    }
    // Admission holds calls back and refuses them: a method in shadow mode,
    // or one its entry keeps out of admission, is not held to it.
    if (shared_.gate != nullptr && !served_.shadow && served_.admission) return Admit(rb, m);
    return Arrival::kGoOn;
  }

  // The transit delay of a call stamped `sent` (transit.h); zero without a
  // stamp, or with one that does not parse (a stamp can only shrink a
  // budget, so ignoring one is safe).
  absl::Duration TransitDelay(const grpc::string_ref* sent) {
    if (sent == nullptr) return absl::ZeroDuration();
    const ParsedSentStamp stamp = ParseSentHeader(absl::string_view(sent->data(), sent->size()));
    if (stamp.result != HeaderParse::kOk) return absl::ZeroDuration();
    const absl::Duration d = shared_.transit->Observe(stamp.stamp, shared_.clock->Steady());
    internal::Record(*shared_.metrics).ObserveTransitDelay(d);
    return d;
  }

  Arrival Admit(const RequestBudget& rb, grpc::experimental::InterceptorBatchMethods* m) {
    const internal::AdmissionGate::Method& method = shared_.gate->For(method_name_);
    if (!method.covered) return Arrival::kGoOn;
    predictor_ = method.predictor.get();
    pending_ = m;  // before the waiter is visible to other threads
    waiter_.user = static_cast<internal::AdmissionClient*>(this);
    Admission::Ready others;
    Admission& admission = shared_.gate->admission();
    const ArrivalDecision d = admission.Arrive(&waiter_, rb.deadline, predictor_, &others);
    internal::Record(*shared_.metrics).CountAdmission(d);
    internal::Record(*shared_.metrics)
        .SetAdmissionState(admission.in_flight(), admission.queued(), admission.limit());
    shared_.gate->Dispatch(others);
    switch (d) {
      case ArrivalDecision::kAdmit:
        admitted_ = true;
        handler_start_ = shared_.clock->Now();
        predicted_ = predictor_->Predicted(handler_start_);
        return Arrival::kGoOn;
      case ArrivalDecision::kQueue:
        // From here on another thread owns this call until it proceeds.
        shared_.gate->Queued(waiter_.expiry);
        return Arrival::kWaiting;
      default:
        MarkShed(d);
        return Arrival::kGoOn;
    }
  }

  // internal::AdmissionClient, on the gate's workers.
  void Admitted() override {
    admitted_ = true;
    handler_start_ = shared_.clock->Now();
    predicted_ = predictor_->Predicted(handler_start_);
    internal::Record(*shared_.metrics).CountAdmittedAfterWait(handler_start_ - waiter_.enqueued);
    pending_->Proceed();
  }
  void Shed(ArrivalDecision why) override {
    internal::Record(*shared_.metrics).CountAdmission(why);
    MarkShed(why);
    pending_->Proceed();
  }

  // Refuses the call for admission's reason `why`: the handler sees
  // refused(); the answer goes out through OnSendStatus.
  void MarkShed(ArrivalDecision why) {
    shed_ = why;
    const ArrivalOutcome outcome = OutcomeOf(why);
    internal::InboundBudgetAccess::SetOutcome(*budget_, outcome);
    if (outcome != ArrivalOutcome::kShedOverload) {
      internal::Record(*shared_.metrics)
          .CountDeadlineExceeded(Side::kServer, ServerCutAttribution(Call(), arrival_).source,
                                 shared_.hop);
    }
    const RequestBudget& rb = budget_->request_budget();
    if (rb.deadline == absl::InfiniteFuture()) return;
    const absl::Duration left = rb.deadline - shared_.clock->Now();
    if (left <= absl::ZeroDuration()) {
      CancelNow();
    } else if (timer_ == 0) {
      ArmBackstop(shared_.clock->Now(), left);
    }
  }

  // An admitted call answered (or ended): its place goes to the next.
  void ReleaseAdmission(absl::StatusCode code) {
    if (!admitted_ || released_) return;
    released_ = true;
    const absl::Time now = shared_.clock->Now();
    const absl::Duration handler_time = now - handler_start_;
    // Only answers that finished teach the prediction "time to finish".
    if (code == absl::StatusCode::kOk) predictor_->Record(handler_time, now);
    internal::Record(*shared_.metrics).ObserveAdmittedHandler(handler_time, predicted_);
    Admission& admission = shared_.gate->admission();
    Admission::Ready ready;
    // Only finished work is a latency sample for the adaptive limit, as for
    // the prediction (admission.h).
    admission.Release(
        code == absl::StatusCode::kOk ? absl::make_optional(handler_time) : absl::nullopt, &ready);
    internal::Record(*shared_.metrics)
        .SetAdmissionState(admission.in_flight(), admission.queued(), admission.limit());
    shared_.gate->Dispatch(ready);
  }

  void ArmTimer(absl::Time at, absl::Duration slack = absl::ZeroDuration()) {
    internal::Record(*shared_.metrics).CountTimerArmed();
    grpc_call* call = ctx_->c_call();
    grpc_call_ref(call);
    timer_call_ = call;
    timer_ = shared_.timers->Schedule(at, slack, [this] { OnTimer(); });
  }

  // A refusal's backstop, for a handler that does not return: a cancel
  // between halfway and three quarters of the way from `from` to the
  // deadline `left` later. It almost never fires, and with that slack
  // arming it does not wake the timer thread once per refusal.
  void ArmBackstop(absl::Time from, absl::Duration left) { ArmTimer(from + left / 2, left / 4); }

  // The call as the core's classification sees it.
  ServerCall Call() const {
    ServerCall call;
    call.budget = budget_->request_budget();
    call.hop = shared_.hop;
    call.cut_by_this_hop = request_fired_.load(std::memory_order_acquire);
    return call;
  }

  // Cancels the call with this hop's own cut. gRPC core sends a cancel's
  // status and message only (grpc_call_cancel_with_status takes no
  // trailers): the message form is all the caller gets.
  void CancelNow() {
    request_fired_.store(true, std::memory_order_release);
    grpc_call_cancel_with_status(
        ctx_->c_call(), GRPC_STATUS_DEADLINE_EXCEEDED,
        FormatAttributionMessage(ServerCutAttribution(Call(), shared_.clock->Now())).c_str(),
        nullptr);
  }

  // Runs on the timer thread: the request cap, or the backstop of a refusal.
  void OnTimer() {
    request_fired_.store(true, std::memory_order_release);
    // Counted before the cancel: once the caller has its answer, the count
    // must already be visible. A refusal was counted on arrival.
    if (!budget_->refused()) {
      internal::Record(*shared_.metrics)
          .CountDeadlineExceeded(Side::kServer,
                                 ServerCutAttribution(Call(), shared_.clock->Now()).source,
                                 shared_.hop);
    }
    grpc_call_cancel_with_status(
        timer_call_, GRPC_STATUS_DEADLINE_EXCEEDED,
        FormatAttributionMessage(ServerCutAttribution(Call(), shared_.clock->Now())).c_str(),
        nullptr);
    ReleaseCall();
  }

  void CancelTimer() {
    if (timer_ == 0) return;
    if (shared_.timers->Cancel(timer_) == internal::TimerService::CancelOutcome::kCancelled) {
      ReleaseCall();
    }
    timer_ = 0;
  }

  void ReleaseCall() {
    grpc_call* call = timer_call_;
    timer_call_ = nullptr;
    if (call != nullptr) grpc_call_unref(call);
  }

  void OnSendStatus(grpc::experimental::InterceptorBatchMethods* m) {
    CancelTimer();
    if (!budget_.has_value() || answered_) return;
    const grpc::Status status = m->GetSendStatus();
    const absl::StatusCode code = static_cast<absl::StatusCode>(status.error_code());
    ReleaseAdmission(code);
    // Only a DEADLINE_EXCEEDED's relayed attribution is read: the common
    // path parses nothing.
    ReceivedAttribution relayed;
    if (code == absl::StatusCode::kDeadlineExceeded) {
      relayed.details = ReadStatusDetails(status.error_details());
      relayed.message = ReadAttributionMessage(status.error_message());
    }
    const absl::Time now = shared_.clock->Now();
    const ServerVerdict v = ClassifyServerAnswer(Call(), code, relayed, now);
    for (int i = 0; i < v.malformed_forms; ++i)
      internal::Record(*shared_.metrics).CountBadAttribution();
    if (v.count) {
      internal::Record(*shared_.metrics)
          .CountDeadlineExceeded(Side::kServer, v.counted_source, v.counted_hop);
    }
    if (v.overload_shed) {
      AnswerOverloadShed(m);
    } else if (v.replace) {
      // A refusal ignores what the handler said; anything else keeps what
      // the callee said (its message's text, its own details) beside the
      // attribution.
      const bool refused = budget_->refused();
      m->ModifySendStatus(internal::AttributedStatus(
          v.attribution, refused ? absl::string_view() : status.error_message(),
          refused ? absl::string_view() : status.error_details()));
      internal::AddAttributionTrailers(v.attribution, m->GetSendTrailingMetadata());
    }
    // The trace goes out on failures and when asked for: building and
    // serializing it is most of this interceptor's cost per call.
    if (send_trace_ || v.code != absl::StatusCode::kOk) {
      m->GetSendTrailingMetadata()->emplace(kTraceTrailer,
                                            EncodeTrace(Finish(v.code, v.fired, now)));
    } else {
      Finish(v.code, v.fired, now);
    }
  }

  // RESOURCE_EXHAUSTED, with what a caller needs to back off rather than
  // retry at once: gRFC A6's pushback, and why.
  void AnswerOverloadShed(grpc::experimental::InterceptorBatchMethods* m) {
    const absl::string_view reason = ArrivalDecisionName(shed_);
    const absl::Duration pushback = shared_.gate->policy().pushback;
    m->ModifySendStatus(grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        absl::StrCat("hopbudget: shed at ", shared_.hop, " (", reason, "): over its limit of ",
                     shared_.gate->admission().limit(), " calls in progress; retry after ",
                     absl::ToInt64Milliseconds(pushback), " ms")));
    auto* trailers = m->GetSendTrailingMetadata();
    trailers->emplace(kShedTrailer, std::string(reason));
    trailers->emplace(kHopTrailer, shared_.hop);
    if (pushback > absl::ZeroDuration()) {
      trailers->emplace(kPushbackHeader, absl::StrCat(absl::ToInt64Milliseconds(pushback)));
    }
  }

  // Counts the answer, remembers the call for /deadlinez (a sample), and
  // returns this hop's trace: its own entry, then what its downstream calls
  // reported. The trace is built only when it is used. `now`: the answer's
  // time, as the caller read it for the verdict.
  BudgetTrace Finish(absl::StatusCode code, DeadlineSource fired, absl::Time now) {
    answered_ = true;
    const RequestBudget& rb = budget_->request_budget();
    if (budget_->shadow() && ShadowActionAt(internal::InboundBudgetAccess::Shadowed(*budget_),
                                            now) == ShadowAction::kCut) {
      internal::Record(*shared_.metrics).CountShadow(ShadowAction::kCut);
    }
    internal::Record(*shared_.metrics).EndServerCall(method_, code, now - arrival_);
    if (rb.deadline != absl::InfiniteFuture()) {
      internal::Record(*shared_.metrics).ObserveBudgetRemaining(method_, rb.deadline - now);
    }
    auto make_trace = [&] {
      BudgetTrace trace;
      HopTrace self;
      self.hop = shared_.hop;
      self.budget_at_arrival =
          rb.deadline == absl::InfiniteFuture() ? absl::InfiniteDuration() : rb.budget_on_arrival;
      self.spent = now - arrival_;
      self.attempts = downstream_.calls();
      self.code = code;
      self.source = fired;
      trace.hops.push_back(std::move(self));
      downstream_.AppendTo(trace);
      return trace;
    };
    internal::Record(*shared_.metrics).RecordRecentCall(code, sampled_, [&] {
      return RecentCall{method_name_, arrival_,     code,
                        fired,        make_trace(), downstream_.retry_skipped()};
    });
    return send_trace_ || code != absl::StatusCode::kOk ? make_trace() : BudgetTrace{};
  }

  const ServerShared& shared_;
  grpc::ServerContextBase* const ctx_;
  const char* const method_name_;  // owned by the server's method table
  const MethodId method_;
  // This call's budgets, resolved once: the call keeps them through a
  // reload of its Hop's table.
  const ServedPolicy served_;
  const absl::Time arrival_;
  absl::optional<InboundBudget> budget_;
  DownstreamLog downstream_;
  // Written by the send-status hook or the destructor, which gRPC orders.
  bool answered_ = false;
  bool send_trace_ = false;  // set on arrival
  bool sampled_ = false;     // kept for /deadlinez whatever the outcome
  internal::TimerService::TimerId timer_ = 0;
  grpc_call* timer_call_ = nullptr;  // ref held while the timer is armed
  // Admission (when on and this method is covered). A waiting call is owned
  // by the gate's threads from Arrive() until Admitted()/Shed() proceeds it.
  Admission::Waiter waiter_;
  grpc::experimental::InterceptorBatchMethods* pending_ = nullptr;
  LatencyPredictor* predictor_ = nullptr;  // owned by the gate
  bool admitted_ = false;
  bool released_ = false;
  absl::Time handler_start_;
  absl::optional<absl::Duration> predicted_;  // when admitted
  ArrivalDecision shed_ = ArrivalDecision::kAdmit;
  std::atomic<bool> request_fired_{false};
};

class ServerFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  // Timers must read the same clock as the budgets they enforce: the real
  // clock shares the process-wide service, any other clock gets its own.
  ServerFactory(ServerShared shared, const AdmissionOptions& admission)
      : own_timers_(shared.clock == &Clock::Real()
                        ? nullptr
                        : std::make_unique<internal::TimerService>(*shared.clock)),
        transit_(*internal::TransitDelays::Create({})),
        shared_(WithTimers(std::move(shared), own_timers_.get(), transit_.get())) {
    if (admission.enabled) {
      // Validated by MakeServerInterceptorFactory.
      gate_ = *internal::AdmissionGate::Create(admission, GiveUpMargin(shared_.policy),
                                               shared_.clock, shared_.timers);
      shared_.gate = gate_.get();
    }
  }
  const internal::AdmissionGate* gate() const { return gate_.get(); }
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new ServerBudgetInterceptor(&shared_, info);
  }

 private:
  static ServerShared WithTimers(ServerShared shared, internal::TimerService* own,
                                 internal::TransitDelays* transit) {
    shared.timers = own != nullptr ? own : &internal::TimerService::Shared();
    shared.transit = transit;
    return shared;
  }
  const std::unique_ptr<internal::TimerService> own_timers_;
  const std::unique_ptr<internal::TransitDelays> transit_;  // the default options are valid
  ServerShared shared_;
  std::unique_ptr<internal::AdmissionGate> gate_;  // outlives no call: the server ends first
};

}  // namespace

absl::StatusOr<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
MakeServerInterceptorFactory(ServerOptions options) {
  if (absl::Status s = ValidateHopName(options.hop); !s.ok()) return s;
  if (absl::Status s = ValidatePolicy(options.policy); !s.ok()) return s;
  if (options.admission.enabled) {
    // The same checks the factory's gate repeats, reported here.
    auto gate = internal::AdmissionGate::Create(options.admission, GiveUpMargin(options.policy),
                                                &Clock::Real(), &internal::TimerService::Shared());
    if (!gate.ok()) return gate.status();
  }
  ServerShared shared{std::move(options.hop),
                      options.policy,
                      nullptr,
                      options.trace,
                      options.clock != nullptr ? options.clock : &Clock::Real(),
                      options.metrics != nullptr ? options.metrics : &Metrics::Default(),
                      nullptr,
                      nullptr,
                      nullptr};
  return std::make_unique<ServerFactory>(std::move(shared), options.admission);
}

absl::StatusOr<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
MakeServerInterceptorFactory(const Hop& hop, const AdmissionOptions& admission, TraceMode trace) {
  // Admission's give-up margin is the hop's default entry's (one gate for
  // every method).
  const BudgetPolicy& defaults = hop.policies().Default().budget;
  if (admission.enabled) {
    auto gate = internal::AdmissionGate::Create(admission, GiveUpMargin(defaults), &Clock::Real(),
                                                &internal::TimerService::Shared());
    if (!gate.ok()) return gate.status();
  }
  ServerShared shared{hop.name(),     defaults, &hop,    trace,  &hop.clock(),
                      &hop.metrics(), nullptr,  nullptr, nullptr};
  return std::make_unique<ServerFactory>(std::move(shared), admission);
}

absl::Status InstallServerInterceptor(const Hop& hop, grpc::ServerBuilder& builder,
                                      const AdmissionOptions& admission) {
  auto factory = MakeServerInterceptorFactory(hop, admission);
  if (!factory.ok()) return factory.status();
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
  creators.push_back(*std::move(factory));
  builder.experimental().SetInterceptorCreators(std::move(creators));
  return absl::OkStatus();
}

absl::optional<grpc::Status> Refusal(const grpc::ServerContextBase& inbound) {
  const InboundBudget* budget = InboundBudget::Of(inbound);
  if (budget == nullptr || !budget->refused()) return absl::nullopt;
  // The interceptor answers with the refusal's own status and attribution.
  return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "hopbudget: refused on arrival");
}

namespace internal {
std::unique_ptr<grpc::ClientContext> NewChildOfInbound(uintptr_t key, uint64_t id) {
  return InboundRegistry::Get().NewChild(key, id);
}
bool ShadowWouldFailFast(const InboundBudget& budget, absl::Duration attempt_cap,
                         bool whole_request, absl::Time now) {
  const BudgetPolicy* real = InboundBudgetAccess::ShadowedPolicy(budget);
  if (real == nullptr) return false;
  const RequestBudget& would = InboundBudgetAccess::Shadowed(budget);
  // A request hopbudget would have refused is counted once, as a refusal:
  // its handler would have made no downstream call.
  if (would.outcome != ArrivalOutcome::kAccepted) return false;
  BudgetPolicy policy = *real;
  policy.attempt_cap = whole_request ? attempt_cap : std::min(policy.attempt_cap, attempt_cap);
  return DeriveCallDeadline(policy, would.deadline, would.source, now).outcome ==
         CallOutcome::kExhausted;
}
uintptr_t InboundKey(const InboundBudget& budget, uint64_t* id) {
  *id = InboundBudgetAccess::Id(budget);
  return InboundBudgetAccess::Key(budget);
}
void RecordDownstreamCall(uintptr_t key, uint64_t id, const BudgetTrace* trace) {
  InboundRegistry::Get().RecordDownstream(key, id, trace);
}
void RecordRetrySkipped(uintptr_t key, uint64_t id, RetryOutcome outcome) {
  if (key == 0 || outcome == RetryOutcome::kSucceeded || outcome == RetryOutcome::kRetry) return;
  InboundRegistry::Get().RecordRetrySkipped(key, id, outcome);
}
}  // namespace internal

absl::optional<AdmissionStats> AdmissionStatsOf(
    const grpc::experimental::ServerInterceptorFactoryInterface& factory) {
  const auto* ours = dynamic_cast<const ServerFactory*>(&factory);
  if (ours == nullptr || ours->gate() == nullptr) return absl::nullopt;
  return const_cast<internal::AdmissionGate*>(ours->gate())->admission().Stats();
}

const InboundBudget* InboundBudget::Of(const grpc::ServerContextBase& context) {
  return InboundRegistry::Get().Find(&context);
}

absl::Duration InboundBudget::remaining() const {
  if (budget_.deadline == absl::InfiniteFuture()) return absl::InfiniteDuration();
  return budget_.deadline - clock_->Now();
}

}  // namespace hopbudget
