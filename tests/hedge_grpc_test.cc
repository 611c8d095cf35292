// Copyright hopbudget authors.
//
// Hedger against real servers on loopback: a slow primary is hedged to the
// other target and the hedge wins (the primary is cancelled at the callee),
// a hedge is never sent without room in the budget, the extra-load cap holds
// under a slow replica (a hedge it holds back goes out once a token is
// earned), the delay learns from attempts a hedge cut short, a pushback or a
// fatal answer stops the hedging, a non-fatal one sends the next hedge at
// once, an attempt whose target has no ready backend leaves the others running,
// and cancelling the logical call cancels every attempt.
#include "hopbudget/advanced/hedge_grpc.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "eventually.h"
#include "hopbudget/client.h"
#include "hopbudget/hop.h"
#include "scripted_server.h"
#include "sync.h"
#include "test_hop.h"

namespace hopbudget {
namespace {

using testing::Action;
using testing::ScriptedServer;

enum class Form { kSync, kCallback };

HedgerOptions Options(Metrics* metrics, absl::Duration delay) {
  HedgerOptions o;
  o.hop = "orders";
  o.metrics = metrics;
  o.hedge.delay = delay;
  o.hedge.max_extra_load = 1;  // every call may hedge, unless a test says otherwise
  return o;
}

// Attempt i goes to target i % 2.
struct HedgeRig {
  HedgeRig(ScriptedServer& a, ScriptedServer& b, HedgerOptions options)
      : HedgeRig(a.address(), b.address(), std::move(options)) {}
  HedgeRig(const std::string& a, const std::string& b, HedgerOptions options) {
    options.metrics = &metrics;
    stubs.push_back(testing::AttemptStub(a, "orders", &metrics));
    stubs.push_back(testing::AttemptStub(b, "orders", &metrics));
    auto h = Hedger::Create(std::move(options));
    EXPECT_TRUE(h.ok()) << h.status();
    hedger = *std::move(h);
  }
  // `replies` must hold 3 replies and outlive the call.
  Hedger::AsyncAttempt Attempt(echo::RelayReply* replies) {
    return
        [this, replies](int i, grpc::ClientContext* ctx, std::function<void(grpc::Status)> done) {
          stubs[i % 2]->async()->Call(ctx, &request, &replies[i], std::move(done));
        };
  }
  HedgeResult Run(Form form, absl::Duration budget) {
    echo::RelayReply replies[3];
    const LogicalCall call = LogicalCall::WithDeadline(absl::Now() + budget);
    if (form == Form::kSync) return hedger->Call(call, Attempt(replies));
    hopbudget::internal::Notification done;
    HedgeResult result;
    hedger->Start(call, Attempt(replies), [&](HedgeResult r) {
      result = std::move(r);
      done.Notify();
    });
    EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
    return result;
  }
  Metrics metrics;
  std::vector<std::unique_ptr<echo::Relay::Stub>> stubs;
  const echo::RelayRequest request;
  std::unique_ptr<Hedger> hedger;
};

class HedgeGrpcTest : public ::testing::TestWithParam<Form> {};

TEST_P(HedgeGrpcTest, ASlowPrimaryIsHedgedToTheOtherTargetAndTheHedgeWins) {
  ScriptedServer slow("ledger-a", [](int) { return Action::Hang(); });
  // The hedge wins once the primary is at its callee: on a loaded machine
  // a primary still connecting when the hedge won was cancelled before it
  // was sent, and the callee had nothing to cancel.
  ScriptedServer fast("ledger-b",
                      [&slow](int) { return Action::Ok().When([&] { return slow.calls() > 0; }); });
  HedgeRig rig(slow, fast, Options(nullptr, absl::Milliseconds(20)));
  const HedgeResult r = rig.Run(GetParam(), absl::Seconds(20));
  EXPECT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.winner, 1);
  EXPECT_EQ(r.sent, 2);
  EXPECT_EQ(r.losers, 1);
  ASSERT_TRUE(slow.WaitForCancels(1, absl::Seconds(10)));  // the primary, cancelled at the callee
  EXPECT_THAT(slow.previous_attempts(), ::testing::ElementsAre(""));
  EXPECT_THAT(fast.previous_attempts(), ::testing::ElementsAre("1"));  // the hedge says so
  const MetricsSnapshot s = rig.metrics.Snapshot();
  EXPECT_EQ(s.hedges_sent, 1u);
  EXPECT_EQ(s.hedges_won, 1u);
  EXPECT_EQ(s.hedge_losers_cancelled, 1u);
}

TEST_P(HedgeGrpcTest, NoHedgeIsSentWithoutRoomInTheBudget) {
  ScriptedServer slow("ledger-a", [](int) { return Action::Hang(); });
  ScriptedServer other("ledger-b", [](int) { return Action::Ok(); });
  HedgerOptions o = Options(nullptr, absl::Milliseconds(200));
  o.budget.min_attempt_budget = absl::Milliseconds(150);
  HedgeRig rig(slow, other, o);
  // At the hedge delay (200 ms) about 100 ms of the 300 ms remain: below
  // 150. (The 100 ms also let a late timer decide before the deadline.)
  const HedgeResult r = rig.Run(GetParam(), absl::Milliseconds(300));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(r.sent, 1);
  EXPECT_EQ(r.skipped, HedgeOutcome::kNoBudget);
  EXPECT_EQ(other.calls(), 0);
  EXPECT_EQ(rig.metrics.Snapshot().hedge_skipped(HedgeOutcome::kNoBudget), 1u);
}

TEST_P(HedgeGrpcTest, APushbackStopsTheHedging) {
  ScriptedServer pushing("ledger-a", [](int) {
    return Action::Fail(grpc::StatusCode::UNAVAILABLE, /*pushback=*/"5");
  });
  ScriptedServer other("ledger-b", [](int) { return Action::Ok(); });
  HedgeRig rig(pushing, other, Options(nullptr, absl::Milliseconds(200)));
  const HedgeResult r = rig.Run(GetParam(), absl::Seconds(20));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(r.sent, 1);
  EXPECT_EQ(other.calls(), 0);
}

TEST_P(HedgeGrpcTest, AFatalAnswerStopsTheHedgingAndCancelsTheRest) {
  ScriptedServer slow_bad("ledger-a", [](int) { return Action::Hang(); });
  ScriptedServer bad("ledger-b", [&slow_bad](int) {
    return Action::Fail(grpc::StatusCode::INVALID_ARGUMENT).When([&] {
      return slow_bad.calls() > 0;  // the first attempt is there to cancel
    });
  });
  HedgerOptions o = Options(nullptr, absl::Milliseconds(20));
  o.hedge.max_attempts = 3;
  HedgeRig rig(slow_bad, bad, o);
  const HedgeResult r = rig.Run(GetParam(), absl::Seconds(20));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(r.sent, 2);  // no third attempt after the fatal answer
  EXPECT_EQ(r.losers, 1);
  EXPECT_TRUE(slow_bad.WaitForCancels(1, absl::Seconds(10)));
  EXPECT_EQ(slow_bad.calls(), 1);
}

TEST_P(HedgeGrpcTest, ANonFatalAnswerSendsTheNextHedgeAtOnce) {
  ScriptedServer down("ledger-a", [](int) { return Action::Fail(grpc::StatusCode::UNAVAILABLE); });
  ScriptedServer up("ledger-b", [](int) { return Action::Ok(); });
  HedgeRig rig(down, up, Options(nullptr, absl::Seconds(10)));  // the delay never passes
  const absl::Time start = absl::Now();
  const HedgeResult r = rig.Run(GetParam(), absl::Seconds(20));
  EXPECT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.winner, 1);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST_P(HedgeGrpcTest, ThePrimarysAttemptCapDoesNotCutAHedgeStillRunning) {
  // Hedge at 400 ms; each attempt's cap is 1 s. The primary hangs and is
  // cut by its cap at 1 s; the hedge answers at ~1.2 s, within its own cap
  // (1.4 s). A cap that fired is this attempt's, not the call's: the hedge
  // must win. 200 ms on each side: with 50 ms, the hedge's answer missed its
  // cap under four copies of this test on two loaded cores.
  ScriptedServer hung("ledger-a", [](int) { return Action::Hang(); });
  ScriptedServer late("ledger-b", [](int) { return Action::After(absl::Milliseconds(800)); });
  HedgerOptions o = Options(nullptr, absl::Milliseconds(400));
  o.budget.attempt_cap = absl::Seconds(1);
  HedgeRig rig(hung, late, o);
  const HedgeResult r = rig.Run(GetParam(), absl::Seconds(20));
  EXPECT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.winner, 1);
  EXPECT_EQ(r.sent, 2);
  // The primary was cut before the hedge answered, not cancelled by its win.
  ASSERT_TRUE(hung.WaitForCancels(1, absl::Seconds(10)));
  EXPECT_EQ(r.losers, 0);
}

TEST_P(HedgeGrpcTest, AnAttemptWithNoBackendLeavesTheOthersRunning) {
  // The primary goes to a port nothing listens on, the hedge to ledger-b.
  // Hedge at 400 ms; caps of 1 s. The primary waits for a backend until its
  // cap (1 s) and ends as no-backend; the hedge answers at ~1.2 s, inside
  // its own cap (1.4 s). The no-backend answer sent nothing and is the
  // attempt's own: it must not end the call (it did, cancelling the hedge).
  ScriptedServer b("ledger-b", [](int) { return Action::After(absl::Milliseconds(800)); });
  HedgerOptions o = Options(nullptr, absl::Milliseconds(400));
  o.budget.attempt_cap = absl::Seconds(1);
  HedgeRig rig(absl::StrCat("127.0.0.1:", testing::UnusedPort()), b.address(), o);
  const HedgeResult r = rig.Run(GetParam(), absl::Seconds(20));
  EXPECT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.winner, 1);
  EXPECT_EQ(r.sent, 2);
  EXPECT_EQ(rig.metrics.Snapshot().deadline_exceeded(Side::kClient, DeadlineSource::kNoBackend),
            1u);
}

TEST_P(HedgeGrpcTest, CancellingTheLogicalCallCancelsEveryAttempt) {
  ScriptedServer a("ledger-a", [](int) { return Action::Hang(); });
  ScriptedServer b("ledger-b", [](int) { return Action::Hang(); });
  HedgeRig rig(a, b, Options(nullptr, absl::Milliseconds(10)));
  echo::RelayReply replies[3];
  hopbudget::internal::Notification done;
  HedgeResult r;
  auto call = rig.hedger->Start(LogicalCall::WithDeadline(absl::Now() + absl::Seconds(20)),
                                rig.Attempt(replies), [&](HedgeResult res) {
                                  r = std::move(res);
                                  done.Notify();
                                });
  // Both attempts have reached their callees (under ASan on a loaded
  // machine the primary can still be in flight when the hedge arrives: a
  // cancel then overtakes it and the callee never sees a call to cancel).
  ASSERT_TRUE(a.WaitForCalls(1, absl::Seconds(10)));
  ASSERT_TRUE(b.WaitForCalls(1, absl::Seconds(10)));  // the hedge is out
  call->TryCancel();
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(r.sent, 2);
  EXPECT_TRUE(a.WaitForCancels(1, absl::Seconds(10)));
  EXPECT_TRUE(b.WaitForCancels(1, absl::Seconds(10)));
}

INSTANTIATE_TEST_SUITE_P(Forms, HedgeGrpcTest, ::testing::Values(Form::kSync, Form::kCallback),
                         [](const ::testing::TestParamInfo<Form>& i) {
                           return i.param == Form::kSync ? "Sync" : "Callback";
                         });

// 200 calls at once, every primary slow: only 5 % may be hedged.
TEST(HedgeLoadTest, TheExtraLoadCapHoldsUnderASlowReplica) {
  constexpr int kCalls = 200;
  ScriptedServer slow("ledger-a", [](int) { return Action::After(absl::Milliseconds(150)); });
  ScriptedServer fast("ledger-b", [](int) { return Action::Ok(); });
  HedgerOptions o = Options(nullptr, absl::Milliseconds(20));
  o.hedge.max_extra_load = 0.05;
  HedgeRig rig(slow, fast, o);
  std::vector<std::array<echo::RelayReply, 3>> replies(kCalls);
  std::vector<hopbudget::internal::Notification> done(kCalls);
  for (int i = 0; i < kCalls; ++i) {
    rig.hedger->Start(LogicalCall::WithDeadline(absl::Now() + absl::Seconds(20)),
                      rig.Attempt(replies[i].data()), [&done, i](HedgeResult r) {
                        EXPECT_TRUE(r.status.ok()) << r.status.error_message();
                        done[i].Notify();
                      });
  }
  for (auto& d : done) ASSERT_TRUE(d.WaitForNotificationWithTimeout(absl::Seconds(30)));
  const MetricsSnapshot s = rig.metrics.Snapshot();
  std::printf("RESULT hedge_extra_load_cap calls=%d hedges=%llu extra_load=%.3f\n", kCalls,
              static_cast<unsigned long long>(s.hedges_sent), s.extra_load());
  EXPECT_LE(s.hedges_sent, static_cast<uint64_t>(kCalls * 0.05 + 1));
  EXPECT_GE(s.hedges_sent, 5u);  // the cap is a cap, not an off switch
  EXPECT_EQ(static_cast<uint64_t>(fast.calls()), s.hedges_sent);
  EXPECT_LE(rig.hedger->extra_load(), 0.05 + 1.0 / kCalls);
  // Every call left unhedged was held back (once each, however often it
  // looked); a call held back may still have sent its hedge later, when the
  // calls started after it had earned a token (when starting 200 calls took
  // longer than the 20 ms delay).
  EXPECT_GE(s.hedge_skipped(HedgeOutcome::kExtraLoad), kCalls - s.hedges_sent);
  EXPECT_LE(s.hedge_skipped(HedgeOutcome::kExtraLoad), static_cast<uint64_t>(kCalls));
}

// The bucket holds a hedge back, it does not drop it: the slow call's hedge
// goes out once a later call has earned the token.
TEST(HedgeLoadTest, AHedgeHeldBackByTheBucketGoesOutOnceATokenIsEarned) {
  // a's first call hangs (call 1's primary); its second answers (call 2's).
  ScriptedServer a("ledger-a", [](int n) { return n == 0 ? Action::Hang() : Action::Ok(); });
  ScriptedServer b("ledger-b", [](int) { return Action::Ok(); });
  // Call 2 must answer before its own hedge delay, or it takes the token it
  // earned: 20 ms was too short under ASan beside the other tests (CI saw
  // call 2 hedge itself).
  HedgerOptions o = Options(nullptr, absl::Milliseconds(200));
  o.hedge.max_extra_load = 0.5;  // two calls earn one hedge
  o.hedge.burst = 1;
  HedgeRig rig(a, b, o);
  std::array<echo::RelayReply, 3> replies1, replies2;
  hopbudget::internal::Notification done1;
  HedgeResult r1;
  // 5 s: without its hedge, call 1 still ends inside the test's waits.
  rig.hedger->Start(LogicalCall::WithDeadline(absl::Now() + absl::Seconds(5)),
                    rig.Attempt(replies1.data()), [&](HedgeResult r) {
                      r1 = std::move(r);
                      done1.Notify();
                    });
  // Call 1 alone has earned half a token: its hedge is held back.
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (rig.metrics.Snapshot().hedge_skipped(HedgeOutcome::kExtraLoad) == 0 &&
         absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_EQ(rig.metrics.Snapshot().hedge_skipped(HedgeOutcome::kExtraLoad), 1u);
  EXPECT_EQ(b.calls(), 0);
  // Call 2 earns the other half and answers at once, unhedged.
  const HedgeResult r2 = rig.hedger->Call(
      LogicalCall::WithDeadline(absl::Now() + absl::Seconds(20)), rig.Attempt(replies2.data()));
  EXPECT_TRUE(r2.status.ok()) << r2.status.error_message();
  EXPECT_EQ(r2.sent, 1);
  // Call 1's next look finds the token: its hedge goes to b and wins.
  ASSERT_TRUE(done1.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(r1.status.ok()) << r1.status.error_message();
  EXPECT_EQ(r1.sent, 2);
  EXPECT_EQ(r1.winner, 1);
  EXPECT_EQ(r1.skipped, HedgeOutcome::kSend);  // held back, then sent
  const MetricsSnapshot s = rig.metrics.Snapshot();
  EXPECT_EQ(s.hedges_sent, 1u);
  EXPECT_EQ(s.hedge_skipped(HedgeOutcome::kExtraLoad), 1u);  // once, however often it looked
  EXPECT_EQ(b.calls(), 1);
}

// The window learns how long a first attempt cut short by a hedge had run,
// not only the hedge's own quick answer; otherwise a slow replica would
// drag the delay down to the fast one's latency, and hedges would go out
// for more calls than max_extra_load allows.
TEST(HedgeLoadTest, TheDelayLearnsFromTheAttemptsAHedgeCutShort) {
  ScriptedServer slow("ledger-a", [](int) { return Action::Hang(); });
  ScriptedServer fast("ledger-b", [](int) { return Action::Ok(); });
  HedgerOptions o = Options(nullptr, absl::Milliseconds(50));  // until min_samples are known
  o.hedge.quantile = 0.99;
  o.hedge.window = 8;
  o.hedge.min_samples = 1;
  o.hedge.min_delay = absl::ZeroDuration();
  HedgeRig rig(slow, fast, o);
  const HedgeResult r = rig.Run(Form::kSync, absl::Seconds(20));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  ASSERT_EQ(r.winner, 1);
  // The primary had run at least the 50 ms delay when the hedge won.
  EXPECT_GE(rig.hedger->current_delay(), absl::Milliseconds(50));
}

TEST(HedgeOptionsTest, BadOptionsAreRefused) {
  HedgerOptions o = Options(nullptr, absl::Milliseconds(10));
  o.hedge.max_attempts = 4;
  EXPECT_THAT(Hedger::Create(o).status().message(), ::testing::HasSubstr("max_attempts"));
  o = Options(nullptr, absl::Milliseconds(10));
  o.hop = "";
  EXPECT_FALSE(Hedger::Create(o).ok());
}

// A hedger made from a Hop: each call takes its method's entry in the Hop's
// table (hedgingPolicy: maxAttempts, hedgingDelay, nonFatalStatusCodes).

// The service config of these tests' Hop: Call is hedged after 20 ms; Write
// is not.
std::string HedgeConfig() {
  return R"({"methodConfig": [
      {"name": [{"service": "hopbudget.echo.Relay", "method": "Call"}], "timeout": "5s",
       "hedgingPolicy": {"maxAttempts": 2, "hedgingDelay": "0.02s",
                         "nonFatalStatusCodes": ["UNAVAILABLE"]}},
      {"name": [{"service": "hopbudget.echo.Relay", "method": "Write"}], "timeout": "5s"}]})";
}

// `calls` logical calls through `hedger` to two targets (attempt i to
// target i % 2) on channels made from `hop`, each with a 300 ms budget;
// the last call's result.
HedgeResult HedgeThroughHop(const Hop& hop, Hedger& hedger, ScriptedServer& a, ScriptedServer& b,
                            int calls) {
  std::unique_ptr<echo::Relay::Stub> stubs[2];
  int i = 0;
  for (ScriptedServer* target : {&a, &b}) {
    auto channel = CreateChannel(hop, target->address(), grpc::InsecureChannelCredentials());
    EXPECT_TRUE(channel.ok()) << channel.status();
    if (!channel.ok()) return HedgeResult();
    stubs[i++] = echo::Relay::NewStub(*channel);
  }
  HedgeResult result;
  for (int c = 0; c < calls; ++c) {
    echo::RelayReply replies[3];
    const echo::RelayRequest request;
    result = hedger.Call(
        LogicalCall::WithDeadline(absl::Now() + absl::Milliseconds(300)),
        [&](int index, grpc::ClientContext* ctx, std::function<void(grpc::Status)> done) {
          stubs[index % 2]->async()->Call(ctx, &request, &replies[index], std::move(done));
        });
  }
  return result;
}

// The bucket a service config's hedgingPolicy gets is HedgePolicy's (5 %
// extra load at most): 20 calls earn the one hedge the last call sends.
TEST(HedgeHopTest, AHopsHedgerHedgesAsTheMethodsHedgingPolicySays) {
  Metrics metrics;
  std::unique_ptr<Hop> hop = testing::MakeTestHop("orders", &metrics, HedgeConfig());
  ASSERT_NE(hop, nullptr);
  auto hedger = Hedger::Create(*hop, "/hopbudget.echo.Relay/Call");
  ASSERT_TRUE(hedger.ok()) << hedger.status();
  EXPECT_EQ((*hedger)->options().hedge.delay, absl::Milliseconds(20));
  ScriptedServer primary("ledger-a",
                         [](int call) { return call < 20 ? Action::Ok() : Action::Hang(); });
  ScriptedServer other("ledger-b", [](int) { return Action::Ok(); });
  const HedgeResult r = HedgeThroughHop(*hop, **hedger, primary, other, 21);
  EXPECT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.sent, 2);
  EXPECT_EQ(r.winner, 1);
  EXPECT_EQ(other.calls(), 1);
  EXPECT_EQ(metrics.Snapshot().hedges_won, 1u);
}

TEST(HedgeHopTest, AMethodWithoutAHedgingPolicyGetsOneAttempt) {
  Metrics metrics;
  std::unique_ptr<Hop> hop = testing::MakeTestHop("orders", &metrics, HedgeConfig());
  ASSERT_NE(hop, nullptr);
  auto hedger = Hedger::Create(*hop, "/hopbudget.echo.Relay/Write");
  ASSERT_TRUE(hedger.ok()) << hedger.status();
  EXPECT_EQ((*hedger)->options().hedge.max_attempts, 1);
  ScriptedServer primary("ledger-a",
                         [](int call) { return call < 20 ? Action::Ok() : Action::Hang(); });
  ScriptedServer other("ledger-b", [](int) { return Action::Ok(); });
  const HedgeResult r = HedgeThroughHop(*hop, **hedger, primary, other, 21);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(r.sent, 1);
  EXPECT_EQ(other.calls(), 0);
}

// A reload applies from the next call; shadow mode is one attempt under the
// logical deadline itself.
TEST(HedgeHopTest, AReloadIntoShadowModeLeavesTheNextCallUnhedged) {
  Metrics metrics;
  std::unique_ptr<Hop> hop = testing::MakeTestHop("orders", &metrics, HedgeConfig());
  ASSERT_NE(hop, nullptr);
  auto hedger = Hedger::Create(*hop, "/hopbudget.echo.Relay/Call");
  ASSERT_TRUE(hedger.ok()) << hedger.status();
  ScriptedServer primary("ledger-a",
                         [](int call) { return call < 20 ? Action::Ok() : Action::Hang(); });
  ScriptedServer other("ledger-b", [](int) { return Action::Ok(); });
  EXPECT_TRUE(HedgeThroughHop(*hop, **hedger, primary, other, 20).status.ok());
  ASSERT_TRUE(hop->ReloadServiceConfig(absl::StrCat(R"({"methodConfig": [
      {"name": [{"service": "hopbudget.echo.Relay", "method": "Call"}], "timeout": "5s",
       "hedgingPolicy": {"maxAttempts": 2, "hedgingDelay": "0.02s"}}],
    "hopbudget": {"methodPolicy": [
      {"name": [{"service": "hopbudget.echo.Relay", "method": "Call"}], "shadow": true}]}})"))
                  .ok());
  const HedgeResult r = HedgeThroughHop(*hop, **hedger, primary, other, 1);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(r.sent, 1);
  EXPECT_EQ(other.calls(), 0);
}

TEST(HedgeOptionsTest, AHopsHedgerNeedsAFullMethodName) {
  Metrics metrics;
  std::unique_ptr<Hop> hop = testing::MakeTestHop("orders", &metrics, HedgeConfig());
  ASSERT_NE(hop, nullptr);
  for (const char* bad : {"", "Call", "/hopbudget.echo.Relay", "/a/b/c"}) {
    auto hedger = Hedger::Create(*hop, bad);
    ASSERT_FALSE(hedger.ok()) << bad;
    EXPECT_EQ(hedger.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(hedger.status().message()),
                ::testing::HasSubstr(absl::StrCat("\"", bad, "\" is not a full method name")));
  }
}

// Issue 29: a hedge's attempt function runs on the timer's thread; the
// hedge may win, and the first attempt end, before it returns. `on_done`
// waits for it.
TEST(HedgeThreadsTest, OnDoneWaitsForTheHedgesAttemptFunctionToReturn) {
  Metrics metrics;
  auto hedger = Hedger::Create(Options(&metrics, absl::Milliseconds(5)));
  ASSERT_TRUE(hedger.ok()) << hedger.status();
  std::function<void(grpc::Status)> first_done;
  std::atomic<bool> hedge_returned{false};
  bool returned_at_done = false;
  HedgeResult result;
  hopbudget::internal::Notification done;
  (*hedger)->Start(
      LogicalCall::WithDeadline(absl::Now() + absl::Seconds(20)),
      [&](int i, grpc::ClientContext*, std::function<void(grpc::Status)> attempt_done) {
        if (i == 0) {
          first_done = std::move(attempt_done);  // slow: still out when the hedge goes
          return;
        }
        attempt_done(grpc::Status::OK);  // the hedge wins at once
        first_done(grpc::Status(grpc::StatusCode::CANCELLED, "lost the race"));
        hedge_returned.store(true);
      },
      [&](HedgeResult r) {
        returned_at_done = hedge_returned.load();
        result = std::move(r);
        done.Notify();
      });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(result.winner, 1);
  EXPECT_TRUE(returned_at_done);
}

// A hedge that wins while the logical call is cancelled from another thread
// and the first attempt ends on a third, many times. The caller is a heap
// object its `on_done` deletes and its attempt functions write to after
// their attempt ended (a use after free fails under ASan); `on_done` runs
// once.
TEST(HedgeThreadsTest, AWinningHedgeRacingACancelEndsTheCallOnce) {
  Metrics metrics;
  HedgerOptions o = Options(&metrics, absl::Milliseconds(1));
  o.hedge.burst = 1000;
  auto hedger = Hedger::Create(o);
  ASSERT_TRUE(hedger.ok()) << hedger.status();
  struct Caller {
    std::function<void(grpc::Status)> first_done;
    hopbudget::internal::Notification first_started;
    int written = 0;
  };
  std::atomic<int> ended{0};
  constexpr int kRounds = 200;
  for (int round = 0; round < kRounds; ++round) {
    auto* c = new Caller;
    hopbudget::internal::Notification* first_started = &c->first_started;
    std::function<void(grpc::Status)>* first_done = &c->first_done;
    std::shared_ptr<HedgingCall> call = (*hedger)->Start(
        LogicalCall::WithDeadline(absl::Now() + absl::Seconds(20)),
        [c](int i, grpc::ClientContext*, std::function<void(grpc::Status)> done) {
          if (i == 0) {
            c->first_done = std::move(done);
            c->first_started.Notify();
            return;
          }
          done(grpc::Status::OK);
          c->written = 1;
        },
        [c, &ended](HedgeResult) {
          delete c;
          ended.fetch_add(1);
        });
    ASSERT_TRUE(first_started->HasBeenNotified());
    std::function<void(grpc::Status)> end_first = std::move(*first_done);
    std::thread canceller([&] { call->TryCancel(); });
    std::thread first([&] {
      absl::SleepFor(absl::Microseconds(round % 2000));  // before or after the hedge goes
      end_first(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
    });
    canceller.join();
    first.join();
    ASSERT_TRUE(testing::Eventually([&] { return ended.load() == round + 1; }, absl::Seconds(10)))
        << "round " << round;
  }
  EXPECT_EQ(ended.load(), kRounds);
}

}  // namespace
}  // namespace hopbudget
