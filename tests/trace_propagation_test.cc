// Copyright hopbudget authors.
//
// The per-hop budget trace over real gRPC: every hop adds its entry, the
// original caller receives the whole chain in order, and a callee's bad
// trace is dropped and counted, never passed on.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "hopbudget/advanced/trace.h"
#include "hopbudget/client.h"
#include "hopbudget/server.h"
#include "relay_fixture.h"

namespace hopbudget {
namespace {

using testing::Api;
using testing::HopConfig;
using testing::RelayHop;
using testing::Request;
using testing::Work;

HopConfig Hop(std::string name, Api api = Api::kSync) {
  HopConfig c;
  c.hop = std::move(name);
  c.api = api;
  return c;
}

std::vector<std::string> Hops(const BudgetTrace& t) {
  std::vector<std::string> out;
  for (const HopTrace& h : t.hops) out.push_back(h.hop);
  return out;
}

class TraceOverApis : public ::testing::TestWithParam<Api> {};

TEST_P(TraceOverApis, ThreeHopCallBringsTheWholeWaterfallInOrder) {
  RelayHop gateway(Hop("gateway", GetParam())), orders(Hop("orders", GetParam())),
      ledger(Hop("ledger", GetParam()));
  gateway.SetNext(orders.address());
  orders.SetNext(ledger.address());
  auto stub = testing::NewStub(gateway.address());
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, absl::Seconds(5));
  RequestTrace(ctx);  // a successful call answers with its trace when asked
  echo::RelayReply reply;
  ASSERT_TRUE(stub->Call(&ctx, Request({Work(20), Work(10), Work(5)}), &reply).ok());

  const BudgetTrace trace = TraceOf(ctx);
  ASSERT_EQ(Hops(trace), (std::vector<std::string>{"gateway", "orders", "ledger"}))
      << FormatWaterfall(trace);
  EXPECT_FALSE(trace.truncated);
  EXPECT_EQ(trace.hops[0].attempts, 1);
  EXPECT_EQ(trace.hops[1].attempts, 1);
  EXPECT_EQ(trace.hops[2].attempts, 0);
  for (const HopTrace& h : trace.hops) {
    EXPECT_EQ(h.code, absl::StatusCode::kOk) << h.hop;
    EXPECT_EQ(h.source, DeadlineSource::kNone) << h.hop;
    EXPECT_LE(h.budget_at_arrival, absl::Seconds(5)) << h.hop;
  }
  // Budgets shrink down the chain, and each hop spent at least its own work
  // plus what it waited for below it.
  EXPECT_LT(trace.hops[1].budget_at_arrival,
            trace.hops[0].budget_at_arrival - absl::Milliseconds(20));
  EXPECT_LT(trace.hops[2].budget_at_arrival,
            trace.hops[1].budget_at_arrival - absl::Milliseconds(10));
  EXPECT_GE(trace.hops[2].spent, absl::Milliseconds(5));
  EXPECT_GE(trace.hops[1].spent, absl::Milliseconds(15));
  EXPECT_GE(trace.hops[0].spent, absl::Milliseconds(35));
  EXPECT_GE(trace.hops[0].spent, trace.hops[1].spent);
}

INSTANTIATE_TEST_SUITE_P(Apis, TraceOverApis,
                         ::testing::Values(Api::kSync, Api::kCallback, Api::kAsync),
                         [](const auto& info) {
                           return std::string(info.param == Api::kSync       ? "Sync"
                                              : info.param == Api::kCallback ? "Callback"
                                                                             : "Async");
                         });

TEST(TraceTest, CallWithoutDeadlineShowsNoBudgetAtEveryHop) {
  RelayHop gateway(Hop("gateway")), ledger(Hop("ledger"));
  gateway.SetNext(ledger.address());
  auto stub = testing::NewStub(gateway.address());
  grpc::ClientContext ctx;
  RequestTrace(ctx);
  echo::RelayReply reply;
  ASSERT_TRUE(stub->Call(&ctx, Request({Work(0), Work(0)}), &reply).ok());
  const BudgetTrace trace = TraceOf(ctx);
  ASSERT_EQ(Hops(trace), (std::vector<std::string>{"gateway", "ledger"}));
  EXPECT_EQ(trace.hops[0].budget_at_arrival, absl::InfiniteDuration());
  EXPECT_EQ(trace.hops[1].budget_at_arrival, absl::InfiniteDuration());
}

TEST(TraceTest, RetriedHopShowsEveryAttemptBelowIt) {
  HopConfig ledger_config = Hop("ledger");
  ledger_config.faults.unavailable_first = 1;
  RelayHop gateway(Hop("gateway")), ledger(ledger_config);
  RetryOptions retry;
  retry.retry.max_attempts = 3;
  retry.retry.initial_backoff = absl::Milliseconds(1);
  retry.retry.max_backoff = absl::Milliseconds(2);
  gateway.SetNext(ledger.address(), &retry);
  auto stub = testing::NewStub(gateway.address());
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, absl::Seconds(5));
  RequestTrace(ctx);  // the retrying channel passes the request on to every attempt
  echo::RelayReply reply;
  ASSERT_TRUE(stub->Call(&ctx, Request({Work(0), Work(0)}), &reply).ok());
  const BudgetTrace trace = TraceOf(ctx);
  ASSERT_EQ(Hops(trace), (std::vector<std::string>{"gateway", "ledger", "ledger"}))
      << FormatWaterfall(trace);
  EXPECT_EQ(trace.hops[0].attempts, 2);
  EXPECT_EQ(trace.hops[1].code, absl::StatusCode::kUnavailable);
  EXPECT_EQ(trace.hops[2].code, absl::StatusCode::kOk);
}

// The trace costs a build and a serialization per answer: a successful
// answer carries it only when asked, a failed one always.
TEST(TraceTest, SuccessfulCallCarriesNoTraceUnlessAsked) {
  RelayHop gateway(Hop("gateway")), ledger(Hop("ledger"));
  gateway.SetNext(ledger.address());
  auto stub = testing::NewStub(gateway.address());
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, absl::Seconds(5));
  echo::RelayReply reply;
  ASSERT_TRUE(stub->Call(&ctx, Request({Work(0), Work(0)}), &reply).ok());
  EXPECT_EQ(ctx.GetServerTrailingMetadata().count(kTraceTrailer), 0u);
  EXPECT_TRUE(TraceOf(ctx).hops.empty());
}

TEST(TraceTest, FailedCallCarriesTheTraceUnasked) {
  RelayHop gateway(Hop("gateway")), ledger(Hop("ledger"));
  gateway.SetNext(ledger.address());
  auto stub = testing::NewStub(gateway.address());
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, absl::Seconds(5));
  echo::Step careless;
  careless.set_plain_deadline_exceeded(true);
  echo::RelayReply reply;
  ASSERT_EQ(stub->Call(&ctx, Request({Work(0), careless}), &reply).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(Hops(TraceOf(ctx)), (std::vector<std::string>{"gateway", "ledger"}));
}

TEST(TraceTest, TraceModeAlwaysAnswersEveryCallWithItsTrace) {
  ServerOptions options;
  options.hop = "ledger";
  options.trace = TraceMode::kAlways;
  class Echo final : public echo::Relay::Service {
    grpc::Status Call(grpc::ServerContext*, const echo::RelayRequest*, echo::RelayReply*) override {
      return grpc::Status::OK;
    }
  } service;
  std::string address;
  std::unique_ptr<grpc::Server> server = testing::ServeBehindHopbudget(&service, options, &address);
  ASSERT_NE(server, nullptr);
  auto stub = testing::NewStub(address);
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, absl::Seconds(5));
  echo::RelayReply reply;
  ASSERT_TRUE(stub->Call(&ctx, Request({Work(0)}), &reply).ok());
  EXPECT_EQ(Hops(TraceOf(ctx)), std::vector<std::string>{"ledger"});
  server->Shutdown();
}

TEST(TraceTest, HopCutByItsRequestCapLeavesTheCallersEntryToTellWhatFired) {
  HopConfig orders_config = Hop("orders");
  orders_config.policy.request_cap = absl::Milliseconds(200);
  RelayHop gateway(Hop("gateway")), orders(orders_config), ledger(Hop("ledger"));
  gateway.SetNext(orders.address());
  orders.SetNext(ledger.address());
  auto stub = testing::NewStub(gateway.address());
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, absl::Seconds(5));
  echo::RelayReply reply;
  grpc::Status s = stub->Call(&ctx, Request({Work(0), Work(0), testing::Hang()}), &reply);
  ASSERT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
  // orders' cap cancels its call: whether orders' own entry still leaves
  // depends on whether its handler's answer or the cancel reaches gRPC
  // first. The gateway's entry always carries what fired below it.
  const BudgetTrace trace = TraceOf(ctx);
  ASSERT_GE(trace.hops.size(), 1u);
  ASSERT_LE(trace.hops.size(), 2u) << FormatWaterfall(trace);
  EXPECT_EQ(trace.hops[0].hop, "gateway");
  EXPECT_EQ(trace.hops[0].code, absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(trace.hops[0].source, DeadlineSource::kRequest);
  EXPECT_EQ(trace.hops[0].attempts, 1);
  // orders always made its own entry (its /deadlinez ring keeps it), whether
  // or not the entry reached the wire; when it did, it is that entry.
  orders.Shutdown();
  const std::vector<RecentCall> recent = orders.metrics().RecentCalls();
  ASSERT_EQ(recent.size(), 1u);
  ASSERT_FALSE(recent[0].trace.hops.empty());
  const HopTrace& own = recent[0].trace.hops[0];
  EXPECT_EQ(own.hop, "orders");
  EXPECT_EQ(own.code, absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(own.source, DeadlineSource::kRequest);
  if (trace.hops.size() == 2) {
    EXPECT_EQ(trace.hops[1].hop, own.hop);
    EXPECT_EQ(trace.hops[1].code, own.code);
    EXPECT_EQ(trace.hops[1].source, own.source);
  }
}

TEST(TraceTest, DeadlineExceededAnsweredByHandlersReachesTheCallerFromEveryHop) {
  RelayHop gateway(Hop("gateway")), orders(Hop("orders")), ledger(Hop("ledger"));
  gateway.SetNext(orders.address());
  orders.SetNext(ledger.address());
  auto stub = testing::NewStub(gateway.address());
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, absl::Seconds(5));
  echo::Step careless;
  careless.set_plain_deadline_exceeded(true);
  echo::RelayReply reply;
  grpc::Status s = stub->Call(&ctx, Request({Work(0), Work(0), careless}), &reply);
  ASSERT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
  const BudgetTrace trace = TraceOf(ctx);
  ASSERT_EQ(Hops(trace), (std::vector<std::string>{"gateway", "orders", "ledger"}))
      << FormatWaterfall(trace);
  for (const HopTrace& h : trace.hops) {
    EXPECT_EQ(h.code, absl::StatusCode::kDeadlineExceeded) << h.hop;
    // ledger answered DEADLINE_EXCEEDED with its budget intact: the origin
    // is unknown, reported as downstream all the way up.
    EXPECT_EQ(h.source, DeadlineSource::kDownstream) << h.hop;
  }
}

// A plain gRPC Relay server that answers OK with whatever trace trailer it
// is told to send: what a buggy or hostile callee could do.
class BadTraceService final : public echo::Relay::Service {
 public:
  explicit BadTraceService(std::string trailer) : trailer_(std::move(trailer)) {}
  grpc::Status Call(grpc::ServerContext* ctx, const echo::RelayRequest*,
                    echo::RelayReply*) override {
    ctx->AddTrailingMetadata(kTraceTrailer, trailer_);
    return grpc::Status::OK;
  }

 private:
  std::string trailer_;
};

struct BadCase {
  const char* name;
  std::string trailer;
  TraceDrop reason;
};

class BadTraceTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadTraceTest, IsDroppedCountedAndNotPassedOn) {
  BadTraceService service(GetParam().trailer);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> bad = builder.BuildAndStart();
  ASSERT_NE(port, 0);

  RelayHop orders(Hop("orders"));
  orders.SetNext("127.0.0.1:" + std::to_string(port));
  auto stub = testing::NewStub(orders.address());
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, absl::Seconds(5));
  RequestTrace(ctx);
  echo::RelayReply reply;
  ASSERT_TRUE(stub->Call(&ctx, Request({Work(0), Work(0)}), &reply).ok());
  const BudgetTrace trace = TraceOf(ctx);
  ASSERT_EQ(Hops(trace), std::vector<std::string>{"orders"});
  EXPECT_EQ(trace.hops[0].attempts, 1);  // the call still counts
  EXPECT_EQ(orders.metrics().Snapshot().dropped_traces(GetParam().reason), 1u);
  bad->Shutdown();
}

std::string TooManyEntries() {
  BudgetTrace t;
  for (int i = 0; i < kMaxTraceEntries; ++i) t.hops.push_back(HopTrace{"x"});
  std::string one = EncodeTrace(t);
  return one + one;  // proto concatenation merges: twice the entries
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadTraceTest,
    ::testing::Values(BadCase{"Garbage", "\xff\x01garbage", TraceDrop::kMalformed},
                      BadCase{"Oversized", std::string(kMaxTraceBytes + 100, 'x'),
                              TraceDrop::kOversized},
                      BadCase{"TooManyEntries", TooManyEntries(), TraceDrop::kOversized}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace hopbudget
