// Copyright hopbudget authors.
//
// The retrying interceptor (retry.h): hijacks a unary call, then runs each
// attempt as a new call through the rest of the interceptor chain, deriving
// every attempt's deadline from what is left of the logical call's.
#include <google/protobuf/descriptor.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/client_callback.h>
#include <grpcpp/support/client_interceptor.h>

#include <algorithm>
#include <deque>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "attempt_context.h"
#include "attempt_result.h"
#include "call_mutex.h"
#include "channel_defaults.h"
#include "grpc_glue.h"
#include "hijacked_call.h"
#include "hopbudget/advanced/attribution.h"
#include "hopbudget/advanced/retry.h"
#include "metrics_recorder.h"
#include "retry_step.h"
#include "timer_service.h"

namespace hopbudget {
namespace {

using grpc::experimental::InterceptionHookPoints;
using grpc::experimental::InterceptorBatchMethods;

using internal::kGrpcPreviousAttemptsHeader;

struct RetryShared {
  explicit RetryShared(RetryThrottleOptions throttle_options) : throttle(throttle_options) {}

  std::string hop;
  BudgetPolicy budget;  // hop_reserve 0: the logical deadline already has it
  RetryPolicy retry;
  // When set, each method's entry says whether and how its calls are retried
  // (budget and retry above are then unused).
  const Hop* hop_config = nullptr;
  bool unfit = false;
  // ClientOptions::backend_wait is kWithinBudget: attempts wait for a ready
  // backend, gRPC's pick included (wait_for_ready, see PrepareAttemptLocked).
  bool wait_for_backend = true;
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
    const auto* desc = google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(name);
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

// One logical call of a retrying channel, from the caller's view: the
// caller's batches are hijacked, and each attempt runs as a call of its own
// (GenericStub) through the rest of the interceptor chain.
//
// Its life, in `state_` (all under mu_):
//
//   kAttempting --(attempt failed, retry)----------> kBackingOff
//       ^   |                                              |
//       |   +--(retry at once)--> kAttempting              |
//       +---------------------(backoff over)---------------+
//   kAttempting --(first message of a stream)-----> kCommitted (no retry after)
//   kAttempting|kBackingOff|kCommitted --(caller's TryCancel)--> kCancelled
//   any --(no retry follows / the cancel ended the attempt)--> kDone
//
// Receive batches wait in pending_ until they can be answered (ServeLocked)
// and are answered outside the lock (DeliverAll), the status last.
class RetryInterceptor final : public grpc::experimental::Interceptor {
 public:
  RetryInterceptor(RetryShared* shared, grpc::experimental::ClientRpcInfo* info)
      : shared_(*shared), info_(info), method_(shared->metrics->Method(info->method())) {
    // A tag handed over in process (grpc_glue.h) is only readable here, on
    // the thread of the stub call.
    if (const internal::SourceTag* tag = internal::HandedAttemptTag(info->client_context())) {
      handed_tag_ = *tag;
    }
  }

  void Intercept(InterceptorBatchMethods* m) override {
    if (mode_ == RetryShared::Mode::kPassThrough) {
      m->Proceed();
      return;
    }
    if (m->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_CANCEL)) {
      CancelLogical("cancelled by the caller");
      return;  // Proceed is a no-op for a cancel batch
    }
    if (m->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      mode_ = ModeOfCall();
      if (mode_ == RetryShared::Mode::kPassThrough) {
        m->Proceed();
        return;
      }
      TakeLogicalCall(m);
      channel_ = m->GetInterceptedChannel();
      stub_ = std::make_unique<grpc::GenericStub>(channel_);
      if (shared_.unfit) internal::Record(*shared_.metrics).CountUnfitPolicyCall();
      // Hijack() re-enters Intercept() at once with this batch's receive
      // hooks; they wait in pending_ until there is something to answer.
      m->Hijack();
      StartAttempt();
      return;
    }
    if (internal::IsReceiveBatch(m)) {
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
  enum class State { kAttempting, kBackingOff, kCommitted, kCancelled, kDone };

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

  // A receive batch that can be answered now, and the message it gets.
  struct Delivery {
    InterceptorBatchMethods* batch;
    absl::optional<grpc::ByteBuffer> message;  // for PRE_RECV_MESSAGE; none: fail it
  };
  using Deliveries = std::vector<Delivery>;

  // Unary and server-streaming calls of protobuf methods are retried; the
  // rest passes through untouched.
  RetryShared::Mode ModeOfCall() {
    using Type = grpc::experimental::ClientRpcInfo::Type;
    if (shared_.hop_config != nullptr) {
      // Only a method the service config gives a retryPolicy is retried: a
      // write without one is sent once. A method in shadow mode is left to
      // gRPC core, which has its retryPolicy (Hop::core_service_config).
      method_policy_ = &shared_.hop_config->PolicyFor(method_, info_->method());
      if (!method_policy_->retry.has_value() || method_policy_->shadow) {
        return RetryShared::Mode::kPassThrough;
      }
    }
    const RetryShared::Mode mode = shared_.ModeOf(info_->method());
    const Type expected =
        mode == RetryShared::Mode::kServerStreaming ? Type::SERVER_STREAMING : Type::UNARY;
    return mode != RetryShared::Mode::kPassThrough && info_->type() == expected
               ? mode
               : RetryShared::Mode::kPassThrough;
  }

  void TakeLogicalCall(InterceptorBatchMethods* m) {
    auto* md = m->GetSendInitialMetadata();
    internal::SourceTag tag;
    if (handed_tag_.has_value()) {
      tag = *handed_tag_;
    } else if (auto it = md->find(internal::kInternalSourceKey); it != md->end()) {
      tag = internal::ParseSourceTag(it->second).value_or(internal::SourceTag());
    }
    metadata_ = *md;
    metadata_.erase(internal::kInternalSourceKey);
    metadata_.erase(kGrpcPreviousAttemptsHeader);
    absl::optional<std::string> call_wait;
    if (auto it = metadata_.find(internal::kInternalBackendWaitKey); it != metadata_.end()) {
      call_wait = it->second;
    }
    wait_for_backend_ =
        internal::BackendWaitOfCall(
            shared_.wait_for_backend ? BackendWait::kWithinBudget : BackendWait::kFailFast,
            method_policy_ != nullptr ? method_policy_->wait_for_ready : absl::nullopt,
            internal::CallBackendWait(call_wait)) == BackendWait::kWithinBudget;
    BudgetPolicy budget = shared_.budget;
    if (method_policy_ != nullptr) {
      budget = method_policy_->budget;
      budget.hop_reserve = absl::ZeroDuration();  // the logical deadline already has it
    }
    logical_.emplace(budget, tag, internal::ToAbslTime(info_->client_context()->deadline()),
                     shared_.clock->Now());
    // The method's RetryPolicy lives in its Hop's table, which outlives the
    // channel.
    step_.emplace(logical_->attempt_policy(),
                  method_policy_ != nullptr ? *method_policy_->retry : shared_.retry,
                  shared_.throttle, *shared_.metrics, method_, *shared_.clock);
    request_ = *m->GetSerializedSendMessage();
  }

  // Starts the next attempt, or ends the call when it was cancelled.
  void StartAttempt() {
    Deliveries finished;
    grpc::ClientContext* raw = nullptr;
    StreamAttempt* stream = nullptr;
    {
      internal::CallMutexLock lock(&mu_);
      if (state_ == State::kDone) return;
      if (state_ == State::kCancelled) {
        finished = FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, cancel_reason_));
      } else {
        state_ = State::kAttempting;
        raw = PrepareAttemptLocked();
        if (mode_ == RetryShared::Mode::kServerStreaming) {
          streams_.push_back(std::make_unique<StreamAttempt>(this, raw));
          stream = streams_.back().get();
        } else {
          unary_response_.Clear();
        }
      }
    }
    if (raw == nullptr) {
      if (!finished.empty()) DeliverAll(std::move(finished));
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

  // The next attempt's context (LogicalBudget: deadline, parentage, source
  // tag, previous attempts), with the caller's own metadata.
  grpc::ClientContext* PrepareAttemptLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ++attempt_;
    // An attempt: this interceptor observes the logical call once, the
    // budget interceptor next in the chain each attempt.
    std::unique_ptr<grpc::ClientContext> ctx =
        logical_->NewAttemptContext(attempt_, shared_.clock->Now(), ClientCallKind::kRetryAttempt);
    for (const auto& [key, value] : metadata_) ctx->AddMetadata(key, value);
    // The budget interceptor holds an attempt while the channel has no ready
    // backend; one it lets go a moment before the backend turns unhealthy (a
    // lame duck) would otherwise be failed fast by gRPC's pick.
    if (wait_for_backend_) ctx->set_wait_for_ready(true);
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
        stream_ended_ = committed_to_ != nullptr;  // before commit, OnDone decides what follows
      } else {
        if (committed_to_ == nullptr) {
          committed_to_ = stream;
          if (state_ == State::kAttempting) state_ = State::kCommitted;
          CopyMetadata(stream->context()->GetServerInitialMetadata(), &initial_md_);
        }
        ready_.push_back(std::move(stream->message_));
        stream->message_.Clear();
      }
      ready = ServeLocked(&read_more);
    }
    if (read_more != nullptr) read_more->ReadNext();
    if (!ready.empty()) DeliverAll(std::move(ready));
  }

  void OnAttemptDone(grpc::ClientContext* ctx, const grpc::Status& status, StreamAttempt* stream) {
    AttemptResult result =
        internal::AttemptResultOf(status, ctx->GetServerTrailingMetadata(), shared_.hop);
    Deliveries finished;
    bool retry_now = false;
    {
      internal::CallMutexLock lock(&mu_);
      step_->FeedThrottle(result);
      if (stream == nullptr && status.ok()) ready_.push_back(std::move(unary_response_));
      if (state_ == State::kCancelled) {
        finished = FinishLocked(status.error_code() == grpc::StatusCode::CANCELLED
                                    ? grpc::Status(grpc::StatusCode::CANCELLED, cancel_reason_)
                                    : status,
                                ctx);
      } else {
        result.committed = committed_to_ != nullptr;
        const RetryDecision d = step_->Decide(result, attempt_, logical_->deadline());
        if (d.outcome != RetryOutcome::kRetry) {
          internal::RecordRetrySkipped(logical_->inbound_key(), logical_->inbound_id(), d.outcome);
          finished = FinishLocked(internal::NotRetried(status, d), ctx);
        } else if (d.backoff <= absl::ZeroDuration()) {
          retry_now = true;
        } else {
          state_ = State::kBackingOff;
          backoff_timer_ = shared_.timers->Schedule(shared_.clock->Now() + d.backoff,
                                                    [this] { OnBackoffDone(); });
        }
      }
    }
    if (retry_now) {
      StartAttempt();
    } else if (!finished.empty()) {
      DeliverAll(std::move(finished));
    }
    // Else `this` may be gone already: a short backoff may have run the next
    // attempt, and ended the call, on the timer thread.
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
      if (state_ == State::kDone || state_ == State::kCancelled) return;
      state_ = State::kCancelled;
      cancel_reason_ = reason;
      if (!attempts_.empty()) in_flight = attempts_.back().get();
      if (committed_to_ != nullptr && !read_in_flight_ && !stream_ended_) {
        read_in_flight_ = true;
        drain = committed_to_;
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
                           internal::MetadataPairs* to) {
    for (const auto& [k, v] : from) {
      to->emplace_back(std::string(k.data(), k.size()), std::string(v.data(), v.size()));
    }
  }

  // Records the final answer; returns the receive batches it answers.
  Deliveries FinishLocked(grpc::Status status, grpc::ClientContext* last = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (state_ == State::kDone) return {};
    state_ = State::kDone;
    stream_ended_ = true;
    final_status_ = std::move(status);
    if (last != nullptr) {
      if (committed_to_ == nullptr) CopyMetadata(last->GetServerInitialMetadata(), &initial_md_);
      CopyMetadata(last->GetServerTrailingMetadata(), &trailing_md_);
    }
    internal::Record(*shared_.metrics)
        .EndRetryingCall(method_, static_cast<absl::StatusCode>(final_status_.error_code()),
                         attempt_, shared_.clock->Now() - started_);
    return ServeLocked(nullptr);
  }

  // Answers the pending receive batches that can be answered now. Batches
  // are independent (the callback API keeps its status batch pending from
  // the start; reads come one at a time), so one that must wait does not
  // hold up the others. Sets *read_more when a streaming read must start.
  Deliveries ServeLocked(StreamAttempt** read_more) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const bool done = state_ == State::kDone;
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
      if (wants_status && !done) {
        now = false;
      } else if (wants_message) {
        if (!ready_.empty()) {
          d.message = std::move(ready_.front());
          ready_.pop_front();
        } else if (!stream_ended_) {
          now = false;
          if (read_more != nullptr && committed_to_ != nullptr && !read_in_flight_) {
            read_in_flight_ = true;
            *read_more = committed_to_;
          }
        }
      } else if (wants_metadata && committed_to_ == nullptr && !done) {
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
  // Callers skip it when there is nothing to deliver: another thread may
  // have ended the call since they let go of mu_.
  // The metadata and status the batches read are immutable by then (set
  // before commit / done).
  void DeliverAll(Deliveries deliveries) {
    for (Delivery& d : deliveries) {
      internal::HijackedAnswer answer;
      answer.initial_metadata = &initial_md_;
      answer.message = d.message.has_value() ? &*d.message : nullptr;
      answer.status = &final_status_;
      answer.trailing_metadata = &trailing_md_;
      internal::AnswerHijackedBatch(d.batch, answer);
    }
  }

  RetryShared& shared_;
  grpc::experimental::ClientRpcInfo* const info_;
  const MethodId method_;
  // The source tag a typed retry loop handed over in process, if any.
  absl::optional<internal::SourceTag> handed_tag_;
  const absl::Time started_ = shared_.clock->Now();     // the logical call's, for its latency
  RetryShared::Mode mode_ = RetryShared::Mode::kUnary;  // decided on the first batch

  // Set before the first attempt; read-only afterwards.
  // The method's entry in the channel's Hop (nullptr: no Hop); resolved
  // once, when the call starts.
  const MethodPolicy* method_policy_ = nullptr;
  std::multimap<std::string, std::string> metadata_;
  bool wait_for_backend_ = true;  // the channel's backend_wait, or the call's (SetBackendWait)
  grpc::ByteBuffer request_;
  absl::optional<internal::LogicalBudget> logical_;
  std::shared_ptr<grpc::ChannelInterface> channel_;
  std::unique_ptr<grpc::GenericStub> stub_;

  internal::CallMutex mu_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kAttempting;
  absl::optional<internal::RetryStep> step_ ABSL_GUARDED_BY(mu_);
  int attempt_ ABSL_GUARDED_BY(mu_) = 0;
  // Every attempt's context and stream, kept until the logical call ends.
  std::vector<std::unique_ptr<grpc::ClientContext>> attempts_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<StreamAttempt>> streams_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer unary_response_;  // written by the unary attempt in flight
  std::string cancel_reason_ ABSL_GUARDED_BY(mu_);
  internal::TimerService::TimerId backoff_timer_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<InterceptorBatchMethods*> pending_ ABSL_GUARDED_BY(mu_);
  std::deque<grpc::ByteBuffer> ready_ ABSL_GUARDED_BY(mu_);  // responses not yet delivered
  // The streaming attempt the call is committed to (its first message came);
  // it stays set once cancelled or done.
  StreamAttempt* committed_to_ ABSL_GUARDED_BY(mu_) = nullptr;
  // The committed stream's reads: one outstanding, and no more to come.
  bool read_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool stream_ended_ ABSL_GUARDED_BY(mu_) = false;
  // Written once under mu_ (at commit or done), read-only afterwards.
  grpc::Status final_status_;
  internal::MetadataPairs initial_md_;
  internal::MetadataPairs trailing_md_;
};

class RetryFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit RetryFactory(std::unique_ptr<RetryShared> shared,
                        std::unique_ptr<internal::TimerService> own)
      : own_timers_(std::move(own)), shared_(std::move(shared)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* info) override {
    return new RetryInterceptor(shared_.get(), info);
  }

 private:
  const std::unique_ptr<internal::TimerService> own_timers_;
  const std::unique_ptr<RetryShared> shared_;
};

// The channel of `shared` (its policy, clock and metrics set): the retry
// interceptor, then `client`'s budget interceptor, with the channel
// defaults under `args`.
absl::StatusOr<std::shared_ptr<grpc::Channel>> BuildRetryingChannel(
    std::unique_ptr<RetryShared> shared, const ClientOptions& client, const std::string& target,
    const std::shared_ptr<grpc::ChannelCredentials>& creds, const grpc::ChannelArguments& args) {
  auto budget_factory = internal::MakeClientInterceptorFactory(client, shared->hop_config);
  if (!budget_factory.ok()) return budget_factory.status();
  absl::StatusOr<grpc::ChannelArguments> channel_args = internal::WithChannelDefaults(args);
  if (!channel_args.ok()) return channel_args.status();
  // After the defaults: the Hop's config for core keeps the retries of its
  // methods in shadow mode, which WithChannelDefaults would remove.
  if (shared->hop_config != nullptr) {
    *channel_args = internal::WithHopServiceConfig(*shared->hop_config, *channel_args);
  }
  shared->wait_for_backend = client.backend_wait == BackendWait::kWithinBudget;
  std::unique_ptr<internal::TimerService> own;
  if (shared->clock != &Clock::Real()) {
    own = std::make_unique<internal::TimerService>(*shared->clock);
  }
  shared->timers = own != nullptr ? own.get() : &internal::TimerService::Shared();
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> creators;
  creators.push_back(std::make_unique<RetryFactory>(std::move(shared), std::move(own)));
  creators.push_back(*std::move(budget_factory));
  return grpc::experimental::CreateCustomChannelWithInterceptors(target, creds, *channel_args,
                                                                 std::move(creators));
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::Channel>> CreateRetryingChannel(
    const std::string& target, const std::shared_ptr<grpc::ChannelCredentials>& creds,
    RetryOptions options, const grpc::ChannelArguments& args) {
  absl::StatusOr<RetrySetup> setup = ValidateRetrySetup(
      options.budget, options.retry, options.throttle, options.accept_unfit_policy);
  if (!setup.ok()) return setup.status();
  const bool unfit = *setup == RetrySetup::kUnfitAccepted;
  if (unfit) {
    gpr_log(
        GPR_ERROR, "hopbudget: retry policy for %s accepted although it does not fit: %s",
        target.c_str(),
        std::string(ValidateRetryPolicy(options.budget, options.retry).status().message()).c_str());
  }
  auto shared = std::make_unique<RetryShared>(options.throttle);
  shared->hop = options.client.hop;
  shared->budget = options.budget;
  shared->budget.hop_reserve = absl::ZeroDuration();
  shared->retry = options.retry;
  shared->unfit = unfit;
  shared->clock = options.client.clock != nullptr ? options.client.clock : &Clock::Real();
  shared->metrics =
      options.client.metrics != nullptr ? options.client.metrics : &Metrics::Default();
  return BuildRetryingChannel(std::move(shared), options.client, target, creds, args);
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> CreateRetryingChannel(
    const Hop& hop, const std::string& target,
    const std::shared_ptr<grpc::ChannelCredentials>& creds, const grpc::ChannelArguments& args) {
  return CreateRetryingChannel(hop, ClientOptionsFor(hop), target, creds, args);
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> CreateRetryingChannel(
    const Hop& hop, ClientOptions client, const std::string& target,
    const std::shared_ptr<grpc::ChannelCredentials>& creds, const grpc::ChannelArguments& args) {
  client = internal::WithHopIdentity(hop, std::move(client));
  // Every entry was validated when the Hop read its config: none is unfit.
  auto shared =
      std::make_unique<RetryShared>(hop.retry_throttling().value_or(RetryThrottleOptions{}));
  shared->hop = hop.name();
  shared->hop_config = &hop;
  shared->clock = &hop.clock();
  shared->metrics = &hop.metrics();
  return BuildRetryingChannel(std::move(shared), client, target, creds, args);
}

}  // namespace hopbudget
