// Copyright hopbudget authors.
//
// Remaining() in real handlers on loopback: behind hopbudget's interceptor
// (the request cap or the caller's deadline bounds it, the reserve is kept)
// and on a plain server (the gRPC deadline alone).
#include "hopbudget/advanced/remaining_grpc.h"

#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "relay_fixture.h"
#include "sync.h"

namespace hopbudget {
namespace {

// Answers every Call with what Remaining() said on entry.
class RemainingService final : public echo::Relay::Service {
 public:
  grpc::Status Call(grpc::ServerContext* ctx, const echo::RelayRequest*,
                    echo::RelayReply*) override {
    const RemainingTime r = Remaining(*ctx);
    hopbudget::internal::MutexLock lock(&mu_);
    seen_ = r;
    return grpc::Status::OK;
  }
  RemainingTime seen() {
    hopbudget::internal::MutexLock lock(&mu_);
    return seen_;
  }

 private:
  hopbudget::internal::Mutex mu_;
  RemainingTime seen_;
};

grpc::Status CallWithBudget(const std::string& address, absl::Duration budget) {
  auto stub = testing::NewStub(address, /*with_interceptor=*/false);
  grpc::ClientContext ctx;
  if (budget != absl::InfiniteDuration()) testing::SetBudget(ctx, budget);
  echo::RelayReply reply;
  return stub->Call(&ctx, testing::Request({testing::Work(0)}), &reply);
}

TEST(RemainingGrpcTest, RequestCapTighterThanTheCallerIsTheSource) {
  RemainingService service;
  ServerOptions options;
  options.hop = "orders";
  options.policy.request_cap = absl::Milliseconds(400);
  options.policy.hop_reserve = absl::Milliseconds(20);
  std::string address;
  auto server = testing::ServeBehindHopbudget(&service, options, &address);
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(CallWithBudget(address, absl::Seconds(30)).ok());
  const RemainingTime r = service.seen();
  EXPECT_EQ(r.outcome, RemainingOutcome::kOpen);
  EXPECT_EQ(r.source, DeadlineSource::kRequest);
  EXPECT_LE(r.left, absl::Milliseconds(400));
  EXPECT_GT(r.left, absl::Milliseconds(100));  // entry is fast; 300 ms of slack for load
  EXPECT_EQ(r.usable, r.left - absl::Milliseconds(20));
  server->Shutdown();
}

TEST(RemainingGrpcTest, CallerDeadlineTighterThanTheCapIsTheSource) {
  RemainingService service;
  ServerOptions options;
  options.hop = "orders";
  options.policy.request_cap = absl::Seconds(30);
  std::string address;
  auto server = testing::ServeBehindHopbudget(&service, options, &address);
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(CallWithBudget(address, absl::Seconds(2)).ok());
  EXPECT_EQ(service.seen().source, DeadlineSource::kClient);
  // The grpc-timeout header rounds up (a few ms on the wire).
  EXPECT_LE(service.seen().left, absl::Seconds(2) + absl::Milliseconds(50));
  EXPECT_GT(service.seen().left, absl::Seconds(1));
  server->Shutdown();
}

TEST(RemainingGrpcTest, PlainServerReadsTheGrpcDeadline) {
  RemainingService service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  auto server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  const std::string address = "127.0.0.1:" + std::to_string(port);
  ASSERT_TRUE(CallWithBudget(address, absl::Seconds(2)).ok());
  EXPECT_EQ(service.seen().source, DeadlineSource::kClient);
  EXPECT_EQ(service.seen().outcome, RemainingOutcome::kOpen);
  EXPECT_LE(service.seen().left, absl::Seconds(2) + absl::Milliseconds(50));
  ASSERT_TRUE(CallWithBudget(address, absl::InfiniteDuration()).ok());
  EXPECT_EQ(service.seen().outcome, RemainingOutcome::kUnbounded);
  EXPECT_EQ(service.seen().source, DeadlineSource::kNone);
  server->Shutdown();
}

}  // namespace
}  // namespace hopbudget
