// Copyright hopbudget authors.
//
// Admission through the server interceptor, on real gRPC servers (sync and
// callback) on loopback: a saturated server serves what can finish within
// its deadline and refuses the rest without starting it; a call whose
// budget runs out in the queue never reaches its handler's work; overload
// sheds carry a pushback; waiting calls hold no thread; admission off
// changes nothing on the wire; bad configuration is refused at start.
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <fstream>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "echo/relay.grpc.pb.h"
#include "eventually.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hopbudget/client.h"
#include "hopbudget/hop.h"
#include "hopbudget/server.h"
#include "relay_fixture.h"
#include "test_hop.h"

namespace hopbudget {
namespace {

using ::hopbudget::testing::Api;
using ::hopbudget::testing::Eventually;
using ::hopbudget::testing::Request;
using ::hopbudget::testing::SetBudget;
using ::hopbudget::testing::Work;
using ::testing::HasSubstr;

// What the handlers did: `started` counts calls whose work began (the
// handler ran and was not refused); `refused` counts handlers that saw
// refused() and returned at once.
struct Counters {
  std::atomic<int> started{0};
  std::atomic<int> refused{0};
  std::atomic<int> running{0};
  std::atomic<int> max_running{0};
};

void NoteStart(Counters& c) {
  c.started.fetch_add(1);
  const int now = c.running.fetch_add(1) + 1;
  int seen = c.max_running.load();
  while (now > seen && !c.max_running.compare_exchange_weak(seen, now)) {
  }
}

int WorkMs(const echo::RelayRequest& req) {
  return req.steps_size() > 0 ? req.steps(0).work_ms() : 0;
}

class SyncRelay final : public echo::Relay::Service {
 public:
  explicit SyncRelay(Counters* c) : c_(*c) {}
  grpc::Status Call(grpc::ServerContext* ctx, const echo::RelayRequest* req,
                    echo::RelayReply* reply) override {
    const InboundBudget* budget = InboundBudget::Of(*ctx);
    if (budget != nullptr && budget->refused()) {
      c_.refused.fetch_add(1);
      return grpc::Status::CANCELLED;
    }
    NoteStart(c_);
    std::this_thread::sleep_for(std::chrono::milliseconds(WorkMs(*req)));  // the work
    c_.running.fetch_sub(1);
    reply->set_payload("done");
    return grpc::Status::OK;
  }

 private:
  Counters& c_;
};

// Callback handlers return at once; the work finishes on a thread of its own
// (the test's stand-in for an asynchronous downstream call).
class CallbackRelay final : public echo::Relay::CallbackService {
 public:
  explicit CallbackRelay(Counters* c) : c_(*c) {}
  ~CallbackRelay() override {
    for (std::thread& t : work_) t.join();
  }
  grpc::ServerUnaryReactor* Call(grpc::CallbackServerContext* ctx, const echo::RelayRequest* req,
                                 echo::RelayReply* reply) override {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    const InboundBudget* budget = InboundBudget::Of(*ctx);
    if (budget != nullptr && budget->refused()) {
      c_.refused.fetch_add(1);
      reactor->Finish(grpc::Status::CANCELLED);
      return reactor;
    }
    NoteStart(c_);
    const int ms = WorkMs(*req);
    absl::MutexLock lock(&mu_);
    work_.emplace_back([this, reactor, reply, ms] {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      c_.running.fetch_sub(1);
      reply->set_payload("done");
      reactor->Finish(grpc::Status::OK);
    });
    return reactor;
  }

 private:
  Counters& c_;
  absl::Mutex mu_;
  std::vector<std::thread> work_ ABSL_GUARDED_BY(mu_);
};

class AdmissionGrpcTest : public ::testing::TestWithParam<Api> {
 protected:
  // Starts a server with `admission`; keeps the factory for its stats.
  void Start(AdmissionOptions admission, BudgetPolicy policy = {}) {
    ServerOptions options;
    options.hop = "orders";
    options.policy = policy;
    options.admission = std::move(admission);
    options.admission.handlers = Handlers();
    options.metrics = &metrics_;
    StartWith(MakeServerInterceptorFactory(options));
  }
  // The same on `hop`'s server interceptor: its policy table's entries.
  void StartOnHop(const Hop& hop, AdmissionOptions admission) {
    admission.handlers = Handlers();
    StartWith(MakeServerInterceptorFactory(hop, admission));
  }
  HandlerThreads Handlers() const {
    return GetParam() == Api::kSync ? HandlerThreads::kBlocking : HandlerThreads::kNonBlocking;
  }
  void StartWith(
      absl::StatusOr<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
          factory) {
    ASSERT_TRUE(factory.ok()) << factory.status();
    factory_ = factory->get();
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
    creators.push_back(*std::move(factory));
    if (GetParam() == Api::kSync) {
      service_ = std::make_unique<SyncRelay>(&counters_);
    } else {
      service_ = std::make_unique<CallbackRelay>(&counters_);
    }
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    builder.experimental().SetInterceptorCreators(std::move(creators));
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    address_ = "127.0.0.1:" + std::to_string(port);
    stub_ = testing::NewStub(address_, /*with_interceptor=*/false);
  }

  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown(std::chrono::system_clock::now());
    server_.reset();
    service_.reset();
  }

  AdmissionStats Stats() const { return *AdmissionStatsOf(*factory_); }

  struct Answer {
    grpc::Status status;
    absl::Duration took;
    absl::Duration budget;
    std::multimap<std::string, std::string> trailers;
  };

  Answer CallOnce(absl::Duration budget, int work_ms) {
    grpc::ClientContext ctx;
    SetBudget(ctx, budget);
    echo::RelayReply reply;
    const absl::Time start = absl::Now();
    Answer a;
    a.budget = budget;
    a.status = stub_->Call(&ctx, Request({Work(work_ms)}), &reply);
    a.took = absl::Now() - start;
    for (const auto& [k, v] : ctx.GetServerTrailingMetadata()) {
      a.trailers.emplace(std::string(k.data(), k.size()), std::string(v.data(), v.size()));
    }
    return a;
  }

  // `n` calls at once, each on its own thread (the callers, not the server).
  std::vector<Answer> CallConcurrently(int n, absl::Duration budget, int work_ms) {
    std::vector<Answer> answers(n);
    std::vector<std::thread> threads;
    for (int i = 0; i < n; ++i) {
      threads.emplace_back([&, i] { answers[i] = CallOnce(budget, work_ms); });
    }
    for (auto& t : threads) t.join();
    return answers;
  }

  Counters counters_;
  Metrics metrics_;
  grpc::experimental::ServerInterceptorFactoryInterface* factory_ = nullptr;
  std::unique_ptr<grpc::Service> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  std::unique_ptr<echo::Relay::Stub> stub_;
};

AdmissionOptions Limit(int in_flight, int queue) {
  AdmissionOptions o;
  o.enabled = true;
  o.policy.max_in_flight = in_flight;
  o.policy.max_queue = queue;
  o.policy.queue_per_limit = std::numeric_limits<double>::infinity();  // the queue asked for
  o.policy.predict = false;
  return o;
}

TEST_P(AdmissionGrpcTest, SaturatedServerServesWhatCanFinishAndRefusesTheRestUnstarted) {
  // 24 callers start at once on 2 cores: the server learns each deadline as
  // a relative grpc-timeout, later than the caller's clock says by however
  // long the call took to leave the client, and a refusal takes its path
  // (timer, refusers' thread, handler, status) back. The hop reserve covers
  // both, so that the refusals reach their callers before the callers' own
  // deadlines fire: 150 ms (25 ms lost to the callers' deadlines under ASan
  // beside a demo run, 1 answer in 24).
  BudgetPolicy policy;
  policy.hop_reserve = absl::Milliseconds(150);
  AdmissionOptions o = Limit(2, 100);
  // The deadline-driven refusals are the point here; the queue stays
  // non-empty for longer than lifo_after, which with overload_wait would
  // turn waiters away as overload first (OverloadIsShedWithPushback...).
  o.policy.overload_wait = absl::InfiniteDuration();
  o.policy.predict = true;  // learns 50 ms from the first two answers
  o.policy.predict_min_samples = 2;
  o.policy.predict_window = 16;
  Start(o, policy);
  // 24 calls of 50 ms work, 2 at a time, 600 ms each: at most 18 can start
  // with their 50 ms before the reserve, so at least 6 are refused.
  const std::vector<Answer> answers = CallConcurrently(24, absl::Milliseconds(600), 50);
  int ok = 0, refused = 0;
  for (const Answer& a : answers) {
    if (a.status.ok()) {
      ++ok;
      // (took includes the client's own setup before the deadline was set.)
      EXPECT_LE(a.took, a.budget + absl::Milliseconds(2)) << "an OK answer came after its deadline";
      continue;
    }
    ASSERT_EQ(a.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
        << a.status.error_message();
    absl::optional<Attribution> attribution = AttributionOf(a.status);
    ASSERT_TRUE(attribution.has_value()) << a.status.error_message();
    // Waited until no time was left, or until what was left could not fit
    // the predicted handler time.
    EXPECT_THAT(attribution->source,
                ::testing::AnyOf(DeadlineSource::kQueueWait, DeadlineSource::kCannotFinish));
    EXPECT_EQ(attribution->hop, "orders");
    EXPECT_EQ(a.trailers.count(kSourceTrailer), 1u);
    ++refused;
  }
  EXPECT_GE(ok, 4);
  EXPECT_GE(refused, 4);
  EXPECT_EQ(ok + refused, 24);
  // Every call whose work started finished in time: no work was wasted,
  // and never more than the limit at once.
  EXPECT_EQ(counters_.started.load(), ok);
  EXPECT_LE(counters_.max_running.load(), 2);
  const AdmissionStats s = Stats();
  EXPECT_EQ(s.shed[static_cast<int>(ArrivalDecision::kShedQueueExpired)] +
                s.shed[static_cast<int>(ArrivalDecision::kShedCannotFinish)],
            static_cast<uint64_t>(refused));
  // The server lets go of a call's admission after its answer is sent, so
  // the caller can hold its last answer a moment before the gauges read 0
  // (seen once on the callback API in a clean test.sh run).
  EXPECT_TRUE(Eventually([&] {
    const MetricsSnapshot now = metrics_.Snapshot();
    return now.admission_in_progress == 0 && now.admission_waiting == 0;
  }));
  const MetricsSnapshot m = metrics_.Snapshot();
  EXPECT_EQ(m.deadline_exceeded(Side::kServer, DeadlineSource::kQueueWait) +
                m.deadline_exceeded(Side::kServer, DeadlineSource::kCannotFinish),
            static_cast<uint64_t>(refused));
  // The metrics say the same as the admission's own counters.
  EXPECT_EQ(m.admission(ArrivalDecision::kAdmit) + m.admission_admitted_after_wait,
            static_cast<uint64_t>(ok));
  EXPECT_EQ(m.admission(ArrivalDecision::kShedQueueExpired) +
                m.admission(ArrivalDecision::kShedCannotFinish),
            static_cast<uint64_t>(refused));
  EXPECT_EQ(m.admission_queue_wait.count, m.admission_admitted_after_wait);
  EXPECT_EQ(m.admission_handler_time.count, static_cast<uint64_t>(ok));
  EXPECT_EQ(m.admission_limit, 2);
  EXPECT_EQ(m.admission_in_progress, 0);
  EXPECT_EQ(m.admission_waiting, 0);
}

TEST_P(AdmissionGrpcTest, CallWhoseBudgetRunsOutInTheQueueIsAnsweredAtOnceUnstarted) {
  // The refusal leaves the queue hop_reserve + min_attempt_budget before the
  // deadline and must reach the caller before the caller's own deadline
  // fires. The margins are wide because the path is timing, not logic: a
  // 1 s budget with a 200 ms reserve (a 100 ms budget with 25 ms lost to the
  // caller's deadline under TSan beside two busy loops), and a blocker that
  // holds the only slot for 2.5 s, so "answered long before the blocker
  // ends" survives a sanitizer's slowdown (TSan once took 457 ms to deliver
  // a 100 ms call's refusal).
  BudgetPolicy policy;
  policy.hop_reserve = absl::Milliseconds(200);
  AdmissionOptions o = Limit(1, 10);
  o.policy.overload_wait = absl::InfiniteDuration();  // the deadline path, not overload's
  Start(o, policy);
  std::thread blocker([&] { CallOnce(absl::Seconds(5), 2500); });
  EXPECT_TRUE(Eventually([&] { return counters_.started.load() > 0; }, absl::Seconds(20),
                         absl::Milliseconds(1)));
  const Answer a = CallOnce(absl::Seconds(1), 0);
  blocker.join();  // before any ASSERT can return
  EXPECT_EQ(a.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  absl::optional<Attribution> attribution = AttributionOf(a.status);
  ASSERT_TRUE(attribution.has_value()) << a.status.error_message();
  EXPECT_EQ(attribution->source, DeadlineSource::kQueueWait);
  // Answered by the hop when less than hop_reserve + min_attempt_budget was
  // left of the budget the call arrived with (about 800 ms after arrival;
  // less when the call spent part of its second in transit, as under TSan
  // beside busy loops), not by the caller's own deadline, and long before
  // the blocker ends. The wire rounds both figures down to whole ms.
  EXPECT_GE(attribution->elapsed, attribution->budget - policy.hop_reserve -
                                      policy.min_attempt_budget - absl::Milliseconds(2));
  EXPECT_LT(a.took, absl::Milliseconds(2000));
  EXPECT_EQ(counters_.started.load(), 1);  // the blocker only
}

TEST_P(AdmissionGrpcTest, SustainedOverloadTurnsAWaiterAwayWithPushbackLongBeforeItsDeadline) {
  // One slot, held for 2 s; a caller with 5 s waits. Once the queue has not
  // been empty for lifo_after (100 ms), a waiter older than overload_wait
  // (10 ms) is refused as overload, with pushback: at about 100 ms, not at
  // max_wait (1 s), its deadline, nor when the blocker ends.
  Start(Limit(1, 10));
  std::thread blocker([&] { CallOnce(absl::Seconds(5), 2000); });
  EXPECT_TRUE(Eventually([&] { return counters_.started.load() > 0; }, absl::Seconds(20),
                         absl::Milliseconds(1)));
  const Answer a = CallOnce(absl::Seconds(5), 0);
  blocker.join();
  EXPECT_EQ(a.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << a.status.error_message();
  auto one = [&](const char* key) {
    auto it = a.trailers.find(key);
    return it == a.trailers.end() ? std::string("<absent>") : it->second;
  };
  EXPECT_EQ(one(kShedTrailer), "overload_wait");
  EXPECT_EQ(one(kPushbackHeader), "100");
  // Not at max_wait (1 s, queue_timeout), nor when the blocker ends (2 s).
  EXPECT_GE(a.took, absl::Milliseconds(90));
  EXPECT_LT(a.took, absl::Milliseconds(700));
  EXPECT_EQ(counters_.started.load(), 1);
  EXPECT_EQ(Stats().shed[static_cast<int>(ArrivalDecision::kShedOverloadWait)], 1u);
}

TEST_P(AdmissionGrpcTest, OverLimitWithoutQueueIsShedWithPushback) {
  Start(Limit(1, 0));
  // A 2 s blocker: "at once, not after the blocker" with room for a
  // sanitizer's slowdown.
  std::thread blocker([&] { CallOnce(absl::Seconds(5), 2000); });
  EXPECT_TRUE(Eventually([&] { return counters_.started.load() > 0; }, absl::Seconds(20),
                         absl::Milliseconds(1)));
  const Answer a = CallOnce(absl::Seconds(2), 0);
  blocker.join();
  EXPECT_EQ(a.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(a.status.error_message(), HasSubstr("shed at orders (over_limit)"));
  EXPECT_LT(a.took, absl::Milliseconds(1500));  // at once, not after the blocker
  auto one = [&](const char* key) {
    auto it = a.trailers.find(key);
    return it == a.trailers.end() ? std::string("<absent>") : it->second;
  };
  EXPECT_EQ(one(kShedTrailer), "over_limit");
  EXPECT_EQ(one(kHopTrailer), "orders");
  EXPECT_EQ(one(kPushbackHeader), "100");
  EXPECT_EQ(counters_.started.load(), 1);
  EXPECT_EQ(Stats().shed[static_cast<int>(ArrivalDecision::kShedOverLimit)], 1u);
}

// A method whose entry in the Hop's config says "admission": false is never
// held or shed by the server's gate: with a limit of one and a call
// running, the next call is served at once. On the same config without the
// field, that call is shed, as on a server without a Hop.
TEST_P(AdmissionGrpcTest, MethodKeptOutOfAdmissionByItsEntryIsServedOverTheLimit) {
  struct Row {
    const char* name;
    const char* config;
    grpc::StatusCode code;
  };
  const Row rows[] = {
      {"admission false",
       R"({"hopbudget": {"methodPolicy": [
           {"name": [{"service": "hopbudget.echo.Relay", "method": "Call"}],
            "admission": false}]}})",
       grpc::StatusCode::OK},
      {"admission unset",
       R"({"hopbudget": {"methodPolicy": [
           {"name": [{"service": "hopbudget.echo.Relay", "method": "Call"}],
            "hopReserve": "0.005s"}]}})",
       grpc::StatusCode::RESOURCE_EXHAUSTED},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    TearDown();
    counters_.started = 0;
    Metrics metrics;
    std::unique_ptr<Hop> hop = testing::MakeTestHop("orders", &metrics, row.config);
    ASSERT_NE(hop, nullptr);
    StartOnHop(*hop, Limit(1, 0));
    std::thread blocker([&] { CallOnce(absl::Seconds(5), 1000); });
    EXPECT_TRUE(Eventually([&] { return counters_.started.load() > 0; }, absl::Seconds(20),
                           absl::Milliseconds(1)));
    const Answer a = CallOnce(absl::Seconds(5), 0);
    blocker.join();
    EXPECT_EQ(a.status.error_code(), row.code) << a.status.error_message();
    EXPECT_EQ(counters_.started.load(), row.code == grpc::StatusCode::OK ? 2 : 1);
    const uint64_t shed = Stats().shed[static_cast<int>(ArrivalDecision::kShedOverLimit)];
    EXPECT_EQ(shed, row.code == grpc::StatusCode::OK ? 0u : 1u);
    TearDown();
  }
}

TEST_P(AdmissionGrpcTest, CallThatCannotFinishIsRefusedOnArrival) {
  AdmissionOptions o = Limit(4, 10);
  o.policy.predict = true;
  o.policy.predict_min_samples = 5;
  o.policy.predict_window = 16;
  Start(o);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(CallOnce(absl::Seconds(5), 60).status.ok());
  const int started = counters_.started.load();
  const Answer a = CallOnce(absl::Milliseconds(30), 60);  // predicted >= 60 ms
  EXPECT_EQ(a.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  absl::optional<Attribution> attribution = AttributionOf(a.status);
  ASSERT_TRUE(attribution.has_value()) << a.status.error_message();
  EXPECT_EQ(attribution->source, DeadlineSource::kCannotFinish);
  // Refused, not run out: had the caller's 30 ms run out first, its answer
  // would be the client's own DEADLINE_EXCEEDED, which carries no attribution.
  EXPECT_EQ(attribution->hop, "orders");
  EXPECT_EQ(counters_.started.load(), started);
  EXPECT_TRUE(CallOnce(absl::Seconds(5), 0).status.ok());  // one with room still runs
}

// 200 calls wait behind one that runs: the server does not grow a thread
// for each (sync: gRPC's threads go back to polling; hopbudget's pool starts
// at most `limit` threads).
TEST_P(AdmissionGrpcTest, WaitingCallsHoldNoThread) {
  AdmissionOptions o = Limit(1, 1000);
  o.policy.max_wait = absl::Seconds(30);
  o.policy.overload_wait = absl::InfiniteDuration();  // they wait for the blocker
  Start(o);
  auto threads_now = [] {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line)) {
      if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
    }
    return -1;
  };
  // The callers: one channel, async calls, no thread per call.
  grpc::CompletionQueue cq;
  std::thread blocker([&] { CallOnce(absl::Seconds(20), 1500); });
  EXPECT_TRUE(Eventually([&] { return counters_.started.load() > 0; }, absl::Seconds(20),
                         absl::Milliseconds(1)));
  const int before = threads_now();
  constexpr int kWaiting = 200;
  struct Pending {
    grpc::ClientContext ctx;
    echo::RelayReply reply;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<echo::RelayReply>> rpc;
  };
  std::vector<std::unique_ptr<Pending>> pending;
  for (int i = 0; i < kWaiting; ++i) {
    auto p = std::make_unique<Pending>();
    SetBudget(p->ctx, absl::Seconds(20));
    p->rpc = stub_->AsyncCall(&p->ctx, Request({Work(0)}), &cq);
    p->rpc->Finish(&p->reply, &p->status, p.get());
    pending.push_back(std::move(p));
  }
  EXPECT_TRUE(Eventually([&] { return Stats().queued >= kWaiting; }, absl::Seconds(10)));
  EXPECT_EQ(Stats().queued, kWaiting);
  const int during = threads_now();
  // Measured: +0..6 threads (gRPC's pollers and executor); one per waiting
  // call would be +200.
  EXPECT_LT(during - before, 30) << "before " << before << ", during " << during;
  blocker.join();
  for (int i = 0; i < kWaiting; ++i) {
    void* tag;
    bool ok;
    ASSERT_TRUE(cq.Next(&tag, &ok));
    EXPECT_TRUE(static_cast<Pending*>(tag)->status.ok())
        << static_cast<Pending*>(tag)->status.error_message();
  }
  cq.Shutdown();
  void* tag;
  bool ok;
  while (cq.Next(&tag, &ok)) {
  }
  EXPECT_EQ(counters_.started.load(), kWaiting + 1);
  EXPECT_EQ(counters_.max_running.load(), 1);
}

// With admission on and room to spare, the answer on the wire is what a
// server without admission sends: same code, message and trailer keys.
TEST_P(AdmissionGrpcTest, AdmissionWithRoomChangesNothingOnTheWire) {
  AdmissionOptions off;
  Start(off);
  const Answer without = CallOnce(absl::Seconds(2), 0);
  TearDown();
  Start(Limit(8, 8));
  const Answer with = CallOnce(absl::Seconds(2), 0);
  EXPECT_EQ(with.status.error_code(), without.status.error_code());
  EXPECT_EQ(with.status.error_message(), without.status.error_message());
  std::set<std::string> keys_without, keys_with;
  for (const auto& kv : without.trailers) keys_without.insert(kv.first);
  for (const auto& kv : with.trailers) keys_with.insert(kv.first);
  EXPECT_EQ(keys_with, keys_without);
}

INSTANTIATE_TEST_SUITE_P(Apis, AdmissionGrpcTest, ::testing::Values(Api::kSync, Api::kCallback),
                         [](const ::testing::TestParamInfo<Api>& info) {
                           return info.param == Api::kSync ? "Sync" : "Callback";
                         });

TEST(AdmissionConfigTest, BadConfigurationIsRefusedNamingTheField) {
  struct Case {
    const char* want;
    void (*mutate)(AdmissionOptions&);
  } cases[] = {
      {"max_in_flight (0)", [](AdmissionOptions& o) { o.policy.max_in_flight = 0; }},
      {"max_in_flight (-1)", [](AdmissionOptions& o) { o.policy.max_in_flight = -1; }},
      {"quantile (1.5)", [](AdmissionOptions& o) { o.policy.quantile = 1.5; }},
      {"quantile (0)", [](AdmissionOptions& o) { o.policy.quantile = 0; }},
      {"max_queue (-1)", [](AdmissionOptions& o) { o.policy.max_queue = -1; }},
      {"\"Call\" is not a full method name", [](AdmissionOptions& o) { o.methods = {"Call"}; }},
  };
  for (const Case& c : cases) {
    ServerOptions options;
    options.hop = "orders";
    options.admission.enabled = true;
    c.mutate(options.admission);
    auto factory = MakeServerInterceptorFactory(options);
    ASSERT_FALSE(factory.ok()) << c.want;
    EXPECT_EQ(factory.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(factory.status().message()), HasSubstr(c.want));
  }
  // Off, the same bad policy is not looked at.
  ServerOptions off;
  off.hop = "orders";
  off.admission.policy.max_in_flight = 0;
  EXPECT_TRUE(MakeServerInterceptorFactory(off).ok());
}

}  // namespace
}  // namespace hopbudget
