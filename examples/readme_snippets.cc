// Copyright hopbudget authors.
//
// Every C++ snippet of the top-level README and of the pages in docs/, in
// code that compiles against
// the demo's protos (proto/demo/demo.proto): the README's blocks are the
// regions between `// [START name]` and `// [END name]` here, and the ctest
// docs.snippets_match_compiled_code fails when the two differ. Edit a
// snippet here, build, then paste the region into the page.
//
// Built, never run: it is there to keep the README's code true.
#include <grpcpp/grpcpp.h>

#include <functional>
#include <iostream>
#include <memory>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "demo/demo.grpc.pb.h"
#include "hopbudget/advanced/client_throttle.h"
#include "hopbudget/advanced/http_exporter.h"
#include "hopbudget/advanced/metrics.h"
#include "hopbudget/advanced/race_grpc.h"
#include "hopbudget/advanced/retry.h"
#include "hopbudget/advanced/retry_loop.h"
#include "hopbudget/advanced/shield.h"
#include "hopbudget/advanced/shield_grpc.h"
#include "hopbudget/advanced/trace.h"
#include "hopbudget/client.h"
#include "hopbudget/hop.h"
#include "hopbudget/server.h"
#ifdef HOPBUDGET_WITH_PROMETHEUS
#include <prometheus/exposer.h>

#include "hopbudget/advanced/prometheus_collectable.h"
#endif

namespace readme {

using hopbudget::demo::Gateway;
using hopbudget::demo::Ledger;
using hopbudget::demo::Order;
using hopbudget::demo::OrderResult;
using hopbudget::demo::Orders;

std::string ReadFile(const std::string& path);

absl::StatusOr<std::unique_ptr<hopbudget::Hop>> ServerSetup(grpc::ServerBuilder& builder) {
  // [START server]
  hopbudget::HopOptions options;  // one Hop per process, kept as long as the server
  options.name = "orders";
  options.defaults.budget.request_cap = absl::Seconds(1);  // every method's, unless
  options.defaults.budget.attempt_cap = absl::Milliseconds(300);
  options.service_config = ReadFile("orders_service_config.json");  // says otherwise
  absl::StatusOr<std::unique_ptr<hopbudget::Hop>> hop = hopbudget::Hop::Create(options);
  if (!hop.ok()) return hop.status();  // names the bad field, or the method and the numbers
  absl::Status installed = hopbudget::InstallServerInterceptor(**hop, builder);
  if (!installed.ok()) return installed;
  // [END server]
  return hop;
}

absl::Status AdmissionSetup(grpc::ServerBuilder& builder) {
  // [START admission]
  hopbudget::ServerOptions options;
  options.hop = "orders";
  options.admission.enabled = true;
  options.admission.policy.limit = hopbudget::LimitKind::kAdaptive;
  options.admission.policy.max_in_flight = 32;  // where the adaptive limit starts
  options.admission.handlers = hopbudget::HandlerThreads::kBlocking;  // a sync service
  auto factory = hopbudget::MakeServerInterceptorFactory(options);
  if (!factory.ok()) return factory.status();  // names the bad field
  // [END admission]
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
  creators.push_back(*std::move(factory));
  builder.experimental().SetInterceptorCreators(std::move(creators));
  return absl::OkStatus();
}

class OrdersService final : public Orders::Service {
 public:
  // [START handler]
  grpc::Status CreateOrder(grpc::ServerContext* ctx, const Order* order,
                           OrderResult* result) override {
    if (auto refusal = hopbudget::Refusal(*ctx)) return *refusal;  // refused on arrival
    std::unique_ptr<grpc::ClientContext> call = hopbudget::NewDownstreamContext(*ctx);
    return ledger_->Commit(call.get(), *order, result);  // pass the status through
  }
  // [END handler]

 private:
  std::unique_ptr<Ledger::Stub> ledger_;
};

absl::Status ClientSetup(const hopbudget::Hop& hop) {
  // [START client]
  auto channel = hopbudget::CreateChannel(hop, "ledger:50051", grpc::InsecureChannelCredentials());
  if (!channel.ok()) return channel.status();  // bad arguments, named
  std::unique_ptr<Ledger::Stub> ledger = Ledger::NewStub(*channel);
  // [END client]
  return absl::OkStatus();
}

absl::Status RetryingChannelSetup() {
  // [START retrying_channel]
  hopbudget::RetryOptions options;
  options.client.hop = "orders";
  options.budget.request_cap = absl::Milliseconds(500);  // checked against the fit
  options.budget.attempt_cap = absl::Milliseconds(100);
  options.retry.max_attempts = 3;
  auto channel = hopbudget::CreateRetryingChannel(
      "ledger:50051", grpc::InsecureChannelCredentials(), options);  // validates, or says why not
  if (!channel.ok()) return channel.status();
  auto stub = Ledger::NewStub(*channel);  // unchanged stub code
  // [END retrying_channel]
  return absl::OkStatus();
}

absl::Status ClientThrottleUse(Gateway::Stub* gateway, const Order& order, OrderResult& result) {
  // [START client_throttle]
  // One per backend, shared by every call to it (thread-safe, lock-free).
  static auto* throttle =
      hopbudget::ClientThrottle::Create({}, &hopbudget::Clock::Real()).value().release();  // k = 2
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_real_distribution<double> uniform01(0.0, 1.0);
  if (throttle->Decide(uniform01(rng)) == hopbudget::ThrottleDecision::kRejectLocally) {
    return absl::ResourceExhaustedError("throttled here: the gateway is refusing most calls");
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  grpc::Status s = gateway->PlaceOrder(&ctx, order, &result);
  throttle->Record(hopbudget::BackendAnswerOf(static_cast<absl::StatusCode>(s.error_code())));
  // [END client_throttle]
  return s.ok() ? absl::OkStatus() : absl::UnknownError(s.error_message());
}

absl::Status RetryLoopUse(Ledger::Stub* ledger, grpc::ServerContext* ctx,
                          grpc::CallbackServerContext* callback_ctx,
                          grpc::ServerUnaryReactor* reactor, const Order& order,
                          OrderResult& result) {
  // [START retry_loop]
  hopbudget::RetryLoopOptions loop_options;
  loop_options.hop = "orders";  // the same hop as the ledger channel's ClientOptions
  loop_options.method = "/hopbudget.demo.Ledger/Commit";  // metric label
  loop_options.budget.request_cap = absl::Milliseconds(500);
  loop_options.budget.attempt_cap = absl::Milliseconds(100);
  auto loop = hopbudget::RetryLoop::Create(loop_options);  // validates, or says why not
  if (!loop.ok()) return loop.status();

  // sync handler: attempts run on this thread
  grpc::Status s = (*loop)->Call(
      hopbudget::LogicalCall::Of(*ctx),
      [&](grpc::ClientContext* attempt) { return ledger->Commit(attempt, order, &result); });

  // callback handler: no thread is held between attempts (backoff on the timer service)
  (*loop)->Start(
      hopbudget::LogicalCall::Of(*callback_ctx),
      [&](grpc::ClientContext* attempt, std::function<void(grpc::Status)> done) {
        ledger->async()->Commit(attempt, &order, &result, std::move(done));
      },
      [reactor](grpc::Status s) { reactor->Finish(s); });
  // [END retry_loop]
  return s.ok() ? absl::OkStatus() : absl::UnknownError(s.error_message());
}

class ShieldedLedger final : public Ledger::Service {
 public:
  // [START shield]
  hopbudget::Shield shield_;  // one per server: a bounded pool, max_in_flight operations

  grpc::Status Commit(grpc::ServerContext* ctx, const Order* order, OrderResult*) override {
    auto commit =
        shield_.Run("commit", absl::Seconds(5),  // the bound is mandatory
                    [this, order = *order](hopbudget::ShieldContext& work) {  // owns what it uses
                      auto call = hopbudget::NewShieldedContext(work);  // the shield's budget,
                      OrderResult stored;                               // not cancelled with ctx
                      return hopbudget::ToAbslStatus(store_->Commit(call.get(), order, &stored));
                    });
    if (!commit.ok()) return hopbudget::ToGrpcStatus(commit.status());  // RESOURCE_EXHAUSTED
    return hopbudget::AwaitShielded(*ctx, *commit);  // the caller may leave; the work goes on
  }

  // at exit: stop taking calls, let shielded work finish within 5 s, report the rest
  hopbudget::DrainReport Stop(grpc::Server& server) {
    return hopbudget::ShutdownAndDrain(server, shield_, absl::Seconds(5));
  }
  // [END shield]

 private:
  std::unique_ptr<Ledger::Stub> store_;
};

class CallbackShieldedLedger final : public Ledger::CallbackService {
 public:
  // [START shield_callback]
  grpc::ServerUnaryReactor* Commit(grpc::CallbackServerContext* ctx, const Order* order,
                                   OrderResult* result) override {
    auto commit = shield_.Run("commit", absl::Seconds(5), CommitWork(*order));
    if (!commit.ok()) {
      auto* r = ctx->DefaultReactor();
      r->Finish(hopbudget::ToGrpcStatus(commit.status()));
      return r;
    }
    return hopbudget::AnswerWhenShieldedDone(
        ctx, *commit, [result, key = order->key()](const hopbudget::ShieldRecord& r) {
          if (r.status.ok()) result->set_key(key);  // fill runs before the answer
        });
  }
  // [END shield_callback]

 private:
  absl::AnyInvocable<absl::Status(hopbudget::ShieldContext&)> CommitWork(Order order) {
    return [order = std::move(order)](hopbudget::ShieldContext&) { return absl::OkStatus(); };
  }
  hopbudget::Shield shield_;
};

absl::Status RaceUse(const hopbudget::BudgetPolicy& policy, grpc::ServerContext* ctx,
                     std::unique_ptr<Ledger::Stub> (&replica)[2], const Order& req,
                     OrderResult (&reply)[2]) {
  // [START race]
  hopbudget::RaceOptions race_options;
  race_options.hop = "orders";
  race_options.budget = policy;
  auto race = hopbudget::Race::Create(race_options);  // validates, or says why not
  if (!race.ok()) return race.status();
  hopbudget::RaceResult r =
      (*race)->Call(hopbudget::LogicalCall::Of(*ctx), 2,
                    [&](int i, grpc::ClientContext* c, std::function<void(grpc::Status)> done) {
                      replica[i]->async()->Commit(c, &req, &reply[i], std::move(done));
                    });  // or Start(..., on_done): no thread held
  // [END race]
  return r.winner >= 0 ? absl::OkStatus() : absl::DeadlineExceededError("no replica answered");
}

absl::Status ExporterSetup() {
  // [START http_exporter]
  hopbudget::HttpExporterOptions http;
  http.hop = "orders";
  http.port = 9102;  // 0: any free port, read it from port()
  auto exporter =
      hopbudget::HttpExporter::Start(http);      // GET /metrics, /deadlinez, /deadlinez.json
  if (!exporter.ok()) return exporter.status();  // the port is taken, say
  // [END http_exporter]
  return absl::OkStatus();
}

absl::Status ExporterWithPolicyAndPeers(const hopbudget::ServerOptions& server_options,
                                        const hopbudget::RetryLoopOptions& loop_options) {
  hopbudget::HttpExporterOptions http;
  http.hop = "orders";
  // [START deadlinez_options]
  http.policy = server_options.policy;     // caps, reserve, min_attempt_budget
  http.retry_policy = loop_options.retry;  // optional: shown with the attempts that fit
  http.peers = {{"gateway", "http://gateway-host:9101/deadlinez"},
                {"ledger", "http://ledger-host:9103/deadlinez"}};
  // [END deadlinez_options]
  auto exporter = hopbudget::HttpExporter::Start(http);  // a bad peer: InvalidArgument
  return exporter.status();
}

absl::Status MetricsWithOptions() {
  // [START metrics_options]
  hopbudget::MetricsOptions o;
  o.server_call_duration = {/*schema=*/2, /*min_seconds=*/0.0005, /*max_seconds=*/10};
  o.infrastructure_method_prefixes.push_back("/hopbudget.demo.Admin/");
  absl::StatusOr<std::unique_ptr<hopbudget::Metrics>> metrics = hopbudget::Metrics::Create(o);
  // schema 9: InvalidArgument "MetricsOptions.server_call_duration.schema: 9 is outside 0..8"
  // [END metrics_options]
  return metrics.status();
}

#ifdef HOPBUDGET_WITH_PROMETHEUS
absl::Status PrometheusCpp() {
  // [START prometheus]
  prometheus::Exposer exposer("127.0.0.1:9102");
  hopbudget::PrometheusOptions options;
  options.hop = "orders";
  auto hopbudget = hopbudget::NewPrometheusCollectable(options);  // StatusOr
  if (!hopbudget.ok()) return hopbudget.status();
  exposer.RegisterCollectable(*hopbudget);  // keep the shared_ptr alive
  // [END prometheus]
  return absl::OkStatus();
}
#endif  // without prometheus-cpp the README region is still checked, not compiled

void Waterfall(Gateway::Stub* stub, const Order& request) {
  grpc::ClientContext ctx;
  OrderResult reply;
  // [START trace]
  hopbudget::RequestTrace(ctx);  // before the call: the waterfall of a success too
  grpc::Status s = stub->PlaceOrder(&ctx, request, &reply);
  std::cout << hopbudget::FormatWaterfall(hopbudget::TraceOf(ctx));
  // gateway  budget   800.0 ms  spent    42.1 ms  attempts 1  OK
  // orders   budget   794.9 ms  spent    40.2 ms  attempts 2  OK
  // ledger   budget   150.0 ms  spent   150.3 ms  attempts 0  DEADLINE_EXCEEDED (attempt)
  // ledger   budget   638.7 ms  spent     3.0 ms  attempts 0  OK
  // [END trace]
}

absl::Status HopSetup(grpc::ServerBuilder& builder) {
  // [START hop]
  hopbudget::HopOptions options;
  options.name = "orders";
  options.service_config = ReadFile("orders_service_config.json");  // methodConfig, hopbudget
  absl::StatusOr<std::unique_ptr<hopbudget::Hop>> hop = hopbudget::Hop::Create(options);
  if (!hop.ok()) return hop.status();  // names the method and the numbers
  // Inbound calls: each method cut at its own timeout.
  auto factory = hopbudget::MakeServerInterceptorFactory(**hop);
  if (!factory.ok()) return factory.status();
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
  creators.push_back(*std::move(factory));
  builder.experimental().SetInterceptorCreators(std::move(creators));
  // Outbound calls: retried only where the config has a retryPolicy.
  auto ledger =
      hopbudget::CreateRetryingChannel(**hop, "ledger:50051", grpc::InsecureChannelCredentials());
  if (!ledger.ok()) return ledger.status();
  // Or one call per attempt around the stub (retry_loop.h), on CreateChannel(**hop, ...):
  auto commits = hopbudget::RetryLoop::Create(**hop, "/demo.Ledger/Commit");
  if (!commits.ok()) return commits.status();
  // On SIGHUP: a config that does not nest is refused, the old one kept.
  absl::Status reloaded = (*hop)->ReloadServiceConfig(ReadFile("orders_service_config.json"));
  // [END hop]
  return reloaded;
}

}  // namespace readme
