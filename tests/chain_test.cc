// Copyright hopbudget authors.
//
// Three real hops on loopback: client -> gateway -> orders -> ledger.
// Budgets nest strictly hop by hop; every DEADLINE_EXCEEDED reaches the
// client attributed to the budget and hop that fired; a client cancel
// reaches the last hop.
#include <gtest/gtest.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "eventually.h"
#include "hopbudget/client.h"
#include "hopbudget/server.h"
#include "relay_fixture.h"

namespace hopbudget {
namespace {

using testing::Api;
using testing::Eventually;
using testing::HopConfig;
using testing::RelayHop;
using testing::Request;
using testing::Work;

constexpr absl::Duration kReserve = absl::Milliseconds(5);

HopConfig Hop(std::string name, Api api = Api::kSync) {
  HopConfig c;
  c.hop = std::move(name);
  c.api = api;
  c.policy.hop_reserve = kReserve;
  return c;
}

class Chain {
 public:
  explicit Chain(HopConfig gateway = Hop("gateway"), HopConfig orders = Hop("orders"),
                 HopConfig ledger = Hop("ledger"))
      : gateway_(gateway), orders_(orders), ledger_(ledger) {
    gateway_.SetNext(orders_.address());
    orders_.SetNext(ledger_.address());
    stub_ = testing::NewStub(gateway_.address(), true, &client_metrics_);
  }

  grpc::Status Call(absl::Duration budget, std::vector<echo::Step> steps, echo::RelayReply* reply) {
    grpc::ClientContext ctx;
    testing::SetBudget(ctx, budget);
    return stub_->Call(&ctx, Request(std::move(steps)), reply);
  }

  Metrics client_metrics_;
  RelayHop gateway_, orders_, ledger_;
  std::unique_ptr<echo::Relay::Stub> stub_;
};

// A stream relayed for the whole request is not an attempt: gateway's 100 ms
// attempt cap cuts an attempt-scoped watch, while one scoped to the request
// lives until the request deadline less the reserve, and its end is
// attributed to the budget that set that deadline (the client's).
TEST(ChainTest, WatchRelayedForTheWholeRequestOutlivesTheAttemptCap) {
  HopConfig gateway = Hop("gateway");
  gateway.policy.attempt_cap = absl::Milliseconds(100);
  gateway.policy.hop_reserve = absl::Milliseconds(150);
  Chain chain(gateway);
  auto stub = testing::NewStub(chain.gateway_.address());
  for (const bool whole_request : {false, true}) {
    SCOPED_TRACE(whole_request ? "kRequest" : "kAttempt");
    echo::Step relay;
    relay.set_relay_watch_idle_ms(5000);
    relay.set_relay_watch_whole_request(whole_request);
    grpc::ClientContext ctx;
    testing::SetBudget(ctx, absl::Milliseconds(900));
    echo::RelayReply reply;
    const absl::Time start = absl::Now();
    grpc::Status s = stub->Call(&ctx, Request({relay, testing::Hang()}), &reply);
    const absl::Duration took = absl::Now() - start;
    ASSERT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
    absl::optional<Attribution> a = AttributionOf(s);
    ASSERT_TRUE(a.has_value()) << s.error_message();
    EXPECT_EQ(a->hop, "gateway");
    if (whole_request) {
      EXPECT_EQ(a->source, DeadlineSource::kClient);
      EXPECT_GE(took, absl::Milliseconds(600));       // 900 ms less the 150 ms reserve
      EXPECT_GT(a->budget, absl::Milliseconds(800));  // what gateway was given
    } else {
      EXPECT_EQ(a->source, DeadlineSource::kAttempt);
      EXPECT_EQ(a->budget, absl::Milliseconds(100));
      EXPECT_LT(took, absl::Milliseconds(600));
    }
  }
}

// hop[i+1] budget on arrival < hop[i] budget on arrival - work[i] - reserve.
void ExpectStrictNesting(const echo::RelayReply& reply, const std::vector<int>& work_ms) {
  ASSERT_EQ(reply.hops_size(), 3);
  for (int i = 0; i + 1 < reply.hops_size(); ++i) {
    const int64_t upper = reply.hops(i).budget_on_arrival_us() - int64_t{work_ms[i]} * 1000 -
                          absl::ToInt64Microseconds(kReserve);
    EXPECT_LT(reply.hops(i + 1).budget_on_arrival_us(), upper)
        << reply.hops(i).hop() << " -> " << reply.hops(i + 1).hop();
    EXPECT_GT(reply.hops(i + 1).budget_on_arrival_us(), 0);
  }
}

// The DEADLINE_EXCEEDED counts of `m` that are not zero, as
// "side/source=n ...", or "" when there are none.
std::string DeadlineExceededCounted(const MetricsSnapshot& m) {
  std::string out;
  for (Side side : {Side::kClient, Side::kServer}) {
    for (int i = 0; i < kDeadlineSourceCount; ++i) {
      const uint64_t n = m.deadline_exceeded_by_source[static_cast<int>(side)][i];
      if (n == 0) continue;
      out += absl::StrCat(side == Side::kClient ? "client" : "server", "/",
                          DeadlineSourceName(static_cast<DeadlineSource>(i)), "=", n, " ");
    }
  }
  return out;
}

// Waits (real time, bounded) until `metrics` has counted `n` finished server
// calls: a hop counts its call when its handler returns, after the client
// already saw the cancel.
bool WaitForServerCalls(Metrics& metrics, uint64_t n, absl::Duration timeout) {
  return testing::Eventually(
      [&] { return metrics.Snapshot().calls[static_cast<int>(Side::kServer)] >= n; }, timeout,
      absl::Milliseconds(1));
}

TEST(ChainTest, BudgetsNestStrictlyAcrossThreeHops) {
  Chain chain;
  echo::RelayReply reply;
  ASSERT_TRUE(chain.Call(absl::Seconds(2), {Work(20), Work(20), Work(20)}, &reply).ok());
  ExpectStrictNesting(reply, {20, 20, 20});
  EXPECT_EQ(reply.hops(0).source(), "client");
}

TEST(ChainTest, BudgetsNestStrictlyWithLongDeadlinesWhereGrpcTimeoutIsCoarse) {
  // At 10-65 s grpc-timeout is sent in milliseconds and may be rounded up by
  // ~100 ms, more than the 5 ms reserve: only the exact header keeps nesting.
  for (absl::Duration budget : {absl::Seconds(10), absl::Seconds(30), absl::Seconds(65)}) {
    Chain chain;
    echo::RelayReply reply;
    ASSERT_TRUE(chain.Call(budget, {Work(1), Work(1), Work(1)}, &reply).ok());
    ExpectStrictNesting(reply, {1, 1, 1});
  }
}

TEST(ChainTest, CallbackHopsNestToo) {
  Chain chain(Hop("gateway", Api::kCallback), Hop("orders", Api::kCallback),
              Hop("ledger", Api::kCallback));
  echo::RelayReply reply;
  ASSERT_TRUE(chain.Call(absl::Seconds(2), {Work(10), Work(10), Work(10)}, &reply).ok());
  ExpectStrictNesting(reply, {10, 10, 10});
}

TEST(ChainTest, ClientLearnsThatOrdersAttemptBudgetFired) {
  HopConfig orders = Hop("orders");
  orders.policy.attempt_cap = absl::Milliseconds(100);
  Chain chain(Hop("gateway"), orders);
  echo::RelayReply reply;
  grpc::Status s = chain.Call(absl::Seconds(5), {Work(0), Work(0), testing::Hang()}, &reply);
  ASSERT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  absl::optional<Attribution> a = AttributionOf(s);
  ASSERT_TRUE(a.has_value()) << s.error_message();
  EXPECT_EQ(a->source, DeadlineSource::kAttempt);
  EXPECT_EQ(a->hop, "orders");
  EXPECT_EQ(a->budget, absl::Milliseconds(100));
  // Each hop counts what it saw: orders its own attempt budget, the hops
  // above it a downstream expiry.
  EXPECT_EQ(
      chain.orders_.metrics().Snapshot().deadline_exceeded(Side::kClient, DeadlineSource::kAttempt),
      1u);
  EXPECT_EQ(chain.gateway_.metrics().Snapshot().deadline_exceeded(Side::kClient,
                                                                  DeadlineSource::kDownstream),
            1u);
  EXPECT_EQ(chain.client_metrics_.Snapshot().deadline_exceeded(Side::kClient,
                                                               DeadlineSource::kDownstream),
            1u);
  EXPECT_TRUE(chain.ledger_.WaitForCancellations(1, absl::Seconds(10)));
}

TEST(ChainTest, ClientLearnsThatLedgersRequestBudgetFired) {
  HopConfig ledger = Hop("ledger");
  ledger.policy.request_cap = absl::Milliseconds(100);
  Chain chain(Hop("gateway"), Hop("orders"), ledger);
  echo::RelayReply reply;
  grpc::Status s = chain.Call(absl::Seconds(5), {Work(0), Work(0), Work(3000)}, &reply);
  ASSERT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  absl::optional<Attribution> a = AttributionOf(s);
  ASSERT_TRUE(a.has_value()) << s.error_message();
  EXPECT_EQ(a->source, DeadlineSource::kRequest);
  EXPECT_EQ(a->hop, "ledger");
}

TEST(ChainTest, ClientBudgetFiresAtTheDeepestHopFirst) {
  // The reserve makes the deepest call's deadline the earliest one, so the
  // client's budget is seen expiring at orders (calling ledger), not at the
  // client itself.
  HopConfig gateway = Hop("gateway"), orders = Hop("orders");
  gateway.policy.hop_reserve = absl::Milliseconds(50);
  orders.policy.hop_reserve = absl::Milliseconds(200);
  Chain chain(gateway, orders);
  echo::RelayReply reply;
  grpc::Status s =
      chain.Call(absl::Milliseconds(1000), {Work(0), Work(0), testing::Hang()}, &reply);
  ASSERT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  absl::optional<Attribution> a = AttributionOf(s);
  ASSERT_TRUE(a.has_value()) << s.error_message();
  EXPECT_EQ(a->source, DeadlineSource::kClient);
  EXPECT_EQ(a->hop, "orders");
  // The budget reported is the whole budget orders was given (1000 ms less
  // the gateway's 50 ms reserve, less the time to get there), not the share
  // left for its last call (200 ms less again). The 150 ms between the two
  // absorb a slow (sanitized, loaded) machine.
  EXPECT_GT(a->budget, absl::Milliseconds(800));
  EXPECT_LE(a->budget, absl::Milliseconds(950));
}

TEST(ChainTest, ExhaustedBudgetFailsFastAtTheHopWithoutCallingFurther) {
  HopConfig orders = Hop("orders");
  orders.policy.min_attempt_budget = absl::Milliseconds(200);
  Chain chain(Hop("gateway"), orders);
  echo::RelayReply reply;
  // 600 ms budget, orders works 450 ms: < 200 ms left for ledger. The
  // answer comes ~150 ms before the client's own deadline, which must not
  // fire first even on a slow (sanitized, loaded) machine.
  grpc::Status s = chain.Call(absl::Milliseconds(600), {Work(0), Work(450), Work(0)}, &reply);
  ASSERT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  absl::optional<Attribution> a = AttributionOf(s);
  ASSERT_TRUE(a.has_value()) << s.error_message();
  EXPECT_EQ(a->source, DeadlineSource::kExhaustedBeforeCall);
  EXPECT_EQ(a->hop, "orders");
  EXPECT_EQ(chain.ledger_.calls(), 0);
}

TEST(ChainTest, HopWithHigherMinimumRefusesOnArrival) {
  HopConfig ledger = Hop("ledger");
  ledger.policy.min_attempt_budget = absl::Milliseconds(250);
  Chain chain(Hop("gateway"), Hop("orders"), ledger);
  echo::RelayReply reply;
  // ledger gets ~190 ms of 600 (orders works 400): refused, ~200 ms before
  // the client's own deadline.
  grpc::Status s = chain.Call(absl::Milliseconds(600), {Work(0), Work(400), Work(0)}, &reply);
  ASSERT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  absl::optional<Attribution> a = AttributionOf(s);
  ASSERT_TRUE(a.has_value()) << s.error_message();
  EXPECT_EQ(a->source, DeadlineSource::kArrivedExpired);
  EXPECT_EQ(a->hop, "ledger");
  chain.ledger_.Shutdown();  // the handler may still be running: wait for it
  EXPECT_EQ(chain.ledger_.refused(), 1);
}

TEST(ChainTest, ClientCancelReachesTheLastHop) {
  Chain chain;
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, absl::Seconds(20));
  std::thread canceller([&] {
    EXPECT_TRUE(Eventually([&] { return chain.ledger_.calls() > 0; }, absl::Seconds(20),
                           absl::Milliseconds(1)));
    ctx.TryCancel();
  });
  echo::RelayReply reply;
  grpc::Status s = chain.stub_->Call(&ctx, Request({Work(0), Work(0), testing::Hang()}), &reply);
  canceller.join();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(chain.ledger_.WaitForCancellations(1, absl::Seconds(10)));
  // Every hop counted the call as ended, on both sides, and none counted a
  // DEADLINE_EXCEEDED: a cancel is not a budget that fired.
  for (RelayHop* hop : {&chain.gateway_, &chain.orders_, &chain.ledger_}) {
    SCOPED_TRACE(hop->address());
    ASSERT_TRUE(WaitForServerCalls(hop->metrics(), 1, absl::Seconds(10)));
    const MetricsSnapshot m = hop->metrics().Snapshot();
    EXPECT_EQ(m.calls_with_code(Side::kServer, "/hopbudget.echo.Relay/Call",
                                absl::StatusCode::kCancelled),
              1u);
    EXPECT_EQ(DeadlineExceededCounted(m), "");
  }
  // The hops that relayed saw their downstream call end too.
  EXPECT_EQ(chain.gateway_.metrics().Snapshot().calls[static_cast<int>(Side::kClient)], 1u);
  EXPECT_EQ(chain.orders_.metrics().Snapshot().calls[static_cast<int>(Side::kClient)], 1u);
  const MetricsSnapshot client = chain.client_metrics_.Snapshot();
  EXPECT_EQ(client.calls_with_code(Side::kClient, "/hopbudget.echo.Relay/Call",
                                   absl::StatusCode::kCancelled),
            1u);
  EXPECT_EQ(DeadlineExceededCounted(client), "");
}

}  // namespace
}  // namespace hopbudget
