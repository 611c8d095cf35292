// Copyright hopbudget authors.
//
// DemoUnaryCall (server/common/callback_call.h) under calls that end from
// every side at once: the latency alarm firing against the call's cancel
// and deadline, an answer from another thread racing Work()'s return, a
// hang that only the cancel ends, a refusal on arrival. Issue 29's crash
// was a call answered, and deleted, on one thread while another still
// wrote to it; this is the stress of the demo's call base that would show
// such a use after free (under ASan) or a call that is never answered (the
// counts at the end).
#include "server/common/callback_call.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "demo/demo.grpc.pb.h"
#include "gtest/gtest.h"
#include "hopbudget/server.h"
#include "tests/eventually.h"
#include "timer_service.h"

namespace hopbudget::demo {
namespace {

// A Ledger whose Commit is a DemoUnaryCall; the order's item count picks
// how Work() ends the call. Every call's cancel answers it too (CancelWork).
// Calls are counted as made and deleted: the object, not the RPC.
enum WorkEnd : int {
  kAnswerInWork = 0,     // Answer() before Work() returns
  kAnswerElsewhere = 1,  // Answer() from the timer thread, through a Ref
  kUntilCancelled = 2,   // nothing but the call's cancel (CancelWork) answers
  kWorkEnds = 3,
};

class StressLedger final : public Ledger::Service {
 public:
  explicit StressLedger(DemoProcess& process) : process_(process) {
    MarkMethodCallback(DemoMethodIndex("Ledger", "Commit"),
                       NewDemoCallHandler<CommitCall, Order, OrderResult>(*this));
  }

  std::atomic<int> made{0};
  std::atomic<int> deleted{0};

 private:
  class CommitCall final : public DemoServiceCall<StressLedger, Order, OrderResult> {
   public:
    CommitCall(StressLedger& service, grpc::CallbackServerContext* ctx, const Order* request,
               OrderResult* reply)
        : DemoServiceCall(service, service.process_, ctx, request, reply) {
      service_.made.fetch_add(1);
    }
    ~CommitCall() override { service_.deleted.fetch_add(1); }

   private:
    WorkEnd end() const { return static_cast<WorkEnd>(request_->items_size() % kWorkEnds); }
    void Work() override {
      switch (end()) {
        case kAnswerInWork:
          Answer(grpc::Status::OK);
          break;
        case kAnswerElsewhere:
          // On the timer thread, at once: the answer may come while Work()
          // still runs, or after CancelWork() answered and gRPC was done,
          // which the Ref keeps the call alive for.
          service_.timers_.Schedule(absl::InfinitePast(),
                                    [ref = Hold()] { ref.Answer(grpc::Status::OK); });
          // Still inside Work(): the answer above may already have come.
          reply_->set_order_id(1);
          break;
        case kUntilCancelled:
        case kWorkEnds:
          break;
      }
    }
    // Races the timer thread for kAnswerElsewhere calls: the first answer wins.
    void CancelWork() override { Answer(grpc::Status::CANCELLED); }
  };

  DemoProcess& process_;
  internal::TimerService timers_{Clock::Real()};
};

CommonFlags StressFlags() {
  CommonFlags flags;
  flags.name = "stress-ledger";
  return flags;
}

TEST(DemoUnaryCallStressTest, CallsEndedFromEverySideAtOnceAreAnsweredAndDeletedOnce) {
  FaultConfig faults;
  // Half the calls wait a 1 ms alarm first (the alarm against the cancel
  // and the deadline), half start their work at once; some hang until
  // cancelled; some fail.
  faults.latency.kind = LatencyKind::kSpike;
  faults.latency.a = absl::Milliseconds(1);
  faults.latency.fraction = 0.5;
  faults.hang_rate = 0.1;
  faults.error_rate = 0.1;
  ASSERT_TRUE(ValidateFaultConfig(faults).ok());
  DemoProcess process(StressFlags(), faults);
  StressLedger ledger(process);

  ServerOptions options;
  options.hop = "stress-ledger";
  auto factory = MakeServerInterceptorFactory(options);
  ASSERT_TRUE(factory.ok()) << factory.status();
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
  creators.push_back(*std::move(factory));
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&ledger);
  builder.experimental().SetInterceptorCreators(std::move(creators));
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto stub = Ledger::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));

  struct Call {
    grpc::ClientContext ctx;
    Order request;
    OrderResult reply;
  };
  constexpr int kCalls = 4000;
  constexpr int kInFlight = 64;
  std::vector<std::unique_ptr<Call>> calls(kCalls);
  std::atomic<int> answered{0};
  std::atomic<int> unexpected{0};
  // By code: each way of ending must have happened for the run to count.
  std::atomic<int> ok{0}, cancelled{0}, expired{0}, failed{0};
  std::mt19937 rng(29);
  // Budgets in bands, so that on a fast machine and on a slow sanitizer
  // build alike some calls end in their first milliseconds (the alarm, the
  // arrival, the Work() against the deadline) and some live to be answered
  // or cancelled. The last band is for calls that Work() answers: an ASan
  // build on a loaded machine (a compile beside it) takes longer than
  // 500 ms to reach one, and a call only its cancel ends would hold an
  // in-flight place for all of it.
  std::uniform_int_distribution<int> budget_us[] = {
      std::uniform_int_distribution<int>(0, 8000), std::uniform_int_distribution<int>(8000, 50000),
      std::uniform_int_distribution<int>(100000, 500000),
      std::uniform_int_distribution<int>(1000000, 3000000)};
  std::uniform_int_distribution<int> coin(0, 3);
  std::uniform_int_distribution<int> cancel_after_us(0, 5000);
  std::vector<int> to_cancel;
  for (int i = 0; i < kCalls; ++i) {
    // At most kInFlight calls at once: the calls race each other's ends,
    // not a queue of thousands.
    ASSERT_TRUE(testing::Eventually([&] { return i - answered.load() < kInFlight; }));
    calls[i] = std::make_unique<Call>();
    Call& call = *calls[i];
    // A budget of 0 arrives expired: hopbudget refuses it before Work().
    int band = (i / kWorkEnds) % 4;
    if (band == 3 && i % kWorkEnds == kUntilCancelled) band = 2;
    call.ctx.set_deadline(
        absl::ToChronoTime(absl::Now() + absl::Microseconds(budget_us[band](rng))));
    for (int k = 0; k < i % kWorkEnds; ++k) call.request.add_items()->set_sku("sku");
    call.request.set_key("key-" + std::to_string(i));
    stub->async()->Commit(&call.ctx, &call.request, &call.reply, [&](grpc::Status status) {
      switch (status.error_code()) {
        case grpc::StatusCode::OK:
          ok.fetch_add(1);
          break;
        case grpc::StatusCode::CANCELLED:
          cancelled.fetch_add(1);
          break;
        case grpc::StatusCode::DEADLINE_EXCEEDED:
          expired.fetch_add(1);
          break;
        case grpc::StatusCode::UNAVAILABLE:  // the injected error
          failed.fetch_add(1);
          break;
        default:
          unexpected.fetch_add(1);
      }
      answered.fetch_add(1);
    });
    if (coin(rng) == 0) to_cancel.push_back(i);
    // Every few calls, cancel the chosen ones after a moment: the cancel
    // then meets a call in its alarm, its Work(), its hang or its answer.
    if (to_cancel.size() == 4) {
      absl::SleepFor(absl::Microseconds(cancel_after_us(rng)));
      for (int c : to_cancel) calls[c]->ctx.TryCancel();
      to_cancel.clear();
    }
  }
  ASSERT_TRUE(testing::Eventually([&] { return answered.load() == kCalls; }))
      << answered.load() << " of " << kCalls << " calls answered";
  EXPECT_EQ(unexpected.load(), 0);
  EXPECT_GT(ok.load(), 0);
  EXPECT_GT(cancelled.load(), 0);
  EXPECT_GT(expired.load(), 0);
  EXPECT_GT(failed.load(), 0);
  std::cout << "answers: " << ok.load() << " OK, " << cancelled.load() << " CANCELLED, "
            << expired.load() << " DEADLINE_EXCEEDED, " << failed.load() << " UNAVAILABLE\n";
  // Every call the server made was answered and deleted (OnDone), once:
  // none is left waiting for an answer that never comes.
  EXPECT_TRUE(testing::Eventually([&] { return ledger.deleted.load() == ledger.made.load(); }))
      << ledger.made.load() << " made, " << ledger.deleted.load() << " deleted";
  EXPECT_GT(ledger.made.load(), kCalls / 4);
  EXPECT_TRUE(process.accounting().AwaitIdle(absl::Seconds(20)));
  server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  server->Wait();
  EXPECT_EQ(ledger.deleted.load(), ledger.made.load());
}

}  // namespace
}  // namespace hopbudget::demo
