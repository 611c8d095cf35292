// Copyright hopbudget authors.
//
// Metrics counted over real gRPC: each budget source is counted once, at the
// hop and side where it fired, with the hop where it fired as label; calls
// by method and code; budgets at arrival; retries by reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "hopbudget/advanced/retry.h"
#include "hopbudget/advanced/retry_loop.h"
#include "hopbudget/client.h"
#include "hopbudget/server.h"
#include "metrics_recorder.h"
#include "relay_fixture.h"

namespace hopbudget {
namespace {

using testing::HopConfig;
using testing::RelayHop;
using testing::Request;
using testing::Work;

constexpr char kCall[] = "/hopbudget.echo.Relay/Call";

// The bucket of `h` that `seconds` falls into (le: <=).
size_t Bucket(const HistogramSnapshot& h, double seconds) {
  return std::lower_bound(h.bounds.begin(), h.bounds.end(), seconds) - h.bounds.begin();
}

HopConfig Hop(std::string name) {
  HopConfig c;
  c.hop = std::move(name);
  return c;
}

grpc::Status CallWithBudget(echo::Relay::Stub& stub, absl::Duration budget,
                            std::vector<echo::Step> steps) {
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, budget);
  echo::RelayReply reply;
  return stub.Call(&ctx, Request(std::move(steps)), &reply);
}

TEST(MetricsIntegrationTest, SuccessfulCallsAreCountedByMethodCodeAndBudget) {
  RelayHop ledger(Hop("ledger"));
  Metrics client_metrics;
  auto stub = testing::ConnectedStub(ledger.address(), true, &client_metrics);
  ASSERT_NE(stub, nullptr);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(CallWithBudget(*stub, absl::Seconds(2), {Work(0)}).ok());
  ledger.Shutdown();
  const MetricsSnapshot s = ledger.metrics().Snapshot();
  EXPECT_EQ(s.calls_with_code(Side::kServer, kCall, absl::StatusCode::kOk), 3u);
  const MethodSnapshot* m = s.method(kCall);
  ASSERT_NE(m, nullptr) << "a method of a registered service gets its own label";
  EXPECT_EQ(m->budget_at_arrival.count, 3u);
  // Just under 2 s lands in the (1.834, 2] bucket.
  EXPECT_EQ(m->budget_at_arrival.counts[Bucket(m->budget_at_arrival, 1.999)], 3u);
  EXPECT_EQ(m->budget_remaining.count, 3u);
  EXPECT_EQ(client_metrics.Snapshot().calls_with_code(Side::kClient, kCall, absl::StatusCode::kOk),
            3u);
}

// The arrival metrics say what the caller brought; the request budget, what
// the hop allowed itself after its cap.
TEST(MetricsIntegrationTest, ArrivalMetricsSayWhatTheCallerBroughtBeforeTheCap) {
  HopConfig config = Hop("ledger");
  config.policy.request_cap = absl::Milliseconds(300);
  RelayHop ledger(config);
  auto stub = testing::ConnectedStub(ledger.address());
  ASSERT_NE(stub, nullptr);
  ASSERT_TRUE(CallWithBudget(*stub, absl::Seconds(2), {Work(0)}).ok());
  {
    grpc::ClientContext no_deadline;
    echo::RelayReply reply;
    ASSERT_TRUE(stub->Call(&no_deadline, Request({Work(0)}), &reply).ok());
  }
  ledger.Shutdown();
  const MetricsSnapshot s = ledger.metrics().Snapshot();
  const MethodSnapshot* m = s.method(kCall);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->calls_without_deadline, 1u) << "the cap does not hide a caller without a deadline";
  // The caller's 2 s, in the (1.834, 2] bucket, and only the call that had one.
  EXPECT_EQ(m->budget_at_arrival.count, 1u);
  EXPECT_EQ(m->budget_at_arrival.counts[Bucket(m->budget_at_arrival, 1.999)], 1u);
  // Both calls had the 300 ms cap as their request budget: (0.2973, 0.3242].
  EXPECT_EQ(m->request_budget.count, 2u);
  EXPECT_EQ(m->request_budget.counts[Bucket(m->request_budget, 0.300)], 2u);
}

TEST(MetricsIntegrationTest, ArrivedExpiredIsCountedAtTheRefusingHop) {
  HopConfig config = Hop("ledger");
  config.policy.min_attempt_budget = absl::Milliseconds(500);
  RelayHop ledger(config);
  auto stub = testing::ConnectedStub(ledger.address());
  EXPECT_EQ(CallWithBudget(*stub, absl::Milliseconds(300), {Work(0)}).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  ledger.Shutdown();
  const MetricsSnapshot s = ledger.metrics().Snapshot();
  EXPECT_EQ(s.deadline_exceeded(Side::kServer, DeadlineSource::kArrivedExpired, "ledger"), 1u);
  EXPECT_EQ(s.calls_with_code(Side::kServer, kCall, absl::StatusCode::kDeadlineExceeded), 1u);
}

TEST(MetricsIntegrationTest, RequestCapIsCountedAtItsHopAndAsDownstreamAbove) {
  HopConfig ledger_config = Hop("ledger");
  ledger_config.policy.request_cap = absl::Milliseconds(100);
  RelayHop orders(Hop("orders")), ledger(ledger_config);
  orders.SetNext(ledger.address());
  auto stub = testing::ConnectedStub(orders.address());
  EXPECT_EQ(CallWithBudget(*stub, absl::Seconds(5), {Work(0), testing::Hang()}).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  orders.Shutdown();
  ledger.Shutdown();
  const MetricsSnapshot l = ledger.metrics().Snapshot();
  EXPECT_EQ(l.deadline_exceeded(Side::kServer, DeadlineSource::kRequest, "ledger"), 1u);
  EXPECT_EQ(l.calls_with_code(Side::kServer, kCall, absl::StatusCode::kDeadlineExceeded), 1u);
  const MetricsSnapshot o = orders.metrics().Snapshot();
  // orders' client side saw ledger's attribution: downstream, fired at ledger.
  EXPECT_EQ(o.deadline_exceeded(Side::kClient, DeadlineSource::kDownstream, "ledger"), 1u);
  EXPECT_EQ(o.deadline_exceeded(Side::kServer, DeadlineSource::kDownstream, "ledger"), 1u);
  EXPECT_EQ(o.deadline_exceeded(Side::kServer, DeadlineSource::kRequest), 0u);
}

TEST(MetricsIntegrationTest, AttemptBudgetAndRetryAreCountedAtTheRetryingHop) {
  HopConfig ledger_config = Hop("ledger");
  ledger_config.faults.hang_first = 1;
  RelayHop orders(Hop("orders")), ledger(ledger_config);
  RetryOptions retry;
  retry.budget.attempt_cap = absl::Milliseconds(150);
  retry.retry.max_attempts = 3;
  retry.retry.initial_backoff = absl::Milliseconds(1);
  retry.retry.max_backoff = absl::Milliseconds(2);
  orders.SetNext(ledger.address(), &retry);
  auto stub = testing::ConnectedStub(orders.address());
  ASSERT_TRUE(CallWithBudget(*stub, absl::Seconds(10), {Work(0), Work(0)}).ok());
  orders.Shutdown();
  ledger.Shutdown();
  const MetricsSnapshot o = orders.metrics().Snapshot();
  EXPECT_EQ(o.deadline_exceeded(Side::kClient, DeadlineSource::kAttempt, "orders"), 1u);
  const MethodSnapshot* m = o.method(kCall);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->retries[static_cast<int>(absl::StatusCode::kDeadlineExceeded)], 1u);
  EXPECT_EQ(m->attempts.count, 1u);
  EXPECT_EQ(m->attempts.counts[1], 1u);  // le="2"
  EXPECT_EQ(o.calls_with_code(Side::kClient, kCall, absl::StatusCode::kDeadlineExceeded), 1u);
  EXPECT_EQ(o.calls_with_code(Side::kClient, kCall, absl::StatusCode::kOk), 1u);
  EXPECT_EQ(o.calls_with_code(Side::kServer, kCall, absl::StatusCode::kOk), 1u);
}

TEST(MetricsIntegrationTest, RetryWithoutRoomIsCountedAsSkippedForLackOfBudget) {
  HopConfig ledger_config = Hop("ledger");
  ledger_config.faults.hang_first = 1;
  RelayHop orders(Hop("orders")), ledger(ledger_config);
  RetryOptions retry;
  retry.budget.attempt_cap = absl::Milliseconds(250);
  retry.retry.max_attempts = 3;
  retry.retry.initial_backoff = absl::Milliseconds(1);
  retry.retry.max_backoff = absl::Milliseconds(2);
  retry.budget.min_attempt_budget = absl::Milliseconds(200);
  orders.SetNext(ledger.address(), &retry);
  auto stub = testing::ConnectedStub(orders.address());
  // 400 ms: the first attempt takes 250, the 150 left are below 200.
  EXPECT_EQ(CallWithBudget(*stub, absl::Milliseconds(400), {Work(0), Work(0)}).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  orders.Shutdown();
  ledger.Shutdown();
  const MetricsSnapshot o = orders.metrics().Snapshot();
  EXPECT_EQ(o.retry_decision(RetryOutcome::kNoRoom), 1u);
  // orders' /deadlinez entry for the call says why its one attempt stood.
  const std::vector<RecentCall> recent = orders.metrics().RecentCalls();
  ASSERT_EQ(recent.size(), 1u);
  EXPECT_EQ(recent[0].code, absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(recent[0].retry_skipped, RetryOutcome::kNoRoom);
}

TEST(MetricsIntegrationTest, ExhaustedBeforeCallIsCountedWithoutTouchingTheNetwork) {
  HopConfig orders_config = Hop("orders");
  orders_config.policy.min_attempt_budget = absl::Milliseconds(100);
  RelayHop orders(orders_config), ledger(Hop("ledger"));
  orders.SetNext(ledger.address());
  auto stub = testing::ConnectedStub(orders.address());
  // orders works 250 ms of a 300 ms budget: less than 100 ms left for ledger.
  EXPECT_EQ(CallWithBudget(*stub, absl::Milliseconds(300), {Work(250), Work(0)}).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  orders.Shutdown();
  ledger.Shutdown();
  const MetricsSnapshot o = orders.metrics().Snapshot();
  const uint64_t exhausted =
      o.deadline_exceeded(Side::kClient, DeadlineSource::kExhaustedBeforeCall, "orders");
  const uint64_t client = o.deadline_exceeded(Side::kServer, DeadlineSource::kClient, "orders");
  // On a loaded machine the whole budget may pass before orders looks.
  EXPECT_EQ(exhausted + client, 1u);
  EXPECT_EQ(ledger.calls(), 0);
}

TEST(MetricsIntegrationTest, ClientDeadlineIsCountedByTheCallerAndTheHopThatSawItPass) {
  RelayHop ledger(Hop("ledger"));
  Metrics client_metrics;
  auto stub = testing::ConnectedStub(ledger.address(), true, &client_metrics);
  // The ledger's deadline is later than the caller's by the time the call
  // took to arrive, and the caller's expiry reaches it as a cancel: it takes
  // a cancel within the last tenth of its budget for its deadline
  // (DeadlineSlack). A 1 s budget keeps that 100 ms window well above the
  // arrival lag of a loaded machine (a 200 ms budget's 20 ms was not).
  EXPECT_EQ(CallWithBudget(*stub, absl::Seconds(1), {testing::Hang()}).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  ledger.Shutdown();
  EXPECT_EQ(
      client_metrics.Snapshot().deadline_exceeded(Side::kClient, DeadlineSource::kClient, "client"),
      1u);
  const MetricsSnapshot l = ledger.metrics().Snapshot();
  EXPECT_EQ(l.deadline_exceeded(Side::kServer, DeadlineSource::kClient, "ledger"), 1u);
  EXPECT_EQ(l.calls_with_code(Side::kServer, kCall, absl::StatusCode::kDeadlineExceeded), 1u);
}

// Latency over real gRPC: orders retries ledger's hung first attempt on a
// retrying channel. Each attempt is observed on its own, the logical call
// once with both attempts in it, and a plain channel's call as both.
TEST(MetricsIntegrationTest, LatencyIsObservedPerAttemptPerLogicalCallAndPerServerCall) {
  HopConfig ledger_config = Hop("ledger");
  ledger_config.faults.hang_first = 1;
  RelayHop orders(Hop("orders")), ledger(ledger_config);
  RetryOptions retry;
  retry.budget.attempt_cap = absl::Milliseconds(150);
  retry.retry.max_attempts = 3;
  retry.retry.initial_backoff = absl::Milliseconds(1);
  retry.retry.max_backoff = absl::Milliseconds(2);
  orders.SetNext(ledger.address(), &retry);
  Metrics client_metrics;
  auto stub = testing::ConnectedStub(orders.address(), true, &client_metrics);
  ASSERT_TRUE(CallWithBudget(*stub, absl::Seconds(10), {Work(0), Work(0)}).ok());
  orders.Shutdown();
  ledger.Shutdown();

  const MetricsSnapshot o = orders.metrics().Snapshot();
  const MethodSnapshot* m = o.method(kCall);
  ASSERT_NE(m, nullptr);
  const HistogramSnapshot* cut =
      m->latency_of(LatencyKind::kClientAttempt, absl::StatusCode::kDeadlineExceeded);
  const HistogramSnapshot* ok_attempt =
      m->latency_of(LatencyKind::kClientAttempt, absl::StatusCode::kOk);
  const HistogramSnapshot* call = m->latency_of(LatencyKind::kClientCall, absl::StatusCode::kOk);
  const HistogramSnapshot* served = m->latency_of(LatencyKind::kServerCall, absl::StatusCode::kOk);
  ASSERT_TRUE(cut && ok_attempt && call && served);
  EXPECT_EQ(cut->count, 1u);
  // Cut at the attempt budget. The loop fixes the attempt's deadline when it
  // makes the attempt; the attempt's latency starts when the call reaches
  // the interceptor, a little later (0.4 ms seen under ctest -j2): not less
  // than the budget minus that gap.
  EXPECT_GE(cut->sum, 0.140);
  EXPECT_LT(cut->sum, 5.0);
  EXPECT_EQ(ok_attempt->count, 1u);
  EXPECT_EQ(call->count, 1u) << "one logical call, not one per attempt";
  EXPECT_EQ(m->succeeded_after_retry, 1u);
  EXPECT_GE(call->sum, cut->sum + ok_attempt->sum);
  EXPECT_EQ(m->latency_of(LatencyKind::kClientCall, absl::StatusCode::kDeadlineExceeded), nullptr);
  EXPECT_EQ(served->count, 1u);
  EXPECT_GE(served->sum, call->sum);  // orders answered after its downstream call ended
  EXPECT_LT(served->sum, 5.0);

  // The caller's plain channel: its call is its one attempt.
  const MetricsSnapshot c = client_metrics.Snapshot();
  const MethodSnapshot* cm = c.method(kCall);
  ASSERT_NE(cm, nullptr);
  const HistogramSnapshot* a = cm->latency_of(LatencyKind::kClientAttempt, absl::StatusCode::kOk);
  const HistogramSnapshot* l = cm->latency_of(LatencyKind::kClientCall, absl::StatusCode::kOk);
  ASSERT_TRUE(a && l);
  EXPECT_EQ(a->count, 1u);
  EXPECT_EQ(l->count, 1u);
  EXPECT_EQ(a->counts, l->counts);
  EXPECT_GE(a->sum, served->sum);

  // Ledger served two calls: the hung one (cut by orders) and the retry.
  const MetricsSnapshot ls = ledger.metrics().Snapshot();
  uint64_t ledger_calls = 0;
  for (const LatencySnapshot& x : ls.method(kCall)->latency) {
    if (x.kind == LatencyKind::kServerCall) ledger_calls += x.seconds.count;
  }
  EXPECT_EQ(ledger_calls, 2u);
}

// RetryLoop (the explicit loop around a plain stub): the budget interceptor
// under it sees each attempt, the loop the logical call.
TEST(MetricsIntegrationTest, RetryLoopObservesTheLogicalCallOnceAndEachAttempt) {
  HopConfig ledger_config = Hop("ledger");
  ledger_config.faults.unavailable_first = 2;
  RelayHop ledger(ledger_config);
  Metrics metrics;
  ClientOptions client;
  client.hop = "orders";
  client.metrics = &metrics;
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  auto channel = CreateChannel(ledger.address(), grpc::InsecureChannelCredentials(), client, args);
  ASSERT_TRUE(channel.ok()) << channel.status();
  auto stub = echo::Relay::NewStub(*channel);
  RetryLoopOptions options;
  options.hop = "orders";
  options.method = kCall;
  options.metrics = &metrics;
  options.retry.max_attempts = 3;
  options.retry.initial_backoff = absl::Milliseconds(1);
  options.retry.max_backoff = absl::Milliseconds(2);
  auto loop = RetryLoop::Create(options);
  ASSERT_TRUE(loop.ok()) << loop.status();
  const echo::RelayRequest request = testing::Request({Work(0)});
  echo::RelayReply reply;
  ASSERT_TRUE(
      (*loop)
          ->Call(LogicalCall::WithDeadline(absl::Now() + absl::Seconds(10)),
                 [&](grpc::ClientContext* attempt) { return stub->Call(attempt, request, &reply); })
          .ok());
  ledger.Shutdown();
  const MetricsSnapshot s = metrics.Snapshot();
  const MethodSnapshot* m = s.method(kCall);
  ASSERT_NE(m, nullptr);
  const HistogramSnapshot* failed =
      m->latency_of(LatencyKind::kClientAttempt, absl::StatusCode::kUnavailable);
  ASSERT_NE(failed, nullptr);
  EXPECT_EQ(failed->count, 2u);
  EXPECT_EQ(m->latency_of(LatencyKind::kClientCall, absl::StatusCode::kUnavailable), nullptr)
      << "a retried attempt is not a logical call";
  const HistogramSnapshot* call = m->latency_of(LatencyKind::kClientCall, absl::StatusCode::kOk);
  ASSERT_NE(call, nullptr);
  EXPECT_EQ(call->count, 1u);
  EXPECT_EQ(s.calls_with_attempts(3), 1u);
  EXPECT_EQ(m->succeeded_after_retry, 1u);
}

// Health checks, reflection and channelz, and any prefix the options add
// (the demo's Admin service), are infrastructure: labelled apart.
TEST(MetricsIntegrationTest, InfrastructureMethodsAreKeptApartByRole) {
  MetricsOptions o;
  o.infrastructure_method_prefixes.push_back("/hopbudget.echo.Relay/");
  absl::StatusOr<std::unique_ptr<Metrics>> created = Metrics::Create(o);
  ASSERT_TRUE(created.ok()) << created.status();
  Metrics& m = **created;
  internal::Record(m).CountCallEnd(Side::kServer, m.Method("/hopbudget.echo.Relay/Call"),
                                   absl::StatusCode::kOk);
  internal::Record(m).CountCallEnd(Side::kServer, MethodId{}, absl::StatusCode::kOk);
  const MetricsSnapshot s = m.Snapshot();
  EXPECT_EQ(s.method("/hopbudget.echo.Relay/Call")->role, MethodRole::kInfrastructure);
  EXPECT_EQ(s.method("other")->role, MethodRole::kApplication);
  Metrics plain;
  internal::Record(plain).CountCallEnd(Side::kServer, plain.Method("/hopbudget.echo.Relay/Call"),
                                       absl::StatusCode::kOk);
  EXPECT_EQ(plain.Snapshot().method("/hopbudget.echo.Relay/Call")->role, MethodRole::kApplication);
}

// Method() remembers a name by its address, as gRPC passes each call's
// name from its method table; a generic call's name can later hold another
// method at the same address, and must be labelled by what it says.
TEST(MetricsIntegrationTest, ANameAtAnAddressThatHeldAnotherIsLabelledByItsName) {
  Metrics m;
  char name[64] = "/hopbudget.echo.Relay/Call";
  const MethodId relay = m.Method(name);
  EXPECT_NE(relay.index, 0);
  EXPECT_EQ(m.Method(name).index, relay.index);  // from the cache
  std::strcpy(name, "/no.such.Service/Method");
  EXPECT_EQ(m.Method(name).index, 0);
  std::strcpy(name, "/hopbudget.echo.Relay/Call");
  EXPECT_EQ(m.Method(name).index, relay.index);
  const std::string copy = name;  // another address, the same name
  EXPECT_EQ(m.Method(copy).index, relay.index);
}

// Counting each expiry once across a chain. Every hop that relays an expiry
// counts it (source="downstream"), and the server behind a client-side
// expiry sees its caller's deadline pass (side="server", source="client").
// docs/metrics.md's query keeps the count where the budget fired:
//   {side="client", source!="downstream"} or
//   {side="server", source!~"downstream|client"}
// This is that selector over the same counters, on three chains.
using FiredCounts = std::map<std::pair<std::string, std::string>, uint64_t>;  // (source, hop)

void AddFired(const Metrics& metrics, FiredCounts* fired, uint64_t* naive) {
  for (const DeadlineExceededCount& d : metrics.Snapshot().deadline_exceeded_by_hop) {
    *naive += d.count;
    const bool fired_here = d.side == Side::kClient ? d.source != DeadlineSource::kDownstream
                                                    : d.source != DeadlineSource::kDownstream &&
                                                          d.source != DeadlineSource::kClient;
    if (fired_here) (*fired)[{std::string(DeadlineSourceName(d.source)), d.hop}] += d.count;
  }
}

TEST(MetricsIntegrationTest, DocumentedSelectorCountsEachExpiryOnceAcrossTheChain) {
  struct Scenario {
    const char* name;
    FiredCounts expected;
  };
  const Scenario scenarios[] = {
      {"request cap fires at ledger", {{{"request", "ledger"}, 1}}},
      {"both attempts cut at orders", {{{"attempt", "orders"}, 2}}},
      {"the caller's deadline passes in gateway", {{{"client", "client"}, 1}}},
  };
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(scenarios[i].name);
    HopConfig ledger_config = Hop("ledger");
    if (i == 0) ledger_config.policy.request_cap = absl::Milliseconds(100);
    RelayHop gateway(Hop("gateway")), orders(Hop("orders")), ledger(ledger_config);
    RetryOptions retry;
    retry.budget.attempt_cap = absl::Milliseconds(150);
    retry.retry.max_attempts = 2;
    retry.retry.initial_backoff = absl::Milliseconds(1);
    retry.retry.max_backoff = absl::Milliseconds(2);
    gateway.SetNext(orders.address());
    orders.SetNext(ledger.address(), i == 1 ? &retry : nullptr);
    Metrics client_metrics;
    auto stub = testing::ConnectedStub(gateway.address(), true, &client_metrics);
    std::vector<echo::Step> steps = {Work(0), Work(0), Work(300)};
    if (i == 1) steps = {Work(0), Work(0), testing::Hang()};
    if (i == 2) steps = {testing::Hang()};
    const absl::Duration budget = i == 2 ? absl::Milliseconds(300) : absl::Seconds(10);
    EXPECT_EQ(CallWithBudget(*stub, budget, steps).error_code(),
              grpc::StatusCode::DEADLINE_EXCEEDED);
    gateway.Shutdown();
    orders.Shutdown();
    ledger.Shutdown();
    FiredCounts fired;
    uint64_t naive = 0;
    for (const Metrics* m :
         {&client_metrics, &gateway.metrics(), &orders.metrics(), &ledger.metrics()}) {
      AddFired(*m, &fired, &naive);
    }
    EXPECT_EQ(fired, scenarios[i].expected);
    // Each hop above relays it: a naive sum counts it three or four times.
    if (i < 2) {
      EXPECT_GT(naive, scenarios[i].expected.begin()->second + 2);
    }
  }
}

}  // namespace
}  // namespace hopbudget
