// Copyright hopbudget authors.
//
// The retrying interceptor (retry.h): hijacks a unary call, then runs each
// attempt as a new call through the rest of the interceptor chain, deriving
// every attempt's deadline from what is left of the logical call's.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/client_callback.h>
#include <grpcpp/support/client_interceptor.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include <algorithm>
#include <deque>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "attempt_result.h"
#include "call_mutex.h"
#include "channel_defaults.h"
#include "grpc_glue.h"
#include "hopbudget/attribution.h"
#include "hopbudget/retry.h"
#include "timer_service.h"

namespace hopbudget {
namespace {

using grpc::experimental::InterceptionHookPoints;
using grpc::experimental::InterceptorBatchMethods;

using internal::kPreviousAttemptsHeader;

struct RetryShared {
  explicit RetryShared(RetryThrottleOptions throttle_options) : throttle(throttle_options) {}

  std::string hop;
  BudgetPolicy budget;  // hop_reserve 0: the logical deadline already has it
  RetryPolicy retry;
  bool unfit = false;
  Clock* clock;
  Metrics* metrics;
  internal::TimerService* timers;
  RetryThrottle throttle;  // one per channel, that is per target

  enum class Mode { kPassThrough, kUnary, kServerStreaming };

  // How calls of `method` ("/pkg.Service/Method") are retried. Only methods
  // of protobuf services linked into this program qualify: for them the
  // application's response object is known to be a google::protobuf::Message.
  Mode ModeOf(const char* method) {
    {
      internal::SharedCallMutexReaderLock lock(&mu);
      auto it = known.find(method);
      if (it != known.end()) return it->second;
    }
    std::string name(method);
    if (!name.empty() && name[0] == '/') name.erase(0, 1);
    absl::StrReplaceAll({{"/", "."}}, &name);
    const auto* desc =
        google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(name);
    Mode mode = Mode::kPassThrough;
    if (desc != nullptr && !desc->client_streaming()) {
      mode = desc->server_streaming() ? Mode::kServerStreaming : Mode::kUnary;
    }
    internal::SharedCallMutexLock lock(&mu);
    known.emplace(method, mode);
    return mode;
  }
  internal::SharedCallMutex mu;
  absl::flat_hash_map<std::string, Mode> known ABSL_GUARDED_BY(mu);
};

class RetryInterceptor final : public grpc::experimental::Interceptor {
 public:
  RetryInterceptor(RetryShared* shared, grpc::experimental::ClientRpcInfo* info)
      : shared_(*shared), info_(info), method_(shared->metrics->Method(info->method())) {}

  void Intercept(InterceptorBatchMethods* m) override {
    if (passthrough_) {
      m->Proceed();
      return;
    }
    if (m->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_CANCEL)) {
      CancelLogical("cancelled by the caller");
      return;  // Proceed is a no-op for a cancel batch
    }
    if (m->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      using Type = grpc::experimental::ClientRpcInfo::Type;
      const RetryShared::Mode mode = shared_.ModeOf(info_->method());
      streaming_ = mode == RetryShared::Mode::kServerStreaming;
      if (mode == RetryShared::Mode::kPassThrough ||
          (info_->type() != Type::UNARY && info_->type() != Type::SERVER_STREAMING) ||
          (info_->type() == Type::SERVER_STREAMING) != streaming_) {
        passthrough_ = true;
        m->Proceed();
        return;
      }
      TakeLogicalCall(m);
      channel_ = m->GetInterceptedChannel();
      stub_ = std::make_unique<grpc::GenericStub>(channel_);
      if (shared_.unfit) shared_.metrics->CountUnfitPolicyCall();
      // Hijack() re-enters Intercept() at once with this batch's receive
      // hooks; they wait in pending_ until there is something to answer.
      m->Hijack();
      StartAttempt();
      return;
    }
    if (m->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_RECV_INITIAL_METADATA) ||
        m->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_RECV_MESSAGE) ||
        m->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_RECV_STATUS)) {
      Deliveries ready;
      StreamAttempt* read_more = nullptr;
      {
        internal::CallMutexLock lock(&mu_);
        pending_.push_back(m);
        ready = ServeLocked(&read_more);
      }
      if (read_more != nullptr) read_more->ReadNext();
      DeliverAll(std::move(ready));  // last action: see DeliverAll()
      return;
    }
    m->Proceed();
  }

 private:
  // One attempt of a server-streaming call, run as a generic bidi stream:
  // the request, a half-close, then reads one at a time as the application
  // asks for messages (no read-ahead, so flow control still works).
  //
  // Reads after the first are started from outside reactor callbacks, so
  // the attempt holds the stream open (AddHold) until a read has failed:
  // without the hold the stream could finish, and be freed, between the
  // decision to read and the read. A read therefore ends every stream: the
  // application's next read, or the one CancelLogical() starts.
  class StreamAttempt final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
   public:
    StreamAttempt(RetryInterceptor* owner, grpc::ClientContext* ctx) : owner_(owner), ctx_(ctx) {}
    void Start(grpc::GenericStub& stub, const char* method, const grpc::ByteBuffer* request) {
      stub.PrepareBidiStreamingCall(ctx_, method, grpc::StubOptions(), this);
      AddHold();
      StartWriteLast(request, grpc::WriteOptions());
      StartRead(&message_);
      StartCall();
    }
    void ReadNext() { StartRead(&message_); }
    void OnReadDone(bool ok) override {
      owner_->OnStreamMessage(this, ok);
      // No read follows a failed one: the stream may now finish. (OnDone
      // cannot run before this returns, so `this` is still valid.)
      if (!ok) RemoveHold();
    }
    // Last action: the owner may end the logical call, and with it this.
    void OnDone(const grpc::Status& s) override { owner_->OnAttemptDone(ctx_, s, this); }
    grpc::ClientContext* context() const { return ctx_; }
    grpc::ByteBuffer message_;

   private:
    RetryInterceptor* const owner_;
    grpc::ClientContext* const ctx_;
  };

  // A receive batch that can be answered now, and what to answer it with.
  struct Delivery {
    InterceptorBatchMethods* batch;
    absl::optional<grpc::ByteBuffer> message;  // for PRE_RECV_MESSAGE; none: fail it
  };
  using Deliveries = std::vector<Delivery>;

  void TakeLogicalCall(InterceptorBatchMethods* m) {
    auto* md = m->GetSendInitialMetadata();
    internal::SourceTag tag;
    if (auto it = md->find(internal::kInternalSourceKey); it != md->end()) {
      tag = internal::ParseSourceTag(it->second);
    }
    metadata_ = *md;
    metadata_.erase(internal::kInternalSourceKey);
    metadata_.erase(kPreviousAttemptsHeader);
    // NewDownstreamContext() found nothing left by the hop's own policy: the
    // first attempt carries that verdict, and fails without the network.
    logical_exhausted_ = tag.source == DeadlineSource::kExhaustedBeforeCall;
    const absl::Time now = shared_.clock->Now();
    if (tag.has_logical) {
      logical_deadline_ = tag.logical_deadline;
      logical_source_ = tag.logical_source;
      logical_budget_ = tag.logical_budget;
      logical_start_ = tag.logical_start != absl::InfinitePast() ? tag.logical_start : now;
    } else {
      logical_deadline_ = internal::ToAbslTime(info_->client_context()->deadline());
      logical_source_ = logical_deadline_ == absl::InfiniteFuture() ? DeadlineSource::kNone
                                                                    : DeadlineSource::kClient;
      logical_budget_ = logical_deadline_ - now;
      logical_start_ = now;
    }
    inbound_key_ = tag.inbound_key;
    inbound_id_ = tag.inbound_id;
    request_ = *m->GetSerializedSendMessage();
  }

  // Starts the next attempt, or ends the call when it was cancelled.
  void StartAttempt() {
    Deliveries finished;
    grpc::ClientContext* raw = nullptr;
    StreamAttempt* stream = nullptr;
    {
      internal::CallMutexLock lock(&mu_);
      if (done_) return;
      if (cancelled_) {
        finished = FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, cancel_reason_));
      } else {
        raw = PrepareAttemptLocked();
        if (streaming_) {
          streams_.push_back(std::make_unique<StreamAttempt>(this, raw));
          stream = streams_.back().get();
        } else {
          unary_response_.Clear();
        }
      }
    }
    if (raw == nullptr) {
      DeliverAll(std::move(finished));
      return;
    }
    // Outside the lock: the completion may run on this very thread.
    if (stream != nullptr) {
      stream->Start(*stub_, info_->method(), &request_);
    } else {
      stub_->UnaryCall(raw, info_->method(), grpc::StubOptions(), &request_, &unary_response_,
                       [this, raw](grpc::Status s) { OnAttemptDone(raw, s, nullptr); });
    }
  }

  grpc::ClientContext* PrepareAttemptLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const absl::Time now = shared_.clock->Now();
    const CallDeadline call =
        DeriveCallDeadline(shared_.budget, logical_deadline_, logical_source_, now);
    ++attempt_;
    // A child of the inbound call when there is one, so that its cancel
    // reaches the attempt at once, as it reaches any propagated call.
    std::unique_ptr<grpc::ClientContext> ctx;
    if (inbound_key_ != 0) ctx = internal::NewChildOfInbound(inbound_key_, inbound_id_);
    if (ctx == nullptr) ctx = std::make_unique<grpc::ClientContext>();
    for (const auto& [key, value] : metadata_) ctx->AddMetadata(key, value);
    if (attempt_ > 1) ctx->AddMetadata(kPreviousAttemptsHeader, absl::StrCat(attempt_ - 1));
    if (call.deadline != absl::InfiniteFuture()) {
      ctx->set_deadline(absl::ToChronoTime(call.deadline));
    }
    // The budget interceptor next in the chain attributes the attempt, and
    // fails an exhausted one without touching the network.
    internal::SourceTag tag;
    tag.source = call.outcome == CallOutcome::kExhausted || logical_exhausted_
                     ? DeadlineSource::kExhaustedBeforeCall
                     : call.source;
    tag.budget = call.source == DeadlineSource::kAttempt ? call.budget : logical_budget_;
    // The logical part is carried for the inbound call's identity: the budget
    // interceptor reports each attempt to it.
    tag.has_logical = true;
    tag.logical_deadline = logical_deadline_;
    tag.logical_source = logical_source_;
    tag.logical_budget = logical_budget_;
    tag.inbound_key = inbound_key_;
    tag.inbound_id = inbound_id_;
    tag.logical_start = logical_start_;
    tag.budget_start = call.source == DeadlineSource::kAttempt ? now : logical_start_;
    ctx->AddMetadata(internal::kInternalSourceKey, internal::FormatSourceTag(tag));
    ctx->AddMetadata(internal::kInternalAttemptKey, "1");
    attempts_.push_back(std::move(ctx));  // kept until the logical call ends
    return attempts_.back().get();
  }

  // A streaming attempt read a message (ok) or reached its end (!ok). The
  // first message commits the call to this attempt: no retry after it.
  void OnStreamMessage(StreamAttempt* stream, bool ok) {
    Deliveries ready;
    StreamAttempt* read_more = nullptr;
    {
      internal::CallMutexLock lock(&mu_);
      read_in_flight_ = false;
      if (!ok) {
        stream_ended_ = committed_;  // before commit, OnDone decides what follows
        ready = ServeLocked(&read_more);
      } else {
        if (!committed_) {
          committed_ = true;
          CopyMetadata(stream->context()->GetServerInitialMetadata(), &initial_md_);
        }
        ready_.push_back(std::move(stream->message_));
        stream->message_.Clear();
        ready = ServeLocked(&read_more);
      }
    }
    if (read_more != nullptr) read_more->ReadNext();
    DeliverAll(std::move(ready));
  }

  void OnAttemptDone(grpc::ClientContext* ctx, const grpc::Status& status_in,
                     StreamAttempt* stream) {
    grpc::Status status = status_in;
    AttemptResult result =
        internal::AttemptResultOf(status, ctx->GetServerTrailingMetadata(), shared_.hop);
    switch (ThrottleEffectOf(shared_.retry, result)) {
      case ThrottleEffect::kSuccess: shared_.throttle.RecordSuccess(); break;
      case ThrottleEffect::kFailure: shared_.throttle.RecordFailure(); break;
      case ThrottleEffect::kNone: break;
    }

    Deliveries finished;
    bool retry_now = false;
    {
      internal::CallMutexLock lock(&mu_);
      result.committed = committed_;
      if (stream == nullptr && status.ok()) ready_.push_back(std::move(unary_response_));
      if (cancelled_) {
        finished = FinishLocked(status.error_code() == grpc::StatusCode::CANCELLED
                                    ? grpc::Status(grpc::StatusCode::CANCELLED, cancel_reason_)
                                    : status,
                                ctx);
      } else {
        const RetryDecision d =
            DecideRetry(shared_.budget, shared_.retry, attempt_, result,
                        shared_.throttle.RetryAllowed(), logical_deadline_, shared_.clock->Now(),
                        JitterDrawLocked(result.code));
        shared_.metrics->CountRetryDecision(d.outcome);
        if (d.outcome != RetryOutcome::kRetry) {
          if (d.outcome == RetryOutcome::kNoRoom &&
              result.code != absl::StatusCode::kDeadlineExceeded) {
            // The error stands; say why no retry followed it.
            status = grpc::Status(status.error_code(),
                                  absl::StrCat(status.error_message(),
                                               " (hopbudget: no budget left for a retry)"),
                                  status.error_details());
          }
          internal::RecordRetrySkipped(inbound_key_, inbound_id_, d.outcome);
          finished = FinishLocked(status, ctx);
        } else {
          shared_.metrics->CountRetry(method_, result.code);
          if (d.backoff_clipped) shared_.metrics->CountBackoffClipped();
          if (result.pushback.kind == PushbackKind::kDelay) {
            shared_.metrics->CountPushbackHonoured();
          }
          if (d.backoff <= absl::ZeroDuration()) {
            retry_now = true;
          } else {
            backoff_timer_ = shared_.timers->Schedule(
                shared_.clock->Now() + d.backoff, [this] { OnBackoffDone(); });
          }
        }
      }
    }
    if (retry_now) {
      StartAttempt();
    } else {
      DeliverAll(std::move(finished));
    }
  }

  // The jitter draw DecideRetry() takes; a success is never retried, so it
  // draws nothing.
  double JitterDrawLocked(absl::StatusCode code) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (code == absl::StatusCode::kOk) return 0.0;
    if (!bitgen_.has_value()) bitgen_.emplace();
    return absl::Uniform(*bitgen_, 0.0, 1.0);
  }

  void OnBackoffDone() {
    {
      internal::CallMutexLock lock(&mu_);
      backoff_timer_ = 0;
    }
    StartAttempt();
  }

  // Runs on the caller's TryCancel(): it only signals, and never ends the
  // call inline.
  void CancelLogical(const char* reason) {
    grpc::ClientContext* in_flight = nullptr;
    StreamAttempt* drain = nullptr;
    internal::TimerService::TimerId timer = 0;
    {
      internal::CallMutexLock lock(&mu_);
      if (done_ || cancelled_) return;
      cancelled_ = true;
      cancel_reason_ = reason;
      if (!attempts_.empty()) in_flight = attempts_.back().get();
      if (committed_ && !read_in_flight_ && !stream_ended_ && !streams_.empty()) {
        read_in_flight_ = true;
        drain = streams_.back().get();
      }
      timer = backoff_timer_;
    }
    // Outside the lock: TryCancel runs the attempt's interceptors. A finished
    // attempt ignores it; one not started yet starts cancelled.
    if (in_flight != nullptr) in_flight->TryCancel();
    // A committed stream with no read outstanding stays open on its hold
    // until a read fails: start one, which the cancel fails at once.
    if (drain != nullptr) drain->ReadNext();
    if (timer != 0 &&
        shared_.timers->Cancel(timer) == internal::TimerService::CancelOutcome::kCancelled) {
      // The wait was cut short: end the call on the timer thread.
      shared_.timers->Schedule(absl::InfinitePast(), [this] { OnBackoffDone(); });
    }
  }

  static void CopyMetadata(const std::multimap<grpc::string_ref, grpc::string_ref>& from,
                           std::vector<std::pair<std::string, std::string>>* to) {
    for (const auto& [k, v] : from) {
      to->emplace_back(std::string(k.data(), k.size()), std::string(v.data(), v.size()));
    }
  }

  // Records the final answer; returns the receive batches it answers.
  Deliveries FinishLocked(grpc::Status status, grpc::ClientContext* last = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (done_) return {};
    done_ = true;
    stream_ended_ = true;
    final_status_ = std::move(status);
    if (last != nullptr) {
      if (!committed_) CopyMetadata(last->GetServerInitialMetadata(), &initial_md_);
      CopyMetadata(last->GetServerTrailingMetadata(), &trailing_md_);
    }
    shared_.metrics->EndRetryingCall(method_,
                                     static_cast<absl::StatusCode>(final_status_.error_code()),
                                     attempt_, shared_.clock->Now() - started_);
    return ServeLocked(nullptr);
  }

  // Answers the pending receive batches that can be answered now. Batches
  // are independent (the callback API keeps its status batch pending from
  // the start; reads come one at a time), so one that must wait does not
  // hold up the others. Sets *read_more when a streaming read must start.
  Deliveries ServeLocked(StreamAttempt** read_more) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Deliveries out;
    std::deque<InterceptorBatchMethods*> waiting;
    for (InterceptorBatchMethods* m : pending_) {
      const bool wants_status =
          m->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_RECV_STATUS);
      const bool wants_message =
          m->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_RECV_MESSAGE);
      const bool wants_metadata =
          m->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_RECV_INITIAL_METADATA);
      Delivery d{m, absl::nullopt};
      bool now = true;
      if (wants_status && !done_) {
        now = false;
      } else if (wants_message) {
        if (!ready_.empty()) {
          d.message = std::move(ready_.front());
          ready_.pop_front();
        } else if (!stream_ended_) {
          now = false;
          if (read_more != nullptr && committed_ && !read_in_flight_ && !streams_.empty()) {
            read_in_flight_ = true;
            *read_more = streams_.back().get();
          }
        }
      } else if (wants_metadata && !committed_ && !done_) {
        now = false;
      }
      if (now) {
        out.push_back(std::move(d));
      } else {
        waiting.push_back(m);
      }
    }
    pending_ = std::move(waiting);
    // The status last: once it proceeds the call may be gone.
    std::stable_partition(out.begin(), out.end(), [](const Delivery& d) {
      return !d.batch->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_RECV_STATUS);
    });
    return out;
  }

  // Must be the caller's last action: once the batch holding the status
  // proceeds, the application may destroy the call, and this interceptor.
  void DeliverAll(Deliveries deliveries) {
    for (Delivery& d : deliveries) Deliver(d);
  }

  // Fills one hijacked receive batch and lets it proceed. The metadata and
  // status it reads are immutable by then (set before commit / done).
  void Deliver(Delivery& d) {
    InterceptorBatchMethods* m = d.batch;
    if (m->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_RECV_INITIAL_METADATA)) {
      auto* map = m->GetRecvInitialMetadata();
      for (const auto& [k, v] : initial_md_) map->emplace(k, v);
    }
    if (m->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_RECV_MESSAGE)) {
      bool parsed = false;
      if (d.message.has_value()) {
        // ModeOf() established that the message is a generated protobuf
        // message (single inheritance from Message, so the cast is exact).
        auto* msg = static_cast<google::protobuf::Message*>(m->GetRecvMessage());
        grpc::ProtoBufferReader reader(&*d.message);
        parsed = msg->ParseFromZeroCopyStream(&reader);
      }
      if (!parsed) m->FailHijackedRecvMessage();
    }
    if (m->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_RECV_STATUS)) {
      *m->GetRecvStatus() = final_status_;
      auto* map = m->GetRecvTrailingMetadata();
      for (const auto& [k, v] : trailing_md_) map->emplace(k, v);
    }
    m->Proceed();
  }

  RetryShared& shared_;
  grpc::experimental::ClientRpcInfo* const info_;
  const MethodId method_;
  const absl::Time started_ = shared_.clock->Now();  // the logical call's, for its latency
  bool passthrough_ = false;
  bool streaming_ = false;

  // Set before the first attempt; read-only afterwards.
  std::multimap<std::string, std::string> metadata_;
  grpc::ByteBuffer request_;
  absl::Time logical_deadline_ = absl::InfiniteFuture();
  DeadlineSource logical_source_ = DeadlineSource::kNone;
  absl::Duration logical_budget_ = absl::InfiniteDuration();
  absl::Time logical_start_;  // when the logical budget started
  bool logical_exhausted_ = false;
  uintptr_t inbound_key_ = 0;  // the inbound call this one serves, if any
  uint64_t inbound_id_ = 0;
  std::shared_ptr<grpc::ChannelInterface> channel_;
  std::unique_ptr<grpc::GenericStub> stub_;

  internal::CallMutex mu_;
  int attempt_ ABSL_GUARDED_BY(mu_) = 0;
  // Every attempt's context and stream, kept until the logical call ends.
  std::vector<std::unique_ptr<grpc::ClientContext>> attempts_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<StreamAttempt>> streams_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer unary_response_;  // written by the unary attempt in flight
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  std::string cancel_reason_ ABSL_GUARDED_BY(mu_);
  internal::TimerService::TimerId backoff_timer_ ABSL_GUARDED_BY(mu_) = 0;
  // Seeded on the first failure: seeding draws from absl's shared entropy
  // pool, which most calls, ending OK, never need.
  absl::optional<absl::BitGen> bitgen_ ABSL_GUARDED_BY(mu_);
  std::deque<InterceptorBatchMethods*> pending_ ABSL_GUARDED_BY(mu_);
  std::deque<grpc::ByteBuffer> ready_ ABSL_GUARDED_BY(mu_);  // responses not yet delivered
  bool committed_ ABSL_GUARDED_BY(mu_) = false;     // a streaming response arrived
  bool read_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool stream_ended_ ABSL_GUARDED_BY(mu_) = false;  // no more messages will arrive
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  // Written once under mu_ (at commit or done), read-only afterwards.
  grpc::Status final_status_;
  std::vector<std::pair<std::string, std::string>> initial_md_;
  std::vector<std::pair<std::string, std::string>> trailing_md_;
};

class RetryFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit RetryFactory(std::unique_ptr<RetryShared> shared, std::unique_ptr<internal::TimerService> own)
      : own_timers_(std::move(own)), shared_(std::move(shared)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* info) override {
    return new RetryInterceptor(shared_.get(), info);
  }

 private:
  const std::unique_ptr<internal::TimerService> own_timers_;
  const std::unique_ptr<RetryShared> shared_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::Channel>> CreateRetryingChannel(
    const std::string& target, const std::shared_ptr<grpc::ChannelCredentials>& creds,
    RetryOptions options, const grpc::ChannelArguments& args) {
  absl::StatusOr<RetrySetup> setup = ValidateRetrySetup(
      options.budget, options.retry, options.throttle, options.accept_unfit_policy);
  if (!setup.ok()) return setup.status();
  const bool unfit = *setup == RetrySetup::kUnfitAccepted;
  if (unfit) {
    gpr_log(GPR_ERROR, "hopbudget: retry policy for %s accepted although it does not fit: %s",
            target.c_str(),
            std::string(ValidateRetryPolicy(options.budget, options.retry).status().message())
                .c_str());
  }
  auto budget_factory = MakeClientInterceptorFactory(options.client);
  if (!budget_factory.ok()) return budget_factory.status();

  auto shared = std::make_unique<RetryShared>(options.throttle);
  shared->hop = options.client.hop;
  shared->budget = options.budget;
  shared->budget.hop_reserve = absl::ZeroDuration();
  shared->retry = options.retry;
  shared->unfit = unfit;
  shared->clock = options.client.clock != nullptr ? options.client.clock : &Clock::Real();
  shared->metrics = options.client.metrics != nullptr ? options.client.metrics : &Metrics::Default();
  std::unique_ptr<internal::TimerService> own;
  if (shared->clock != &Clock::Real()) own = std::make_unique<internal::TimerService>(*shared->clock);
  shared->timers = own != nullptr ? own.get() : &internal::TimerService::Shared();

  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> creators;
  creators.push_back(std::make_unique<RetryFactory>(std::move(shared), std::move(own)));
  creators.push_back(*std::move(budget_factory));
  grpc::ChannelArguments channel_args = internal::WithChannelDefaults(args);
  channel_args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);  // one retry layer, not two
  return grpc::experimental::CreateCustomChannelWithInterceptors(target, creds, channel_args,
                                                                  std::move(creators));
}

}  // namespace hopbudget
