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
#include <grpcpp/support/client_interceptor.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/mutex.h"
#include "grpc_glue.h"
#include "hopbudget/attribution.h"
#include "hopbudget/retry.h"
#include "timer_service.h"

namespace hopbudget {
namespace {

using grpc::experimental::InterceptionHookPoints;
using grpc::experimental::InterceptorBatchMethods;

constexpr char kPreviousAttemptsHeader[] = "grpc-previous-rpc-attempts";
constexpr char kPushbackTrailer[] = "grpc-retry-pushback-ms";

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

  // Whether `method` ("/pkg.Service/Method") is a unary method of a protobuf
  // service linked into this program: only then is the application's
  // response object known to be a google::protobuf::Message.
  bool IsRetryable(const char* method) {
    {
      absl::ReaderMutexLock lock(&mu);
      auto it = known.find(method);
      if (it != known.end()) return it->second;
    }
    std::string name(method);
    if (!name.empty() && name[0] == '/') name.erase(0, 1);
    absl::StrReplaceAll({{"/", "."}}, &name);
    const auto* desc =
        google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(name);
    const bool ok = desc != nullptr && !desc->client_streaming() && !desc->server_streaming();
    absl::MutexLock lock(&mu);
    known.emplace(method, ok);
    return ok;
  }
  absl::Mutex mu;
  absl::flat_hash_map<std::string, bool> known ABSL_GUARDED_BY(mu);
};

class RetryInterceptor final : public grpc::experimental::Interceptor {
 public:
  RetryInterceptor(RetryShared* shared, grpc::experimental::ClientRpcInfo* info)
      : shared_(*shared), info_(info) {}

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
      if (info_->type() != grpc::experimental::ClientRpcInfo::Type::UNARY ||
          !shared_.IsRetryable(info_->method())) {
        passthrough_ = true;
        m->Proceed();
        return;
      }
      TakeLogicalCall(m);
      // Hijack() re-enters Intercept() at once with this batch's receive
      // hooks; they wait in pending_ until the last attempt ends.
      channel_ = m->GetInterceptedChannel();
      stub_ = std::make_unique<grpc::GenericStub>(channel_);
      if (shared_.unfit) shared_.metrics->CountUnfitPolicyCall();
      m->Hijack();
      StartAttempt();
      return;
    }
    if (m->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_RECV_INITIAL_METADATA) ||
        m->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_RECV_MESSAGE) ||
        m->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_RECV_STATUS)) {
      bool ready;
      {
        absl::MutexLock lock(&mu_);
        ready = done_;
        if (!ready) pending_.push_back(m);
      }
      if (ready) Deliver(m);  // last action: see DeliverAll()
      return;
    }
    m->Proceed();
  }

 private:
  void TakeLogicalCall(InterceptorBatchMethods* m) {
    auto* md = m->GetSendInitialMetadata();
    internal::SourceTag tag;
    if (auto it = md->find(internal::kInternalSourceKey); it != md->end()) {
      tag = internal::ParseSourceTag(it->second);
    }
    metadata_ = *md;
    metadata_.erase(internal::kInternalSourceKey);
    metadata_.erase(kPreviousAttemptsHeader);
    if (tag.has_logical) {
      logical_deadline_ = tag.logical_deadline;
      logical_source_ = tag.logical_source;
      logical_budget_ = tag.logical_budget;
    } else {
      logical_deadline_ = internal::ToAbslTime(info_->client_context()->deadline());
      logical_source_ = logical_deadline_ == absl::InfiniteFuture() ? DeadlineSource::kNone
                                                                    : DeadlineSource::kClient;
      logical_budget_ = logical_deadline_ - shared_.clock->Now();
    }
    inbound_key_ = tag.inbound_key;
    inbound_id_ = tag.inbound_id;
    request_ = *m->GetSerializedSendMessage();
  }

  using Batches = std::vector<InterceptorBatchMethods*>;

  // Starts the next attempt, or ends the call when it was cancelled.
  void StartAttempt() {
    Batches finished;
    grpc::ClientContext* raw = nullptr;
    {
      absl::MutexLock lock(&mu_);
      if (done_) return;
      if (cancelled_) {
        finished = FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, cancel_reason_));
      } else {
        raw = PrepareAttemptLocked();
      }
    }
    if (raw == nullptr) {
      DeliverAll(std::move(finished));
      return;
    }
    // Outside the lock: the completion may run on this very thread.
    stub_->UnaryCall(raw, info_->method(), grpc::StubOptions(), &request_, &response_,
                     [this, raw](grpc::Status s) { OnAttemptDone(raw, std::move(s)); });
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
    tag.source = call.outcome == CallOutcome::kExhausted ? DeadlineSource::kExhaustedBeforeCall
                                                         : call.source;
    tag.budget = call.source == DeadlineSource::kAttempt ? call.budget : logical_budget_;
    ctx->AddMetadata(internal::kInternalSourceKey, internal::FormatSourceTag(tag));
    response_.Clear();
    attempts_.push_back(std::move(ctx));  // kept until the logical call ends
    return attempts_.back().get();
  }

  void OnAttemptDone(grpc::ClientContext* ctx, grpc::Status status) {
    AttemptResult result;
    result.code = static_cast<absl::StatusCode>(status.error_code());
    if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      // Only this hop's own attempt budget makes a timeout retryable.
      absl::optional<Attribution> a = AttributionOf(status);
      result.fired = a.has_value() && a->source == DeadlineSource::kAttempt &&
                             a->hop == shared_.hop
                         ? DeadlineSource::kAttempt
                         : DeadlineSource::kDownstream;
    }
    const auto& trailers = ctx->GetServerTrailingMetadata();
    if (auto it = trailers.find(kPushbackTrailer); it != trailers.end()) {
      result.pushback = ParsePushback(absl::string_view(it->second.data(), it->second.size()));
    }
    switch (ThrottleEffectOf(shared_.retry, result)) {
      case ThrottleEffect::kSuccess: shared_.throttle.RecordSuccess(); break;
      case ThrottleEffect::kFailure: shared_.throttle.RecordFailure(); break;
      case ThrottleEffect::kNone: break;
    }

    Batches finished;
    bool retry_now = false;
    {
      absl::MutexLock lock(&mu_);
      if (cancelled_) {
        finished = FinishLocked(status.error_code() == grpc::StatusCode::CANCELLED
                                    ? grpc::Status(grpc::StatusCode::CANCELLED, cancel_reason_)
                                    : status,
                                ctx);
      } else {
        const RetryDecision d =
            DecideRetry(shared_.budget, shared_.retry, attempt_, result,
                        shared_.throttle.RetryAllowed(), logical_deadline_, shared_.clock->Now(),
                        absl::Uniform(bitgen_, 0.0, 1.0));
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
          finished = FinishLocked(status, ctx);
        } else {
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

  void OnBackoffDone() {
    {
      absl::MutexLock lock(&mu_);
      backoff_timer_ = 0;
    }
    StartAttempt();
  }

  // Runs on the caller's TryCancel(): it only signals, and never ends the
  // call inline.
  void CancelLogical(const char* reason) {
    grpc::ClientContext* in_flight = nullptr;
    internal::TimerService::TimerId timer = 0;
    {
      absl::MutexLock lock(&mu_);
      if (done_ || cancelled_) return;
      cancelled_ = true;
      cancel_reason_ = reason;
      if (!attempts_.empty()) in_flight = attempts_.back().get();
      timer = backoff_timer_;
    }
    // Outside the lock: TryCancel runs the attempt's interceptors. A finished
    // attempt ignores it; one not started yet starts cancelled.
    if (in_flight != nullptr) in_flight->TryCancel();
    if (timer != 0 &&
        shared_.timers->Cancel(timer) == internal::TimerService::CancelOutcome::kCancelled) {
      // The wait was cut short: end the call on the timer thread.
      shared_.timers->Schedule(absl::InfinitePast(), [this] { OnBackoffDone(); });
    }
  }

  // Records the final answer; returns the receive batches to deliver it to.
  Batches FinishLocked(grpc::Status status, grpc::ClientContext* last = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (done_) return {};
    done_ = true;
    final_status_ = std::move(status);
    if (last != nullptr) {
      for (const auto& [k, v] : last->GetServerInitialMetadata()) {
        initial_md_.emplace_back(std::string(k.data(), k.size()), std::string(v.data(), v.size()));
      }
      for (const auto& [k, v] : last->GetServerTrailingMetadata()) {
        trailing_md_.emplace_back(std::string(k.data(), k.size()),
                                  std::string(v.data(), v.size()));
      }
    }
    shared_.metrics->CountAttemptsPerCall(attempt_);
    return std::move(pending_);
  }

  // Must be the caller's last action: once the batch holding the status
  // proceeds, the application may destroy the call, and this interceptor.
  void DeliverAll(Batches batches) {
    std::stable_partition(batches.begin(), batches.end(), [](InterceptorBatchMethods* m) {
      return !m->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_RECV_STATUS);
    });
    for (InterceptorBatchMethods* m : batches) Deliver(m);
  }

  // Fills a hijacked receive batch with the final answer. After done_, the
  // answer is immutable, so no lock is needed.
  void Deliver(InterceptorBatchMethods* m) {
    if (m->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_RECV_INITIAL_METADATA)) {
      auto* map = m->GetRecvInitialMetadata();
      for (const auto& [k, v] : initial_md_) map->emplace(k, v);
    }
    if (m->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_RECV_MESSAGE)) {
      bool parsed = false;
      if (final_status_.ok()) {
        // IsRetryable() established that the message is a generated
        // protobuf message (single inheritance from Message).
        auto* msg = static_cast<google::protobuf::Message*>(m->GetRecvMessage());
        grpc::ProtoBufferReader reader(&response_);
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
  bool passthrough_ = false;

  // Set before the first attempt; read-only afterwards.
  std::multimap<std::string, std::string> metadata_;
  grpc::ByteBuffer request_;
  absl::Time logical_deadline_ = absl::InfiniteFuture();
  DeadlineSource logical_source_ = DeadlineSource::kNone;
  absl::Duration logical_budget_ = absl::InfiniteDuration();
  std::shared_ptr<grpc::ChannelInterface> channel_;
  std::unique_ptr<grpc::GenericStub> stub_;
  uintptr_t inbound_key_ = 0;  // the inbound call this one serves, if any
  uint64_t inbound_id_ = 0;

  absl::Mutex mu_;
  int attempt_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::unique_ptr<grpc::ClientContext>> attempts_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer response_;  // written by the attempt in flight only
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  std::string cancel_reason_ ABSL_GUARDED_BY(mu_);
  internal::TimerService::TimerId backoff_timer_ ABSL_GUARDED_BY(mu_) = 0;
  absl::BitGen bitgen_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<InterceptorBatchMethods*> pending_ ABSL_GUARDED_BY(mu_);
  // The final answer: written once under mu_ before done_, then read-only.
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
  if (absl::Status s = ValidatePolicy(options.budget); !s.ok()) return s;
  if (absl::Status s = RetryThrottle::Validate(options.throttle); !s.ok()) return s;
  absl::StatusOr<RetryFit> fit = ValidateRetryPolicy(options.budget, options.retry);
  bool unfit = false;
  if (!fit.ok()) {
    if (!options.accept_unfit_policy || fit.status().code() != absl::StatusCode::kInvalidArgument ||
        absl::StrContains(fit.status().message(), "must be")) {
      return fit.status();
    }
    unfit = true;
    gpr_log(GPR_ERROR, "hopbudget: retry policy for %s accepted although it does not fit: %s",
            target.c_str(), std::string(fit.status().message()).c_str());
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
  grpc::ChannelArguments channel_args = args;
  channel_args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);  // one retry layer, not two
  return grpc::experimental::CreateCustomChannelWithInterceptors(target, creds, channel_args,
                                                                  std::move(creators));
}

}  // namespace hopbudget
