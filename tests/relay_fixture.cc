// Copyright hopbudget authors.
#include "relay_fixture.h"

#include <grpcpp/health_check_service_interface.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "eventually.h"
#include "hopbudget/advanced/shield_grpc.h"
#include "hopbudget/advanced/wire.h"
#include "hopbudget/client.h"
#include "hopbudget/server.h"
#include "sync.h"

namespace hopbudget {
namespace testing {
namespace {

int64_t ToUs(absl::Duration d) {
  return d == absl::InfiniteDuration() ? -1 : absl::ToInt64Microseconds(d);
}

// Sleeps up to `d`, in 1 ms slices, returning early (false) on cancellation:
// a test stand-in for work that checks for cancellation as it goes.
bool WorkFor(grpc::ServerContextBase& ctx, absl::Duration d) {
  const absl::Time end = absl::Now() + d;
  while (absl::Now() < end) {
    if (ctx.IsCancelled()) return false;
    absl::SleepFor(std::min(absl::Milliseconds(1), end - absl::Now()));
  }
  return !ctx.IsCancelled();
}

}  // namespace

class RelayHop::SyncService final : public echo::Relay::Service {
 public:
  explicit SyncService(RelayHop* hop) : hop_(hop) {}
  grpc::Status Call(grpc::ServerContext* ctx, const echo::RelayRequest* req,
                    echo::RelayReply* reply) override {
    return hop_->Handle(*ctx, *req, reply);
  }
  grpc::Status Write(grpc::ServerContext* ctx, const echo::RelayRequest* req,
                     echo::RelayReply* reply) override {
    return hop_->Handle(*ctx, *req, reply);
  }
  grpc::Status Watch(grpc::ServerContext* ctx, const echo::RelayRequest* req,
                     grpc::ServerWriter<echo::RelayReply>* writer) override {
    const int call = ++hop_->calls_;
    if (grpc::Status fault = hop_->InjectFault(*ctx, call); !fault.ok()) return fault;
    for (int i = 0; i < req->steps_size(); ++i) {
      if (!WorkFor(*ctx, absl::Milliseconds(req->steps(i).work_ms()))) break;
      echo::RelayReply r;
      r.set_payload(absl::StrCat(i));
      if (!writer->Write(r)) break;
      if (req->steps(i).hang()) {
        while (!ctx->IsCancelled()) absl::SleepFor(absl::Milliseconds(1));
        hop_->cancellations_seen_++;
        return grpc::Status::CANCELLED;
      }
    }
    return grpc::Status::OK;
  }

 private:
  RelayHop* hop_;
};

class RelayHop::CallbackService final : public echo::Relay::CallbackService {
 public:
  explicit CallbackService(RelayHop* hop) : hop_(hop) {}
  grpc::ServerUnaryReactor* Call(grpc::CallbackServerContext* ctx, const echo::RelayRequest* req,
                                 echo::RelayReply* reply) override {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    // The work blocks, so it leaves the callback thread (test code only).
    std::thread([this, ctx, req, reply, reactor] {
      reactor->Finish(hop_->Handle(*ctx, *req, reply));
    }).detach();
    return reactor;
  }
  grpc::ServerUnaryReactor* Write(grpc::CallbackServerContext* ctx, const echo::RelayRequest* req,
                                  echo::RelayReply* reply) override {
    return Call(ctx, req, reply);
  }

 private:
  RelayHop* hop_;
};

// The async API: one completion-queue thread serves Call and Write; each call's
// handler runs on a short-lived thread so that a hanging step does not
// block the queue (test code only).
class RelayHop::AsyncLoop {
 public:
  AsyncLoop(RelayHop* hop, grpc::ServerBuilder& builder) : hop_(hop) {
    cq_ = builder.AddCompletionQueue();
  }
  void Start() {
    new CallData(this, /*write=*/false);
    new CallData(this, /*write=*/true);
    thread_ = std::thread([this] {
      void* tag;
      bool ok;
      while (cq_->Next(&tag, &ok)) {
        Tag* t = static_cast<Tag*>(tag);
        t->call->Proceed(ok, t->done_tag);
      }
    });
  }
  // Called before the server shuts down: no new RequestCall after this
  // (gRPC asserts on a request against a server that is shutting down).
  void StopRequesting() {
    hopbudget::internal::MutexLock lock(&mu_);
    stopping_ = true;
  }
  // After the server has shut down: waits for handler threads (the async
  // API leaves them to the application), then drains the queue.
  void Stop() {
    {
      hopbudget::internal::MutexLock lock(&mu_);
      mu_.Await(hopbudget::internal::Condition(
          +[](int* active) { return *active == 0; }, &active_handlers_));
    }
    cq_->Shutdown();
    if (thread_.joinable()) thread_.join();
  }
  echo::Relay::AsyncService service;

 private:
  // Two tags per call: the request/finish tag and the done tag that
  // IsCancelled() needs (AsyncNotifyWhenDone). Freed when both came back.
  struct CallData;
  struct Tag {
    CallData* call;
    bool done_tag;
  };
  struct CallData {
    CallData(AsyncLoop* loop, bool write) : loop(loop), write(write), responder(&ctx) {
      ctx.AsyncNotifyWhenDone(&done);
      if (write) {
        loop->service.RequestWrite(&ctx, &request, &responder, loop->cq_.get(), loop->cq_.get(),
                                   &main);
      } else {
        loop->service.RequestCall(&ctx, &request, &responder, loop->cq_.get(), loop->cq_.get(),
                                  &main);
      }
    }
    void Proceed(bool ok, bool done_tag) {
      if (done_tag) {
        Unref();
        return;
      }
      if (state == kWaiting) {
        if (!ok) {  // never matched: the done tag will not come back
          delete this;
          return;
        }
        loop->RequestNext(write);
        state = kFinishing;
        loop->HandlerStarted();
        std::thread([this] {
          grpc::Status s = loop->hop_->Handle(ctx, request, &reply);
          AsyncLoop* l = loop;  // `this` may be freed once Finish is queued
          responder.Finish(reply, s, &main);
          l->HandlerDone();
        }).detach();
      } else {
        Unref();
      }
    }
    void Unref() {
      if (--refs == 0) delete this;
    }
    enum { kWaiting, kFinishing } state = kWaiting;
    int refs = 2;  // only touched on the completion-queue thread
    AsyncLoop* loop;
    const bool write;  // serves Write, else Call
    Tag main{this, false};
    Tag done{this, true};
    grpc::ServerContext ctx;
    echo::RelayRequest request;
    echo::RelayReply reply;
    grpc::ServerAsyncResponseWriter<echo::RelayReply> responder;
  };

  void HandlerStarted() {
    hopbudget::internal::MutexLock lock(&mu_);
    ++active_handlers_;
  }
  void HandlerDone() {
    hopbudget::internal::MutexLock lock(&mu_);
    --active_handlers_;
  }
  void RequestNext(bool write) {
    hopbudget::internal::MutexLock lock(&mu_);
    if (!stopping_) new CallData(this, write);
  }

  RelayHop* hop_;
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  std::thread thread_;
  hopbudget::internal::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int active_handlers_ ABSL_GUARDED_BY(mu_) = 0;
};

std::string ApiTestName(const ::testing::TestParamInfo<Api>& info) {
  switch (info.param) {
    case Api::kSync:
      return "Sync";
    case Api::kCallback:
      return "Callback";
    case Api::kAsync:
      return "Async";
  }
  return "Unknown";
}

RelayHop::RelayHop(HopConfig config) : config_(std::move(config)), rng_(config_.faults.seed) {
  if (config_.hop_config != nullptr) {
    config_.hop = config_.hop_config->name();  // its channels too: one name
    metrics_ = &config_.hop_config->metrics();
  } else if (config_.metrics == nullptr) {
    own_metrics_ = std::make_unique<Metrics>();
    metrics_ = own_metrics_.get();
  } else {
    metrics_ = config_.metrics;
  }
  // Read by every server built from here on; one that does not ask for
  // health never calls SetServing().
  if (config_.health) grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(absl::StrCat("127.0.0.1:", config_.port),
                           grpc::InsecureServerCredentials(), &port);
  switch (config_.api) {
    case Api::kSync:
      service_ = std::make_unique<SyncService>(this);
      builder.RegisterService(service_.get());
      break;
    case Api::kCallback:
      service_ = std::make_unique<CallbackService>(this);
      builder.RegisterService(service_.get());
      break;
    case Api::kAsync:
      async_ = std::make_unique<AsyncLoop>(this, builder);
      builder.RegisterService(&async_->service);
      break;
  }
  if (config_.install_interceptors) {
    ServerOptions options;
    options.hop = config_.hop;
    options.policy = config_.policy;
    options.admission = config_.admission;
    options.metrics = metrics_;
    auto factory = config_.hop_config != nullptr
                       ? MakeServerInterceptorFactory(*config_.hop_config, config_.admission)
                       : MakeServerInterceptorFactory(options);
    if (!factory.ok()) {
      ADD_FAILURE() << factory.status();
      return;
    }
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
    creators.push_back(*std::move(factory));
    builder.experimental().SetInterceptorCreators(std::move(creators));
  }
  server_ = builder.BuildAndStart();
  address_ = absl::StrCat("127.0.0.1:", port);
  if (async_ != nullptr) async_->Start();
}

RelayHop::~RelayHop() { Shutdown(); }

void RelayHop::SetServing(bool serving) {
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  ASSERT_NE(health, nullptr) << "HopConfig::health is off";
  health->SetServingStatus(serving);
}

void RelayHop::Shutdown() {
  if (server_ == nullptr) return;
  if (async_ != nullptr) async_->StopRequesting();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  if (async_ != nullptr) async_->Stop();
  server_->Wait();
  server_.reset();
}

void RelayHop::SetNext(const std::string& target, const RetryOptions* retry) {
  if (retry != nullptr) {
    RetryOptions options = *retry;
    options.client.hop = config_.hop;
    options.client.metrics = metrics_;
    auto channel = CreateRetryingChannel(target, grpc::InsecureChannelCredentials(), options);
    ASSERT_TRUE(channel.ok()) << channel.status();
    next_ = echo::Relay::NewStub(*channel);
    return;
  }
  if (!config_.install_interceptors) {
    next_ = echo::Relay::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
    return;
  }
  ClientOptions options;
  options.hop = config_.hop;
  options.metrics = metrics_;
  auto channel = CreateChannel(target, grpc::InsecureChannelCredentials(), options);
  ASSERT_TRUE(channel.ok()) << channel.status();
  next_ = echo::Relay::NewStub(*channel);
}

bool RelayHop::WaitForCancellations(int n, absl::Duration timeout) {
  return Eventually([&] { return cancellations_seen_.load() >= n; }, timeout,
                    absl::Milliseconds(1));
}

std::vector<std::string> RelayHop::previous_attempts() const {
  hopbudget::internal::MutexLock lock(&mu_);
  return previous_attempts_;
}

std::string RelayHop::last_budget_header() const {
  hopbudget::internal::MutexLock lock(&mu_);
  return last_budget_header_;
}

std::vector<std::string> RelayHop::last_own_metadata() const {
  hopbudget::internal::MutexLock lock(&mu_);
  return last_own_metadata_;
}

grpc::Status RelayHop::InjectFault(grpc::ServerContextBase& ctx, int call) {
  bool unavailable = false;
  {
    auto header = [&ctx](const char* key) {
      auto it = ctx.client_metadata().find(key);
      return it == ctx.client_metadata().end() ? std::string()
                                               : std::string(it->second.data(), it->second.size());
    };
    hopbudget::internal::MutexLock lock(&mu_);
    last_budget_header_ = header(kBudgetHeader);
    last_own_metadata_.clear();
    for (const auto& [key, value] : ctx.client_metadata()) {
      if (key.starts_with("hopbudget-")) {
        last_own_metadata_.push_back(std::string(key.data(), key.size()) + "=" +
                                     std::string(value.data(), value.size()));
      }
    }
    previous_attempts_.push_back(header("grpc-previous-rpc-attempts"));
    unavailable =
        call <= config_.faults.unavailable_first ||
        (config_.faults.unavailable_ratio > 0 &&
         std::uniform_real_distribution<double>(0, 1)(rng_) < config_.faults.unavailable_ratio);
  }
  if (call <= config_.faults.hang_first) {
    while (!ctx.IsCancelled()) absl::SleepFor(absl::Milliseconds(1));
    cancellations_seen_++;
    return grpc::Status(grpc::StatusCode::CANCELLED, "hung until cancelled");
  }
  if (unavailable) {
    if (!config_.faults.pushback_ms.empty()) {
      ctx.AddTrailingMetadata("grpc-retry-pushback-ms", config_.faults.pushback_ms);
    }
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "injected");
  }
  return grpc::Status::OK;
}

grpc::Status RelayHop::Handle(grpc::ServerContextBase& ctx, const echo::RelayRequest& req,
                              echo::RelayReply* reply) {
  const int call = ++calls_;
  if (grpc::Status fault = InjectFault(ctx, call); !fault.ok()) return fault;
  echo::HopReport report;
  report.set_hop(config_.hop);
  const InboundBudget* budget = InboundBudget::Of(ctx);
  if (budget != nullptr) {
    report.set_budget_on_arrival_us(ToUs(budget->budget_on_arrival()));
    report.set_source(std::string(DeadlineSourceName(budget->source())));
    if (budget->refused()) {
      refused_++;
      return grpc::Status(grpc::StatusCode::CANCELLED, "refused on arrival");
    }
  }
  const echo::Step step = req.steps_size() > 0 ? req.steps(0) : echo::Step();
  if (step.hang()) {
    while (!ctx.IsCancelled()) absl::SleepFor(absl::Milliseconds(1));
    cancellations_seen_++;
    return grpc::Status(grpc::StatusCode::CANCELLED, "hung until cancelled");
  }
  if (!WorkFor(ctx, absl::Milliseconds(step.work_ms()))) {
    cancellations_seen_++;
    return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled while working");
  }
  if (!step.raw_details().empty() || !step.raw_message().empty() || !step.raw_trailers().empty()) {
    for (const auto& [key, value] : step.raw_trailers()) ctx.AddTrailingMetadata(key, value);
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        step.raw_message().empty() ? "garbage details" : step.raw_message(),
                        step.raw_details());
  }
  if (step.plain_deadline_exceeded()) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "careless handler");
  }
  if (next_ != nullptr && req.steps_size() > 1 &&
      (step.relay_watch_idle_ms() > 0 || step.shield_bound_ms() > 0)) {
    echo::RelayRequest sub;
    sub.set_payload(req.payload());
    sub.mutable_steps()->CopyFrom(
        google::protobuf::RepeatedPtrField<echo::Step>(req.steps().begin() + 1, req.steps().end()));
    grpc::Status s =
        step.relay_watch_idle_ms() > 0 ? RelayWatch(ctx, step, sub) : RelayShielded(ctx, step, sub);
    if (!s.ok()) return s;
    *reply->add_hops() = report;
  } else if (next_ != nullptr && req.steps_size() > 1) {
    std::unique_ptr<grpc::ClientContext> call;
    absl::optional<InboundScope> scope;
    if (step.leak()) {
      scope.emplace(ctx);
      call = std::make_unique<grpc::ClientContext>();
    } else if (config_.install_interceptors) {
      call = NewDownstreamContext(ctx);
    } else {
      call = grpc::ClientContext::FromServerContext(ctx);
    }
    const auto deadline = call->deadline();
    report.set_downstream_budget_us(
        deadline == std::chrono::system_clock::time_point::max()
            ? -1
            : absl::ToInt64Microseconds(absl::FromChrono(deadline) - absl::Now()));
    echo::RelayRequest sub;
    sub.set_payload(req.payload());
    sub.mutable_steps()->CopyFrom(
        google::protobuf::RepeatedPtrField<echo::Step>(req.steps().begin() + 1, req.steps().end()));
    echo::RelayReply sub_reply;
    grpc::Status s = next_->Call(call.get(), sub, &sub_reply);
    if (!s.ok()) return s;
    *reply->add_hops() = report;
    for (const auto& h : sub_reply.hops()) *reply->add_hops() = h;
  } else {
    *reply->add_hops() = report;
  }
  reply->set_payload(req.payload());
  return grpc::Status::OK;
}

Shield& RelayHop::ShieldForRelays() {
  hopbudget::internal::MutexLock lock(&mu_);
  if (shield_ == nullptr) {
    ShieldOptions options;
    options.metrics = metrics_;
    shield_ = std::make_unique<Shield>(options);
  }
  return *shield_;
}

grpc::Status RelayHop::RelayWatch(grpc::ServerContextBase& ctx, const echo::Step& step,
                                  const echo::RelayRequest& sub) {
  DownstreamOptions options;
  if (step.relay_watch_whole_request()) options.scope = DownstreamScope::kRequest;
  std::unique_ptr<grpc::ClientContext> call = NewDownstreamContext(ctx, options);
  SetStreamIdleBudget(*call, absl::Milliseconds(step.relay_watch_idle_ms()));
  std::unique_ptr<grpc::ClientReader<echo::RelayReply>> reader = next_->Watch(call.get(), sub);
  echo::RelayReply message;
  while (reader->Read(&message)) {
  }
  return reader->Finish();
}

grpc::Status RelayHop::RelayShielded(grpc::ServerContextBase& ctx, const echo::Step& step,
                                     const echo::RelayRequest& sub) {
  absl::StatusOr<ShieldHandle> work = ShieldForRelays().Run(
      "relay", absl::Milliseconds(step.shield_bound_ms()), [this, sub](ShieldContext& shielded) {
        std::unique_ptr<grpc::ClientContext> call = NewShieldedContext(shielded);
        echo::RelayReply reply;
        return ToAbslStatus(next_->Call(call.get(), sub, &reply));
      });
  if (!work.ok()) return ToGrpcStatus(work.status());
  return AwaitShielded(ctx, *work);
}

std::unique_ptr<grpc::Server> ServeBehindHopbudget(grpc::Service* service,
                                                   const ServerOptions& options,
                                                   std::string* address) {
  auto factory = MakeServerInterceptorFactory(options);
  if (!factory.ok()) {
    ADD_FAILURE() << factory.status();
    return nullptr;
  }
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
  creators.push_back(*std::move(factory));
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(service);
  builder.experimental().SetInterceptorCreators(std::move(creators));
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  *address = "127.0.0.1:" + std::to_string(port);
  return server;
}

namespace {

std::shared_ptr<grpc::Channel> NewChannel(const std::string& target, bool with_interceptor,
                                          Metrics* metrics) {
  if (!with_interceptor) return grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  ClientOptions options;
  options.hop = "client";
  options.metrics = metrics;
  auto channel = CreateChannel(target, grpc::InsecureChannelCredentials(), options);
  if (!channel.ok()) {
    ADD_FAILURE() << channel.status();
    return nullptr;
  }
  return *std::move(channel);
}

}  // namespace

std::unique_ptr<echo::Relay::Stub> NewStub(const std::string& target, bool with_interceptor,
                                           Metrics* metrics) {
  std::shared_ptr<grpc::Channel> channel = NewChannel(target, with_interceptor, metrics);
  if (channel == nullptr) return nullptr;
  return echo::Relay::NewStub(channel);
}

std::unique_ptr<echo::Relay::Stub> ConnectedStub(const std::string& target, bool with_interceptor,
                                                 Metrics* metrics) {
  std::shared_ptr<grpc::Channel> channel = NewChannel(target, with_interceptor, metrics);
  if (channel == nullptr) return nullptr;
  if (!channel->WaitForConnected(absl::ToChronoTime(absl::Now() + absl::Seconds(20)))) {
    ADD_FAILURE() << "no connection to " << target << " within 20 s";
    return nullptr;
  }
  return echo::Relay::NewStub(channel);
}

int UnusedPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ADD_FAILURE() << "no free port";
  }
  if (fd >= 0) close(fd);
  return ntohs(a.sin_port);
}

void SetBudget(grpc::ClientContext& ctx, absl::Duration budget) {
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + budget));
}

echo::RelayRequest Request(std::vector<echo::Step> steps) {
  echo::RelayRequest r;
  r.set_payload("p");
  for (auto& s : steps) *r.add_steps() = s;
  return r;
}

echo::Step Work(int ms) {
  echo::Step s;
  s.set_work_ms(ms);
  return s;
}

echo::Step Hang() {
  echo::Step s;
  s.set_hang(true);
  return s;
}

}  // namespace testing
}  // namespace hopbudget
