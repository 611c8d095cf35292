// Copyright hopbudget authors.
#include "hopbudget/advanced/budget.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "hopbudget/advanced/clock.h"

namespace hopbudget {
namespace {

using ::testing::HasSubstr;

BudgetPolicy Policy(absl::Duration request, absl::Duration attempt,
                    absl::Duration reserve = absl::Milliseconds(5),
                    absl::Duration min = absl::Milliseconds(1)) {
  BudgetPolicy p;
  p.request_cap = request;
  p.attempt_cap = attempt;
  p.hop_reserve = reserve;
  p.min_attempt_budget = min;
  return p;
}

TEST(ValidatePolicyTest, DefaultPolicyIsValid) { EXPECT_TRUE(ValidatePolicy({}).ok()); }

TEST(ValidatePolicyTest, StrictlyNestedPolicyIsValid) {
  EXPECT_TRUE(ValidatePolicy(Policy(absl::Seconds(2), absl::Milliseconds(600))).ok());
}

TEST(ValidatePolicyTest, TheIncidentIsRejectedWithItsNumbers) {
  // Outer 5 s around 10 s attempts: the attempt budget can never fire.
  absl::Status s = ValidatePolicy(Policy(absl::Seconds(5), absl::Seconds(10)));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("attempt_cap (10s)"));
  EXPECT_THAT(s.message(), HasSubstr("request_cap (5s)"));
  EXPECT_THAT(s.message(), HasSubstr("nest strictly"));
}

TEST(ValidatePolicyTest, AttemptPlusReserveEqualToRequestIsRejected) {
  EXPECT_FALSE(
      ValidatePolicy(Policy(absl::Seconds(1), absl::Milliseconds(995), absl::Milliseconds(5)))
          .ok());
  EXPECT_TRUE(
      ValidatePolicy(Policy(absl::Seconds(1), absl::Milliseconds(994), absl::Milliseconds(5)))
          .ok());
}

TEST(ValidatePolicyTest, NegativeFieldIsRejectedByName) {
  BudgetPolicy p;
  p.hop_reserve = absl::Milliseconds(-1);
  absl::Status s = ValidatePolicy(p);
  EXPECT_THAT(s.message(), HasSubstr("hop_reserve is negative"));
}

TEST(ValidatePolicyTest, ZeroCapsAreRejected) {
  BudgetPolicy p;
  p.request_cap = absl::ZeroDuration();
  EXPECT_THAT(ValidatePolicy(p).message(), HasSubstr("request_cap is zero"));
  p = BudgetPolicy();
  p.attempt_cap = absl::ZeroDuration();
  EXPECT_THAT(ValidatePolicy(p).message(), HasSubstr("attempt_cap is zero"));
  p = BudgetPolicy();
  p.max_inbound_budget = absl::ZeroDuration();
  EXPECT_THAT(ValidatePolicy(p).message(), HasSubstr("max_inbound_budget is zero"));
}

TEST(ValidatePolicyTest, ZeroReserveAndZeroMinimumAreAllowed) {
  EXPECT_TRUE(ValidatePolicy(Policy(absl::Seconds(1), absl::Milliseconds(500), absl::ZeroDuration(),
                                    absl::ZeroDuration()))
                  .ok());
}

TEST(ValidatePolicyTest, MinimumAboveAttemptCapIsRejected) {
  absl::Status s = ValidatePolicy(Policy(absl::Seconds(1), absl::Milliseconds(10),
                                         absl::Milliseconds(1), absl::Milliseconds(20)));
  EXPECT_THAT(s.message(), HasSubstr("min_attempt_budget (20ms) > attempt_cap (10ms)"));
}

TEST(ValidatePolicyTest, MinimumPlusReserveCoveringRequestIsRejected) {
  absl::Status s = ValidatePolicy(Policy(absl::Milliseconds(10), absl::InfiniteDuration(),
                                         absl::Milliseconds(5), absl::Milliseconds(5)));
  EXPECT_THAT(s.message(), HasSubstr("every downstream call would fail"));
}

TEST(ValidatePolicyTest, InfiniteReserveIsRejected) {
  BudgetPolicy p;
  p.hop_reserve = absl::InfiniteDuration();
  EXPECT_THAT(ValidatePolicy(p).message(), HasSubstr("must be finite"));
}

TEST(ValidatePolicyTest, RequestCapAboveMaxInboundIsRejected) {
  BudgetPolicy p;
  p.request_cap = absl::Seconds(10);
  p.max_inbound_budget = absl::Seconds(5);
  EXPECT_THAT(ValidatePolicy(p).message(), HasSubstr("could never apply"));
}

class DeriveRequestBudgetTest : public ::testing::Test {
 protected:
  FakeClock clock_;
};

TEST_F(DeriveRequestBudgetTest, ClientDeadlineTighterThanCapIsTheClientsBudget) {
  const absl::Time now = clock_.Now();
  RequestBudget b = DeriveRequestBudget(Policy(absl::Seconds(2), absl::Seconds(1)),
                                        now + absl::Milliseconds(800), now);
  EXPECT_EQ(b.outcome, ArrivalOutcome::kAccepted);
  EXPECT_EQ(b.deadline, now + absl::Milliseconds(800));
  EXPECT_EQ(b.source, DeadlineSource::kClient);
  EXPECT_EQ(b.budget_on_arrival, absl::Milliseconds(800));
  EXPECT_EQ(b.arrival, now);
}

TEST_F(DeriveRequestBudgetTest, CapTighterThanClientDeadlineIsTheRequestBudget) {
  const absl::Time now = clock_.Now();
  RequestBudget b =
      DeriveRequestBudget(Policy(absl::Seconds(2), absl::Seconds(1)), now + absl::Seconds(30), now);
  EXPECT_EQ(b.deadline, now + absl::Seconds(2));
  EXPECT_EQ(b.source, DeadlineSource::kRequest);
}

TEST_F(DeriveRequestBudgetTest, TieGoesToTheClient) {
  const absl::Time now = clock_.Now();
  RequestBudget b =
      DeriveRequestBudget(Policy(absl::Seconds(2), absl::Seconds(1)), now + absl::Seconds(2), now);
  EXPECT_EQ(b.source, DeadlineSource::kClient);
}

TEST_F(DeriveRequestBudgetTest, InfiniteInboundWithNoCapIsInfinite) {
  RequestBudget b = DeriveRequestBudget(BudgetPolicy(), absl::InfiniteFuture(), clock_.Now());
  EXPECT_EQ(b.outcome, ArrivalOutcome::kAccepted);
  EXPECT_EQ(b.deadline, absl::InfiniteFuture());
  EXPECT_EQ(b.source, DeadlineSource::kNone);
  EXPECT_EQ(b.budget_on_arrival, absl::InfiniteDuration());
}

TEST_F(DeriveRequestBudgetTest, InfiniteInboundIsBoundedByTheCap) {
  const absl::Time now = clock_.Now();
  RequestBudget b =
      DeriveRequestBudget(Policy(absl::Seconds(3), absl::Seconds(1)), absl::InfiniteFuture(), now);
  EXPECT_EQ(b.deadline, now + absl::Seconds(3));
  EXPECT_EQ(b.source, DeadlineSource::kRequest);
}

TEST_F(DeriveRequestBudgetTest, HugeInboundIsClampedByMaxInboundBudget) {
  BudgetPolicy p;
  p.max_inbound_budget = absl::Minutes(1);
  const absl::Time now = clock_.Now();
  RequestBudget b = DeriveRequestBudget(p, now + absl::Hours(24 * 365), now);
  EXPECT_EQ(b.deadline, now + absl::Minutes(1));
  EXPECT_EQ(b.source, DeadlineSource::kRequest);
}

TEST_F(DeriveRequestBudgetTest, ExpiredOnArrivalIsRefused) {
  const absl::Time now = clock_.Now();
  RequestBudget b = DeriveRequestBudget(BudgetPolicy(), now - absl::Milliseconds(1), now);
  EXPECT_EQ(b.outcome, ArrivalOutcome::kExpired);
  EXPECT_EQ(b.budget_on_arrival, absl::Milliseconds(-1));
}

TEST_F(DeriveRequestBudgetTest, DeadlineExactlyNowIsExpired) {
  const absl::Time now = clock_.Now();
  EXPECT_EQ(DeriveRequestBudget(BudgetPolicy(), now, now).outcome, ArrivalOutcome::kExpired);
}

TEST_F(DeriveRequestBudgetTest, InfinitePastIsExpired) {
  RequestBudget b = DeriveRequestBudget(BudgetPolicy(), absl::InfinitePast(), clock_.Now());
  EXPECT_EQ(b.outcome, ArrivalOutcome::kExpired);
}

TEST_F(DeriveRequestBudgetTest, BelowMinimumIsRefused) {
  BudgetPolicy p;
  p.min_attempt_budget = absl::Milliseconds(10);
  const absl::Time now = clock_.Now();
  EXPECT_EQ(DeriveRequestBudget(p, now + absl::Milliseconds(9), now).outcome,
            ArrivalOutcome::kBelowMinimum);
  EXPECT_EQ(DeriveRequestBudget(p, now + absl::Milliseconds(10), now).outcome,
            ArrivalOutcome::kAccepted);
}

class DeriveCallDeadlineTest : public ::testing::Test {
 protected:
  FakeClock clock_;
};

TEST_F(DeriveCallDeadlineTest, AttemptCapTighterThanRemainderIsTheAttemptBudget) {
  const absl::Time now = clock_.Now();
  CallDeadline c = DeriveCallDeadline(Policy(absl::Seconds(2), absl::Milliseconds(300)),
                                      now + absl::Seconds(2), DeadlineSource::kRequest, now);
  EXPECT_EQ(c.outcome, CallOutcome::kProceed);
  EXPECT_EQ(c.deadline, now + absl::Milliseconds(300));
  EXPECT_EQ(c.source, DeadlineSource::kAttempt);
  EXPECT_EQ(c.budget, absl::Milliseconds(300));
}

TEST_F(DeriveCallDeadlineTest, RemainderMinusReserveWhenTighterKeepsParentSource) {
  const absl::Time start = clock_.Now();
  const absl::Time parent = start + absl::Milliseconds(500);
  clock_.Advance(absl::Milliseconds(300));  // the handler worked 300 ms
  CallDeadline c = DeriveCallDeadline(Policy(absl::Seconds(2), absl::Milliseconds(400)), parent,
                                      DeadlineSource::kClient, clock_.Now());
  EXPECT_EQ(c.deadline, parent - absl::Milliseconds(5));
  EXPECT_EQ(c.source, DeadlineSource::kClient);
  EXPECT_EQ(c.budget, absl::Milliseconds(195));
}

TEST_F(DeriveCallDeadlineTest, ShrinkingDeadlineGivesEachLaterCallTheRemainder) {
  const BudgetPolicy p = Policy(absl::Seconds(2), absl::InfiniteDuration());
  const absl::Time parent = clock_.Now() + absl::Seconds(2);
  CallDeadline first = DeriveCallDeadline(p, parent, DeadlineSource::kRequest, clock_.Now());
  clock_.Advance(absl::Milliseconds(1500));
  CallDeadline second = DeriveCallDeadline(p, parent, DeadlineSource::kRequest, clock_.Now());
  EXPECT_EQ(first.deadline, second.deadline);  // one absolute deadline
  EXPECT_EQ(first.budget - second.budget, absl::Milliseconds(1500));
}

TEST_F(DeriveCallDeadlineTest, TieGoesToTheParent) {
  const absl::Time now = clock_.Now();
  CallDeadline c =
      DeriveCallDeadline(Policy(absl::Seconds(2), absl::Milliseconds(95), absl::Milliseconds(5)),
                         now + absl::Milliseconds(100), DeadlineSource::kRequest, now);
  EXPECT_EQ(c.source, DeadlineSource::kRequest);
}

TEST_F(DeriveCallDeadlineTest, BelowMinimumIsExhausted) {
  const absl::Time now = clock_.Now();
  CallDeadline c = DeriveCallDeadline(Policy(absl::Seconds(2), absl::Seconds(1)),
                                      now + absl::Milliseconds(5), DeadlineSource::kClient, now);
  EXPECT_EQ(c.outcome, CallOutcome::kExhausted);  // 5 ms - 5 ms reserve = 0
}

TEST_F(DeriveCallDeadlineTest, ZeroMinimumStillRefusesZeroBudget) {
  const absl::Time now = clock_.Now();
  CallDeadline c = DeriveCallDeadline(
      Policy(absl::Seconds(2), absl::Seconds(1), absl::ZeroDuration(), absl::ZeroDuration()), now,
      DeadlineSource::kClient, now);
  EXPECT_EQ(c.outcome, CallOutcome::kExhausted);
}

TEST_F(DeriveCallDeadlineTest, ExpiredParentIsExhaustedWithNegativeBudget) {
  const absl::Time now = clock_.Now();
  CallDeadline c =
      DeriveCallDeadline(BudgetPolicy(), now - absl::Seconds(1), DeadlineSource::kClient, now);
  EXPECT_EQ(c.outcome, CallOutcome::kExhausted);
  EXPECT_LT(c.budget, absl::ZeroDuration());
}

TEST_F(DeriveCallDeadlineTest, InfiniteEverythingIsInfinite) {
  CallDeadline c = DeriveCallDeadline(BudgetPolicy(), absl::InfiniteFuture(), DeadlineSource::kNone,
                                      clock_.Now());
  EXPECT_EQ(c.outcome, CallOutcome::kProceed);
  EXPECT_EQ(c.deadline, absl::InfiniteFuture());
  EXPECT_EQ(c.source, DeadlineSource::kNone);
  EXPECT_EQ(c.budget, absl::InfiniteDuration());
}

TEST_F(DeriveCallDeadlineTest, InfiniteParentIsBoundedByAttemptCap) {
  const absl::Time now = clock_.Now();
  CallDeadline c = DeriveCallDeadline(Policy(absl::InfiniteDuration(), absl::Seconds(1)),
                                      absl::InfiniteFuture(), DeadlineSource::kNone, now);
  EXPECT_EQ(c.deadline, now + absl::Seconds(1));
  EXPECT_EQ(c.source, DeadlineSource::kAttempt);
}

TEST_F(DeriveCallDeadlineTest, InfinitePastParentSaturatesWithoutOverflow) {
  CallDeadline c = DeriveCallDeadline(BudgetPolicy(), absl::InfinitePast(), DeadlineSource::kClient,
                                      clock_.Now());
  EXPECT_EQ(c.outcome, CallOutcome::kExhausted);
  EXPECT_EQ(c.deadline, absl::InfinitePast());
}

TEST_F(DeriveCallDeadlineTest, NestingHoldsAcrossThreeHops) {
  // Each hop's downstream budget is strictly below its own by the reserve,
  // even with no time spent.
  const BudgetPolicy p = Policy(absl::Seconds(60), absl::InfiniteDuration());
  const absl::Time now = clock_.Now();
  RequestBudget hop1 = DeriveRequestBudget(p, now + absl::Seconds(30), now);
  CallDeadline to2 = DeriveCallDeadline(p, hop1.deadline, hop1.source, now);
  RequestBudget hop2 = DeriveRequestBudget(p, to2.deadline, now);
  CallDeadline to3 = DeriveCallDeadline(p, hop2.deadline, hop2.source, now);
  EXPECT_LT(hop2.budget_on_arrival, hop1.budget_on_arrival);
  EXPECT_LT(to3.budget, hop2.budget_on_arrival);
  EXPECT_EQ(hop1.budget_on_arrival - to3.budget, 2 * p.hop_reserve);
}

TEST(FormatBudgetTest, FormatsCommonValues) {
  EXPECT_EQ(FormatBudget(absl::Milliseconds(250)), "250ms");
  EXPECT_EQ(FormatBudget(absl::Milliseconds(1500)), "1.5s");
  EXPECT_EQ(FormatBudget(absl::InfiniteDuration()), "inf");
  EXPECT_EQ(FormatBudget(-absl::InfiniteDuration()), "-inf");
  EXPECT_EQ(FormatBudget(absl::ZeroDuration()), "0ms");
}

// DecideBackendWait, table-style on a FakeClock: the give-up time is the
// deadline minus min_call_budget, and only a channel with nothing ready, a
// deadline and time before the give-up time waits.
TEST(DecideBackendWaitTest, WaitsUntilOnlyTheMinimumIsLeftAndNoLonger) {
  FakeClock clock;
  const absl::Time t0 = clock.Now();
  const absl::Duration ms = absl::Milliseconds(1);
  struct Case {
    const char* name;
    BackendState state;
    absl::Duration deadline_in;  // InfiniteDuration(): no deadline
    absl::Duration min_call_budget;
    absl::Duration now_in;
    BackendWaitOutcome outcome;
    absl::Duration until_in;  // kWait and kGiveUp: the give-up time
  };
  const absl::Duration inf = absl::InfiniteDuration();
  const Case cases[] = {
      {"ready goes", BackendState::kReady, 800 * ms, ms, 0 * ms, BackendWaitOutcome::kGo, inf},
      {"ready goes even at the give-up time", BackendState::kReady, 800 * ms, ms, 799 * ms,
       BackendWaitOutcome::kGo, inf},
      {"shutdown goes (nothing to wait for)", BackendState::kShutdown, 800 * ms, ms, 0 * ms,
       BackendWaitOutcome::kGo, inf},
      {"no deadline goes, as gRPC's fail-fast", BackendState::kTransientFailure, inf, ms, 0 * ms,
       BackendWaitOutcome::kGo, inf},
      {"transient failure waits", BackendState::kTransientFailure, 800 * ms, ms, 0 * ms,
       BackendWaitOutcome::kWait, 799 * ms},
      {"connecting waits", BackendState::kConnecting, 800 * ms, 20 * ms, 100 * ms,
       BackendWaitOutcome::kWait, 780 * ms},
      {"idle waits (the watch asks it to connect)", BackendState::kIdle, 800 * ms, ms, 0 * ms,
       BackendWaitOutcome::kWait, 799 * ms},
      {"just before the give-up time waits", BackendState::kTransientFailure, 800 * ms, ms,
       absl::Microseconds(798999), BackendWaitOutcome::kWait, 799 * ms},
      {"at the give-up time gives up", BackendState::kTransientFailure, 800 * ms, ms, 799 * ms,
       BackendWaitOutcome::kGiveUp, 799 * ms},
      {"after it gives up", BackendState::kConnecting, 800 * ms, ms, 900 * ms,
       BackendWaitOutcome::kGiveUp, 799 * ms},
      {"zero minimum waits to the deadline", BackendState::kTransientFailure, 800 * ms, 0 * ms,
       0 * ms, BackendWaitOutcome::kWait, 800 * ms},
      {"negative minimum counts as zero", BackendState::kTransientFailure, 800 * ms, -5 * ms,
       0 * ms, BackendWaitOutcome::kWait, 800 * ms},
      {"an expired deadline gives up", BackendState::kTransientFailure, -1 * ms, ms, 0 * ms,
       BackendWaitOutcome::kGiveUp, -2 * ms},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const absl::Time deadline = c.deadline_in == inf ? absl::InfiniteFuture() : t0 + c.deadline_in;
    const BackendWaitStep step =
        DecideBackendWait(c.state, deadline, c.min_call_budget, t0 + c.now_in);
    EXPECT_EQ(step.outcome, c.outcome);
    if (c.outcome != BackendWaitOutcome::kGo) {
      EXPECT_EQ(step.until, t0 + c.until_in);
    }
  }
}

// Shadow mode: what the call runs under, and what hopbudget would have done.
TEST(ShadowTest, ACallInShadowRunsUnderItsCallersDeadlineWhateverIsLeft) {
  FakeClock clock;
  const absl::Time t0 = clock.Now();
  const absl::Duration inf = absl::InfiniteDuration();
  struct Case {
    const char* name;
    absl::Duration deadline_in;  // inf: no deadline
    DeadlineSource source;
    absl::Duration budget;
  };
  const Case cases[] = {
      {"a second left", absl::Seconds(1), DeadlineSource::kClient, absl::Seconds(1)},
      {"below any minimum", absl::Microseconds(10), DeadlineSource::kClient,
       absl::Microseconds(10)},
      {"expired", -absl::Milliseconds(3), DeadlineSource::kClient, -absl::Milliseconds(3)},
      {"no deadline", inf, DeadlineSource::kNone, inf},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const absl::Time deadline = c.deadline_in == inf ? absl::InfiniteFuture() : t0 + c.deadline_in;
    const RequestBudget b = PassThroughRequestBudget(deadline, t0);
    EXPECT_EQ(b.outcome, ArrivalOutcome::kAccepted);
    EXPECT_EQ(b.deadline, deadline);
    EXPECT_EQ(b.source, c.source);
    EXPECT_EQ(b.budget_on_arrival, c.budget);
    EXPECT_EQ(b.arrival, t0);
  }
}

TEST(ShadowTest, TheRealBudgetSaysWhatWouldHaveBeenRefusedOrCut) {
  FakeClock clock;
  const absl::Time t0 = clock.Now();
  const BudgetPolicy capped = Policy(absl::Milliseconds(200), absl::Milliseconds(50),
                                     absl::Milliseconds(5), absl::Milliseconds(10));
  struct Case {
    const char* name;
    absl::Duration deadline_in;  // the caller's
    absl::Duration seen_at;      // when asked, from arrival
    ShadowAction action;
  };
  const Case cases[] = {
      {"arrived below the minimum", absl::Milliseconds(4), absl::ZeroDuration(),
       ShadowAction::kRefuse},
      {"arrived expired", -absl::Milliseconds(1), absl::ZeroDuration(), ShadowAction::kRefuse},
      {"refused stays refused when it ends", absl::Milliseconds(4), absl::Seconds(1),
       ShadowAction::kRefuse},
      {"the cap binds, ended before it", absl::Seconds(2), absl::Milliseconds(150),
       ShadowAction::kNone},
      {"the cap binds, ended at it", absl::Seconds(2), absl::Milliseconds(200),
       ShadowAction::kNone},
      {"the cap binds, ended after it", absl::Seconds(2), absl::Milliseconds(201),
       ShadowAction::kCut},
      // The caller's own deadline is gRPC's to enforce, shadow or not.
      {"the caller's deadline binds, ended after it", absl::Milliseconds(100),
       absl::Milliseconds(300), ShadowAction::kNone},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const RequestBudget would = DeriveRequestBudget(capped, t0 + c.deadline_in, t0);
    EXPECT_EQ(ShadowActionAt(would, t0 + c.seen_at), c.action);
  }
  // No deadline and no cap: nothing to refuse or cut.
  EXPECT_EQ(ShadowActionAt(DeriveRequestBudget(BudgetPolicy{}, absl::InfiniteFuture(), t0),
                           t0 + absl::Hours(1)),
            ShadowAction::kNone);
}

TEST(ShadowTest, ADownstreamCallOfAShadowedRequestTakesTheRequestsDeadline) {
  FakeClock clock;
  const absl::Time t0 = clock.Now();
  const CallDeadline call = DeriveCallDeadline(PassThroughPolicy(), t0 + absl::Milliseconds(300),
                                               DeadlineSource::kClient, t0);
  EXPECT_EQ(call.outcome, CallOutcome::kProceed);
  EXPECT_EQ(call.deadline, t0 + absl::Milliseconds(300));
  EXPECT_EQ(call.source, DeadlineSource::kClient);
  EXPECT_TRUE(ValidatePolicy(PassThroughPolicy()).ok());
}

// Test failures name the value, not its integer.
TEST(BudgetNamesTest, OutcomesPrintByName) {
  EXPECT_EQ(::testing::PrintToString(BackendWaitOutcome::kGiveUp), "give_up");
  EXPECT_EQ(::testing::PrintToString(ArrivalOutcome::kBelowMinimum), "below_minimum");
  EXPECT_EQ(::testing::PrintToString(ArrivalOutcome::kShedQueueExpired), "shed_queue_expired");
  EXPECT_EQ(::testing::PrintToString(ArrivalOutcome::kExpired), "expired");
  EXPECT_EQ(::testing::PrintToString(CallOutcome::kExhausted), "exhausted");
  EXPECT_EQ(::testing::PrintToString(ShadowAction::kFailFast), "fail_fast");
}

}  // namespace
}  // namespace hopbudget
