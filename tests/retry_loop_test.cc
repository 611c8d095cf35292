// Copyright hopbudget authors.
//
// The typed retry loop against real servers on loopback, in its sync and
// callback forms: the retry scenarios the retrying channel passes (the
// incident's hang then success, UNAVAILABLE twice then success, pushback,
// the throttle, no room for another attempt, cancel of the logical call),
// one server call per attempt, and no thread held between attempts.
#include "hopbudget/advanced/retry_loop.h"

#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "eventually.h"
#include "hopbudget/client.h"
#include "hopbudget/hop.h"
#include "hopbudget/server.h"
#include "relay_fixture.h"
#include "sync.h"
#include "test_hop.h"

namespace hopbudget {
namespace {

using ::testing::ElementsAre;
using testing::Eventually;
using testing::Faults;
using testing::HopConfig;
using testing::RelayHop;
using testing::Request;
using testing::Work;

enum class Form { kSync, kCallback };

std::string FormName(const ::testing::TestParamInfo<Form>& info) {
  return info.param == Form::kSync ? "Sync" : "Callback";
}

HopConfig Ledger(Faults faults = {}) {
  HopConfig c;
  c.hop = "ledger";
  c.faults = std::move(faults);
  return c;
}

RetryLoopOptions LoopOptions(Metrics* metrics, absl::Duration request_cap,
                             absl::Duration attempt_cap, int max_attempts = 3) {
  RetryLoopOptions o;
  o.hop = "orders";
  o.method = "/hopbudget.echo.Relay/Call";
  o.metrics = metrics;
  o.budget.request_cap = request_cap;
  o.budget.attempt_cap = attempt_cap;
  o.retry.max_attempts = max_attempts;
  o.retry.initial_backoff = absl::Milliseconds(5);
  o.retry.max_backoff = absl::Milliseconds(20);
  return o;
}

// A ledger, the "orders" stub on a budget-interceptor channel, and a loop.
struct LoopRig {
  LoopRig(Faults faults, RetryLoopOptions options) : ledger(Ledger(std::move(faults))) {
    ClientOptions client;
    client.hop = "orders";
    client.metrics = options.metrics;
    auto channel = CreateChannel(ledger.address(), grpc::InsecureChannelCredentials(), client);
    EXPECT_TRUE(channel.ok()) << channel.status();
    stub = echo::Relay::NewStub(*channel);
    auto created = RetryLoop::Create(std::move(options));
    EXPECT_TRUE(created.ok()) << created.status();
    loop = *std::move(created);
  }
  RelayHop ledger;
  std::unique_ptr<echo::Relay::Stub> stub;
  std::unique_ptr<RetryLoop> loop;
};

// One logical call of `form` at the edge with `budget`, to completion.
grpc::Status CallOnce(Form form, LoopRig& rig, absl::Duration budget,
                      echo::RelayReply* reply = nullptr,
                      std::shared_ptr<RetryingCall>* handle = nullptr) {
  echo::RelayReply local;
  if (reply == nullptr) reply = &local;
  const echo::RelayRequest request = Request({Work(0)});
  const LogicalCall call = LogicalCall::WithDeadline(absl::Now() + budget);
  if (form == Form::kSync) {
    return rig.loop->Call(call, [&](grpc::ClientContext* attempt) {
      return rig.stub->Call(attempt, request, reply);
    });
  }
  hopbudget::internal::Notification done;
  grpc::Status result;
  auto started = rig.loop->Start(
      call,
      [&](grpc::ClientContext* attempt, std::function<void(grpc::Status)> on_attempt) {
        rig.stub->async()->Call(attempt, &request, reply, std::move(on_attempt));
      },
      [&](grpc::Status s) {
        result = std::move(s);
        done.Notify();
      });
  if (handle != nullptr) *handle = started;
  done.WaitForNotification();
  return result;
}

class RetryLoopTest : public ::testing::TestWithParam<Form> {};

INSTANTIATE_TEST_SUITE_P(Forms, RetryLoopTest, ::testing::Values(Form::kSync, Form::kCallback),
                         FormName);

TEST_P(RetryLoopTest, SuccessOnTheFirstAttemptIsOneServerCall) {
  Metrics metrics;
  LoopRig rig({}, LoopOptions(&metrics, absl::Seconds(5), absl::Seconds(2)));
  echo::RelayReply reply;
  ASSERT_TRUE(CallOnce(GetParam(), rig, absl::Seconds(5), &reply).ok());
  EXPECT_EQ(reply.hops_size(), 1);
  rig.ledger.Shutdown();
  EXPECT_EQ(rig.ledger.calls(), 1);
  EXPECT_THAT(rig.ledger.previous_attempts(), ElementsAre(""));
  EXPECT_EQ(metrics.Snapshot().retry_decision(RetryOutcome::kSucceeded), 1u);
}

TEST_P(RetryLoopTest, UnavailableTwiceThenSuccessIsThreeServerCalls) {
  Faults faults;
  faults.unavailable_first = 2;
  Metrics metrics;
  // Budgets far above what the calls need: only the UNAVAILABLEs retry, even
  // on a loaded machine.
  LoopRig rig(faults, LoopOptions(&metrics, absl::Seconds(5), absl::Seconds(2)));
  const grpc::Status s = CallOnce(GetParam(), rig, absl::Seconds(5));
  ASSERT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
  rig.ledger.Shutdown();
  EXPECT_EQ(rig.ledger.calls(), 3);
  EXPECT_THAT(rig.ledger.previous_attempts(), ElementsAre("", "1", "2"));
  const MetricsSnapshot m = metrics.Snapshot();
  EXPECT_EQ(m.retry_decision(RetryOutcome::kRetry), 2u);
  EXPECT_EQ(m.attempts_per_call[2], 1u);  // one logical call of 3 attempts
}

// The incident's shape: an attempt budget inside the request budget cuts
// the hang, and attempt two still fits.
TEST_P(RetryLoopTest, HangIsCutAtTheAttemptBudgetAndTheRetrySucceeds) {
  Faults faults;
  faults.hang_first = 1;
  Metrics metrics;
  // On a loaded machine attempt 2 may time out too: what matters is that
  // the attempt budget fired and the retries ran within the request budget.
  LoopRig rig(faults, LoopOptions(&metrics, absl::Seconds(3), absl::Milliseconds(500)));
  const absl::Time start = absl::Now();
  const grpc::Status s = CallOnce(GetParam(), rig, absl::Seconds(3));
  ASSERT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  const MetricsSnapshot m = metrics.Snapshot();
  EXPECT_GE(m.retry_decision(RetryOutcome::kRetry), 1u);
  EXPECT_EQ(m.retry_decision(RetryOutcome::kSucceeded), 1u);
  EXPECT_EQ(m.deadline_exceeded(Side::kClient, DeadlineSource::kAttempt),
            m.retry_decision(RetryOutcome::kRetry));
  EXPECT_TRUE(rig.ledger.WaitForCancellations(1, absl::Seconds(10)));
  rig.ledger.Shutdown();
  EXPECT_EQ(rig.ledger.calls(), 1 + static_cast<int>(m.retry_decision(RetryOutcome::kRetry)));
}

TEST_P(RetryLoopTest, PushbackDelayIsHonoured) {
  Faults faults;
  faults.unavailable_first = 1;
  faults.pushback_ms = "150";
  Metrics metrics;
  LoopRig rig(faults, LoopOptions(&metrics, absl::Seconds(5), absl::Seconds(2)));
  const absl::Time start = absl::Now();
  ASSERT_TRUE(CallOnce(GetParam(), rig, absl::Seconds(5)).ok());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(150));
  EXPECT_EQ(metrics.Snapshot().pushback_honoured, 1u);
  rig.ledger.Shutdown();
  EXPECT_EQ(rig.ledger.calls(), 2);
}

TEST_P(RetryLoopTest, NegativePushbackMeansDoNotRetry) {
  Faults faults;
  faults.unavailable_first = 1;
  faults.pushback_ms = "-1";
  Metrics metrics;
  LoopRig rig(faults, LoopOptions(&metrics, absl::Seconds(5), absl::Seconds(2)));
  EXPECT_EQ(CallOnce(GetParam(), rig, absl::Seconds(5)).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(metrics.Snapshot().retry_decision(RetryOutcome::kPushbackDoNotRetry), 1u);
  rig.ledger.Shutdown();
  EXPECT_EQ(rig.ledger.calls(), 1);
}

TEST_P(RetryLoopTest, ThrottleBoundsRetriesWhenHalfTheCallsFail) {
  Faults faults;
  faults.unavailable_ratio = 0.5;
  faults.seed = 42;
  Metrics metrics;
  RetryLoopOptions options = LoopOptions(&metrics, absl::Seconds(5), absl::Seconds(2));
  options.retry.initial_backoff = absl::Microseconds(100);
  options.retry.max_backoff = absl::Microseconds(200);
  LoopRig rig(faults, options);
  constexpr int kCalls = 200;
  for (int i = 0; i < kCalls; ++i) CallOnce(GetParam(), rig, absl::Seconds(5));
  const MetricsSnapshot m = metrics.Snapshot();
  const uint64_t retries = m.retry_decision(RetryOutcome::kRetry);
  // Unthrottled, 3 attempts at 50 % failure retry ~150 times in 200 calls;
  // the bucket (10 tokens, 0.1 per success) runs dry within a few dozen.
  EXPECT_GT(retries, 0u);
  EXPECT_LE(retries, 20u);
  EXPECT_GT(m.retry_decision(RetryOutcome::kThrottled), 50u);
  rig.ledger.Shutdown();
  EXPECT_EQ(rig.ledger.calls(), kCalls + static_cast<int>(retries));
}

TEST_P(RetryLoopTest, AttemptThatCannotFitIsNeverSent) {
  Faults faults;
  faults.hang_first = 100;
  Metrics metrics;
  RetryLoopOptions options =
      LoopOptions(&metrics, absl::Milliseconds(400), absl::Milliseconds(160));
  options.budget.min_attempt_budget = absl::Milliseconds(150);
  LoopRig rig(faults, options);
  const grpc::Status s = CallOnce(GetParam(), rig, absl::Milliseconds(300));
  // Attempt 1 is cut at 160 ms; < 150 ms are left for attempt 2: not sent.
  ASSERT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  const absl::optional<Attribution> a = AttributionOf(s);
  ASSERT_TRUE(a.has_value()) << s.error_message();
  EXPECT_EQ(a->source, DeadlineSource::kAttempt);
  EXPECT_EQ(a->hop, "orders");
  EXPECT_EQ(metrics.Snapshot().retry_decision(RetryOutcome::kNoRoom), 1u);
  rig.ledger.Shutdown();
  EXPECT_LE(rig.ledger.calls(), 1);  // (0 when a loaded machine cut attempt 1 before it arrived)
}

TEST_P(RetryLoopTest, ExpiredLogicalDeadlineFailsFastWithoutTheNetwork) {
  Metrics metrics;
  LoopRig rig({}, LoopOptions(&metrics, absl::Seconds(5), absl::Seconds(2)));
  const grpc::Status s = CallOnce(GetParam(), rig, -absl::Milliseconds(1));
  ASSERT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  const absl::optional<Attribution> a = AttributionOf(s);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->source, DeadlineSource::kExhaustedBeforeCall);
  rig.ledger.Shutdown();
  EXPECT_EQ(rig.ledger.calls(), 0);
}

TEST(RetryLoopCallbackTest, CancellingTheLogicalCallStopsEveryAttempt) {
  Faults faults;
  faults.hang_first = 100;
  Metrics metrics;
  LoopRig rig(faults, LoopOptions(&metrics, absl::Seconds(5), absl::Seconds(1)));
  std::shared_ptr<RetryingCall> handle;
  std::thread canceller([&] {
    EXPECT_TRUE(Eventually([&] { return rig.ledger.calls() > 0; }, absl::Seconds(20),
                           absl::Milliseconds(1)));
    // The handle is published before the first attempt can have ended.
    ASSERT_TRUE(Eventually([&] { return std::atomic_load(&handle) != nullptr; }, absl::Seconds(20),
                           absl::Milliseconds(1)));
    std::atomic_load(&handle)->TryCancel();
  });
  const absl::Time start = absl::Now();
  echo::RelayReply reply;
  const echo::RelayRequest request = Request({Work(0)});
  hopbudget::internal::Notification done;
  grpc::Status result;
  std::atomic_store(&handle,
                    rig.loop->Start(
                        LogicalCall::WithDeadline(absl::Now() + absl::Seconds(5)),
                        [&](grpc::ClientContext* attempt, std::function<void(grpc::Status)> d) {
                          rig.stub->async()->Call(attempt, &request, &reply, std::move(d));
                        },
                        [&](grpc::Status s) {
                          result = std::move(s);
                          done.Notify();
                        }));
  done.WaitForNotification();
  canceller.join();
  EXPECT_EQ(result.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));  // not at the 1 s attempt budget
  EXPECT_TRUE(rig.ledger.WaitForCancellations(1, absl::Seconds(10)));
  rig.ledger.Shutdown();
  EXPECT_EQ(rig.ledger.calls(), 1);
}

// Inside a sync handler the logical call is the inbound call: its cancel
// reaches the attempt in flight, and no attempt follows.
class LoopFront final : public echo::Relay::Service {
 public:
  LoopFront(RetryLoop* loop, echo::Relay::Stub* next) : loop_(loop), next_(next) {}
  grpc::Status Call(grpc::ServerContext* ctx, const echo::RelayRequest* req,
                    echo::RelayReply* reply) override {
    echo::RelayRequest sub;
    sub.mutable_steps()->CopyFrom(req->steps());
    sub.mutable_steps()->DeleteSubrange(0, 1);
    return loop_->Call(LogicalCall::Of(*ctx), [&](grpc::ClientContext* attempt) {
      return next_->Call(attempt, sub, reply);
    });
  }

 private:
  RetryLoop* loop_;
  echo::Relay::Stub* next_;
};

TEST(RetryLoopSyncTest, InboundCancelStopsTheAttemptsOfTheHandlersLoop) {
  Faults faults;
  faults.hang_first = 100;
  Metrics metrics;
  LoopRig rig(faults, LoopOptions(&metrics, absl::Seconds(5), absl::Seconds(1)));
  LoopFront front(rig.loop.get(), rig.stub.get());
  ServerOptions server;
  server.hop = "orders";
  server.metrics = &metrics;
  std::string address;
  std::unique_ptr<grpc::Server> front_server =
      testing::ServeBehindHopbudget(&front, server, &address);
  ASSERT_NE(front_server, nullptr);
  auto stub = testing::NewStub(address);
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, absl::Seconds(5));
  std::thread canceller([&] {
    EXPECT_TRUE(Eventually([&] { return rig.ledger.calls() > 0; }, absl::Seconds(20),
                           absl::Milliseconds(1)));
    ctx.TryCancel();
  });
  echo::RelayReply reply;
  const absl::Time start = absl::Now();
  const grpc::Status s = stub->Call(&ctx, Request({Work(0), Work(0)}), &reply);
  canceller.join();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  EXPECT_TRUE(rig.ledger.WaitForCancellations(1, absl::Seconds(10)));
  front_server->Shutdown();
  rig.ledger.Shutdown();
  EXPECT_EQ(rig.ledger.calls(), 1);
}

// A loop made from a Hop: each call takes its method's entry in the Hop's
// table (retryPolicy, perAttemptRecvTimeout, timeout), and the loop and the
// Hop's channel share the hop's name, so an attempt budget is retried.

// "Call" retries UNAVAILABLE with a 300 ms attempt cap; "Write" has no
// retryPolicy. `extra`: more of the config's top level, after a comma.
std::string RetryConfig(const std::string& extra = "") {
  return absl::StrCat(R"({"methodConfig": [
      {"name": [{"service": "hopbudget.echo.Relay", "method": "Call"}], "timeout": "5s",
       "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.005s", "maxBackoff": "0.02s",
                       "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"],
                       "perAttemptRecvTimeout": "0.3s"}},
      {"name": [{"service": "hopbudget.echo.Relay", "method": "Write"}], "timeout": "5s"}])",
                      extra, "}");
}

enum class Rpc { kCall, kWrite };

// One logical call of `rpc` through a loop made from `hop`, on the Hop's
// channel to `ledger`, in `form`, with a 5 s deadline at the edge.
grpc::Status CallThroughHop(Form form, const Hop& hop, RelayHop& ledger, Rpc rpc,
                            RetryLoop* loop = nullptr) {
  std::unique_ptr<RetryLoop> own;
  if (loop == nullptr) {
    absl::StatusOr<std::unique_ptr<RetryLoop>> made = RetryLoop::Create(
        hop, rpc == Rpc::kCall ? "/hopbudget.echo.Relay/Call" : "/hopbudget.echo.Relay/Write");
    EXPECT_TRUE(made.ok()) << made.status();
    if (!made.ok()) return grpc::Status(grpc::StatusCode::INTERNAL, "no loop");
    own = *std::move(made);
    loop = own.get();
  }
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      CreateChannel(hop, ledger.address(), grpc::InsecureChannelCredentials());
  EXPECT_TRUE(channel.ok()) << channel.status();
  if (!channel.ok()) return grpc::Status(grpc::StatusCode::INTERNAL, "no channel");
  auto stub = echo::Relay::NewStub(*channel);
  const echo::RelayRequest request = Request({Work(0)});
  echo::RelayReply reply;
  const LogicalCall call = LogicalCall::WithDeadline(absl::Now() + absl::Seconds(5));
  const auto sync_rpc = [&](grpc::ClientContext* attempt) {
    return rpc == Rpc::kCall ? stub->Call(attempt, request, &reply)
                             : stub->Write(attempt, request, &reply);
  };
  if (form == Form::kSync) return loop->Call(call, sync_rpc);
  hopbudget::internal::Notification done;
  grpc::Status result;
  loop->Start(
      call,
      [&](grpc::ClientContext* attempt, std::function<void(grpc::Status)> on_attempt) {
        if (rpc == Rpc::kCall) {
          stub->async()->Call(attempt, &request, &reply, std::move(on_attempt));
        } else {
          stub->async()->Write(attempt, &request, &reply, std::move(on_attempt));
        }
      },
      [&](grpc::Status s) {
        result = std::move(s);
        done.Notify();
      });
  done.WaitForNotification();
  return result;
}

TEST_P(RetryLoopTest, AHopsLoopRetriesOnlyTheMethodsItsConfigCallsRetryable) {
  Metrics metrics;
  std::unique_ptr<Hop> hop = testing::MakeTestHop("orders", &metrics, RetryConfig());
  ASSERT_NE(hop, nullptr);
  Faults faults;
  faults.unavailable_first = 2;
  {
    RelayHop ledger(Ledger(faults));
    const grpc::Status s = CallThroughHop(GetParam(), *hop, ledger, Rpc::kCall);
    EXPECT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
    ledger.Shutdown();
    EXPECT_EQ(ledger.calls(), 3);
    EXPECT_THAT(ledger.previous_attempts(), ElementsAre("", "1", "2"));
  }
  {
    // A write the config gives no retryPolicy is sent once.
    RelayHop ledger(Ledger(faults));
    EXPECT_EQ(CallThroughHop(GetParam(), *hop, ledger, Rpc::kWrite).error_code(),
              grpc::StatusCode::UNAVAILABLE);
    ledger.Shutdown();
    EXPECT_EQ(ledger.calls(), 1);
  }
}

// The attempt cap is the method's perAttemptRecvTimeout, and the channel
// made from the same Hop attributes the cut to this hop's attempt budget:
// the loop retries it (with RetryLoopOptions, a hop name that differs from
// the channel's would end the call there).
TEST_P(RetryLoopTest, AnAttemptCutAtAHopsPerAttemptRecvTimeoutIsRetried) {
  Metrics metrics;
  std::unique_ptr<Hop> hop = testing::MakeTestHop("orders", &metrics, RetryConfig());
  ASSERT_NE(hop, nullptr);
  Faults faults;
  faults.hang_first = 1;
  RelayHop ledger(Ledger(faults));
  const grpc::Status s = CallThroughHop(GetParam(), *hop, ledger, Rpc::kCall);
  EXPECT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
  const MetricsSnapshot m = metrics.Snapshot();
  EXPECT_GE(m.deadline_exceeded(Side::kClient, DeadlineSource::kAttempt), 1u);
  EXPECT_EQ(m.retry_decision(RetryOutcome::kRetry),
            m.deadline_exceeded(Side::kClient, DeadlineSource::kAttempt));
  EXPECT_EQ(m.retry_decision(RetryOutcome::kSucceeded), 1u);
}

TEST(RetryLoopHopTest, AReloadAppliesFromTheNextCall) {
  Metrics metrics;
  // At first "Call" has no retryPolicy.
  std::unique_ptr<Hop> hop = testing::MakeTestHop("orders", &metrics, R"({"methodConfig": [
      {"name": [{"service": "hopbudget.echo.Relay", "method": "Call"}], "timeout": "5s"}]})");
  ASSERT_NE(hop, nullptr);
  absl::StatusOr<std::unique_ptr<RetryLoop>> loop =
      RetryLoop::Create(*hop, "/hopbudget.echo.Relay/Call");
  ASSERT_TRUE(loop.ok()) << loop.status();
  Faults faults;
  faults.unavailable_first = 2;
  RelayHop ledger(Ledger(faults));
  EXPECT_EQ(CallThroughHop(Form::kSync, *hop, ledger, Rpc::kCall, loop->get()).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(ledger.calls(), 1);
  ASSERT_TRUE(hop->ReloadServiceConfig(RetryConfig()).ok());
  const grpc::Status s = CallThroughHop(Form::kSync, *hop, ledger, Rpc::kCall, loop->get());
  EXPECT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
  ledger.Shutdown();
  EXPECT_EQ(ledger.calls(), 3);  // the second call: UNAVAILABLE, then its retry
}

// Shadow mode: one attempt under the logical deadline itself, as if the
// loop were not there (gRPC core has the method's retryPolicy then).
TEST(RetryLoopHopTest, AMethodInShadowModeGetsOneUncappedAttempt) {
  Metrics metrics;
  std::unique_ptr<Hop> hop = testing::MakeTestHop("orders", &metrics, RetryConfig(R"(,
    "hopbudget": {"methodPolicy": [
      {"name": [{"service": "hopbudget.echo.Relay", "method": "Call"}], "shadow": true}]})"));
  ASSERT_NE(hop, nullptr);
  absl::StatusOr<std::unique_ptr<RetryLoop>> loop =
      RetryLoop::Create(*hop, "/hopbudget.echo.Relay/Call");
  ASSERT_TRUE(loop.ok()) << loop.status();
  const LogicalCall call = LogicalCall::WithDeadline(absl::Now() + absl::Seconds(5));
  absl::Time attempt_deadline = absl::InfinitePast();
  int attempts = 0;
  const grpc::Status s = (*loop)->Call(call, [&](grpc::ClientContext* attempt) {
    ++attempts;
    attempt_deadline = absl::FromChrono(attempt->deadline());
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "down");
  });
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(attempts, 1);
  // The logical deadline, not now + 300 ms (the attempt cap).
  EXPECT_LE(absl::AbsDuration(attempt_deadline - call.deadline), absl::Microseconds(1));
  EXPECT_EQ(metrics.Snapshot().retry_decision(RetryOutcome::kRetry), 0u);
}

TEST(RetryLoopCreateTest, AHopsLoopNeedsAFullMethodName) {
  Metrics metrics;
  std::unique_ptr<Hop> hop = testing::MakeTestHop("orders", &metrics, RetryConfig());
  ASSERT_NE(hop, nullptr);
  for (const char* bad : {"", "Call", "hopbudget.echo.Relay/Call", "/hopbudget.echo.Relay",
                          "/hopbudget.echo.Relay/", "//Call", "/a/b/c"}) {
    absl::StatusOr<std::unique_ptr<RetryLoop>> loop = RetryLoop::Create(*hop, bad);
    ASSERT_FALSE(loop.ok()) << bad;
    EXPECT_EQ(loop.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(loop.status().message()),
                ::testing::HasSubstr(absl::StrCat("\"", bad, "\" is not a full method name")));
  }
}

TEST(RetryLoopCreateTest, PolicyWhereRetriesCanNeverRunIsRejectedNamingTheNumbers) {
  RetryLoopOptions o = LoopOptions(nullptr, absl::Seconds(5), absl::Seconds(10));
  absl::StatusOr<std::unique_ptr<RetryLoop>> loop = RetryLoop::Create(o);
  ASSERT_FALSE(loop.ok());
  EXPECT_THAT(std::string(loop.status().message()), ::testing::HasSubstr("attempt_cap (10s)"));
}

TEST(RetryLoopCreateTest, BadHopNameIsRejected) {
  RetryLoopOptions o = LoopOptions(nullptr, absl::Seconds(1), absl::Milliseconds(100));
  o.hop = "has space";
  absl::StatusOr<std::unique_ptr<RetryLoop>> loop = RetryLoop::Create(o);
  ASSERT_FALSE(loop.ok());
  EXPECT_THAT(std::string(loop.status().message()), ::testing::HasSubstr("has space"));
}

TEST(RetryLoopCreateTest, UnfitPolicyAcceptedAnywayIsCountedPerCall) {
  Metrics metrics;
  // Nests (2 990 + 2 < 3 000), but a timed-out attempt leaves less than the
  // 20 ms minimum for another.
  RetryLoopOptions o = LoopOptions(&metrics, absl::Seconds(3), absl::Milliseconds(2990));
  o.budget.hop_reserve = absl::Milliseconds(2);
  o.budget.min_attempt_budget = absl::Milliseconds(20);
  ASSERT_FALSE(RetryLoop::Create(o).ok());
  o.accept_unfit_policy = true;
  LoopRig rig({}, o);
  ASSERT_TRUE(CallOnce(Form::kSync, rig, absl::Seconds(3)).ok());
  EXPECT_EQ(metrics.Snapshot().unfit_policy_calls, 1u);
}

int ThreadCount() {
  int n = 0;
  if (DIR* dir = opendir("/proc/self/task")) {
    while (dirent* e = readdir(dir)) n += e->d_name[0] != '.';
    closedir(dir);
  }
  return n;
}

// 1 000 logical calls of the callback form, all waiting out a backoff at
// once: the waits sit on the timer service, not on threads.
TEST(RetryLoopCallbackTest, ThousandCallsBackingOffHoldNoThreads) {
  constexpr int kCalls = 1000;
  constexpr int kLoops = 4;  // a throttle per loop: 250 failures stay above half of 1000
  Faults faults;
  faults.unavailable_first = kCalls;
  faults.pushback_ms = "5000";
  Metrics metrics;
  RetryLoopOptions options = LoopOptions(&metrics, absl::Seconds(30), absl::Seconds(10), 2);
  options.throttle.max_tokens = 1000;
  LoopRig rig(faults, options);
  std::vector<std::unique_ptr<RetryLoop>> loops;
  for (int i = 0; i < kLoops; ++i) loops.push_back(*RetryLoop::Create(options));

  // Warm-up with the same load shape, so that gRPC's own pools have grown.
  HopConfig healthy_config = Ledger();
  RelayHop healthy(healthy_config);
  auto healthy_stub = testing::NewStub(healthy.address());
  {
    std::atomic<int> left{kCalls};
    hopbudget::internal::Notification all;
    std::vector<echo::RelayReply> replies(kCalls);
    std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
    const echo::RelayRequest request = Request({Work(0)});
    for (int i = 0; i < kCalls; ++i) {
      contexts.push_back(std::make_unique<grpc::ClientContext>());
      healthy_stub->async()->Call(contexts.back().get(), &request, &replies[i], [&](grpc::Status) {
        if (--left == 0) all.Notify();
      });
    }
    ASSERT_TRUE(all.WaitForNotificationWithTimeout(absl::Seconds(60)));
  }
  const int before = ThreadCount();

  const echo::RelayRequest request = Request({Work(0)});
  std::vector<echo::RelayReply> replies(kCalls);
  std::atomic<int> left{kCalls};
  hopbudget::internal::Notification all_done;
  std::atomic<int> ok{0};
  for (int i = 0; i < kCalls; ++i) {
    loops[i % kLoops]->Start(
        LogicalCall::WithDeadline(absl::Now() + absl::Seconds(30)),
        [&, i](grpc::ClientContext* attempt, std::function<void(grpc::Status)> done) {
          rig.stub->async()->Call(attempt, &request, &replies[i], std::move(done));
        },
        [&](grpc::Status s) {
          if (s.ok()) ++ok;
          if (--left == 0) all_done.Notify();
        });
  }
  // Every call has failed once and is waiting out its 5 s pushback.
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (metrics.Snapshot().retry_decision(RetryOutcome::kRetry) < kCalls &&
         absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  ASSERT_EQ(metrics.Snapshot().retry_decision(RetryOutcome::kRetry), uint64_t{kCalls});
  // The ledger's sync server grew threads to answer 1 000 calls at once and
  // lets them go once idle: wait (bounded, well inside the backoff) for the
  // count to settle. 1 000 waits each holding a thread never would.
  int during = ThreadCount();
  Eventually(
      [&] {
        during = ThreadCount();
        return during <= before + 8;
      },
      absl::Seconds(3), absl::Milliseconds(20));
  EXPECT_LE(during, before + 8) << "threads before " << before << ", during backoff " << during;
  EXPECT_EQ(left.load(), kCalls) << "measured while every call was still backing off";
  ASSERT_TRUE(all_done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  EXPECT_EQ(ok.load(), kCalls);
  EXPECT_EQ(left.load(), 0);
}

// Issue 29: `on_done` never runs while an attempt function is still
// running, whether the attempt runs inside Start (the first) or on the
// timer's thread after a backoff (the retry), even when the attempt ends
// before its attempt function returns.
TEST(RetryLoopThreadsTest, OnDoneWaitsForTheAttemptFunctionToReturn) {
  Metrics metrics;
  auto loop = RetryLoop::Create(LoopOptions(&metrics, absl::Seconds(5), absl::Seconds(2)));
  ASSERT_TRUE(loop.ok()) << loop.status();
  for (int fail_first : {0, 1}) {
    std::atomic<int> attempts{0};
    std::atomic<bool> last_returned{false};
    bool returned_at_done = false;
    grpc::Status final;
    hopbudget::internal::Notification done;
    (*loop)->Start(
        LogicalCall::WithDeadline(absl::Now() + absl::Seconds(5)),
        [&](grpc::ClientContext*, std::function<void(grpc::Status)> attempt_done) {
          const bool fail = attempts.fetch_add(1) < fail_first;
          last_returned.store(false);
          attempt_done(fail ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "try again")
                            : grpc::Status::OK);
          last_returned.store(true);
        },
        [&](grpc::Status s) {
          returned_at_done = last_returned.load();
          final = std::move(s);
          done.Notify();
        });
    ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
    EXPECT_TRUE(final.ok()) << final.error_message();
    EXPECT_EQ(attempts.load(), fail_first + 1);
    EXPECT_TRUE(returned_at_done) << "fail_first=" << fail_first;
  }
}

// `attempt` and what it refers to need only stay valid until `on_done`
// has run: a caller may drop its stub and channel right after. The loop
// must not then destroy the last attempt's context (which holds the
// channel) on gRPC's callback thread: gRPC 1.51 cannot shut a channel's
// callback queue down from there (grpc#32584), and aborted
// ("assertion failed: prior > 0") in the first run of the Hop loop tests.
TEST(RetryLoopThreadsTest, TheCallerMayDropItsChannelOnceOnDoneHasRun) {
  Metrics metrics;
  auto loop = RetryLoop::Create(LoopOptions(&metrics, absl::Seconds(5), absl::Seconds(2)));
  ASSERT_TRUE(loop.ok()) << loop.status();
  RelayHop ledger(Ledger());
  for (int i = 0; i < 200; ++i) {
    ClientOptions client;
    client.hop = "orders";
    client.metrics = &metrics;
    auto channel = CreateChannel(ledger.address(), grpc::InsecureChannelCredentials(), client);
    ASSERT_TRUE(channel.ok()) << channel.status();
    auto stub = echo::Relay::NewStub(*channel);
    channel->reset();  // the stub holds the only reference
    const echo::RelayRequest request = Request({Work(0)});
    echo::RelayReply reply;
    hopbudget::internal::Notification done;
    grpc::Status result;
    (*loop)->Start(
        LogicalCall::WithDeadline(absl::Now() + absl::Seconds(5)),
        [&](grpc::ClientContext* attempt, std::function<void(grpc::Status)> on_attempt) {
          stub->async()->Call(attempt, &request, &reply, std::move(on_attempt));
        },
        [&](grpc::Status s) {
          result = std::move(s);
          done.Notify();
        });
    ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
    ASSERT_TRUE(result.ok()) << result.error_message();
    stub.reset();
  }
}

}  // namespace
}  // namespace hopbudget
