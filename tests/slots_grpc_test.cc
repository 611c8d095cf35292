// Copyright hopbudget authors.
//
// DownstreamSlots against real servers on loopback: the limit holds, a slot
// wait that outlives the budget fails with source slot-wait and never
// reaches the server, a cancel while waiting answers at once, and 10 000
// callers waiting for 100 slots hold no thread and expire on time. Slots
// made from a Hop and a method take the method's entry in the table in
// force when each call starts.
#include "hopbudget/advanced/slots_grpc.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "eventually.h"
#include "hopbudget/client.h"
#include "scripted_server.h"
#include "sync.h"
#include "test_hop.h"

namespace hopbudget {
namespace {

using testing::Action;
using testing::ScriptedServer;

DownstreamSlotsOptions SlotOptions(int max_in_flight, Metrics* metrics) {
  DownstreamSlotsOptions o;
  o.hop = "orders";
  o.max_in_flight = max_in_flight;
  o.budget.min_attempt_budget = absl::Milliseconds(20);
  o.metrics = metrics;
  return o;
}

struct Result {
  hopbudget::internal::Notification done;
  grpc::Status status;
  absl::Time at;
};

// One callback call through `slots` at the edge with `budget`.
std::shared_ptr<SlotCall> StartCall(DownstreamSlots& slots, echo::Relay::Stub& stub,
                                    absl::Duration budget, Result* result) {
  static const echo::RelayRequest request;
  auto reply = std::make_shared<echo::RelayReply>();
  return slots.Start(
      LogicalCall::WithDeadline(absl::Now() + budget),
      [&stub, reply](grpc::ClientContext* ctx, std::function<void(grpc::Status)> done) {
        stub.async()->Call(ctx, &request, reply.get(), std::move(done));
      },
      [result](grpc::Status s) {
        result->status = std::move(s);
        result->at = absl::Now();
        result->done.Notify();
      });
}

TEST(DownstreamSlotsTest, BadOptionsAreRefused) {
  Metrics metrics;
  DownstreamSlotsOptions o = SlotOptions(0, &metrics);
  auto s = DownstreamSlots::Create(o);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), ::testing::HasSubstr("max_in_flight must be >= 1, got 0"));
  o = SlotOptions(1, &metrics);
  o.hop = "bad hop";
  EXPECT_FALSE(DownstreamSlots::Create(o).ok());
  o = SlotOptions(1, &metrics);
  o.max_waiters = 0;
  EXPECT_THAT(DownstreamSlots::Create(o).status().message(), ::testing::HasSubstr("max_waiters"));
}

TEST(DownstreamSlotsTest, NoMoreThanTheLimitReachTheServerAndAllFinish) {
  Metrics metrics;
  ScriptedServer ledger("ledger", [](int) { return Action::After(absl::Milliseconds(30)); });
  auto stub = testing::AttemptStub(ledger.address(), "orders", &metrics);
  auto slots = DownstreamSlots::Create(SlotOptions(2, &metrics));
  ASSERT_TRUE(slots.ok()) << slots.status();
  std::vector<Result> results(8);
  for (Result& r : results) StartCall(**slots, *stub, absl::Seconds(20), &r);
  for (Result& r : results) {
    ASSERT_TRUE(r.done.WaitForNotificationWithTimeout(absl::Seconds(30)));
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
  }
  EXPECT_EQ(ledger.calls(), 8);
  EXPECT_EQ(ledger.max_in_flight(), 2);
  EXPECT_EQ(metrics.Snapshot().slot_wait.count, 8u);  // every grant, queued or not
  EXPECT_EQ((*slots)->in_flight(), 0);
  EXPECT_EQ((*slots)->waiting(), 0u);
}

enum class Form { kSync, kCallback };

class SlotWaitTest : public ::testing::TestWithParam<Form> {};

TEST_P(SlotWaitTest, AWaitThatOutlivesTheBudgetFailsWithSlotWaitAndNoCallIsSent) {
  Metrics metrics;
  ScriptedServer ledger("ledger", [](int) { return Action::Hang(); });
  auto stub = testing::AttemptStub(ledger.address(), "orders", &metrics);
  auto slots = DownstreamSlots::Create(SlotOptions(1, &metrics));
  ASSERT_TRUE(slots.ok());
  Result holder;
  auto held = StartCall(**slots, *stub, absl::Seconds(20), &holder);
  ASSERT_TRUE(ledger.WaitForCalls(1, absl::Seconds(10)));

  const absl::Duration budget = absl::Milliseconds(200);
  const absl::Time start = absl::Now();
  grpc::Status status;
  if (GetParam() == Form::kSync) {
    const echo::RelayRequest request;
    echo::RelayReply reply;
    status =
        (*slots)->Call(LogicalCall::WithDeadline(start + budget),
                       [&](grpc::ClientContext* ctx) { return stub->Call(ctx, request, &reply); });
  } else {
    Result r;
    StartCall(**slots, *stub, budget, &r);
    ASSERT_TRUE(r.done.WaitForNotificationWithTimeout(absl::Seconds(10)));
    status = r.status;
  }
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  const absl::optional<Attribution> a = AttributionOf(status);
  ASSERT_TRUE(a.has_value()) << status.error_message();
  EXPECT_EQ(a->source, DeadlineSource::kSlotWait);
  EXPECT_EQ(a->hop, "orders");
  // It gave up when less than min_attempt_budget (20 ms) was left.
  EXPECT_GE(took, absl::Milliseconds(175));
  EXPECT_LT(took, absl::Milliseconds(200) + absl::Milliseconds(400));
  EXPECT_EQ(ledger.calls(), 1);  // only the holder reached the server
  EXPECT_EQ(metrics.Snapshot().deadline_exceeded(Side::kClient, DeadlineSource::kSlotWait), 1u);
  EXPECT_EQ(metrics.Snapshot().slot_refusals[static_cast<int>(SlotRefusalReason::kNoTimeToWait)],
            1u);
  held->TryCancel();
  ASSERT_TRUE(holder.done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(holder.status.error_code(), grpc::StatusCode::CANCELLED);
}

// Made from a Hop, the slots attribute a wait to the Hop's name and count
// it in its metrics, whatever their options say.
TEST(DownstreamSlotsTest, SlotsMadeFromAHopAttributeTheWaitToIt) {
  Metrics hop_metrics;
  std::unique_ptr<Hop> hop = testing::MakeTestHop("orders", &hop_metrics);
  ASSERT_NE(hop, nullptr);
  Metrics other_metrics;
  DownstreamSlotsOptions options = SlotOptions(1, &other_metrics);
  options.hop = "someone-else";
  auto slots = DownstreamSlots::Create(*hop, options);
  ASSERT_TRUE(slots.ok()) << slots.status();
  ScriptedServer ledger("ledger", [](int) { return Action::Hang(); });
  auto channel = CreateChannel(*hop, ledger.address(), grpc::InsecureChannelCredentials());
  ASSERT_TRUE(channel.ok()) << channel.status();
  auto stub = echo::Relay::NewStub(*channel);
  Result holder;
  auto held = StartCall(**slots, *stub, absl::Seconds(20), &holder);
  ASSERT_TRUE(ledger.WaitForCalls(1, absl::Seconds(10)));
  Result waiter;
  StartCall(**slots, *stub, absl::Milliseconds(200), &waiter);
  ASSERT_TRUE(waiter.done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  const absl::optional<Attribution> a = AttributionOf(waiter.status);
  ASSERT_TRUE(a.has_value()) << waiter.status.error_message();
  EXPECT_EQ(a->source, DeadlineSource::kSlotWait);
  EXPECT_EQ(a->hop, "orders");
  EXPECT_EQ(hop_metrics.Snapshot().deadline_exceeded(Side::kClient, DeadlineSource::kSlotWait), 1u);
  EXPECT_EQ(other_metrics.Snapshot().deadline_exceeded(Side::kClient, DeadlineSource::kSlotWait),
            0u);
  held->TryCancel();
  ASSERT_TRUE(holder.done.WaitForNotificationWithTimeout(absl::Seconds(10)));
}

INSTANTIATE_TEST_SUITE_P(Forms, SlotWaitTest, ::testing::Values(Form::kSync, Form::kCallback),
                         [](const ::testing::TestParamInfo<Form>& i) {
                           return i.param == Form::kSync ? "Sync" : "Callback";
                         });

// A handler that passes a slot-wait refusal on: its caller reads the
// origin (slot-wait at orders) from the answer, in every form.
TEST(DownstreamSlotsTest, AHandlerRelaysTheSlotWaitAttributionToItsCaller) {
  Metrics metrics;
  ScriptedServer ledger("ledger", [](int) { return Action::Hang(); });
  auto stub = testing::AttemptStub(ledger.address(), "orders", &metrics);
  auto slots = DownstreamSlots::Create(SlotOptions(1, &metrics));
  ASSERT_TRUE(slots.ok());
  Result holder;
  auto held = StartCall(**slots, *stub, absl::Seconds(20), &holder);
  ASSERT_TRUE(ledger.WaitForCalls(1, absl::Seconds(10)));

  class Orders final : public echo::Relay::Service {
   public:
    Orders(DownstreamSlots* slots, echo::Relay::Stub* ledger) : slots_(slots), ledger_(ledger) {}
    grpc::Status Call(grpc::ServerContext* ctx, const echo::RelayRequest* req,
                      echo::RelayReply* reply) override {
      return slots_->Call(LogicalCall::Of(*ctx),
                          [&](grpc::ClientContext* c) { return ledger_->Call(c, *req, reply); });
    }
    DownstreamSlots* slots_;
    echo::Relay::Stub* ledger_;
  } orders(slots->get(), stub.get());
  ServerOptions so;
  so.hop = "orders";
  // Orders gives up 120 ms before its caller's deadline (reserve plus
  // min_attempt_budget): its answer must beat that deadline under load.
  so.policy.hop_reserve = absl::Milliseconds(100);
  std::string address;
  auto server = testing::ServeBehindHopbudget(&orders, so, &address);
  ASSERT_NE(server, nullptr);
  auto front = testing::NewStub(address, /*with_interceptor=*/false);
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, absl::Milliseconds(600));
  echo::RelayReply reply;
  const grpc::Status status = front->Call(&ctx, echo::RelayRequest(), &reply);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  const absl::optional<Attribution> a = AttributionOf(status);
  ASSERT_TRUE(a.has_value()) << status.error_message();
  EXPECT_EQ(a->source, DeadlineSource::kSlotWait);
  EXPECT_EQ(a->hop, "orders");
  const auto& trailers = ctx.GetServerTrailingMetadata();
  auto it = trailers.find("hopbudget-source");
  ASSERT_NE(it, trailers.end());
  EXPECT_EQ(std::string(it->second.data(), it->second.size()), "slot-wait");
  EXPECT_EQ(ledger.calls(), 1);
  held->TryCancel();
  ASSERT_TRUE(holder.done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  server->Shutdown();
}

TEST(DownstreamSlotsTest, AWaiterGetsTheSlotWhenTheHolderEnds) {
  Metrics metrics;
  ScriptedServer ledger("ledger", [](int n) { return n == 0 ? Action::Hang() : Action::Ok(); });
  auto stub = testing::AttemptStub(ledger.address(), "orders", &metrics);
  auto slots = DownstreamSlots::Create(SlotOptions(1, &metrics));
  ASSERT_TRUE(slots.ok());
  Result holder, waiter;
  auto held = StartCall(**slots, *stub, absl::Seconds(20), &holder);
  ASSERT_TRUE(ledger.WaitForCalls(1, absl::Seconds(10)));
  StartCall(**slots, *stub, absl::Seconds(20), &waiter);
  EXPECT_EQ((*slots)->waiting(), 1u);
  held->TryCancel();
  ASSERT_TRUE(waiter.done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(waiter.status.ok()) << waiter.status.error_message();
  // The holder's answer may come after the waiter's (its slot went first).
  ASSERT_TRUE(holder.done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(holder.status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(ledger.calls(), 2);
}

TEST(DownstreamSlotsTest, CancelWhileWaitingAnswersAtOnceAndSendsNothing) {
  Metrics metrics;
  ScriptedServer ledger("ledger", [](int) { return Action::Hang(); });
  auto stub = testing::AttemptStub(ledger.address(), "orders", &metrics);
  auto slots = DownstreamSlots::Create(SlotOptions(1, &metrics));
  ASSERT_TRUE(slots.ok());
  Result holder, waiter;
  auto held = StartCall(**slots, *stub, absl::Seconds(20), &holder);
  ASSERT_TRUE(ledger.WaitForCalls(1, absl::Seconds(10)));
  auto waiting = StartCall(**slots, *stub, absl::Seconds(20), &waiter);
  waiting->TryCancel();
  ASSERT_TRUE(waiter.done.HasBeenNotified());  // on the cancelling thread, at once
  EXPECT_EQ(waiter.status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ((*slots)->waiting(), 0u);
  held->TryCancel();
  ASSERT_TRUE(holder.done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(ledger.calls(), 1);
  EXPECT_EQ((*slots)->in_flight(), 0);
}

// 10 000 callers for 100 slots held by hanging calls: the waiters hold no
// thread, none is answered before its own give-up time, and each fails with
// slot-wait. How late past the give-up time they are answered is a speed
// target, measured by bench/slots_bench (section "slots" of the report).
TEST(DownstreamSlotsTest, TenThousandWaitersHoldNoThreadAndEachFailsWithSlotWait) {
  constexpr int kSlots = 100;
  constexpr int kWaiters = 10000;
  Metrics metrics;
  ScriptedServer ledger("ledger", [](int) { return Action::Hang(); });
  auto stub = testing::AttemptStub(ledger.address(), "orders", &metrics);
  auto slots = DownstreamSlots::Create(SlotOptions(kSlots, &metrics));
  ASSERT_TRUE(slots.ok());
  std::vector<Result> holders(kSlots);
  std::vector<std::shared_ptr<SlotCall>> held;
  for (Result& r : holders) held.push_back(StartCall(**slots, *stub, absl::Seconds(60), &r));
  ASSERT_TRUE(ledger.WaitForCalls(kSlots, absl::Seconds(20)));
  const int threads_before = testing::ThreadCount();

  // Give-up times spread over 1000..1200 ms from now (min_attempt_budget
  // 20 ms): enqueueing takes about 50 ms, 350 ms under ASan on a loaded
  // machine, so all are still waiting when counted.
  std::vector<Result> waiters(kWaiters);
  std::vector<absl::Time> give_up(kWaiters);
  const absl::Time start = absl::Now();
  for (int i = 0; i < kWaiters; ++i) {
    const absl::Duration budget = absl::Milliseconds(1020 + (i % 200));
    give_up[i] = absl::Now() + budget - absl::Milliseconds(20);
    StartCall(**slots, *stub, budget, &waiters[i]);
  }
  const absl::Duration enqueue = absl::Now() - start;
  // Those answered before the count are those whose give-up time passed
  // while the others were enqueued (checked below, per waiter). A waiter
  // leaves the queue before it is answered, so none answered is counted;
  // one that left may not be answered yet, so the count has no lower bound.
  auto unanswered = [&] {
    return static_cast<size_t>(std::count_if(waiters.begin(), waiters.end(),
                                             [](Result& r) { return !r.done.HasBeenNotified(); }));
  };
  const size_t unanswered_before = unanswered();
  const size_t waiting = (*slots)->waiting();
  const int threads_waiting = testing::ThreadCount();
  EXPECT_LE(waiting, unanswered_before);
  absl::Duration worst_late = absl::ZeroDuration();
  for (int i = 0; i < kWaiters; ++i) {
    ASSERT_TRUE(waiters[i].done.WaitForNotificationWithTimeout(absl::Seconds(30)));
    ASSERT_EQ(waiters[i].status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
    EXPECT_GE(waiters[i].at, give_up[i]);
    worst_late = std::max(worst_late, waiters[i].at - give_up[i]);
  }
  std::printf(
      "RESULT slots_10k enqueue_ms=%.1f worst_expiry_late_ms=%.2f threads_before=%d "
      "threads_waiting=%d waiting=%zu\n",
      absl::ToDoubleMilliseconds(enqueue), absl::ToDoubleMilliseconds(worst_late), threads_before,
      threads_waiting, waiting);
  EXPECT_LE(threads_waiting, threads_before + 2);
  EXPECT_EQ(ledger.calls(), kSlots);
  EXPECT_EQ(metrics.Snapshot().deadline_exceeded(Side::kClient, DeadlineSource::kSlotWait),
            static_cast<uint64_t>(kWaiters));
  for (auto& h : held) h->TryCancel();
  for (Result& r : holders) ASSERT_TRUE(r.done.WaitForNotificationWithTimeout(absl::Seconds(20)));
}

// Takes the one slot of `slots` and keeps it: the attempt's completion is
// left in *done, for the test to end it; *ended is notified by on_done.
void StartHolder(DownstreamSlots& slots, std::function<void(grpc::Status)>* done,
                 hopbudget::internal::Notification* ended) {
  slots.Start(
      LogicalCall::WithDeadline(absl::Now() + absl::Seconds(20)),
      [done](grpc::ClientContext*, std::function<void(grpc::Status)> d) { *done = std::move(d); },
      [ended](grpc::Status) { ended->Notify(); });
}

// The orders crash (issue 29): a waiter's attempt runs on the thread of the
// call that hands its slot on, and its first attempt may end before the
// attempt function returns. `on_done` (which frees the caller's reactor)
// must wait for the attempt function: here each attempt ends inside its own
// attempt function and then writes to the caller's state, as orders'
// CreateOrderCall wrote its retry handle.
TEST(DownstreamSlotsTest, OnDoneWaitsForTheAttemptFunctionToReturn) {
  Metrics metrics;
  auto slots = DownstreamSlots::Create(SlotOptions(1, &metrics));
  ASSERT_TRUE(slots.ok());
  struct Caller {
    std::atomic<bool> attempt_returned{false};
    bool returned_at_done = false;
    hopbudget::internal::Notification done;
  };
  auto start = [&](Caller& c) {
    return (*slots)->Start(
        LogicalCall::WithDeadline(absl::Now() + absl::Seconds(20)),
        [&c](grpc::ClientContext*, std::function<void(grpc::Status)> done) {
          done(grpc::Status::OK);  // an attempt refused at once, on its way back
          c.attempt_returned.store(true);
        },
        [&c](grpc::Status) {
          c.returned_at_done = c.attempt_returned.load();
          c.done.Notify();
        });
  };
  // Granted at once, inside Start.
  Caller first;
  start(first);
  ASSERT_TRUE(first.done.HasBeenNotified());
  EXPECT_TRUE(first.returned_at_done);

  // Granted to a waiter by the holder's completion, on the holder's thread.
  std::function<void(grpc::Status)> holder_done;
  hopbudget::internal::Notification holder_ended;
  StartHolder(**slots, &holder_done, &holder_ended);
  Caller waiter;
  start(waiter);
  ASSERT_EQ((*slots)->waiting(), 1u);
  holder_done(grpc::Status::OK);  // hands the slot on, here
  ASSERT_TRUE(waiter.done.HasBeenNotified());
  EXPECT_TRUE(waiter.returned_at_done);
  EXPECT_TRUE(holder_ended.HasBeenNotified());
  EXPECT_EQ((*slots)->in_flight(), 0);
}

// The grant, the cancel and the give-up time race for the same waiter, on
// three threads, many times. Each waiter is a heap object its `on_done`
// deletes (as a reactor's answer does) and its attempt function writes to
// after its attempt ended: under ASan a use after free fails the test.
// `on_done` runs once for each, and every slot comes back.
TEST(DownstreamSlotsTest, GrantCancelAndGiveUpRacingForAWaiterEndItOnce) {
  Metrics metrics;
  DownstreamSlotsOptions o = SlotOptions(1, &metrics);
  o.budget.min_attempt_budget = absl::Milliseconds(1);
  auto slots = DownstreamSlots::Create(o);
  ASSERT_TRUE(slots.ok());
  struct Waiter {
    int written_after_done = 0;
  };
  std::atomic<int> ended{0};
  constexpr int kRounds = 300;
  for (int round = 0; round < kRounds; ++round) {
    std::function<void(grpc::Status)> holder_done;
    hopbudget::internal::Notification holder_ended;
    StartHolder(**slots, &holder_done, &holder_ended);
    ASSERT_TRUE(holder_done != nullptr);
    auto* w = new Waiter;
    // A give-up time 0-2 ms away: the expiry timer joins the race.
    const absl::Duration budget = absl::Microseconds(1000 + (round % 3) * 500);
    std::shared_ptr<SlotCall> waiting = (*slots)->Start(
        LogicalCall::WithDeadline(absl::Now() + budget),
        [w](grpc::ClientContext*, std::function<void(grpc::Status)> done) {
          done(grpc::Status::OK);
          w->written_after_done = 1;
        },
        [w, &ended](grpc::Status) {
          delete w;
          ended.fetch_add(1);
        });
    std::thread releaser([&] { holder_done(grpc::Status::OK); });
    std::thread canceller([&] { waiting->TryCancel(); });
    releaser.join();
    canceller.join();
    ASSERT_TRUE(holder_ended.WaitForNotificationWithTimeout(absl::Seconds(10)));
    ASSERT_TRUE(testing::Eventually([&] { return ended.load() == round + 1; }, absl::Seconds(10)))
        << "round " << round << ": on_done ran " << ended.load() - round << " times";
  }
  EXPECT_EQ(ended.load(), kRounds);
  EXPECT_TRUE(testing::Eventually(
      [&] { return (*slots)->in_flight() == 0 && (*slots)->waiting() == 0; }, absl::Seconds(10)));
}

// Slots made from a Hop and a method (DownstreamSlots::Create(hop, method,
// max_in_flight)): each call takes the method's entry in the Hop's table in
// force when it starts.
//
// The attempts go to a ScriptedServer, which serves Relay/Call only, on a
// channel with hopbudget's client interceptor and no table of its own
// (AttemptStub): the cap an attempt gets is the slots' method's, not the
// wire method's, which a Hop's channel would add.

using ::hopbudget::testing::AttemptCapsConfig;
using ::hopbudget::testing::kRelayCallName;
using ::hopbudget::testing::kRelayWriteName;

// One sync call of Relay/Call on `stub` through `slots`, 20 s at the edge.
grpc::Status CallThrough(DownstreamSlots& slots, echo::Relay::Stub& stub) {
  const echo::RelayRequest request;
  echo::RelayReply reply;
  return slots.Call(LogicalCall::WithDeadline(absl::Now() + absl::Seconds(20)),
                    [&](grpc::ClientContext* ctx) { return stub.Call(ctx, request, &reply); });
}

// `status` is this hop's attempt budget of `cap`, fired.
void ExpectCutAt(const grpc::Status& status, absl::Duration cap) {
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
  const absl::optional<Attribution> a = AttributionOf(status);
  ASSERT_TRUE(a.has_value()) << status.error_message();
  EXPECT_EQ(a->source, DeadlineSource::kAttempt);
  EXPECT_EQ(a->hop, "orders");
  EXPECT_EQ(a->budget, cap);
}

TEST(SlotsHopMethodTest, EachMethodsAttemptIsCutAtItsOwnPerAttemptRecvTimeout) {
  Metrics metrics;
  std::unique_ptr<Hop> hop = testing::MakeTestHop("orders", &metrics, AttemptCapsConfig("0.1s"));
  ASSERT_NE(hop, nullptr);
  ScriptedServer hung("ledger", [](int) { return Action::Hang(); });
  auto stub = testing::AttemptStub(hung.address(), "orders", &metrics);
  auto calls = DownstreamSlots::Create(*hop, "/hopbudget.echo.Relay/Call", 1);
  ASSERT_TRUE(calls.ok()) << calls.status();
  auto writes = DownstreamSlots::Create(*hop, "/hopbudget.echo.Relay/Write", 1);
  ASSERT_TRUE(writes.ok()) << writes.status();
  // A method the table does not name takes its default entry.
  auto watches = DownstreamSlots::Create(*hop, "/hopbudget.echo.Relay/Watch", 1);
  ASSERT_TRUE(watches.ok()) << watches.status();

  ExpectCutAt(CallThrough(**calls, *stub), absl::Milliseconds(100));
  ExpectCutAt(CallThrough(**writes, *stub), absl::Milliseconds(250));
  ExpectCutAt(CallThrough(**watches, *stub), absl::Milliseconds(150));
  EXPECT_EQ(hung.calls(), 3);
  EXPECT_EQ((*calls)->in_flight(), 0);
}

// The give-up time of a wait is the method's minBudget: with 50 ms, a call
// with 40 ms left is refused at once rather than queued.
TEST(SlotsHopMethodTest, AWaitGivesUpAtItsMethodsMinBudget) {
  Metrics metrics;
  std::unique_ptr<Hop> hop = testing::MakeTestHop(
      "orders", &metrics,
      AttemptCapsConfig("0.1s", absl::StrCat(R"(, "hopbudget": {"methodPolicy": [
      {"name": [)",
                                             kRelayWriteName, R"(], "minBudget": "0.05s"}]})")));
  ASSERT_NE(hop, nullptr);
  auto slots = DownstreamSlots::Create(*hop, "/hopbudget.echo.Relay/Write", 1);
  ASSERT_TRUE(slots.ok()) << slots.status();
  std::function<void(grpc::Status)> holder_done;
  hopbudget::internal::Notification holder_ended;
  StartHolder(**slots, &holder_done, &holder_ended);
  ASSERT_EQ((*slots)->in_flight(), 1);
  const grpc::Status status = (*slots)->Call(
      LogicalCall::WithDeadline(absl::Now() + absl::Milliseconds(40)), [](grpc::ClientContext*) {
        ADD_FAILURE() << "no attempt may start";
        return grpc::Status::OK;
      });
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  const absl::optional<Attribution> a = AttributionOf(status);
  ASSERT_TRUE(a.has_value()) << status.error_message();
  EXPECT_EQ(a->source, DeadlineSource::kSlotWait);
  EXPECT_THAT(status.error_message(),
              ::testing::HasSubstr("no slot of 1 free before the deadline less 50ms"));
  EXPECT_EQ((*slots)->waiting(), 0u);
  holder_done(grpc::Status::OK);
  ASSERT_TRUE(holder_ended.WaitForNotificationWithTimeout(absl::Seconds(10)));
}

// A call resolves its method's entry when it starts: one in flight across a
// reload keeps the cap it started with, one started after gets the new.
TEST(SlotsHopMethodTest, AReloadChangesTheCapOfCallsStartedAfterIt) {
  Metrics metrics;
  std::unique_ptr<Hop> hop = testing::MakeTestHop("orders", &metrics, AttemptCapsConfig("0.3s"));
  ASSERT_NE(hop, nullptr);
  ScriptedServer hung("ledger", [](int) { return Action::Hang(); });
  auto stub = testing::AttemptStub(hung.address(), "orders", &metrics);
  auto slots = DownstreamSlots::Create(*hop, "/hopbudget.echo.Relay/Call", 2);
  ASSERT_TRUE(slots.ok()) << slots.status();
  Result before;
  StartCall(**slots, *stub, absl::Seconds(20), &before);
  ASSERT_TRUE(hung.WaitForCalls(1, absl::Seconds(10)));
  ASSERT_TRUE(hop->ReloadServiceConfig(AttemptCapsConfig("0.1s")).ok());
  const grpc::Status after = CallThrough(**slots, *stub);
  ASSERT_TRUE(before.done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  ExpectCutAt(before.status, absl::Milliseconds(300));
  ExpectCutAt(after, absl::Milliseconds(100));
}

TEST(SlotsHopMethodTest, AMethodThatIsNotAFullMethodNameIsInvalidArgument) {
  Metrics metrics;
  std::unique_ptr<Hop> hop = testing::MakeTestHop("orders", &metrics, AttemptCapsConfig("0.1s"));
  ASSERT_NE(hop, nullptr);
  for (const char* bad : {"", "Call", "hopbudget.echo.Relay/Call", "/hopbudget.echo.Relay",
                          "/hopbudget.echo.Relay/", "//Call", "/a/b/c"}) {
    auto slots = DownstreamSlots::Create(*hop, bad, 1);
    ASSERT_FALSE(slots.ok()) << bad;
    EXPECT_EQ(slots.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(slots.status().message()),
                ::testing::HasSubstr(absl::StrCat("DownstreamSlots of orders: method \"", bad,
                                                  "\" is not a full method name")));
  }
  // And the sizes, as with options.
  auto no_slots = DownstreamSlots::Create(*hop, "/hopbudget.echo.Relay/Call", 0);
  ASSERT_FALSE(no_slots.ok());
  EXPECT_EQ(no_slots.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(no_slots.status().message(),
              ::testing::HasSubstr("max_in_flight must be >= 1, got 0"));
  auto no_waiters = DownstreamSlots::Create(*hop, "/hopbudget.echo.Relay/Call", 1, 0);
  ASSERT_FALSE(no_waiters.ok());
  EXPECT_EQ(no_waiters.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(no_waiters.status().message(), ::testing::HasSubstr("max_waiters"));
}

// Shadow mode: the attempt takes the logical call's own deadline, no cap.
TEST(SlotsHopMethodTest, AMethodInShadowModePassesTheRequestsDeadlineThrough) {
  Metrics metrics;
  std::unique_ptr<Hop> hop = testing::MakeTestHop(
      "orders", &metrics,
      AttemptCapsConfig("0.1s", absl::StrCat(R"(, "hopbudget": {"methodPolicy": [
      {"name": [)",
                                             kRelayCallName, R"(], "shadow": true}]})")));
  ASSERT_NE(hop, nullptr);
  ScriptedServer ledger("ledger", [](int) { return Action::Ok(); });
  auto stub = testing::AttemptStub(ledger.address(), "orders", &metrics);
  const echo::RelayRequest request;
  // The shadowed Call, then Write (capped, for contrast).
  for (const char* method : {"/hopbudget.echo.Relay/Call", "/hopbudget.echo.Relay/Write"}) {
    SCOPED_TRACE(method);
    auto slots = DownstreamSlots::Create(*hop, method, 1);
    ASSERT_TRUE(slots.ok()) << slots.status();
    const LogicalCall call = LogicalCall::WithDeadline(absl::Now() + absl::Seconds(20));
    absl::Time deadline = absl::InfinitePast();
    echo::RelayReply reply;
    const grpc::Status s = (*slots)->Call(call, [&](grpc::ClientContext* ctx) {
      deadline = absl::FromChrono(ctx->deadline());
      return stub->Call(ctx, request, &reply);
    });
    EXPECT_TRUE(s.ok()) << s.error_message();
    if (std::string(method) == "/hopbudget.echo.Relay/Call") {
      EXPECT_LE(absl::AbsDuration(deadline - call.deadline), absl::Microseconds(1));
    } else {
      EXPECT_LT(deadline, call.deadline - absl::Seconds(10));  // now + 250 ms
    }
  }
}

}  // namespace
}  // namespace hopbudget
