// Copyright hopbudget authors.
//
// Shield plus bound inside real gRPC services on loopback: a caller that
// leaves does not take a commit with it, shielded work keeps its own budget,
// and a server stops gracefully within a bound.
#include "hopbudget/advanced/shield_grpc.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "absl/time/clock.h"
#include "eventually.h"
#include "hopbudget/client.h"
#include "hopbudget/server.h"
#include "relay_fixture.h"
#include "sync.h"

namespace hopbudget {
namespace {

using testing::Eventually;
using testing::HopConfig;
using testing::RelayHop;
using testing::Request;
using testing::Work;

// Sleeps `d` in 1 ms slices unless a stop is requested: shielded work that
// honours its bound.
absl::Status CommitFor(ShieldContext& work, absl::Duration d) {
  const absl::Time end = absl::Now() + d;
  while (absl::Now() < end) {
    if (work.stop_requested()) return absl::CancelledError("stopped at the bound");
    absl::SleepFor(absl::Milliseconds(1));
  }
  return absl::OkStatus();
}

// Serves `service` as hop "orders" behind hopbudget's server interceptor on
// a free loopback port.
std::unique_ptr<grpc::Server> StartOrders(grpc::Service* service, std::string* address) {
  ServerOptions options;
  options.hop = "orders";
  return testing::ServeBehindHopbudget(service, options, address);
}

// An "orders" service whose Call runs steps[0].work_ms of shielded commit,
// then, with more steps, relays them to the ledger from inside the shield.
class ShieldedOrders final : public echo::Relay::Service {
 public:
  explicit ShieldedOrders(Shield* shield)
      : shield_(shield), server_(StartOrders(this, &address_)) {}
  ~ShieldedOrders() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  void SetLedger(const std::string& target) {
    ClientOptions options;
    options.hop = "orders";
    ledger_ =
        echo::Relay::NewStub(*CreateChannel(target, grpc::InsecureChannelCredentials(), options));
  }

  grpc::Status Call(grpc::ServerContext* ctx, const echo::RelayRequest* req,
                    echo::RelayReply*) override {
    arrived_.Notify();
    auto commit = shield_->Run(
        "commit", absl::Seconds(2), [this, req = *req](ShieldContext& work) -> absl::Status {
          absl::Status s = CommitFor(work, absl::Milliseconds(req.steps(0).work_ms()));
          if (!s.ok()) return s;
          if (req.steps_size() > 1 && ledger_ != nullptr) {
            auto call = NewShieldedContext(work);
            echo::RelayRequest down;
            *down.add_steps() = req.steps(1);
            echo::RelayReply reply;
            s = ToAbslStatus(ledger_->Call(call.get(), down, &reply));
            if (!s.ok()) return s;
          }
          commits_++;
          return absl::OkStatus();
        });
    if (!commit.ok()) return ToGrpcStatus(commit.status());
    grpc::Status answer = AwaitShielded(*ctx, *commit);
    commits_when_answered_ = commits_.load();
    answered_.Notify();
    return answer;
  }

  grpc::Server& server() { return *server_; }
  const std::string& address() const { return address_; }
  hopbudget::internal::Notification arrived_, answered_;
  std::atomic<int> commits_{0};
  std::atomic<int> commits_when_answered_{-1};

 private:
  Shield* shield_;
  std::unique_ptr<echo::Relay::Stub> ledger_;
  std::string address_;
  std::unique_ptr<grpc::Server> server_;  // last: serves once the rest exists
};

TEST(ShieldGrpcTest, ClientCancelDuringShieldedCommitCompletesItOnceAndAnswersAtOnce) {
  Shield shield;
  ShieldedOrders orders(&shield);
  auto stub = testing::NewStub(orders.address());
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, absl::Seconds(10));
  std::thread canceller([&] {
    orders.arrived_.WaitForNotification();
    ctx.TryCancel();
  });
  echo::RelayReply reply;
  grpc::Status s = stub->Call(&ctx, Request({Work(300)}), &reply);
  canceller.join();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::CANCELLED);
  ASSERT_TRUE(orders.answered_.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(orders.commits_when_answered_.load(), 0);  // answered before the commit ended
  DrainReport report = shield.Drain(absl::Seconds(10));
  EXPECT_EQ(report.completed, 1);
  EXPECT_EQ(orders.commits_.load(), 1);  // the commit went on, exactly once
  EXPECT_EQ(shield.stats().completed, 1u);
  // The handler gave up its handle when the caller left: the outcome is
  // logged and counted, not lost.
  EXPECT_EQ(shield.stats().unobserved, 1u);
}

TEST(ShieldGrpcTest, InboundCancelDoesNotCancelTheShieldedDownstreamCall) {
  Shield shield;
  RelayHop ledger(HopConfig{});
  ShieldedOrders orders(&shield);
  orders.SetLedger(ledger.address());
  auto stub = testing::NewStub(orders.address());
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, absl::Seconds(10));
  std::thread canceller([&] {
    EXPECT_TRUE(
        Eventually([&] { return ledger.calls() > 0; }, absl::Seconds(20), absl::Milliseconds(1)));
    ctx.TryCancel();
  });
  echo::RelayReply reply;
  grpc::Status s = stub->Call(&ctx, Request({Work(0), Work(200)}), &reply);
  canceller.join();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::CANCELLED);
  DrainReport report = shield.Drain(absl::Seconds(10));
  EXPECT_EQ(report.completed, 1);
  EXPECT_EQ(orders.commits_.load(), 1);
  EXPECT_EQ(ledger.cancellations_seen(), 0);  // the ledger call was not cancelled
}

TEST(ShieldGrpcTest, HangingShieldedCallStopsAtTheBoundAttributedToTheShield) {
  RelayHop ledger(HopConfig{});
  auto stub = testing::NewStub(ledger.address());
  Shield shield;
  grpc::Status downstream;
  auto handle = shield.Run("commit", absl::Milliseconds(200), [&](ShieldContext& work) {
    auto call = NewShieldedContext(work);
    echo::RelayReply reply;
    downstream = stub->Call(call.get(), Request({testing::Hang()}), &reply);
    return ToAbslStatus(downstream);
  });
  ASSERT_TRUE(handle.ok());
  ShieldRecord record = *handle->Wait();
  EXPECT_EQ(record.outcome, ShieldOutcome::kExceededBound) << record.status;
  EXPECT_EQ(downstream.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  absl::optional<Attribution> a = AttributionOf(downstream);
  ASSERT_TRUE(a.has_value()) << downstream.error_message();
  EXPECT_EQ(a->source, DeadlineSource::kShield);
  EXPECT_EQ(a->budget, absl::Milliseconds(200));
  EXPECT_TRUE(ledger.WaitForCancellations(1, absl::Seconds(10)));
}

TEST(ShieldGrpcTest, CallerDeadlineAnswersDeadlineExceededWhileTheCommitGoesOn) {
  Shield shield;
  ShieldedOrders orders(&shield);
  auto stub = testing::NewStub(orders.address());
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, absl::Milliseconds(100));
  echo::RelayReply reply;
  grpc::Status s = stub->Call(&ctx, Request({Work(300)}), &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  // Stop the server gracefully: the handler has answered; the commit is
  // drained within the bound.
  DrainReport report = ShutdownAndDrain(orders.server(), shield, absl::Seconds(10));
  EXPECT_EQ(report.completed, 1);
  EXPECT_TRUE(report.still_running.empty());
  EXPECT_EQ(orders.commits_.load(), 1);
}

TEST(ShieldGrpcTest, DrainReportsWorkStillRunningAtItsDeadline) {
  Shield shield;
  ShieldedOrders orders(&shield);
  auto stuck = shield.Run("stuck", absl::Seconds(30), [](ShieldContext& work) {
    while (!work.stop_requested()) absl::SleepFor(absl::Milliseconds(1));
    return absl::CancelledError("stopped by the drain");
  });
  ASSERT_TRUE(stuck.ok());
  DrainReport report = ShutdownAndDrain(orders.server(), shield, absl::Milliseconds(100));
  ASSERT_EQ(report.still_running.size(), 1u);
  EXPECT_EQ(report.still_running[0], "stuck");
  ASSERT_TRUE(stuck->Wait().has_value());
  EXPECT_EQ(stuck->Wait()->outcome, ShieldOutcome::kFailed);  // it honoured the stop
  EXPECT_FALSE(shield.Run("late", absl::Seconds(1), [](ShieldContext&) { return absl::OkStatus(); })
                   .ok());  // no new work once draining
}

// The same commit from a callback-API handler: AnswerWhenShieldedDone holds
// no thread while the work runs.
class CallbackShieldedOrders final : public echo::Relay::CallbackService {
 public:
  CallbackShieldedOrders(Shield* shield, absl::Duration bound)
      : shield_(shield), bound_(bound), server_(StartOrders(this, &address_)) {}
  ~CallbackShieldedOrders() override { server_->Shutdown(); }

  grpc::ServerUnaryReactor* Call(grpc::CallbackServerContext* ctx, const echo::RelayRequest* req,
                                 echo::RelayReply* reply) override {
    auto commit =
        shield_->Run("commit", bound_, [this, ms = req->steps(0).work_ms()](ShieldContext& work) {
          absl::Status s = CommitFor(work, absl::Milliseconds(ms));
          if (s.ok()) commits_++;
          return s;
        });
    if (!commit.ok()) {
      auto* r = ctx->DefaultReactor();
      r->Finish(ToGrpcStatus(commit.status()));
      return r;
    }
    arrived_.Notify();
    return AnswerWhenShieldedDone(ctx, *commit, [reply](const ShieldRecord& r) {
      reply->set_payload(r.outcome == ShieldOutcome::kCompleted ? "committed" : "not committed");
    });
  }

  const std::string& address() const { return address_; }
  hopbudget::internal::Notification arrived_;
  std::atomic<int> commits_{0};

 private:
  Shield* shield_;
  const absl::Duration bound_;
  std::string address_;
  std::unique_ptr<grpc::Server> server_;  // last: serves once the rest exists
};

TEST(ShieldGrpcCallbackTest, HandlerAnswersWithTheWorksResult) {
  Shield shield;
  CallbackShieldedOrders orders(&shield, absl::Seconds(5));
  auto stub = testing::NewStub(orders.address());
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, absl::Seconds(10));
  echo::RelayReply reply;
  ASSERT_TRUE(stub->Call(&ctx, Request({Work(30)}), &reply).ok());
  EXPECT_EQ(reply.payload(), "committed");
  EXPECT_EQ(orders.commits_.load(), 1);
  EXPECT_EQ(shield.stats().completed, 1u);
  EXPECT_EQ(shield.stats().unobserved, 0u);  // the reactor took the outcome
}

TEST(ShieldGrpcCallbackTest, ClientCancelAnswersAtOnceAndTheCommitCompletesOnce) {
  Shield shield;
  CallbackShieldedOrders orders(&shield, absl::Seconds(5));
  auto stub = testing::NewStub(orders.address());
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, absl::Seconds(10));
  std::thread canceller([&] {
    orders.arrived_.WaitForNotification();
    ctx.TryCancel();
  });
  echo::RelayReply reply;
  const absl::Time start = absl::Now();
  grpc::Status s = stub->Call(&ctx, Request({Work(1500)}), &reply);
  const absl::Duration took = absl::Now() - start;
  canceller.join();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_LT(took, absl::Milliseconds(1500));  // did not wait for the commit
  DrainReport report = shield.Drain(absl::Seconds(10));
  EXPECT_EQ(report.completed, 1);
  EXPECT_EQ(orders.commits_.load(), 1);
  // Nobody was left to take the outcome: logged and counted.
  EXPECT_EQ(shield.stats().unobserved, 1u);
}

TEST(ShieldGrpcCallbackTest, CallerDeadlineAnswersDeadlineExceededWhileTheCommitGoesOn) {
  Shield shield;
  CallbackShieldedOrders orders(&shield, absl::Seconds(5));
  auto stub = testing::NewStub(orders.address());
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, absl::Milliseconds(300));
  echo::RelayReply reply;
  grpc::Status s = stub->Call(&ctx, Request({Work(1200)}), &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(orders.commits_.load(), 0);  // answered while the commit ran
  shield.Drain(absl::Seconds(10));
  EXPECT_EQ(orders.commits_.load(), 1);
}

TEST(ShieldGrpcCallbackTest, WorkPastItsBoundIsDeadlineExceededAttributedToTheShield) {
  Shield shield;
  CallbackShieldedOrders orders(&shield, absl::Milliseconds(150));
  auto stub = testing::NewStub(orders.address());
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, absl::Seconds(10));
  echo::RelayReply reply;
  grpc::Status s = stub->Call(&ctx, Request({Work(5000)}), &reply);
  ASSERT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
  absl::optional<Attribution> a = AttributionOf(s);
  ASSERT_TRUE(a.has_value()) << s.error_message();
  EXPECT_EQ(a->source, DeadlineSource::kShield);
  EXPECT_EQ(a->hop, "orders");
  EXPECT_EQ(a->budget, absl::Milliseconds(150));
  EXPECT_EQ(shield.stats().exceeded_bound, 1u);
  EXPECT_EQ(orders.commits_.load(), 0);
}

}  // namespace
}  // namespace hopbudget
