// A server interceptor made from a hopbudget::Hop: each method is cut at
// its own budget from the Hop's service config, and a reload reaches the
// calls that arrive after it.
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "eventually.h"
#include "gtest/gtest.h"
#include "hopbudget/advanced/retry.h"
#include "hopbudget/client.h"
#include "hopbudget/hop.h"
#include "hopbudget/server.h"
#include "relay_fixture.h"
#include "test_hop.h"

namespace hopbudget {
namespace {

using testing::Api;
using testing::Hang;
using testing::HopConfig;
using testing::MakeTestHop;
using testing::RelayHop;
using testing::Request;
using testing::Work;

// Every method of echo.Relay gets `service_timeout`; Call its own.
std::string Config(absl::Duration call_timeout, absl::Duration service_timeout) {
  return absl::StrCat(R"({"methodConfig": [
      {"name": [{"service": "hopbudget.echo.Relay", "method": "Call"}], "timeout": ")",
                      absl::ToDoubleSeconds(call_timeout), R"(s"},
      {"name": [{"service": "hopbudget.echo.Relay"}], "timeout": ")",
                      absl::ToDoubleSeconds(service_timeout), R"(s"}],
    "hopbudget": {"methodPolicy": [{"name": [{}], "hopReserve": "0.02s"}]}})");
}

enum class Method { kCall, kWrite };

// One call of `method` through a plain gRPC stub with a 10 s deadline: the
// front relays to a back hop that hangs, so only the front's budget can end
// it.
grpc::Status CallHanging(echo::Relay::Stub& stub, Method method) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  const echo::RelayRequest req = Request({Work(0), Hang()});
  echo::RelayReply reply;
  return method == Method::kCall ? stub.Call(&ctx, req, &reply) : stub.Write(&ctx, req, &reply);
}

// A front hop made from `hop`, serving with `api`, relaying to a back hop.
struct FrontAndBack {
  static HopConfig BackConfig() {
    HopConfig c;
    c.hop = "back";
    return c;
  }
  static HopConfig FrontConfig(const Hop& hop, Api api) {
    HopConfig c;
    c.api = api;
    c.hop_config = &hop;
    return c;
  }
  FrontAndBack(const Hop& hop, Api api) : back(BackConfig()), front(FrontConfig(hop, api)) {
    front.SetNext(back.address());
  }
  RelayHop back;
  RelayHop front;
};

class HopGrpcTest : public ::testing::TestWithParam<Api> {};

TEST_P(HopGrpcTest, EachMethodIsCutAtItsOwnTimeoutWithItsOwnAttribution) {
  Metrics metrics;
  std::unique_ptr<Hop> hop =
      MakeTestHop("front", &metrics, Config(absl::Milliseconds(200), absl::Milliseconds(400)));
  ASSERT_NE(hop, nullptr);
  FrontAndBack chain(*hop, GetParam());
  auto stub = testing::ConnectedStub(chain.front.address(), /*with_interceptor=*/false);

  struct Case {
    Method method;
    absl::Duration cap;
  };
  for (const Case& c : {Case{Method::kCall, absl::Milliseconds(200)},
                        Case{Method::kWrite, absl::Milliseconds(400)}}) {
    const absl::Time start = absl::Now();
    const grpc::Status s = CallHanging(*stub, c.method);
    const absl::Duration took = absl::Now() - start;
    const std::string name = c.method == Method::kCall ? "Call" : "Write";
    ASSERT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
        << name << ": " << s.error_message();
    const absl::optional<Attribution> a = AttributionOf(s);
    ASSERT_TRUE(a.has_value()) << name << ": " << s.error_message();
    EXPECT_EQ(a->source, DeadlineSource::kRequest) << name;
    EXPECT_EQ(a->hop, "front") << name;
    EXPECT_EQ(a->budget, c.cap) << name;
    // The front's downstream call had the cap less the 20 ms reserve.
    EXPECT_GE(took, c.cap - absl::Milliseconds(20)) << name;
  }
}

TEST_P(HopGrpcTest, ReloadReachesNewCallsAndSparesTheCallsInFlight) {
  Metrics metrics;
  std::unique_ptr<Hop> hop =
      MakeTestHop("front", &metrics, Config(absl::Milliseconds(200), absl::Milliseconds(600)));
  ASSERT_NE(hop, nullptr);
  FrontAndBack chain(*hop, GetParam());
  auto stub = testing::ConnectedStub(chain.front.address(), /*with_interceptor=*/false);

  // A Write in flight under the first table: its relay has reached the back
  // hop, so the front resolved its budget before the reload.
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  const echo::RelayRequest req = Request({Work(0), Hang()});
  echo::RelayReply reply;
  grpc::Status in_flight;
  hopbudget::internal::Notification done;
  stub->async()->Write(&ctx, &req, &reply, [&](grpc::Status s) {
    in_flight = std::move(s);
    done.Notify();
  });
  ASSERT_TRUE(testing::Eventually([&] { return chain.back.calls() >= 1; }));
  ASSERT_TRUE(
      hop->ReloadServiceConfig(Config(absl::Milliseconds(200), absl::Milliseconds(300))).ok());

  // A Write that arrives after the reload: the new 300 ms.
  const grpc::Status after = CallHanging(*stub, Method::kWrite);
  ASSERT_EQ(after.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << after.error_message();
  ASSERT_TRUE(AttributionOf(after).has_value()) << after.error_message();
  EXPECT_EQ(AttributionOf(after)->budget, absl::Milliseconds(300));

  // The one in flight keeps the 600 ms it arrived with.
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(20)));
  ASSERT_EQ(in_flight.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
      << in_flight.error_message();
  ASSERT_TRUE(AttributionOf(in_flight).has_value()) << in_flight.error_message();
  EXPECT_EQ(AttributionOf(in_flight)->budget, absl::Milliseconds(600));
  EXPECT_EQ(hop->generation(), 2u);
}

TEST(HopGrpcReloadTest, AReloadThatDoesNotValidateLeavesTheServerOnItsTable) {
  Metrics metrics;
  std::unique_ptr<Hop> hop =
      MakeTestHop("front", &metrics, Config(absl::Milliseconds(200), absl::Milliseconds(400)));
  ASSERT_NE(hop, nullptr);
  FrontAndBack chain(*hop, Api::kSync);
  auto stub = testing::ConnectedStub(chain.front.address(), /*with_interceptor=*/false);
  // 10 ms of timeout under a 20 ms reserve: refused, naming the method.
  const absl::Status s =
      hop->ReloadServiceConfig(Config(absl::Milliseconds(10), absl::Milliseconds(400)));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("method hopbudget.echo.Relay/Call"), absl::string_view::npos) << s;
  const grpc::Status call = CallHanging(*stub, Method::kCall);
  ASSERT_TRUE(AttributionOf(call).has_value()) << call.error_message();
  EXPECT_EQ(AttributionOf(call)->budget, absl::Milliseconds(200));
}

// Call may be retried (its service config gives a retryPolicy); Write, a
// write, has none: a retrying channel from the Hop sends it once.
TEST(HopGrpcChannelTest, TheRetryingChannelRetriesOnlyWhatTheConfigSaysMayBeRetried) {
  Metrics metrics;
  std::unique_ptr<Hop> hop = MakeTestHop("orders", &metrics, R"({"methodConfig": [
      {"name": [{"service": "hopbudget.echo.Relay", "method": "Call"}], "timeout": "5s",
       "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.001s", "maxBackoff": "0.001s",
                       "backoffMultiplier": 1, "retryableStatusCodes": ["UNAVAILABLE"],
                       "perAttemptRecvTimeout": "1s"}},
      {"name": [{"service": "hopbudget.echo.Relay", "method": "Write"}], "timeout": "5s"}]})");
  ASSERT_NE(hop, nullptr);

  struct Case {
    Method method;
    grpc::StatusCode code;
    int calls;  // the server saw
  };
  for (const Case& c : {Case{Method::kCall, grpc::StatusCode::OK, 3},
                        Case{Method::kWrite, grpc::StatusCode::UNAVAILABLE, 1}}) {
    const std::string name = c.method == Method::kCall ? "Call" : "Write";
    HopConfig ledger_config;
    ledger_config.hop = "ledger";
    ledger_config.faults.unavailable_first = 2;
    RelayHop ledger(ledger_config);
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        CreateRetryingChannel(*hop, ledger.address(), grpc::InsecureChannelCredentials());
    ASSERT_TRUE(channel.ok()) << channel.status();
    auto stub = echo::Relay::NewStub(*channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    const echo::RelayRequest req = Request({Work(0)});
    echo::RelayReply reply;
    const grpc::Status s =
        c.method == Method::kCall ? stub->Call(&ctx, req, &reply) : stub->Write(&ctx, req, &reply);
    EXPECT_EQ(s.error_code(), c.code) << name << ": " << s.error_message();
    EXPECT_EQ(ledger.calls(), c.calls) << name;
  }
}

// The Hop's service config reaches gRPC core without what makes core retry:
// Write's retryPolicy there would have core re-send an UNAVAILABLE.
TEST(HopGrpcChannelTest, APlainChannelFromTheHopLeavesRetriesToHopbudget) {
  std::unique_ptr<Hop> hop = MakeTestHop("orders", /*metrics=*/nullptr, R"({"methodConfig": [
      {"name": [{"service": "hopbudget.echo.Relay"}], "timeout": "5s",
       "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.001s", "maxBackoff": "0.001s",
                       "backoffMultiplier": 1, "retryableStatusCodes": ["UNAVAILABLE"]}}]})");
  ASSERT_NE(hop, nullptr);
  EXPECT_EQ(hop->core_service_config(),
            R"({"methodConfig":[{"name":[{"service":"hopbudget.echo.Relay"}],"timeout":"5s"}]})");
  HopConfig ledger_config;
  ledger_config.hop = "ledger";
  ledger_config.faults.unavailable_first = 1;
  RelayHop ledger(ledger_config);
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      CreateChannel(*hop, ledger.address(), grpc::InsecureChannelCredentials());
  ASSERT_TRUE(channel.ok()) << channel.status();
  auto stub = echo::Relay::NewStub(*channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  echo::RelayReply reply;
  const grpc::Status s = stub->Write(&ctx, Request({Work(0)}), &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_EQ(ledger.calls(), 1);
}

// A method in shadow mode is left to gRPC core: its retryPolicy is core's,
// so the retrying channel answers as a plain gRPC channel given the same
// config does, and hopbudget starts no retry of its own.
TEST(HopGrpcChannelTest, AMethodInShadowModeIsRetriedByGrpcCoreAsWithoutHopbudget) {
  const std::string retries = R"({"methodConfig": [
      {"name": [{"service": "hopbudget.echo.Relay", "method": "Call"}], "timeout": "5s",
       "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.001s", "maxBackoff": "0.001s",
                       "backoffMultiplier": 1, "retryableStatusCodes": ["UNAVAILABLE"],
                       "perAttemptRecvTimeout": "1s"}}])";
  Metrics metrics;
  std::unique_ptr<Hop> hop = MakeTestHop("orders", &metrics, absl::StrCat(retries, R"(,
    "hopbudget": {"methodPolicy": [
      {"name": [{"service": "hopbudget.echo.Relay", "method": "Call"}], "shadow": true}]}})"));
  ASSERT_NE(hop, nullptr);

  // gRPC's own reading of perAttemptRecvTimeout needs its experiment flag;
  // the plain channel gets the config without it.
  const std::string plain_config = R"({"methodConfig": [
      {"name": [{"service": "hopbudget.echo.Relay", "method": "Call"}], "timeout": "5s",
       "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.001s", "maxBackoff": "0.001s",
                       "backoffMultiplier": 1, "retryableStatusCodes": ["UNAVAILABLE"]}}]})";
  for (const bool through_hopbudget : {false, true}) {
    SCOPED_TRACE(through_hopbudget ? "hopbudget, shadow" : "plain gRPC");
    HopConfig ledger_config;
    ledger_config.hop = "ledger";
    ledger_config.faults.unavailable_first = 2;
    RelayHop ledger(ledger_config);
    std::shared_ptr<grpc::Channel> channel;
    if (through_hopbudget) {
      absl::StatusOr<std::shared_ptr<grpc::Channel>> made =
          CreateRetryingChannel(*hop, ledger.address(), grpc::InsecureChannelCredentials());
      ASSERT_TRUE(made.ok()) << made.status();
      channel = *std::move(made);
    } else {
      grpc::ChannelArguments args;
      args.SetServiceConfigJSON(plain_config);
      channel =
          grpc::CreateCustomChannel(ledger.address(), grpc::InsecureChannelCredentials(), args);
    }
    auto stub = echo::Relay::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    echo::RelayReply reply;
    const grpc::Status s = stub->Call(&ctx, Request({Work(0)}), &reply);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::OK) << s.error_message();
    EXPECT_EQ(ledger.calls(), 3);
    EXPECT_EQ(ledger.last_budget_header(), "");  // none of hopbudget's headers either
  }
  EXPECT_EQ(metrics.Snapshot().retry_decision(RetryOutcome::kRetry), 0u);
}

// On a Hop's plain channel a call is one attempt: its method's
// perAttemptRecvTimeout bounds it, attributed to the attempt budget; a
// method without one runs to the caller's deadline.
TEST(HopGrpcChannelTest, APlainChannelCapsEachCallAtItsMethodsAttemptCap) {
  Metrics metrics;
  // Call and Watch have a 200 ms attempt cap, Write none.
  std::unique_ptr<Hop> hop = MakeTestHop("orders", &metrics, R"({"methodConfig": [
      {"name": [{"service": "hopbudget.echo.Relay", "method": "Call"},
                {"service": "hopbudget.echo.Relay", "method": "Watch"}], "timeout": "5s",
       "retryPolicy": {"maxAttempts": 2, "initialBackoff": "0.001s", "maxBackoff": "0.001s",
                       "backoffMultiplier": 1, "retryableStatusCodes": ["UNAVAILABLE"],
                       "perAttemptRecvTimeout": "0.2s"}},
      {"name": [{"service": "hopbudget.echo.Relay", "method": "Write"}], "timeout": "5s"}]})");
  ASSERT_NE(hop, nullptr);
  HopConfig ledger_config;
  ledger_config.hop = "ledger";
  ledger_config.faults.hang_first = 2;
  RelayHop ledger(ledger_config);
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      CreateChannel(*hop, ledger.address(), grpc::InsecureChannelCredentials());
  ASSERT_TRUE(channel.ok()) << channel.status();
  auto stub = echo::Relay::NewStub(*channel);

  struct Case {
    Method method;
    DeadlineSource source;
    absl::Duration budget;
  };
  for (const Case& c : {Case{Method::kCall, DeadlineSource::kAttempt, absl::Milliseconds(200)},
                        Case{Method::kWrite, DeadlineSource::kClient, absl::Milliseconds(600)}}) {
    const std::string name = c.method == Method::kCall ? "Call" : "Write";
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Milliseconds(600)));
    echo::RelayReply reply;
    const echo::RelayRequest req = Request({Work(0)});
    const absl::Time start = absl::Now();
    const grpc::Status s =
        c.method == Method::kCall ? stub->Call(&ctx, req, &reply) : stub->Write(&ctx, req, &reply);
    const absl::Duration took = absl::Now() - start;
    ASSERT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
        << name << ": " << s.error_message();
    const absl::optional<Attribution> a = AttributionOf(s);
    ASSERT_TRUE(a.has_value()) << name << ": " << s.error_message();
    EXPECT_EQ(a->source, c.source) << name;
    EXPECT_EQ(a->hop, "orders") << name;
    EXPECT_GE(took, c.budget - absl::Milliseconds(5)) << name;
    if (c.source == DeadlineSource::kAttempt) {
      EXPECT_EQ(a->budget, c.budget) << name;
    }
  }

  // A stream is not an attempt: Watch, one message then silence, runs to
  // the caller's deadline whatever its method's attempt cap.
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Milliseconds(600)));
  const absl::Time start = absl::Now();
  auto reader = stub->Watch(&ctx, Request({Hang()}));
  echo::RelayReply msg;
  while (reader->Read(&msg)) {
  }
  const grpc::Status s = reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(595));
  if (const absl::optional<Attribution> a = AttributionOf(s)) {
    EXPECT_NE(a->source, DeadlineSource::kAttempt);
  }
}

// A stream's idle budget on a Hop's channel: its method's streamIdleBudget
// (hopbudget's section) beats the channel's ClientOptions, and a call's own
// SetStreamIdleBudget beats both.
TEST(HopGrpcChannelTest, AStreamIsCutAtItsMethodsIdleBudget) {
  Metrics metrics;
  std::unique_ptr<Hop> hop = MakeTestHop("orders", &metrics, R"({"methodConfig": [
      {"name": [{"service": "hopbudget.echo.Relay", "method": "Watch"}], "timeout": "20s"}],
    "hopbudget": {"methodPolicy": [
      {"name": [{"service": "hopbudget.echo.Relay", "method": "Watch"}],
       "streamIdleBudget": "0.3s"}]}})");
  ASSERT_NE(hop, nullptr);
  HopConfig ledger_config;
  ledger_config.hop = "ledger";
  RelayHop ledger(ledger_config);
  ClientOptions channel_options = ClientOptionsFor(*hop);
  channel_options.stream_idle_budget = absl::Seconds(10);
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      CreateChannel(*hop, channel_options, ledger.address(), grpc::InsecureChannelCredentials());
  ASSERT_TRUE(channel.ok()) << channel.status();
  auto stub = echo::Relay::NewStub(*channel);
  for (const absl::Duration own :
       {absl::InfiniteDuration(), absl::Milliseconds(500)}) {  // none, then the call's own
    SCOPED_TRACE(absl::FormatDuration(own));
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
    if (own != absl::InfiniteDuration()) SetStreamIdleBudget(ctx, own);
    const absl::Duration expected = own != absl::InfiniteDuration() ? own : absl::Milliseconds(300);
    auto reader = stub->Watch(&ctx, Request({Hang()}));  // one message, then silence
    echo::RelayReply msg;
    while (reader->Read(&msg)) {
    }
    const grpc::Status s = reader->Finish();
    ASSERT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
    const absl::optional<Attribution> a = AttributionOf(s);
    ASSERT_TRUE(a.has_value()) << s.error_message();
    EXPECT_EQ(a->source, DeadlineSource::kIdle);
    EXPECT_EQ(a->hop, "orders");
    EXPECT_EQ(a->budget, expected);
  }
}

// The drop-in pair: InstallServerInterceptor puts a Hop's interceptor on a
// ServerBuilder, and a handler returns Refusal(*ctx) when the call was
// refused on arrival, nothing else.
class RefusingRelay final : public echo::Relay::Service {
 public:
  grpc::Status Call(grpc::ServerContext* ctx, const echo::RelayRequest*,
                    echo::RelayReply*) override {
    if (auto refusal = Refusal(*ctx)) {
      refused_.fetch_add(1);
      return *refusal;
    }
    accepted_.fetch_add(1);
    return grpc::Status::OK;
  }
  int refused() const { return refused_.load(); }
  int accepted() const { return accepted_.load(); }

 private:
  std::atomic<int> refused_{0}, accepted_{0};
};

TEST(HopGrpcTest, InstallServerInterceptorAndRefusalAreTheWholeDropIn) {
  Metrics metrics;
  // Call needs 100 ms on arrival.
  std::unique_ptr<Hop> hop = MakeTestHop("front", &metrics, R"({"methodConfig": [
      {"name": [{"service": "hopbudget.echo.Relay"}], "timeout": "5s"}],
    "hopbudget": {"methodPolicy": [
      {"name": [{"service": "hopbudget.echo.Relay", "method": "Call"}], "minBudget": "0.1s"}]}})");
  ASSERT_NE(hop, nullptr);
  RefusingRelay service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  ASSERT_TRUE(InstallServerInterceptor(*hop, builder).ok());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  // A plain gRPC client, no hopbudget.
  auto stub = echo::Relay::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  for (const absl::Duration budget : {absl::Milliseconds(50), absl::Seconds(5)}) {
    SCOPED_TRACE(absl::FormatDuration(budget));
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + budget));
    echo::RelayReply reply;
    const grpc::Status s = stub->Call(&ctx, echo::RelayRequest(), &reply);
    if (budget < absl::Milliseconds(100)) {
      ASSERT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
      const absl::optional<Attribution> a = AttributionOf(s);
      ASSERT_TRUE(a.has_value()) << s.error_message();
      EXPECT_EQ(a->source, DeadlineSource::kArrivedExpired);
      EXPECT_EQ(a->hop, "front");
    } else {
      EXPECT_TRUE(s.ok()) << s.error_message();
    }
  }
  EXPECT_EQ(service.refused(), 1);
  EXPECT_EQ(service.accepted(), 1);
  server->Shutdown();
}

TEST(HopGrpcTest, InstallServerInterceptorRefusesBadAdmissionOptions) {
  Metrics metrics;
  std::unique_ptr<Hop> hop = MakeTestHop("front", &metrics, R"({"methodConfig": []})");
  ASSERT_NE(hop, nullptr);
  AdmissionOptions admission;
  admission.enabled = true;
  admission.policy.max_in_flight = 0;
  grpc::ServerBuilder builder;
  const absl::Status s = InstallServerInterceptor(*hop, builder, admission);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message(), "");
}

// A call that never passed through hopbudget's interceptor is not refused.
TEST(HopGrpcTest, RefusalIsNulloptWithoutHopbudget) {
  RefusingRelay service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto stub = echo::Relay::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  echo::RelayReply reply;
  EXPECT_TRUE(stub->Call(&ctx, echo::RelayRequest(), &reply).ok());
  EXPECT_EQ(service.accepted(), 1);
  server->Shutdown();
}

// This test links echo.Relay (Call, Write, Watch): a typo is refused by name.
TEST(HopGrpcReloadTest, AMethodNameThisProgramDoesNotLinkIsATypo) {
  HopOptions options;
  options.name = "front";
  options.service_config = R"({"methodConfig": [
      {"name": [{"service": "hopbudget.echo.Relay", "method": "Cal"}], "timeout": "1s"},
      {"name": [{"service": "hopbudget.echo.Realy"}], "timeout": "1s"},
      {"name": [{"service": "hopbudget.echo.Relay", "method": "Write"}], "timeout": "1s"}]})";
  absl::StatusOr<std::unique_ptr<Hop>> hop = Hop::Create(options);
  ASSERT_FALSE(hop.ok());
  EXPECT_EQ(hop.status().message(),
            "service config: policy table names what this program does not link (no generated "
            "code for it; HopOptions::check_names): service hopbudget.echo.Realy, method "
            "hopbudget.echo.Relay/Cal");
  options.check_names = NameCheck::kNone;  // a config shared with programs that link them
  EXPECT_TRUE(Hop::Create(options).ok());
}

// Shadow mode, for every method of the Hop (HopOptions::defaults.shadow):
// Call takes 2 s with a 300 ms reserve, Write 250 ms; both refuse a call
// that arrives with less than 150 ms.
std::unique_ptr<Hop> ShadowHop(Metrics* metrics, bool shadow) {
  HopOptions options;
  options.name = "front";
  options.metrics = metrics;
  options.defaults.shadow = shadow;
  options.defaults.budget.min_attempt_budget = absl::Milliseconds(150);
  options.service_config = R"({"methodConfig": [
      {"name": [{"service": "hopbudget.echo.Relay", "method": "Call"}], "timeout": "2s"},
      {"name": [{"service": "hopbudget.echo.Relay", "method": "Write"}], "timeout": "0.25s"}],
    "hopbudget": {"methodPolicy": [
      {"name": [{"service": "hopbudget.echo.Relay", "method": "Call"}], "hopReserve": "0.3s"}]}})";
  return MakeTestHop(std::move(options));
}

struct ShadowCase {
  const char* name;
  Method method;
  absl::Duration deadline;
  echo::RelayRequest request;
  ShadowAction would;  // what hopbudget would do to the call
};

std::vector<ShadowCase> ShadowCases() {
  return {
      // Write's 250 ms cap would cut it.
      {"cut", Method::kWrite, absl::Seconds(2), Request({Work(300)}), ShadowAction::kCut},
      // 100 ms is below the 150 ms minimum. Its relay is counted with the
      // refusal, not again as a call that would fail fast.
      {"refuse", Method::kCall, absl::Milliseconds(100), Request({Work(0), Work(0)}),
       ShadowAction::kRefuse},
      // After 200 ms of work, 400 ms less the 300 ms reserve is below the
      // minimum: the relay would not be sent.
      {"fail fast", Method::kCall, absl::Milliseconds(600), Request({Work(200), Work(0)}),
       ShadowAction::kFailFast},
      {"relayed", Method::kCall, absl::Seconds(5), Request({Work(0), Work(0)}),
       ShadowAction::kNone},
  };
}

struct ShadowAnswer {
  grpc::StatusCode code;
  int64_t downstream_budget_us = 0;  // the front's relay, when it made one
};

// Each case's answer from a front at `front_address` (a plain stub).
std::vector<ShadowAnswer> AnswersOf(const std::string& front_address) {
  auto stub = testing::ConnectedStub(front_address, /*with_interceptor=*/false);
  std::vector<ShadowAnswer> answers;
  for (const ShadowCase& c : ShadowCases()) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + c.deadline));
    echo::RelayReply reply;
    const grpc::Status s = c.method == Method::kCall ? stub->Call(&ctx, c.request, &reply)
                                                     : stub->Write(&ctx, c.request, &reply);
    answers.push_back(
        {s.error_code(), reply.hops_size() > 0 ? reply.hops(0).downstream_budget_us() : 0});
  }
  return answers;
}

TEST_P(HopGrpcTest, ShadowModeAnswersAsAPlainServerAndCountsWhatItWouldHaveDone) {
  // Without hopbudget: a plain front and back.
  HopConfig plain_back;
  plain_back.install_interceptors = false;
  RelayHop back_alone(plain_back);
  HopConfig plain_front = plain_back;
  plain_front.api = GetParam();
  RelayHop front_alone(plain_front);
  front_alone.SetNext(back_alone.address());
  const std::vector<ShadowAnswer> plain = AnswersOf(front_alone.address());

  Metrics enforced_metrics;
  std::unique_ptr<Hop> enforcing = ShadowHop(&enforced_metrics, /*shadow=*/false);
  ASSERT_NE(enforcing, nullptr);
  FrontAndBack enforced_chain(*enforcing, GetParam());
  const std::vector<ShadowAnswer> enforced = AnswersOf(enforced_chain.front.address());

  Metrics shadow_metrics;
  std::unique_ptr<Hop> shadowing = ShadowHop(&shadow_metrics, /*shadow=*/true);
  ASSERT_NE(shadowing, nullptr);
  FrontAndBack shadow_chain(*shadowing, GetParam());
  const std::vector<ShadowAnswer> shadow = AnswersOf(shadow_chain.front.address());

  const std::vector<ShadowCase> cases = ShadowCases();
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].name);
    EXPECT_EQ(plain[i].code, grpc::StatusCode::OK);
    EXPECT_EQ(shadow[i].code, plain[i].code);
    // What the shadow counts is what enforcing does.
    EXPECT_EQ(enforced[i].code, cases[i].would == ShadowAction::kNone
                                    ? grpc::StatusCode::OK
                                    : grpc::StatusCode::DEADLINE_EXCEEDED);
  }
  // The relay of a shadowed call takes the caller's whole deadline, as
  // gRPC's propagation gives it; enforced, Call's 2 s less its reserve.
  EXPECT_GT(shadow[3].downstream_budget_us, absl::ToInt64Microseconds(absl::Seconds(4)));
  EXPECT_LT(enforced[3].downstream_budget_us, absl::ToInt64Microseconds(absl::Seconds(2)));

  const MetricsSnapshot counted = shadow_metrics.Snapshot();
  EXPECT_EQ(counted.shadow(ShadowAction::kCut), 1u);
  EXPECT_EQ(counted.shadow(ShadowAction::kRefuse), 1u);
  EXPECT_EQ(counted.shadow(ShadowAction::kFailFast), 1u);
  EXPECT_EQ(counted.deadline_exceeded(Side::kServer, DeadlineSource::kArrivedExpired), 0u);
  const MetricsSnapshot none = enforced_metrics.Snapshot();
  EXPECT_EQ(none.shadow(ShadowAction::kCut) + none.shadow(ShadowAction::kRefuse) +
                none.shadow(ShadowAction::kFailFast),
            0u);
}

INSTANTIATE_TEST_SUITE_P(Apis, HopGrpcTest,
                         ::testing::Values(Api::kSync, Api::kCallback, Api::kAsync),
                         testing::ApiTestName);

}  // namespace
}  // namespace hopbudget
