// Copyright hopbudget authors.
//
// Hedge decisions on a FakeClock: the delay (fixed, then the quantile of a
// bounded window), the extra-load bucket, the budget floor, A6's stop on a
// fatal answer or a pushback, and bad policies.
#include "hopbudget/advanced/hedge.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "hopbudget/advanced/clock.h"

namespace hopbudget {
namespace {

using ::testing::HasSubstr;

absl::Duration Ms(double n) { return absl::Milliseconds(n); }

TEST(HedgeDecisionTest, TableOfAttemptsStopBudgetAndLoad) {
  FakeClock clock;
  BudgetPolicy budget;
  budget.min_attempt_budget = Ms(10);
  HedgePolicy policy;
  policy.max_attempts = 3;
  const absl::Time now = clock.Now();
  struct Case {
    const char* name;
    int sent;
    bool stopped;
    absl::Time deadline;
    bool load;
    HedgeOutcome want;
  } cases[] = {
      {"room, load, one sent", 1, false, now + Ms(100), true, HedgeOutcome::kSend},
      {"third attempt allowed", 2, false, now + Ms(100), true, HedgeOutcome::kSend},
      {"max attempts sent", 3, false, now + Ms(100), true, HedgeOutcome::kMaxAttempts},
      {"stopped by a fatal answer", 1, true, now + Ms(100), true, HedgeOutcome::kStopped},
      {"less than min_attempt_budget left", 1, false, now + Ms(9), true, HedgeOutcome::kNoBudget},
      {"exactly min_attempt_budget left", 1, false, now + Ms(10), true, HedgeOutcome::kSend},
      {"deadline passed", 1, false, now - Ms(1), true, HedgeOutcome::kNoBudget},
      {"no deadline", 1, false, absl::InfiniteFuture(), true, HedgeOutcome::kSend},
      {"bucket empty", 1, false, now + Ms(100), false, HedgeOutcome::kExtraLoad},
      {"no budget outranks load", 1, false, now + Ms(1), false, HedgeOutcome::kNoBudget},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(DecideHedge(budget, policy, c.sent, c.stopped, c.deadline, now, c.load), c.want);
  }
}

TEST(HedgeDecisionTest, TheBudgetFloorMovesWithTheClock) {
  FakeClock clock;
  BudgetPolicy budget;
  budget.min_attempt_budget = Ms(20);
  HedgePolicy policy;
  const absl::Time deadline = clock.Now() + Ms(50);
  EXPECT_EQ(DecideHedge(budget, policy, 1, false, deadline, clock.Now(), true),
            HedgeOutcome::kSend);
  clock.Advance(Ms(31));
  EXPECT_EQ(DecideHedge(budget, policy, 1, false, deadline, clock.Now(), true),
            HedgeOutcome::kNoBudget);
}

TEST(HedgeDelayTest, FixedUntilEnoughSamplesThenTheQuantile) {
  HedgePolicy policy;
  policy.delay = Ms(50);
  policy.quantile = 0.95;
  policy.window = 100;
  policy.min_samples = 20;
  LatencyWindow w(policy.window);
  for (int i = 1; i <= 19; ++i) w.Add(Ms(i));
  EXPECT_EQ(HedgeDelay(policy, w), Ms(50));  // 19 < min_samples
  for (int i = 20; i <= 100; ++i) w.Add(Ms(i));
  EXPECT_EQ(HedgeDelay(policy, w), Ms(95));  // p95 of 1..100 ms
  policy.quantile = 0;
  EXPECT_EQ(HedgeDelay(policy, w), Ms(50));  // fixed
}

TEST(HedgeDelayTest, QuantileFollowsTheRecentWindowOnlyAndHasAFloor) {
  HedgePolicy policy;
  policy.quantile = 0.5;
  policy.window = 16;
  policy.min_samples = 1;
  policy.min_delay = Ms(2);
  LatencyWindow w(policy.window);
  for (int i = 0; i < 16; ++i) w.Add(Ms(500));
  EXPECT_EQ(HedgeDelay(policy, w), Ms(500));
  for (int i = 0; i < 16; ++i) w.Add(Ms(10));  // the old samples are overwritten
  EXPECT_EQ(w.samples(), 16);
  EXPECT_EQ(HedgeDelay(policy, w), Ms(10));
  for (int i = 0; i < 16; ++i) w.Add(absl::ZeroDuration());
  EXPECT_EQ(HedgeDelay(policy, w), Ms(2));  // the floor
}

TEST(HedgeDelayTest, TheCachedQuantileIsRecomputedAfterAnEighthOfTheWindow) {
  LatencyWindow w(64);
  for (int i = 0; i < 64; ++i) w.Add(Ms(10));
  EXPECT_EQ(w.Quantile(0.9), Ms(10));
  for (int i = 0; i < 7; ++i) w.Add(Ms(1000));
  EXPECT_EQ(w.Quantile(0.9), Ms(10));  // cached: 7 < 64 / 8
  w.Add(Ms(1000));
  EXPECT_EQ(w.Quantile(0.9), Ms(1000));  // 8 of 64 are 1 s: p90 is 1 s
}

TEST(ExtraLoadBucketTest, CapsHedgesAtTheRatioOfCalls) {
  ExtraLoadBucket bucket(0.05, 10);
  int hedges = 0;
  for (int call = 0; call < 1000; ++call) {
    bucket.OnCall();
    if (bucket.Available()) {  // every call would like a hedge
      bucket.Take();
      ++hedges;
    }
  }
  EXPECT_EQ(hedges, 50);  // 5 % of 1000
}

TEST(ExtraLoadBucketTest, StartsEmptyAndHoldsAtMostTheBurst) {
  ExtraLoadBucket bucket(0.5, 2);
  EXPECT_FALSE(bucket.Available());
  for (int i = 0; i < 100; ++i) bucket.OnCall();
  EXPECT_DOUBLE_EQ(bucket.tokens(), 2);
  bucket.Take();
  bucket.Take();
  EXPECT_FALSE(bucket.Available());
}

TEST(HedgeVerdictTest, A6FatalAndNonFatalAnswers) {
  HedgePolicy policy;  // non-fatal: UNAVAILABLE
  AttemptResult r;
  EXPECT_EQ(HedgeVerdictOf(policy, r), HedgeVerdict::kWon);
  r.code = absl::StatusCode::kUnavailable;
  EXPECT_EQ(HedgeVerdictOf(policy, r), HedgeVerdict::kNonFatal);
  r.pushback.kind = PushbackKind::kDelay;
  r.pushback.delay = Ms(10);
  EXPECT_EQ(HedgeVerdictOf(policy, r), HedgeVerdict::kFatal);  // a pushback stops hedging
  r.pushback.kind = PushbackKind::kDoNotRetry;
  EXPECT_EQ(HedgeVerdictOf(policy, r), HedgeVerdict::kFatal);
  r = AttemptResult();
  r.code = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(HedgeVerdictOf(policy, r), HedgeVerdict::kFatal);
  // Its own attempt cap: the other attempts may still answer.
  r.code = absl::StatusCode::kDeadlineExceeded;
  r.fired = DeadlineSource::kAttempt;
  EXPECT_EQ(HedgeVerdictOf(policy, r), HedgeVerdict::kNonFatal);
  // Its target had no ready backend within its budget: it sent nothing, and
  // the others, sent elsewhere, may still answer.
  r.fired = DeadlineSource::kNoBackend;
  EXPECT_EQ(HedgeVerdictOf(policy, r), HedgeVerdict::kNonFatal);
  // The request or client budget: nobody can answer in time.
  r.fired = DeadlineSource::kRequest;
  EXPECT_EQ(HedgeVerdictOf(policy, r), HedgeVerdict::kFatal);
  r.fired = DeadlineSource::kDownstream;
  EXPECT_EQ(HedgeVerdictOf(policy, r), HedgeVerdict::kFatal);
}

TEST(HedgePolicyTest, BadFieldsAreNamed) {
  EXPECT_TRUE(ValidateHedgePolicy(HedgePolicy()).ok());
  struct Case {
    const char* field;
    void (*mutate)(HedgePolicy&);
  } cases[] = {
      {"max_attempts must be 1..3, got 4", [](HedgePolicy& p) { p.max_attempts = 4; }},
      {"delay must be > 0", [](HedgePolicy& p) { p.delay = absl::ZeroDuration(); }},
      {"delay must be > 0", [](HedgePolicy& p) { p.delay = absl::InfiniteDuration(); }},
      {"quantile", [](HedgePolicy& p) { p.quantile = 1; }},
      {"window", [](HedgePolicy& p) { p.window = 0; }},
      {"min_samples", [](HedgePolicy& p) { p.min_samples = 1000; }},
      {"min_delay", [](HedgePolicy& p) { p.min_delay = Ms(-1); }},
      {"max_extra_load", [](HedgePolicy& p) { p.max_extra_load = 0; }},
      {"max_extra_load", [](HedgePolicy& p) { p.max_extra_load = 1.5; }},
      {"burst", [](HedgePolicy& p) { p.burst = 0.5; }},
      {"non_fatal_codes", [](HedgePolicy& p) { p.non_fatal_codes = {absl::StatusCode::kOk}; }},
  };
  for (const Case& c : cases) {
    HedgePolicy p;
    c.mutate(p);
    const absl::Status s = ValidateHedgePolicy(p);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(s.message(), HasSubstr(c.field));
  }
}

TEST(HedgeNamesTest, OutcomesHaveStableNames) {
  EXPECT_STREQ(HedgeOutcomeName(HedgeOutcome::kNoBudget), "no_budget");
  EXPECT_STREQ(HedgeOutcomeName(HedgeOutcome::kExtraLoad), "extra_load");
}

// Test failures name the value, not its integer.
TEST(HedgeNamesTest, OutcomesAndVerdictsPrintByName) {
  EXPECT_EQ(::testing::PrintToString(HedgeOutcome::kNoBudget), "no_budget");
  EXPECT_EQ(::testing::PrintToString(HedgeVerdict::kNonFatal), "non_fatal");
}

}  // namespace
}  // namespace hopbudget
