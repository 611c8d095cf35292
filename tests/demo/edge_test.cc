// Copyright hopbudget authors.
//
// The edge (server/edge/edge.h) between a real gRPC client and a real gRPC
// server behind hopbudget, all on loopback: what it forwards comes back
// unchanged, what it refuses never reaches the server, a caller's cancel
// and deadline reach the server, and a missing upstream is UNAVAILABLE.
#include "edge/edge.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "eventually.h"
#include "relay_fixture.h"
#include "scripted_server.h"

namespace hopbudget::edge {
namespace {

using ::hopbudget::testing::Action;
using ::hopbudget::testing::ScriptedServer;
using ::testing::HasSubstr;

std::string Trailer(const grpc::ClientContext& ctx, const std::string& key) {
  auto it = ctx.GetServerTrailingMetadata().find(key);
  if (it == ctx.GetServerTrailingMetadata().end()) return "";
  return std::string(it->second.data(), it->second.size());
}

// An edge in front of `upstream`, its loop on a thread of its own.
class RunningEdge {
 public:
  explicit RunningEdge(EdgeOptions options) {
    absl::StatusOr<std::unique_ptr<Edge>> edge = Edge::Create(options);
    EXPECT_TRUE(edge.ok()) << edge.status();
    if (!edge.ok()) return;
    edge_ = std::move(*edge);
    thread_ = std::thread([this] { edge_->Run(); });
  }
  ~RunningEdge() {
    if (edge_ == nullptr) return;
    edge_->Shutdown();
    thread_.join();
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", edge_->port()); }
  EdgeStats stats() const { return edge_->Stats(); }

 private:
  std::unique_ptr<Edge> edge_;
  std::thread thread_;
};

EdgeOptions Options(const std::string& upstream) {
  EdgeOptions o;
  o.upstream = upstream;
  o.admission.limit = LimitKind::kFixed;
  o.admission.max_in_flight = 8;
  o.admission.predict = false;
  return o;
}

grpc::Status Call(echo::Relay::Stub& stub, grpc::ClientContext& ctx,
                  echo::RelayReply* reply = nullptr) {
  echo::RelayReply ignored;
  return stub.Call(&ctx, echo::RelayRequest(), reply != nullptr ? reply : &ignored);
}

TEST(EdgeTest, AForwardedCallIsAnsweredByTheUpstreamUnchanged) {
  ScriptedServer upstream("upstream", [](int) { return Action::Ok(); });
  RunningEdge edge(Options(upstream.address()));
  auto stub = testing::ConnectedStub(edge.address(), /*with_interceptor=*/false);
  for (int i = 0; i < 20; ++i) {
    grpc::ClientContext ctx;
    testing::SetBudget(ctx, absl::Seconds(5));
    echo::RelayReply reply;
    grpc::Status s = Call(*stub, ctx, &reply);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(reply.payload(), upstream.address());  // the upstream's own answer
  }
  EXPECT_EQ(upstream.calls(), 20);
  EXPECT_TRUE(testing::Eventually([&] { return edge.stats().upstream_ok == 20; }));
  EXPECT_EQ(edge.stats().forwarded, 20u);
}

TEST(EdgeTest, AnUpstreamFailureComesBackWithItsTrailers) {
  ScriptedServer upstream("upstream",
                          [](int) { return Action::Fail(grpc::StatusCode::UNAVAILABLE, "250"); });
  RunningEdge edge(Options(upstream.address()));
  auto stub = testing::ConnectedStub(edge.address(), /*with_interceptor=*/false);
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, absl::Seconds(5));
  grpc::Status s = Call(*stub, ctx);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(s.error_message(), "scripted failure");
  EXPECT_EQ(Trailer(ctx, "grpc-retry-pushback-ms"), "250");
}

TEST(EdgeTest, ACallersCancelReachesTheUpstream) {
  ScriptedServer upstream("upstream", [](int) { return Action::Hang(); });
  RunningEdge edge(Options(upstream.address()));
  auto stub = testing::ConnectedStub(edge.address(), /*with_interceptor=*/false);
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, absl::Seconds(30));
  std::thread canceller([&] {
    upstream.WaitForCalls(1, absl::Seconds(20));
    ctx.TryCancel();
  });
  grpc::Status s = Call(*stub, ctx);
  canceller.join();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(upstream.WaitForCancels(1, absl::Seconds(20)));
  EXPECT_TRUE(testing::Eventually([&] { return edge.stats().caller_reset == 1; }));
}

TEST(EdgeTest, TheCallersDeadlineEndsTheCallAtTheUpstream) {
  ScriptedServer upstream("upstream", [](int) { return Action::Hang(); });
  RunningEdge edge(Options(upstream.address()));
  auto stub = testing::ConnectedStub(edge.address(), /*with_interceptor=*/false);
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, absl::Milliseconds(300));
  grpc::Status s = Call(*stub, ctx);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(upstream.WaitForCancels(1, absl::Seconds(20)));
}

TEST(EdgeTest, OverTheLimitWithNoQueueIsShedWithoutReachingTheUpstream) {
  ScriptedServer upstream("upstream", [](int) { return Action::Hang(); });
  EdgeOptions o = Options(upstream.address());
  o.admission.max_in_flight = 1;
  o.admission.max_queue = 0;
  o.admission.pushback = absl::Milliseconds(150);
  RunningEdge edge(o);
  auto stub = testing::ConnectedStub(edge.address(), /*with_interceptor=*/false);
  grpc::ClientContext first;
  testing::SetBudget(first, absl::Seconds(30));
  echo::RelayReply first_reply;
  grpc::Status first_status;
  bool first_done = false;
  hopbudget::internal::Mutex mu;
  stub->async()->Call(&first, new echo::RelayRequest(), &first_reply, [&](grpc::Status s) {
    hopbudget::internal::MutexLock lock(&mu);
    first_status = s;
    first_done = true;
  });
  ASSERT_TRUE(upstream.WaitForCalls(1, absl::Seconds(20)));

  grpc::ClientContext second;
  testing::SetBudget(second, absl::Seconds(5));
  grpc::Status s = Call(*stub, second);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(s.error_message(), HasSubstr("shed at edge (over_limit)"));
  EXPECT_EQ(Trailer(second, "hopbudget-shed"), "over_limit");
  EXPECT_EQ(Trailer(second, "hopbudget-hop"), "edge");
  EXPECT_EQ(Trailer(second, "grpc-retry-pushback-ms"), "150");
  EXPECT_EQ(upstream.calls(), 1);
  EXPECT_EQ(edge.stats().shed[static_cast<int>(ArrivalDecision::kShedOverLimit)], 1u);

  first.TryCancel();
  EXPECT_TRUE(testing::Eventually([&] {
    hopbudget::internal::MutexLock lock(&mu);
    return first_done;
  }));
}

TEST(EdgeTest, AQueuedCallGoesOnWhenAPlaceFrees) {
  ScriptedServer upstream("upstream", [](int n) {
    return n == 0 ? Action::After(absl::Milliseconds(200)) : Action::Ok();
  });
  EdgeOptions o = Options(upstream.address());
  o.admission.max_in_flight = 1;
  o.admission.max_queue = 4;
  o.admission.queue_per_limit = 4;
  // Not a sustained overload's short wait: the second call must wait the
  // first one out.
  o.admission.overload_wait = absl::InfiniteDuration();
  RunningEdge edge(o);
  auto stub = testing::ConnectedStub(edge.address(), /*with_interceptor=*/false);
  grpc::ClientContext first;
  testing::SetBudget(first, absl::Seconds(30));
  echo::RelayReply first_reply;
  std::atomic<bool> first_ok{false};
  stub->async()->Call(&first, new echo::RelayRequest(), &first_reply,
                      [&](grpc::Status s) { first_ok = s.ok(); });
  ASSERT_TRUE(upstream.WaitForCalls(1, absl::Seconds(20)));
  grpc::ClientContext second;
  testing::SetBudget(second, absl::Seconds(30));
  grpc::Status s = Call(*stub, second);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(testing::Eventually([&] { return first_ok.load(); }));
  EXPECT_EQ(upstream.calls(), 2);
  EXPECT_EQ(upstream.max_in_flight(), 1);  // the second waited at the edge
}

TEST(EdgeTest, AQueuedCallWhoseBudgetRunsOutIsAnsweredAtTheEdge) {
  ScriptedServer upstream("upstream", [](int) { return Action::Hang(); });
  EdgeOptions o = Options(upstream.address());
  o.admission.max_in_flight = 1;
  o.admission.max_queue = 4;
  o.admission.queue_per_limit = 4;
  o.admission.overload_wait = absl::InfiniteDuration();
  o.admission.max_wait = absl::Seconds(60);
  o.min_attempt_budget = absl::Milliseconds(500);
  RunningEdge edge(o);
  auto stub = testing::ConnectedStub(edge.address(), /*with_interceptor=*/false);
  grpc::ClientContext first;
  testing::SetBudget(first, absl::Seconds(30));
  echo::RelayReply first_reply;
  std::atomic<bool> first_done{false};
  stub->async()->Call(&first, new echo::RelayRequest(), &first_reply,
                      [&](grpc::Status) { first_done = true; });
  ASSERT_TRUE(upstream.WaitForCalls(1, absl::Seconds(20)));

  grpc::ClientContext second;
  testing::SetBudget(second, absl::Seconds(2));
  const absl::Time start = absl::Now();
  grpc::Status s = Call(*stub, second);
  // Answered by the edge once less than min_attempt_budget was left, before
  // the caller's own deadline.
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_THAT(s.error_message(), HasSubstr("source=queue-wait hop=edge"));
  EXPECT_EQ(Trailer(second, "hopbudget-source"), "queue-wait");
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_EQ(upstream.calls(), 1);
  first.TryCancel();
  EXPECT_TRUE(testing::Eventually([&] { return first_done.load(); }));
}

TEST(EdgeTest, ACallWithLessThanTheLeastBudgetIsRefusedOnArrival) {
  ScriptedServer upstream("upstream", [](int) { return Action::Ok(); });
  EdgeOptions o = Options(upstream.address());
  o.min_attempt_budget = absl::Seconds(10);
  RunningEdge edge(o);
  auto stub = testing::ConnectedStub(edge.address(), /*with_interceptor=*/false);
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, absl::Seconds(5));
  grpc::Status s = Call(*stub, ctx);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_THAT(s.error_message(), HasSubstr("hopbudget/1: source=arrived-expired hop=edge"));
  EXPECT_EQ(Trailer(ctx, "hopbudget-hop"), "edge");
  EXPECT_FALSE(Trailer(ctx, "grpc-status-details-bin").empty());
  EXPECT_EQ(upstream.calls(), 0);
  EXPECT_EQ(edge.stats().arrived_expired, 1u);
}

TEST(EdgeTest, NoUpstreamIsUnavailableNamingIt) {
  const std::string nowhere = absl::StrCat("127.0.0.1:", testing::UnusedPort());
  RunningEdge edge(Options(nowhere));
  auto stub = testing::ConnectedStub(edge.address(), /*with_interceptor=*/false);
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, absl::Seconds(5));
  grpc::Status s = Call(*stub, ctx);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(s.error_message(), HasSubstr(absl::StrCat("upstream ", nowhere, " unavailable")));
}

TEST(EdgeTest, AnUpstreamThatGoesAwayEndsItsCallsAndLaterCallsAreUnavailable) {
  auto upstream = std::make_unique<ScriptedServer>("upstream", [](int) { return Action::Hang(); });
  const std::string address = upstream->address();
  RunningEdge edge(Options(address));
  auto stub = testing::ConnectedStub(edge.address(), /*with_interceptor=*/false);
  grpc::ClientContext hung;
  testing::SetBudget(hung, absl::Seconds(60));
  echo::RelayReply hung_reply;
  std::atomic<bool> hung_done{false};
  grpc::Status hung_status;
  stub->async()->Call(&hung, new echo::RelayRequest(), &hung_reply, [&](grpc::Status s) {
    hung_status = s;
    hung_done = true;
  });
  ASSERT_TRUE(upstream->WaitForCalls(1, absl::Seconds(20)));
  upstream.reset();  // shuts down: GOAWAY, its call cancelled, the connection closed
  ASSERT_TRUE(testing::Eventually([&] { return hung_done.load(); }));
  EXPECT_FALSE(hung_status.ok());

  grpc::ClientContext later;
  testing::SetBudget(later, absl::Seconds(5));
  grpc::Status s = Call(*stub, later);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(s.error_message(), HasSubstr(absl::StrCat("upstream ", address, " unavailable")));
}

TEST(EdgeTest, BadOptionsAreRefusedNamingTheField) {
  EdgeOptions o;
  o.upstream = "no-port";
  EXPECT_THAT(std::string(Edge::Create(o).status().message()), HasSubstr("upstream \"no-port\""));
  o.upstream = "127.0.0.1:1";
  o.max_concurrent_streams = 0;
  EXPECT_THAT(std::string(Edge::Create(o).status().message()),
              HasSubstr("max_concurrent_streams 0"));
  o.max_concurrent_streams = 10;
  o.listen_address = "localhost";
  EXPECT_THAT(std::string(Edge::Create(o).status().message()), HasSubstr("listen_address"));
  o.listen_address = "127.0.0.1";
  o.hop = "bad hop";
  EXPECT_FALSE(Edge::Create(o).ok());
}

}  // namespace
}  // namespace hopbudget::edge
