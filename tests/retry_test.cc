// Copyright hopbudget authors.
//
// Budget-aware retries against real servers on loopback: the incident (a
// naive loop never retries; derived attempt budgets do), the protocol
// headers, the retry budget under steady failures, cancellation, and attempts
// that cannot fit.
#include "hopbudget/advanced/retry.h"

#include <gmock/gmock.h>
#include <grpcpp/generic/generic_stub.h>
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <thread>

#include "absl/functional/function_ref.h"
#include "absl/time/clock.h"
#include "eventually.h"
#include "hopbudget/advanced/exposition.h"
#include "hopbudget/client.h"
#include "hopbudget/server.h"
#include "relay_fixture.h"
#include "sync.h"

namespace hopbudget {
namespace {

using testing::Eventually;
using testing::Faults;
using testing::HopConfig;
using testing::RelayHop;
using testing::Request;
using testing::Work;

HopConfig Faulty(Faults faults) {
  HopConfig c;
  c.hop = "ledger";
  c.faults = std::move(faults);
  return c;
}

RetryOptions Options(Metrics* metrics, absl::Duration request_cap, absl::Duration attempt_cap,
                     int max_attempts = 3) {
  RetryOptions o;
  o.client.hop = "orders";
  o.client.metrics = metrics;
  o.budget.request_cap = request_cap;
  o.budget.attempt_cap = attempt_cap;
  o.retry.max_attempts = max_attempts;
  o.retry.initial_backoff = absl::Milliseconds(5);
  o.retry.max_backoff = absl::Milliseconds(20);
  return o;
}

std::unique_ptr<echo::Relay::Stub> RetryingStub(const std::string& target,
                                                const RetryOptions& options) {
  auto channel = CreateRetryingChannel(target, grpc::InsecureChannelCredentials(), options);
  EXPECT_TRUE(channel.ok()) << channel.status();
  return channel.ok() ? echo::Relay::NewStub(*channel) : nullptr;
}

// A ledger that injects `faults`, the retrying stub that calls it as
// "orders", and that caller's metrics.
struct RetryRig {
  RetryRig(
      Faults faults, absl::Duration request_cap, absl::Duration attempt_cap,
      absl::FunctionRef<void(RetryOptions&)> tweak = [](RetryOptions&) {})
      : ledger(Faulty(std::move(faults))) {
    RetryOptions options = Options(&metrics, request_cap, attempt_cap);
    tweak(options);
    stub = RetryingStub(ledger.address(), options);
  }
  RelayHop ledger;
  Metrics metrics;
  std::unique_ptr<echo::Relay::Stub> stub;
};

TEST(RetryIncidentTest, NaiveAttemptTimeoutInsideAShorterOuterBudgetNeverRetries) {
  // The incident: an outer 500 ms budget around attempts of 1 s each. The
  // outer budget bounds every attempt, fires during attempt one, and the
  // attempt timeout, the only thing the loop retries on, never trips.
  Faults faults;
  faults.hang_first = 1;
  RelayHop ledger(Faulty(faults));
  auto stub = testing::NewStub(ledger.address(), /*with_interceptor=*/false);
  const absl::Time outer = absl::Now() + absl::Milliseconds(500);
  int retries = 0;
  grpc::Status s;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    if (attempt > 1) ++retries;
    if (absl::Now() >= outer) break;
    grpc::ClientContext ctx;
    const absl::Time attempt_deadline = absl::Now() + absl::Seconds(1);
    ctx.set_deadline(absl::ToChronoTime(std::min(outer, attempt_deadline)));
    echo::RelayReply reply;
    s = stub->Call(&ctx, Request({Work(0)}), &reply);
    const bool attempt_timeout_fired = absl::Now() >= attempt_deadline;
    if (s.ok() || !attempt_timeout_fired) break;  // only attempt timeouts are retried
  }
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(retries, 0);
  EXPECT_EQ(ledger.calls(), 1);
}

TEST(RetryIncidentTest, DerivedAttemptBudgetCutsTheHangAndSucceedsOnAttemptTwo) {
  Faults faults;
  faults.hang_first = 1;
  RelayHop ledger(Faulty(faults));
  Metrics metrics;
  auto stub = RetryingStub(ledger.address(),
                           Options(&metrics, absl::Milliseconds(1000), absl::Milliseconds(250)));
  grpc::ClientContext ctx;
  const absl::Time start = absl::Now();
  ctx.set_deadline(absl::ToChronoTime(start + absl::Milliseconds(1000)));
  echo::RelayReply reply;
  grpc::Status s = stub->Call(&ctx, Request({Work(0)}), &reply);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(reply.hops_size(), 1);  // the response of a later attempt reached the stub
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(1000));
  // Attempt 1 hung and was cut at its attempt budget, then retried. (On a
  // loaded machine attempt 2 may time out too; what matters is that the
  // budget that fired was the attempt's, and that a retry really ran.)
  MetricsSnapshot m = metrics.Snapshot();
  EXPECT_GE(ledger.calls(), 2);
  EXPECT_GE(m.retry_decision(RetryOutcome::kRetry), 1u);
  EXPECT_EQ(m.retry_decision(RetryOutcome::kSucceeded), 1u);
  EXPECT_EQ(m.deadline_exceeded(Side::kClient, DeadlineSource::kAttempt),
            m.retry_decision(RetryOutcome::kRetry));
  EXPECT_TRUE(ledger.WaitForCancellations(1, absl::Seconds(10)));  // attempt 1 was cut
}

TEST(RetryTest, ServerSeesPreviousAttemptsOnRetries) {
  Faults faults;
  faults.unavailable_first = 2;
  RetryRig rig(faults, absl::Seconds(2), absl::Milliseconds(500));
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, absl::Seconds(2));
  echo::RelayReply reply;
  ASSERT_TRUE(rig.stub->Call(&ctx, Request({Work(0)}), &reply).ok());
  EXPECT_THAT(rig.ledger.previous_attempts(), ::testing::ElementsAre("", "1", "2"));
  EXPECT_EQ(rig.metrics.Snapshot().calls_with_attempts(3), 1u);
}

TEST(RetryTest, NonRetryableCodeIsReturnedAtOnce) {
  RetryRig rig(Faults(), absl::Seconds(2), absl::Milliseconds(500));
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, absl::Seconds(2));
  echo::Step careless;
  careless.set_plain_deadline_exceeded(true);  // a DEADLINE_EXCEEDED from below
  echo::RelayReply reply;
  grpc::Status s = rig.stub->Call(&ctx, Request({careless}), &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(rig.ledger.calls(), 1);
  EXPECT_EQ(rig.metrics.Snapshot().retry_decision(RetryOutcome::kBudgetFired), 1u);
}

TEST(RetryTest, PushbackDelayIsHonoured) {
  Faults faults;
  faults.unavailable_first = 1;
  faults.pushback_ms = "60";
  RetryRig rig(faults, absl::Seconds(2), absl::Milliseconds(500));
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, absl::Seconds(2));
  const absl::Time start = absl::Now();
  echo::RelayReply reply;
  ASSERT_TRUE(rig.stub->Call(&ctx, Request({Work(0)}), &reply).ok());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(60));  // waited at least as asked
  EXPECT_EQ(rig.metrics.Snapshot().pushback_honoured, 1u);
}

TEST(RetryTest, NegativePushbackMeansDoNotRetry) {
  Faults faults;
  faults.unavailable_first = 1;
  faults.pushback_ms = "-1";
  RetryRig rig(faults, absl::Seconds(2), absl::Milliseconds(500));
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, absl::Seconds(2));
  echo::RelayReply reply;
  EXPECT_EQ(rig.stub->Call(&ctx, Request({Work(0)}), &reply).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(rig.ledger.calls(), 1);
  EXPECT_EQ(rig.metrics.Snapshot().retry_decision(RetryOutcome::kPushbackDoNotRetry), 1u);
}

TEST(RetryTest, RetryBudgetBoundsRetriesWhenHalfTheCallsFail) {
  Faults faults;
  faults.unavailable_ratio = 0.5;
  faults.seed = 42;
  RetryRig rig(faults, absl::Seconds(2), absl::Milliseconds(500), [](RetryOptions& o) {
    o.retry.initial_backoff = absl::Microseconds(100);
    o.retry.max_backoff = absl::Microseconds(200);
  });
  constexpr int kCalls = 200;
  for (int i = 0; i < kCalls; ++i) {
    grpc::ClientContext ctx;
    testing::SetBudget(ctx, absl::Seconds(2));
    echo::RelayReply reply;
    rig.stub->Call(&ctx, Request({Work(0)}), &reply);
  }
  MetricsSnapshot m = rig.metrics.Snapshot();
  const uint64_t retries = m.retry_decision(RetryOutcome::kRetry);
  // Without a retry budget, 3 attempts at 50 % failure retry ~150 times in
  // 200 calls. The bucket (10 tokens, 0.1 per success, no retries below
  // half) runs dry within a few dozen calls and stays dry.
  EXPECT_GT(retries, 0u);
  EXPECT_LE(retries, 20u);
  EXPECT_GT(m.retry_decision(RetryOutcome::kThrottled), 50u);
  EXPECT_EQ(rig.ledger.calls(), kCalls + static_cast<int>(retries));
}

TEST(RetryTest, CancellingTheLogicalCallStopsAllAttempts) {
  Faults faults;
  faults.hang_first = 100;
  RetryRig rig(faults, absl::Seconds(5), absl::Seconds(1));
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, absl::Seconds(5));
  std::thread canceller([&] {
    EXPECT_TRUE(Eventually([&] { return rig.ledger.calls() > 0; }, absl::Seconds(20),
                           absl::Milliseconds(1)));
    ctx.TryCancel();
  });
  echo::RelayReply reply;
  const absl::Time start = absl::Now();
  grpc::Status s = rig.stub->Call(&ctx, Request({Work(0)}), &reply);
  canceller.join();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));  // not at the 1 s attempt budget
  EXPECT_TRUE(rig.ledger.WaitForCancellations(1, absl::Seconds(10)));
  rig.ledger.Shutdown();
  EXPECT_EQ(rig.ledger.calls(), 1);  // no attempt after the cancel
}

TEST(RetryTest, AttemptThatCannotFitIsNeverSent) {
  Faults faults;
  faults.hang_first = 100;
  RetryRig rig(faults, absl::Milliseconds(400), absl::Milliseconds(160),
               [](RetryOptions& o) { o.budget.min_attempt_budget = absl::Milliseconds(150); });
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, absl::Milliseconds(300));
  echo::RelayReply reply;
  grpc::Status s = rig.stub->Call(&ctx, Request({Work(0)}), &reply);
  // Attempt 1 is cut at 160 ms; < 150 ms are left for attempt 2: not sent.
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  absl::optional<Attribution> a = AttributionOf(s);
  ASSERT_TRUE(a.has_value()) << s.error_message();
  EXPECT_EQ(a->source, DeadlineSource::kAttempt);
  EXPECT_EQ(rig.metrics.Snapshot().retry_decision(RetryOutcome::kNoRoom), 1u);
  // The client made exactly one attempt, and no second attempt reached the
  // ledger. (Whether attempt 1 itself arrived depends on the machine's load:
  // a 160 ms cap may cut it first, so the ledger's call count proves nothing.)
  EXPECT_EQ(rig.metrics.Snapshot().calls_with_attempts(1), 1u);
  EXPECT_EQ(rig.metrics.Snapshot().calls_with_attempts(2), 0u);
  rig.ledger.Shutdown();
  EXPECT_THAT(rig.ledger.previous_attempts(), ::testing::Each(::testing::Eq("")));
}

// A service config that asks gRPC core to retry UNAVAILABLE, 5 attempts in
// all, on every Relay method.
grpc::ChannelArguments CoreRetryArgs() {
  grpc::ChannelArguments args;
  args.SetServiceConfigJSON(R"({"methodConfig": [{
      "name": [{"service": "hopbudget.echo.Relay"}],
      "retryPolicy": {"maxAttempts": 5, "initialBackoff": "0.01s", "maxBackoff": "0.01s",
                      "backoffMultiplier": 1, "retryableStatusCodes": ["UNAVAILABLE"]}}]})");
  return args;
}

TEST(RetryTest, CoreRetriesThatAServiceConfigAsksForAreOffOnTheRetryingChannel) {
  Faults faults;
  faults.unavailable_first = 1000;
  {
    // The precondition: on a plain channel this config makes gRPC core retry.
    RelayHop ledger(Faulty(faults));
    auto stub = echo::Relay::NewStub(grpc::CreateCustomChannel(
        ledger.address(), grpc::InsecureChannelCredentials(), CoreRetryArgs()));
    grpc::ClientContext ctx;
    testing::SetBudget(ctx, absl::Seconds(10));
    echo::RelayReply reply;
    EXPECT_EQ(stub->Call(&ctx, Request({Work(0)}), &reply).error_code(),
              grpc::StatusCode::UNAVAILABLE);
    ledger.Shutdown();
    EXPECT_EQ(ledger.calls(), 5);
  }
  // The same config on hopbudget's retrying channel: only hopbudget's two
  // attempts reach the server, each one call.
  RelayHop ledger(Faulty(faults));
  Metrics metrics;
  auto channel = CreateRetryingChannel(
      ledger.address(), grpc::InsecureChannelCredentials(),
      Options(&metrics, absl::Seconds(2), absl::Milliseconds(500), /*max_attempts=*/2),
      CoreRetryArgs());
  ASSERT_TRUE(channel.ok()) << channel.status();
  auto stub = echo::Relay::NewStub(*channel);
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, absl::Seconds(2));
  echo::RelayReply reply;
  EXPECT_EQ(stub->Call(&ctx, Request({Work(0)}), &reply).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  ledger.Shutdown();
  EXPECT_EQ(ledger.calls(), 2);
  EXPECT_THAT(ledger.previous_attempts(), ::testing::ElementsAre("", "1"));
  EXPECT_EQ(metrics.Snapshot().calls_with_attempts(2), 1u);
}

TEST(RetryTest, InboundCancelReachesTheAttemptsOfARetryingHop) {
  Faults faults;
  faults.hang_first = 100;
  RelayHop ledger(Faulty(faults));
  HopConfig orders_config;
  orders_config.hop = "orders";
  RelayHop orders(orders_config);
  Metrics metrics;
  RetryOptions options = Options(&metrics, absl::Seconds(10), absl::Seconds(5));
  orders.SetNext(ledger.address(), &options);
  auto stub = testing::NewStub(orders.address());
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, absl::Seconds(20));
  std::thread canceller([&] {
    EXPECT_TRUE(
        Eventually([&] { return ledger.calls() > 0; }, absl::Seconds(20), absl::Milliseconds(1)));
    ctx.TryCancel();
  });
  echo::RelayReply reply;
  grpc::Status s = stub->Call(&ctx, Request({Work(0), Work(0)}), &reply);
  canceller.join();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::CANCELLED);
  // The ledger's attempt is cancelled long before its 5 s attempt budget.
  EXPECT_TRUE(ledger.WaitForCancellations(1, absl::Seconds(3)));
}

TEST(RetryTest, HopPolicyThatFindsTheBudgetExhaustedSendsNoAttempt) {
  RelayHop ledger(HopConfig{});
  HopConfig orders_config;
  orders_config.hop = "orders";
  orders_config.policy.min_attempt_budget = absl::Milliseconds(250);
  RelayHop orders(orders_config);
  Metrics metrics;
  RetryOptions options = Options(&metrics, absl::Seconds(10), absl::Seconds(5));
  orders.SetNext(ledger.address(), &options);  // the channel's own minimum is 1 ms
  auto stub = testing::NewStub(orders.address());
  grpc::ClientContext ctx;
  // 600 ms, orders works 400: < 250 ms left for ledger by orders' policy.
  testing::SetBudget(ctx, absl::Milliseconds(600));
  echo::RelayReply reply;
  grpc::Status s = stub->Call(&ctx, Request({Work(400), Work(0)}), &reply);
  ASSERT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  absl::optional<Attribution> a = AttributionOf(s);
  ASSERT_TRUE(a.has_value()) << s.error_message();
  EXPECT_EQ(a->source, DeadlineSource::kExhaustedBeforeCall);
  EXPECT_EQ(a->hop, "orders");
  EXPECT_EQ(ledger.calls(), 0);
}

TEST(RetryTest, ServerStreamingCallDeliversEveryMessage) {
  RetryRig rig(Faults(), absl::Seconds(2), absl::Milliseconds(500));
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, absl::Seconds(2));
  auto reader = rig.stub->Watch(&ctx, Request({Work(0), Work(5), Work(5)}));
  echo::RelayReply msg;
  std::vector<std::string> got;
  while (reader->Read(&msg)) got.push_back(msg.payload());
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_THAT(got, ::testing::ElementsAre("0", "1", "2"));
  EXPECT_EQ(rig.metrics.Snapshot().calls_with_attempts(1), 1u);
}

TEST(RetryTest, ServerStreamingCallIsRetriedBeforeItsFirstMessage) {
  Faults faults;
  faults.unavailable_first = 1;
  RetryRig rig(faults, absl::Seconds(2), absl::Milliseconds(500));
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, absl::Seconds(2));
  auto reader = rig.stub->Watch(&ctx, Request({Work(0), Work(0)}));
  echo::RelayReply msg;
  int n = 0;
  while (reader->Read(&msg)) ++n;
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(n, 2);
  EXPECT_EQ(rig.ledger.calls(), 2);
  EXPECT_EQ(rig.metrics.Snapshot().calls_with_attempts(2), 1u);
}

TEST(RetryTest, ServerStreamingCallIsCommittedByItsFirstMessage) {
  RelayHop ledger(HopConfig{});
  Metrics metrics;
  auto stub =
      RetryingStub(ledger.address(), Options(&metrics, absl::Seconds(2), absl::Milliseconds(150)));
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, absl::Seconds(2));
  // One message, then silence: the attempt budget fires, but the stream has
  // delivered a message and must not be replayed.
  auto reader = stub->Watch(&ctx, Request({testing::Hang()}));
  echo::RelayReply msg;
  int n = 0;
  while (reader->Read(&msg)) ++n;
  grpc::Status s = reader->Finish();
  EXPECT_EQ(n, 1);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  absl::optional<Attribution> a = AttributionOf(s);
  ASSERT_TRUE(a.has_value()) << s.error_message();
  EXPECT_EQ(a->source, DeadlineSource::kAttempt);
  EXPECT_EQ(metrics.Snapshot().retry_decision(RetryOutcome::kCommitted), 1u);
  EXPECT_EQ(ledger.calls(), 1);
}

TEST(RetryTest, CallbackApiUnaryCallIsRetried) {
  Faults faults;
  faults.unavailable_first = 1;
  RetryRig rig(faults, absl::Seconds(2), absl::Milliseconds(500));
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, absl::Seconds(2));
  echo::RelayRequest req = Request({Work(0)});
  echo::RelayReply reply;
  hopbudget::internal::Notification done;
  grpc::Status status;
  rig.stub->async()->Call(&ctx, &req, &reply, [&](grpc::Status s) {
    status = std::move(s);
    done.Notify();
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(reply.hops_size(), 1);
  EXPECT_EQ(rig.ledger.calls(), 2);
}

TEST(RetryTest, GenericStubCallsPassThroughUntouched) {
  // A method unknown to the protobuf pool: the retrying channel cannot know
  // the response type, so it does not hijack the call.
  RelayHop ledger(HopConfig{});
  Metrics metrics;
  RetryOptions options = Options(&metrics, absl::Seconds(2), absl::Milliseconds(500));
  auto channel =
      CreateRetryingChannel(ledger.address(), grpc::InsecureChannelCredentials(), options);
  ASSERT_TRUE(channel.ok());
  grpc::GenericStub generic(*channel);
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, absl::Seconds(2));
  grpc::Slice empty("");
  grpc::ByteBuffer request(&empty, 1), response;
  hopbudget::internal::Notification done;
  grpc::Status status;
  generic.UnaryCall(&ctx, "/no.such.Service/Method", grpc::StubOptions(), &request, &response,
                    [&](grpc::Status s) {
                      status = std::move(s);
                      done.Notify();
                    });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(metrics.Snapshot().calls_with_attempts(1), 0u);
}

TEST(CreateRetryingChannelTest, PolicyWhereRetriesCanNeverRunIsRejected) {
  Metrics metrics;
  RetryOptions options = Options(&metrics, absl::Milliseconds(300), absl::Milliseconds(290));
  options.budget.hop_reserve = absl::Milliseconds(2);
  options.budget.min_attempt_budget = absl::Milliseconds(20);
  absl::Status s =
      CreateRetryingChannel("127.0.0.1:1", grpc::InsecureChannelCredentials(), options).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("attempt_cap (290ms)"));
}

TEST(CreateRetryingChannelTest, UnfitPolicyAcceptedAnywayIsCountedPerCall) {
  RetryRig rig(Faults(), absl::Milliseconds(300), absl::Milliseconds(290), [](RetryOptions& o) {
    o.budget.hop_reserve = absl::Milliseconds(2);
    o.budget.min_attempt_budget = absl::Milliseconds(20);
    o.accept_unfit_policy = true;
  });
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, absl::Seconds(1));
  echo::RelayReply reply;
  ASSERT_TRUE(rig.stub->Call(&ctx, Request({Work(0)}), &reply).ok());
  EXPECT_EQ(rig.metrics.Snapshot().unfit_policy_calls, 1u);
}

// The ledger's clock runs 10 ms ahead: it sees its deadline pass, and says
// so, just before the caller's own gRPC deadline would fire. That makes
// deterministic the race in which the callee's answer arrives first.
class AheadClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now() + absl::Milliseconds(10); }
};

// A ledger whose first call waits until its own inbound deadline and then
// answers DEADLINE_EXCEEDED itself (as a handler giving up does): the server
// interceptor attributes it to source client at ledger. That deadline was
// orders' attempt budget, so orders must retry it.
class GivesUpAtItsDeadline final : public echo::Relay::Service {
 public:
  grpc::Status Call(grpc::ServerContext* ctx, const echo::RelayRequest*,
                    echo::RelayReply*) override {
    if (calls_++ > 0) return grpc::Status::OK;
    const InboundBudget* budget = InboundBudget::Of(*ctx);
    if (budget == nullptr) return grpc::Status(grpc::StatusCode::INTERNAL, "no budget");
    absl::SleepFor(budget->remaining());
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "ledger gave up");
  }
  std::atomic<int> calls_{0};
};

// Orders calls `ledger_service` (hop "ledger", served with `ledger_options`)
// through its retrying channel, 5 s for the call and 200 ms per attempt,
// running `before_call` first. The first attempt must end with orders'
// attempt budget firing, and the retry must succeed.
void ExpectOneRetryAfterTheAttemptBudget(
    grpc::Service* ledger_service, ServerOptions ledger_options,
    const std::function<void()>& before_call = [] {}) {
  ledger_options.hop = "ledger";
  std::string address;
  std::unique_ptr<grpc::Server> ledger =
      testing::ServeBehindHopbudget(ledger_service, ledger_options, &address);
  ASSERT_NE(ledger, nullptr);
  Metrics metrics;
  auto stub = RetryingStub(address, Options(&metrics, absl::Seconds(5), absl::Milliseconds(200)));
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, absl::Seconds(5));
  echo::RelayReply reply;
  before_call();
  grpc::Status s = stub->Call(&ctx, Request({Work(0)}), &reply);
  EXPECT_TRUE(s.ok()) << s.error_message();
  const MetricsSnapshot m = metrics.Snapshot();
  EXPECT_EQ(m.deadline_exceeded(Side::kClient, DeadlineSource::kAttempt, "orders"), 1u)
      << FormatPrometheusText(m, "orders");
  EXPECT_EQ(m.retry_decision(RetryOutcome::kRetry), 1u);
  ledger->Shutdown();
}

TEST(RetryTest, CalleeReportingOurAttemptDeadlineAsItsClientDeadlineIsRetried) {
  GivesUpAtItsDeadline service;
  AheadClock ahead;
  ServerOptions ledger_options;
  ledger_options.clock = &ahead;
  ExpectOneRetryAfterTheAttemptBudget(&service, ledger_options);
  EXPECT_EQ(service.calls_.load(), 2);
}

// Real time, except that the read after Arm() first sleeps `delay`: the
// server interceptor reads the clock when a call arrives, so the armed call
// is seen `delay` late, as if it had spent that long in transit.
class LateArrivalClock final : public Clock {
 public:
  explicit LateArrivalClock(absl::Duration delay) : delay_(delay) {}
  void Arm() { armed_.store(true); }
  absl::Time Now() const override {
    if (armed_.exchange(false)) absl::SleepFor(delay_);
    return absl::Now();
  }

 private:
  const absl::Duration delay_;
  mutable std::atomic<bool> armed_{false};
};

class AnswersOk final : public echo::Relay::Service {
 public:
  grpc::Status Call(grpc::ServerContext*, const echo::RelayRequest*, echo::RelayReply*) override {
    return grpc::Status::OK;
  }
};

// The first attempt reaches the ledger with about 8 ms of its 200 ms
// attempt budget left, below the ledger's 50 ms minimum: the ledger refuses
// it as arrived-expired. That budget was orders' attempt budget, spent in
// transit, so orders must retry it like any attempt budget that fired. (Were
// the machine so slow that the refusal came after orders' own deadline,
// gRPC's local deadline would answer instead: the same verdict.)
TEST(RetryTest, AttemptArrivingExpiredAtTheCalleeIsRetried) {
  AnswersOk service;
  LateArrivalClock late(absl::Milliseconds(192));
  ServerOptions ledger_options;
  ledger_options.policy.min_attempt_budget = absl::Milliseconds(50);
  ledger_options.clock = &late;
  ExpectOneRetryAfterTheAttemptBudget(&service, ledger_options, [&] { late.Arm(); });
}

}  // namespace
}  // namespace hopbudget
