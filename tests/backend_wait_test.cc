// Copyright hopbudget authors.
//
// Waiting for a ready backend inside the budget (ClientOptions::backend_wait)
// against real gRPC on loopback: a hop that starts late, one whose health
// says NOT_SERVING and then SERVING, one that never comes, a cancel during
// the wait, and gRPC's fail-fast kept when asked for.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <optional>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "channel_defaults.h"
#include "eventually.h"
#include "hopbudget/advanced/retry.h"
#include "hopbudget/client.h"
#include "hopbudget/hop.h"
#include "relay_fixture.h"
#include "stepped_clock.h"
#include "sync.h"
#include "test_hop.h"

namespace hopbudget {
namespace {

using testing::Eventually;
using testing::HopConfig;
using testing::RelayHop;
using testing::Request;
using testing::SetBudget;
using testing::SteppedClock;
using testing::UnusedPort;
using testing::Work;

struct Client {
  Metrics metrics;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<echo::Relay::Stub> stub;

  explicit Client(const std::string& target, BackendWait wait = BackendWait::kWithinBudget,
                  const grpc::ChannelArguments& args = grpc::ChannelArguments(),
                  Clock* clock = nullptr) {
    ClientOptions options;
    options.hop = "client";
    options.metrics = &metrics;
    options.clock = clock;
    options.backend_wait = wait;
    auto c = CreateChannel(target, grpc::InsecureChannelCredentials(), options, args);
    EXPECT_TRUE(c.ok()) << c.status();
    channel = *c;
    stub = echo::Relay::NewStub(channel);
  }
};

// One call on the callback API, so that the test can act while it waits.
struct PendingCall {
  grpc::ClientContext ctx;
  echo::RelayRequest request = Request({Work(0)});
  echo::RelayReply reply;
  absl::Notification done;
  grpc::Status status;
  absl::Time started;
  absl::Time ended;

  void Start(echo::Relay::Stub& stub, absl::Duration budget) {
    SetBudget(ctx, budget);
    started = absl::Now();
    stub.async()->Call(&ctx, &request, &reply, [this](grpc::Status s) {
      status = std::move(s);
      ended = absl::Now();
      done.Notify();
    });
  }
  bool Wait() { return done.WaitForNotificationWithTimeout(absl::Seconds(20)); }
};

// gRPC gave up connecting once at least: a fail-fast call would fail now.
bool InTransientFailure(grpc::Channel& channel) {
  return channel.GetState(false) == GRPC_CHANNEL_TRANSIENT_FAILURE;
}

// `call` is still waiting; a hop started on `port` answers it.
void ExpectAnsweredOnceTheHopStarts(int port, PendingCall& call) {
  EXPECT_FALSE(call.done.HasBeenNotified()) << call.status.error_message();
  HopConfig config;
  config.hop = "late";
  config.port = port;
  RelayHop hop(config);
  ASSERT_TRUE(call.Wait());
  EXPECT_TRUE(call.status.ok()) << call.status.error_message();
  EXPECT_EQ(hop.calls(), 1);
}

TEST(BackendWaitTest, HopThatStartsLateIsWaitedForAndAnswersInsideTheBudget) {
  const int port = UnusedPort();
  Client client(absl::StrCat("127.0.0.1:", port));
  PendingCall call;
  call.Start(*client.stub, absl::Seconds(10));
  ASSERT_TRUE(Eventually([&] { return InTransientFailure(*client.channel); }));
  ExpectAnsweredOnceTheHopStarts(port, call);
  EXPECT_EQ(client.metrics.Snapshot().backend_wait.count, 1u);
}

// gRPC measures a started call's deadline on its monotonic clock; so does
// the wait. Measured on the wall clock, the step ended it at the channel's
// next state change as no-backend (elapsed_ms = the step), which is how a
// hedge failed in a CI run, its elapsed 10 491 ms in a 161 ms test.
TEST(BackendWaitTest, AWallClockStepDuringTheWaitDoesNotEndIt) {
  // A listener that never accepts: the kernel completes the TCP handshake,
  // gRPC's waits for the server's settings, and the channel stays
  // CONNECTING until the listener closes.
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&a), len), 0);
  ASSERT_EQ(listen(listener, 8), 0);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const int port = ntohs(a.sin_port);

  SteppedClock clock;
  Client client(absl::StrCat("127.0.0.1:", port), BackendWait::kWithinBudget,
                grpc::ChannelArguments(), &clock);
  PendingCall call;
  call.Start(*client.stub, absl::Seconds(10));
  ASSERT_TRUE(
      Eventually([&] { return client.channel->GetState(false) == GRPC_CHANNEL_CONNECTING; }));
  clock.Step(absl::Seconds(30));  // past the call's deadline, on the wall clock only
  // The connection is reset: the channel fails, and the wait is decided
  // again, on the stepped clock.
  close(listener);
  ASSERT_TRUE(Eventually([&] { return InTransientFailure(*client.channel); }));
  ExpectAnsweredOnceTheHopStarts(port, call);
}

TEST(BackendWaitTest, HopThatNeverComesEndsAtItsBudgetAsNoBackend) {
  Client client(absl::StrCat("127.0.0.1:", UnusedPort()));
  PendingCall call;
  const absl::Duration budget = absl::Milliseconds(400);
  call.Start(*client.stub, budget);
  ASSERT_TRUE(call.Wait());
  EXPECT_EQ(call.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
      << call.status.error_message();
  absl::optional<Attribution> a = AttributionOf(call.status);
  ASSERT_TRUE(a.has_value()) << call.status.error_message();
  EXPECT_EQ(a->source, DeadlineSource::kNoBackend);
  EXPECT_EQ(a->hop, "client");
  // Not earlier than the give-up time: the budget less min_call_budget (1 ms).
  EXPECT_GE(call.ended - call.started, budget - absl::Milliseconds(1));
  const MetricsSnapshot m = client.metrics.Snapshot();
  EXPECT_EQ(m.deadline_exceeded(Side::kClient, DeadlineSource::kNoBackend), 1u);
  EXPECT_EQ(m.backend_wait.count, 1u);
}

TEST(BackendWaitTest, NotServingThenServingIsWaitedFor) {
  HopConfig config;
  config.hop = "draining";
  config.health = true;
  RelayHop hop(config);
  hop.SetServing(false);
  grpc::ChannelArguments args;
  // Health checking needs a policy that reads it (round_robin), as the
  // demo's channels have (server/common/outgoing.cc).
  args.SetServiceConfigJSON(
      R"({"loadBalancingConfig":[{"round_robin":{}}],"healthCheckConfig":{"serviceName":""}})");
  Client client(hop.address(), BackendWait::kWithinBudget, args);
  PendingCall call;
  call.Start(*client.stub, absl::Seconds(10));
  ASSERT_TRUE(Eventually([&] { return InTransientFailure(*client.channel); }));
  EXPECT_FALSE(call.done.HasBeenNotified()) << call.status.error_message();
  EXPECT_EQ(hop.calls(), 0);

  hop.SetServing(true);
  ASSERT_TRUE(call.Wait());
  EXPECT_TRUE(call.status.ok()) << call.status.error_message();
  EXPECT_EQ(hop.calls(), 1);
}

// The idle budget of a stream counts from when it is sent, not while it
// waits for a backend.
TEST(BackendWaitTest, StreamHeldLongerThanItsIdleBudgetIsNotIdle) {
  const int port = UnusedPort();
  Client client(absl::StrCat("127.0.0.1:", port));
  grpc::ClientContext ctx;
  SetBudget(ctx, absl::Seconds(20));
  SetStreamIdleBudget(ctx, absl::Milliseconds(100));
  std::unique_ptr<grpc::ClientReader<echo::RelayReply>> reader;
  absl::Notification started;
  std::thread caller([&] {
    // The sync stream's constructor blocks until its first batch is sent.
    reader = client.stub->Watch(&ctx, Request({Work(0)}));
    started.Notify();
  });
  ASSERT_TRUE(Eventually([&] { return InTransientFailure(*client.channel); }));
  // Held past its idle budget: a budget counting the wait would fire now.
  ASSERT_FALSE(started.WaitForNotificationWithTimeout(absl::Milliseconds(300)));
  HopConfig config;
  config.hop = "late";
  config.port = port;
  RelayHop hop(config);
  caller.join();
  echo::RelayReply msg;
  while (reader->Read(&msg)) {
  }
  const grpc::Status s = reader->Finish();
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(client.metrics.Snapshot().deadline_exceeded(Side::kClient, DeadlineSource::kIdle), 0u);
}

TEST(BackendWaitTest, CancelEndsTheWaitAtOnce) {
  Client client(absl::StrCat("127.0.0.1:", UnusedPort()));
  PendingCall call;
  call.Start(*client.stub, absl::Seconds(60));
  ASSERT_TRUE(Eventually([&] { return InTransientFailure(*client.channel); }));
  call.ctx.TryCancel();
  // Bounded well below the 60 s budget: the wait did not run to its end.
  ASSERT_TRUE(call.done.WaitForNotificationWithTimeout(absl::Seconds(20)));
  EXPECT_EQ(call.status.error_code(), grpc::StatusCode::CANCELLED) << call.status.error_message();
  EXPECT_EQ(client.metrics.Snapshot().backend_wait.count, 1u);
}

TEST(BackendWaitTest, FailFastKeepsGrpcsUnavailable) {
  Client client(absl::StrCat("127.0.0.1:", UnusedPort()), BackendWait::kFailFast);
  PendingCall call;
  call.Start(*client.stub, absl::Seconds(60));
  ASSERT_TRUE(call.Wait());
  EXPECT_EQ(call.status.error_code(), grpc::StatusCode::UNAVAILABLE) << call.status.error_message();
  EXPECT_EQ(client.metrics.Snapshot().backend_wait.count, 0u);
}

TEST(BackendWaitTest, OneCallCanAskToFailFastOnAChannelThatWaits) {
  Client client(absl::StrCat("127.0.0.1:", UnusedPort()));
  ASSERT_TRUE(Eventually([&] {
    client.channel->GetState(true);
    return InTransientFailure(*client.channel);
  }));
  PendingCall call;
  SetBackendWait(call.ctx, BackendWait::kFailFast);
  call.Start(*client.stub, absl::Seconds(60));
  ASSERT_TRUE(call.Wait());
  EXPECT_EQ(call.status.error_code(), grpc::StatusCode::UNAVAILABLE) << call.status.error_message();
  EXPECT_EQ(client.metrics.Snapshot().backend_wait.count, 0u);
}

TEST(BackendWaitTest, OneCallCanAskToWaitOnAChannelThatFailsFast) {
  Client client(absl::StrCat("127.0.0.1:", UnusedPort()), BackendWait::kFailFast);
  PendingCall call;
  SetBackendWait(call.ctx, BackendWait::kWithinBudget);
  call.Start(*client.stub, absl::Milliseconds(200));
  ASSERT_TRUE(call.Wait());
  absl::optional<Attribution> a = AttributionOf(call.status);
  ASSERT_TRUE(a.has_value()) << call.status.error_message();
  EXPECT_EQ(a->source, DeadlineSource::kNoBackend);
}

// The order a call's backend wait is decided in: its own SetBackendWait,
// else its method's waitForReady in the channel's Hop, else the channel's.
TEST(BackendWaitOfCallTest, TheCallThenTheMethodThenTheChannel) {
  constexpr BackendWait kWait = BackendWait::kWithinBudget;
  constexpr BackendWait kFast = BackendWait::kFailFast;
  struct Case {
    const char* name;
    BackendWait channel;
    absl::optional<bool> method;
    absl::optional<BackendWait> call;
    BackendWait want;
  } cases[] = {
      {"nothing set: the channel's", kWait, absl::nullopt, absl::nullopt, kWait},
      {"nothing set, fail-fast channel", kFast, absl::nullopt, absl::nullopt, kFast},
      {"waitForReady false on a waiting channel", kWait, false, absl::nullopt, kFast},
      {"waitForReady true on a fail-fast channel", kFast, true, absl::nullopt, kWait},
      {"the call waits though its method fails fast", kWait, false, kWait, kWait},
      {"the call fails fast though its method waits", kFast, true, kFast, kFast},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(internal::BackendWaitOfCall(c.channel, c.method, c.call), c.want) << c.name;
  }
  EXPECT_EQ(internal::CallBackendWait(absl::nullopt), absl::nullopt);
  EXPECT_EQ(internal::CallBackendWait(std::string(BackendWaitName(kFast))), kFast);
  EXPECT_EQ(internal::CallBackendWait(std::string(BackendWaitName(kWait))), kWait);
}

// A channel made from a Hop holds a call for a backend as the call's method
// says in the Hop's service config (issue: "per method switchable"): Call,
// `waitForReady: false`, fails fast; Write, which says nothing, waits as the
// channel does; a call's own SetBackendWait wins over its method. The same
// on the retrying channel, which sets gRPC's wait-for-ready on its attempts
// only when they may wait.
TEST(BackendWaitTest, EachMethodOfAHopsChannelWaitsAsItsWaitForReadySays) {
  Metrics metrics;
  std::unique_ptr<Hop> hop = testing::MakeTestHop("orders", &metrics, R"({"methodConfig": [
      {"name": [{"service": "hopbudget.echo.Relay", "method": "Call"}], "waitForReady": false,
       "retryPolicy": {"maxAttempts": 2, "initialBackoff": "0.001s", "maxBackoff": "0.001s",
                       "backoffMultiplier": 1, "retryableStatusCodes": ["UNAVAILABLE"]}},
      {"name": [{"service": "hopbudget.echo.Relay", "method": "Write"}],
       "retryPolicy": {"maxAttempts": 2, "initialBackoff": "0.001s", "maxBackoff": "0.001s",
                       "backoffMultiplier": 1, "retryableStatusCodes": ["UNAVAILABLE"]}}]})");
  ASSERT_NE(hop, nullptr);
  const std::string target = absl::StrCat("127.0.0.1:", UnusedPort());
  for (const bool retrying : {false, true}) {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        retrying ? CreateRetryingChannel(*hop, target, grpc::InsecureChannelCredentials())
                 : CreateChannel(*hop, target, grpc::InsecureChannelCredentials());
    ASSERT_TRUE(channel.ok()) << channel.status();
    ASSERT_TRUE(Eventually([&] {
      (*channel)->GetState(true);
      return InTransientFailure(**channel);
    }));
    auto stub = echo::Relay::NewStub(*channel);
    struct Case {
      const char* name;
      bool write;
      absl::optional<BackendWait> call;
      bool waits;
    } cases[] = {
        {"Call, waitForReady false: fails fast", false, absl::nullopt, false},
        {"Write, no waitForReady: the channel's wait", true, absl::nullopt, true},
        {"Call asked to wait: waits", false, BackendWait::kWithinBudget, true},
        {"Write asked to fail fast: fails fast", true, BackendWait::kFailFast, false},
    };
    for (const Case& c : cases) {
      const std::string name = absl::StrCat(retrying ? "retrying channel, " : "", c.name);
      grpc::ClientContext ctx;
      SetBudget(ctx, absl::Milliseconds(300));
      if (c.call.has_value()) SetBackendWait(ctx, *c.call);
      const echo::RelayRequest request = Request({Work(0)});
      echo::RelayReply reply;
      const grpc::Status s =
          c.write ? stub->Write(&ctx, request, &reply) : stub->Call(&ctx, request, &reply);
      if (c.waits) {
        EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
            << name << ": " << s.error_message();
        absl::optional<Attribution> a = AttributionOf(s);
        ASSERT_TRUE(a.has_value()) << name << ": " << s.error_message();
        EXPECT_EQ(a->source, DeadlineSource::kNoBackend) << name;
      } else {
        EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE)
            << name << ": " << s.error_message();
      }
    }
  }
}

TEST(BackendWaitTest, ReadyBackendIsNotWaitedFor) {
  RelayHop hop(HopConfig{});
  Client client(hop.address());
  for (int i = 0; i < 3; ++i) {
    PendingCall call;
    call.Start(*client.stub, absl::Seconds(10));
    ASSERT_TRUE(call.Wait());
    EXPECT_TRUE(call.status.ok()) << call.status.error_message();
  }
  // The first call found the channel idle and waited for its connection;
  // the others found it ready.
  EXPECT_LE(client.metrics.Snapshot().backend_wait.count, 1u);
}

TEST(BackendWaitTest, NamesPrint) {
  EXPECT_EQ(::testing::PrintToString(BackendWait::kWithinBudget), "within_budget");
  EXPECT_EQ(::testing::PrintToString(BackendWait::kFailFast), "fail_fast");
  EXPECT_EQ(DeadlineSourceName(DeadlineSource::kNoBackend), "no-backend");
  EXPECT_EQ(ParseDeadlineSource("no-backend"), DeadlineSource::kNoBackend);
}

}  // namespace
}  // namespace hopbudget
