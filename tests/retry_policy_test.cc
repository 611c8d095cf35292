// Copyright hopbudget authors.
#include "hopbudget/advanced/retry_policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "hopbudget/advanced/budget.h"
#include "hopbudget/advanced/clock.h"

namespace hopbudget {
namespace {

using ::testing::HasSubstr;

BudgetPolicy Budget(absl::Duration request, absl::Duration attempt,
                    absl::Duration reserve = absl::Milliseconds(5),
                    absl::Duration min = absl::Milliseconds(10)) {
  BudgetPolicy p;
  p.request_cap = request;
  p.attempt_cap = attempt;
  p.hop_reserve = reserve;
  p.min_attempt_budget = min;
  return p;
}

RetryPolicy Retry(int max_attempts, absl::Duration initial, double multiplier, absl::Duration max) {
  RetryPolicy r;
  r.max_attempts = max_attempts;
  r.initial_backoff = initial;
  r.backoff_multiplier = multiplier;
  r.max_backoff = max;
  return r;
}

AttemptResult Failed(absl::StatusCode code, DeadlineSource fired = DeadlineSource::kNone) {
  AttemptResult r;
  r.code = code;
  r.fired = fired;
  return r;
}

AttemptResult Unavailable() { return Failed(absl::StatusCode::kUnavailable); }

AttemptResult AttemptTimeout() {
  return Failed(absl::StatusCode::kDeadlineExceeded, DeadlineSource::kAttempt);
}

AttemptResult WithPushback(AttemptResult r, Pushback p) {
  r.pushback = p;
  return r;
}

Pushback Delay(absl::Duration d) { return {PushbackKind::kDelay, d}; }
Pushback DoNotRetry() { return {PushbackKind::kDoNotRetry, absl::ZeroDuration()}; }

// ---------------------------------------------------------------------------
// ValidateRetryPolicy

TEST(ValidateRetryPolicyTest, TheIncidentIsRejectedWithItsNumbers) {
  // Outer 5 s request budget around 10 s attempts, three attempts: the
  // request budget always fires during attempt one, so retries == 0 forever.
  const BudgetPolicy budget =
      Budget(absl::Seconds(5), absl::Seconds(10), absl::Milliseconds(2), absl::Milliseconds(1));
  absl::StatusOr<RetryFit> fit = ValidateRetryPolicy(budget, RetryPolicy());
  ASSERT_FALSE(fit.ok());
  EXPECT_EQ(fit.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(fit.status().message()),
            "retry policy: attempt_cap (10s) + hop_reserve (2ms) + min_attempt_budget (1ms) > "
            "request_cap (5s): an attempt that times out leaves no room for a retry; at most 1 "
            "of 3 attempts can run");
}

TEST(ValidateRetryPolicyTest, TheIncidentWithoutRetriesGetsTheBudgetPolicyMessage) {
  // No retry to speak of: the budget itself is still invalid (ValidatePolicy).
  BudgetPolicy budget;
  budget.request_cap = absl::Seconds(5);
  budget.attempt_cap = absl::Seconds(10);
  RetryPolicy retry;
  retry.max_attempts = 1;
  absl::StatusOr<RetryFit> fit = ValidateRetryPolicy(budget, retry);
  ASSERT_FALSE(fit.ok());
  EXPECT_THAT(fit.status().message(), HasSubstr("hopbudget policy: attempt_cap (10s)"));
  EXPECT_THAT(fit.status().message(), HasSubstr("nest strictly"));
}

TEST(ValidateRetryPolicyTest, BudgetThatNestsButLeavesNoRoomAfterATimeoutIsRejected) {
  // ValidatePolicy accepts it (990 + 5 < 1000), but after a 990 ms timeout
  // only 5 ms remain before the deadline minus reserve: less than the 10 ms
  // minimum, so no retry could start.
  const BudgetPolicy budget = Budget(absl::Seconds(1), absl::Milliseconds(990));
  ASSERT_TRUE(ValidatePolicy(budget).ok());
  absl::StatusOr<RetryFit> fit = ValidateRetryPolicy(budget, RetryPolicy());
  ASSERT_FALSE(fit.ok());
  EXPECT_EQ(std::string(fit.status().message()),
            "retry policy: attempt_cap (990ms) + hop_reserve (5ms) + min_attempt_budget (10ms) > "
            "request_cap (1s): an attempt that times out leaves no room for a retry; at most 1 "
            "of 3 attempts can run");
}

TEST(ValidateRetryPolicyTest, SingleAttemptIsNeverRejectedForLackOfRetryRoom) {
  RetryPolicy retry;
  retry.max_attempts = 1;
  absl::StatusOr<RetryFit> fit =
      ValidateRetryPolicy(Budget(absl::Seconds(1), absl::Milliseconds(990)), retry);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->attempts_if_all_time_out, 1);
  EXPECT_EQ(fit->attempts_if_fast_failures, 1);
  EXPECT_FALSE(fit->timeout_retry_possible);
}

TEST(ValidateRetryPolicyTest, TimeoutLeavingExactlyTheMinimumAllowsOneMoreAttempt) {
  // 985 + 5 + 10 == 1000: after the first timeout exactly 10 ms remain, the
  // 10 ms backoff is clipped to zero and attempt 2 runs with those 10 ms.
  absl::StatusOr<RetryFit> fit =
      ValidateRetryPolicy(Budget(absl::Seconds(1), absl::Milliseconds(985)), RetryPolicy());
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->attempts_if_all_time_out, 2);
  EXPECT_EQ(fit->attempts_if_fast_failures, 3);
  EXPECT_TRUE(fit->timeout_retry_possible);
}

TEST(ValidateRetryPolicyTest, GoodPolicyFitIsExact) {
  // request_cap 10s - hop_reserve 2ms = 9998 ms usable; attempts of 1000 ms;
  // waits at their ceiling 10, 20, 40, ... ms (x2), capped at 1000 ms:
  //   a1    0..1000, wait  10 -> a2 1010..2010, wait  20 -> a3 2030..3030,
  //   wait  40 -> a4 3070..4070, wait  80 -> a5 4150..5150,
  //   wait 160 -> a6 5310..6310, wait 320 -> a7 6630..7630,
  //   wait 640 -> a8 8270..9270; 728 ms left, ceiling min(1280, 1000) = 1000
  //   clipped to 728 - 1 = 727 -> a9 starts at 9997 with the 1 ms minimum,
  //   runs to 9998; nothing left: 9 attempts of 10.
  const BudgetPolicy budget =
      Budget(absl::Seconds(10), absl::Seconds(1), absl::Milliseconds(2), absl::Milliseconds(1));
  const RetryPolicy retry = Retry(10, absl::Milliseconds(10), 2.0, absl::Seconds(1));
  absl::StatusOr<RetryFit> fit = ValidateRetryPolicy(budget, retry);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->attempts_if_all_time_out, 9);
  EXPECT_EQ(fit->attempts_if_fast_failures, 10);
  EXPECT_TRUE(fit->timeout_retry_possible);
}

TEST(ValidateRetryPolicyTest, FitCountsTheAttemptThatAClippedBackoffLetsStart) {
  // 2000 - 5 = 1995 ms usable, attempts of 600 ms, ceilings 300, 600 ms:
  //   a1 0..600, wait 300 -> a2 900..1500; 495 ms left, the 600 ms wait is
  //   clipped to 495 - 10 = 485 -> a3 starts at 1985 with the 10 ms minimum.
  const BudgetPolicy budget = Budget(absl::Seconds(2), absl::Milliseconds(600));
  const RetryPolicy retry = Retry(5, absl::Milliseconds(300), 2.0, absl::Seconds(1));
  absl::StatusOr<RetryFit> fit = ValidateRetryPolicy(budget, retry);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->attempts_if_all_time_out, 3);
  EXPECT_EQ(fit->attempts_if_fast_failures, 5);
  EXPECT_TRUE(fit->timeout_retry_possible);
}

TEST(ValidateRetryPolicyTest, FitIsCappedByMaxAttempts) {
  const BudgetPolicy budget =
      Budget(absl::Seconds(10), absl::Seconds(1), absl::Milliseconds(2), absl::Milliseconds(1));
  const RetryPolicy retry = Retry(4, absl::Milliseconds(10), 2.0, absl::Seconds(1));
  absl::StatusOr<RetryFit> fit = ValidateRetryPolicy(budget, retry);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->attempts_if_all_time_out, 4);
  EXPECT_EQ(fit->attempts_if_fast_failures, 4);
}

TEST(ValidateRetryPolicyTest, InfiniteRequestCapIsUnboundedAndNeverRejected) {
  BudgetPolicy budget;
  budget.attempt_cap = absl::Hours(1);  // huge, but the request has no cap
  RetryPolicy retry;
  retry.max_attempts = 10;
  absl::StatusOr<RetryFit> fit = ValidateRetryPolicy(budget, retry);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->attempts_if_all_time_out, 10);
  EXPECT_EQ(fit->attempts_if_fast_failures, 10);
  EXPECT_TRUE(fit->timeout_retry_possible);
}

TEST(ValidateRetryPolicyTest, DefaultsAreValidAndNothingCanTimeOut) {
  absl::StatusOr<RetryFit> fit = ValidateRetryPolicy(BudgetPolicy(), RetryPolicy());
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->attempts_if_all_time_out, 3);
  EXPECT_EQ(fit->attempts_if_fast_failures, 3);
  EXPECT_FALSE(fit->timeout_retry_possible);  // infinite attempt_cap
}

TEST(ValidateRetryPolicyTest, InfiniteAttemptCapUnderAFiniteRequestCapRetriesOnlyFastFailures) {
  // No attempt-budget timeout exists to retry after: accepted, and an attempt
  // that runs until the deadline uses the whole request.
  absl::StatusOr<RetryFit> fit =
      ValidateRetryPolicy(Budget(absl::Seconds(1), absl::InfiniteDuration()), RetryPolicy());
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->attempts_if_all_time_out, 1);
  EXPECT_EQ(fit->attempts_if_fast_failures, 3);
  EXPECT_FALSE(fit->timeout_retry_possible);
}

TEST(ValidateRetryPolicyTest, InvalidBudgetIsRejectedWithValidatePolicysMessage) {
  BudgetPolicy budget = Budget(absl::Seconds(1), absl::Milliseconds(100));
  budget.hop_reserve = absl::Milliseconds(-1);
  EXPECT_THAT(ValidateRetryPolicy(budget, RetryPolicy()).status().message(),
              HasSubstr("hop_reserve is negative"));
  budget = Budget(absl::Seconds(10), absl::Seconds(1));
  budget.max_inbound_budget = absl::Seconds(5);
  EXPECT_THAT(ValidateRetryPolicy(budget, RetryPolicy()).status().message(),
              HasSubstr("could never apply"));
}

TEST(ValidateRetryPolicyTest, MaxAttemptsOutOfRangeIsRejectedByName) {
  for (int n : {0, -1, 11, INT_MAX}) {
    RetryPolicy retry;
    retry.max_attempts = n;
    absl::Status s = ValidateRetryPolicy(BudgetPolicy(), retry).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << n;
    EXPECT_THAT(s.message(), HasSubstr("max_attempts (" + std::to_string(n) + ")"));
  }
  for (int n : {1, 10}) {
    RetryPolicy retry;
    retry.max_attempts = n;
    EXPECT_TRUE(ValidateRetryPolicy(BudgetPolicy(), retry).ok()) << n;
  }
}

TEST(ValidateRetryPolicyTest, RetryableCodesOkOrUnknownAreRejectedByName) {
  RetryPolicy retry;
  retry.retryable_codes = {absl::StatusCode::kUnavailable, absl::StatusCode::kOk};
  EXPECT_THAT(ValidateRetryPolicy(BudgetPolicy(), retry).status().message(),
              HasSubstr("retryable_codes lists OK"));
  retry.retryable_codes = {static_cast<absl::StatusCode>(17)};
  EXPECT_THAT(ValidateRetryPolicy(BudgetPolicy(), retry).status().message(),
              HasSubstr("retryable_codes lists 17"));
  retry.retryable_codes = {static_cast<absl::StatusCode>(-3)};
  EXPECT_THAT(ValidateRetryPolicy(BudgetPolicy(), retry).status().message(),
              HasSubstr("retryable_codes lists -3"));
}

TEST(ValidateRetryPolicyTest, EmptyRetryableCodesRetriesOnlyAttemptTimeoutsAndIsValid) {
  RetryPolicy retry;
  retry.retryable_codes.clear();
  EXPECT_TRUE(ValidateRetryPolicy(BudgetPolicy(), retry).ok());
}

TEST(ValidateRetryPolicyTest, InitialBackoffNotPositiveOrInfiniteIsRejectedByName) {
  for (absl::Duration d :
       {absl::ZeroDuration(), absl::Milliseconds(-1), absl::InfiniteDuration()}) {
    RetryPolicy retry;
    retry.initial_backoff = d;
    EXPECT_THAT(ValidateRetryPolicy(BudgetPolicy(), retry).status().message(),
                HasSubstr("initial_backoff (" + FormatBudget(d) + ")"));
  }
}

TEST(ValidateRetryPolicyTest, MaxBackoffBelowInitialOrInfiniteIsRejectedByName) {
  RetryPolicy retry;
  retry.initial_backoff = absl::Milliseconds(10);
  retry.max_backoff = absl::Milliseconds(5);
  EXPECT_THAT(ValidateRetryPolicy(BudgetPolicy(), retry).status().message(),
              HasSubstr("max_backoff (5ms) < initial_backoff (10ms)"));
  retry.max_backoff = absl::InfiniteDuration();
  EXPECT_THAT(ValidateRetryPolicy(BudgetPolicy(), retry).status().message(),
              HasSubstr("max_backoff (inf) must be finite"));
  retry.max_backoff = absl::Milliseconds(10);  // equal is fine: constant backoff
  EXPECT_TRUE(ValidateRetryPolicy(BudgetPolicy(), retry).ok());
}

TEST(ValidateRetryPolicyTest, MultiplierBelowOneNanOrInfiniteIsRejectedByName) {
  for (double m : {0.5, 0.0, -2.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    RetryPolicy retry;
    retry.backoff_multiplier = m;
    EXPECT_THAT(ValidateRetryPolicy(BudgetPolicy(), retry).status().message(),
                HasSubstr("backoff_multiplier"))
        << m;
  }
  RetryPolicy retry;
  retry.backoff_multiplier = 1.0;  // constant backoff
  EXPECT_TRUE(ValidateRetryPolicy(BudgetPolicy(), retry).ok());
}

// ---------------------------------------------------------------------------
// JitteredBackoff

TEST(JitteredBackoffTest, ZeroRandomWaitsNothing) {
  for (int retry : {0, 1, 5, 100}) {
    EXPECT_EQ(JitteredBackoff(RetryPolicy(), retry, 0.0), absl::ZeroDuration()) << retry;
  }
}

TEST(JitteredBackoffTest, CeilingGrowsByTheMultiplierThenStopsAtMaxBackoff) {
  const RetryPolicy p;  // 10 ms x2, max 1 s
  const int64_t expected_ms[] = {10, 20, 40, 80, 160, 320, 640, 1000, 1000, 1000};
  for (int retry = 0; retry < 10; ++retry) {
    EXPECT_EQ(BackoffCeiling(p, retry), absl::Milliseconds(expected_ms[retry])) << retry;
    EXPECT_EQ(JitteredBackoff(p, retry, 1.0), absl::Milliseconds(expected_ms[retry])) << retry;
  }
}

TEST(JitteredBackoffTest, RandomScalesTheCeiling) {
  const RetryPolicy p;
  EXPECT_EQ(JitteredBackoff(p, 2, 0.5), absl::Milliseconds(20));
  EXPECT_EQ(JitteredBackoff(p, 0, 0.25), absl::Microseconds(2500));
  const absl::Duration almost = JitteredBackoff(p, 3, std::nextafter(1.0, 0.0));
  EXPECT_LE(almost, absl::Milliseconds(80));
  EXPECT_GT(almost, absl::Microseconds(79999));
}

TEST(JitteredBackoffTest, FractionalMultiplierIsExact) {
  const RetryPolicy p = Retry(3, absl::Milliseconds(10), 1.5, absl::Seconds(1));
  EXPECT_EQ(BackoffCeiling(p, 2), absl::Microseconds(22500));
}

TEST(JitteredBackoffTest, HugeRetryIndexSaturatesWithoutOverflow) {
  EXPECT_EQ(BackoffCeiling(RetryPolicy(), INT_MAX), absl::Seconds(1));
  EXPECT_EQ(JitteredBackoff(RetryPolicy(), INT_MAX, 0.5), absl::Milliseconds(500));
  // Barely growing: still saturates, computed in closed form (no loop).
  RetryPolicy slow = Retry(3, absl::Milliseconds(10), 1.0000001, absl::Seconds(1));
  EXPECT_EQ(BackoffCeiling(slow, INT_MAX), absl::Seconds(1));
  // Not growing at all: stays at the initial backoff forever.
  RetryPolicy flat = Retry(3, absl::Milliseconds(10), 1.0, absl::Seconds(1));
  EXPECT_EQ(BackoffCeiling(flat, INT_MAX), absl::Milliseconds(10));
  // Huge durations: the product is never formed.
  RetryPolicy big = Retry(3, absl::Hours(1000), 1000.0, absl::Hours(24 * 365 * 1000));
  EXPECT_EQ(BackoffCeiling(big, INT_MAX), absl::Hours(24 * 365 * 1000));
}

TEST(JitteredBackoffTest, NegativeRetryIndexCountsAsTheFirstRetry) {
  EXPECT_EQ(BackoffCeiling(RetryPolicy(), -1), absl::Milliseconds(10));
  EXPECT_EQ(BackoffCeiling(RetryPolicy(), INT_MIN), absl::Milliseconds(10));
}

TEST(JitteredBackoffTest, OutOfRangeRandomIsClampedToTheInterval) {
  const RetryPolicy p;
  EXPECT_EQ(JitteredBackoff(p, 1, -0.5), absl::ZeroDuration());
  EXPECT_EQ(JitteredBackoff(p, 1, std::nan("")), absl::ZeroDuration());
  EXPECT_EQ(JitteredBackoff(p, 1, 1.5), absl::Milliseconds(20));
  EXPECT_EQ(JitteredBackoff(p, 1, std::numeric_limits<double>::infinity()), absl::Milliseconds(20));
}

TEST(JitteredBackoffTest, EveryDrawLiesBetweenZeroAndTheCeilingAndGrowsWithRandom) {
  const RetryPolicy p = Retry(10, absl::Microseconds(3), 1.7, absl::Milliseconds(700));
  for (int retry = 0; retry < 64; ++retry) {
    const absl::Duration ceiling = BackoffCeiling(p, retry);
    EXPECT_LE(ceiling, p.max_backoff);
    absl::Duration previous = absl::ZeroDuration();
    for (int i = 0; i < 1000; ++i) {
      const double u = i / 1000.0;
      const absl::Duration b = JitteredBackoff(p, retry, u);
      ASSERT_GE(b, absl::ZeroDuration()) << retry << " " << u;
      ASSERT_LE(b, ceiling) << retry << " " << u;
      ASSERT_GE(b, previous) << retry << " " << u;
      previous = b;
    }
  }
}

// ---------------------------------------------------------------------------
// ParsePushback

TEST(ParsePushbackTest, AbsentHeaderIsAbsent) {
  Pushback p = ParsePushback(absl::nullopt);
  EXPECT_EQ(p.kind, PushbackKind::kAbsent);
  EXPECT_EQ(p.delay, absl::ZeroDuration());
}

TEST(ParsePushbackTest, NonNegativeMillisecondsAreADelay) {
  Pushback p = ParsePushback(absl::string_view("250"));
  EXPECT_EQ(p.kind, PushbackKind::kDelay);
  EXPECT_EQ(p.delay, absl::Milliseconds(250));
  p = ParsePushback(absl::string_view("0"));
  EXPECT_EQ(p.kind, PushbackKind::kDelay);
  EXPECT_EQ(p.delay, absl::ZeroDuration());
  p = ParsePushback(absl::string_view("2147483647"));  // INT32_MAX, A6's largest
  EXPECT_EQ(p.kind, PushbackKind::kDelay);
  EXPECT_EQ(p.delay, absl::Milliseconds(2147483647));
}

TEST(ParsePushbackTest, BadValuesMeanDoNotRetry) {
  for (const char* bad : {"-1", "-0", "-", "", "abc", "1.5", " 5", "5 ", "+5", "1e3", "0x10",
                          "2147483648", "99999999999999999999", "123456789012345678901234"}) {
    Pushback p = ParsePushback(absl::string_view(bad));
    EXPECT_EQ(p.kind, PushbackKind::kDoNotRetry) << "'" << bad << "'";
    EXPECT_EQ(p.delay, absl::ZeroDuration()) << "'" << bad << "'";
  }
}

TEST(ParsePushbackTest, EmbeddedNulIsDoNotRetry) {
  const std::string value(
      "5\0"
      "0",
      3);
  EXPECT_EQ(ParsePushback(absl::string_view(value)).kind, PushbackKind::kDoNotRetry);
}

// ---------------------------------------------------------------------------
// RetryOutcomeName

TEST(RetryOutcomeNameTest, NamesAreStableAndDistinct) {
  const std::pair<RetryOutcome, const char*> names[] = {
      {RetryOutcome::kRetry, "retry"},
      {RetryOutcome::kSucceeded, "succeeded"},
      {RetryOutcome::kNotRetryableCode, "not_retryable_code"},
      {RetryOutcome::kBudgetFired, "budget_fired"},
      {RetryOutcome::kCommitted, "committed"},
      {RetryOutcome::kAttemptsExhausted, "attempts_exhausted"},
      {RetryOutcome::kPushbackDoNotRetry, "pushback_do_not_retry"},
      {RetryOutcome::kThrottled, "throttled"},
      {RetryOutcome::kNoRoom, "no_room"},
  };
  static_assert(sizeof(names) / sizeof(names[0]) == kRetryOutcomeCount);
  std::set<std::string> seen;
  for (const auto& [outcome, name] : names) {
    EXPECT_EQ(RetryOutcomeName(outcome), name);
    seen.insert(std::string(RetryOutcomeName(outcome)));
    EXPECT_EQ(static_cast<int>(outcome), static_cast<int>(seen.size()) - 1);  // dense, in order
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(kRetryOutcomeCount));
  EXPECT_EQ(RetryOutcomeName(static_cast<RetryOutcome>(kRetryOutcomeCount)), "unknown");
}

// ---------------------------------------------------------------------------
// DecideRetry

class DecideRetryTest : public ::testing::Test {
 protected:
  // request 2 s, attempts 500 ms, reserve 5 ms, minimum 10 ms; the default
  // retry policy: 3 attempts, UNAVAILABLE, 10 ms x2 up to 1 s.
  RetryDecision Decide(int attempt, const AttemptResult& result, bool throttle_allows = true,
                       absl::Duration left = absl::Seconds(1), double unit_random = 0.5) {
    return DecideRetry(budget_, retry_, attempt, result, throttle_allows, clock_.Now() + left,
                       clock_.Now(), unit_random);
  }

  FakeClock clock_;
  BudgetPolicy budget_ = Budget(absl::Seconds(2), absl::Milliseconds(500));
  RetryPolicy retry_;
};

TEST_F(DecideRetryTest, DefaultDecisionNeverRetries) {
  EXPECT_NE(RetryDecision().outcome, RetryOutcome::kRetry);
}

TEST_F(DecideRetryTest, OkSucceedsEvenWhenCommitted) {
  AttemptResult ok;
  ok.committed = true;
  EXPECT_EQ(Decide(1, ok).outcome, RetryOutcome::kSucceeded);
  EXPECT_EQ(Decide(1, AttemptResult()).outcome, RetryOutcome::kSucceeded);
}

TEST_F(DecideRetryTest, CommittedStreamIsNeverRetriedWhateverTheFailure) {
  AttemptResult r = Unavailable();
  r.committed = true;
  EXPECT_EQ(Decide(1, r).outcome, RetryOutcome::kCommitted);
  r = AttemptTimeout();
  r.committed = true;
  EXPECT_EQ(Decide(1, r).outcome, RetryOutcome::kCommitted);
  r = Failed(absl::StatusCode::kDeadlineExceeded, DeadlineSource::kRequest);
  r.committed = true;
  EXPECT_EQ(Decide(1, r).outcome, RetryOutcome::kCommitted);  // committed is checked first
}

TEST_F(DecideRetryTest, DeadlineExceededFromAnyNonAttemptBudgetIsBudgetFired) {
  retry_.retryable_codes.push_back(
      absl::StatusCode::kDeadlineExceeded);  // listing it changes nothing
  for (DeadlineSource s : {DeadlineSource::kNone, DeadlineSource::kClient, DeadlineSource::kRequest,
                           DeadlineSource::kIdle, DeadlineSource::kDownstream,
                           DeadlineSource::kExhaustedBeforeCall, DeadlineSource::kArrivedExpired}) {
    AttemptResult r = Failed(absl::StatusCode::kDeadlineExceeded, s);
    r.pushback = DoNotRetry();  // budget_fired comes first
    EXPECT_EQ(Decide(1, r).outcome, RetryOutcome::kBudgetFired) << DeadlineSourceName(s);
  }
}

TEST_F(DecideRetryTest, AttemptBudgetTimeoutIsRetriedThoughDeadlineExceededIsNotListed) {
  ASSERT_EQ(retry_.retryable_codes, std::vector<absl::StatusCode>{absl::StatusCode::kUnavailable});
  RetryDecision d = Decide(1, AttemptTimeout());
  EXPECT_EQ(d.outcome, RetryOutcome::kRetry);
  EXPECT_EQ(d.backoff, absl::Milliseconds(5));
  retry_.retryable_codes.clear();
  EXPECT_EQ(Decide(1, AttemptTimeout()).outcome, RetryOutcome::kRetry);
}

// The attempt waited for a ready backend until its cap and sent nothing: the
// call goes on waiting at once, past max_attempts and a throttle that would
// stop a retry, until the budget has no room for an attempt.
TEST_F(DecideRetryTest, AttemptThatFoundNoBackendGoesOnWaitingWhileTheBudgetHasRoom) {
  const AttemptResult no_backend =
      Failed(absl::StatusCode::kDeadlineExceeded, DeadlineSource::kNoBackend);
  struct Row {
    int attempt;
    bool throttle_allows;
    absl::Duration left;
    RetryOutcome want;
  };
  const Row rows[] = {
      {1, true, absl::Seconds(1), RetryOutcome::kRetry},
      {3, true, absl::Seconds(1), RetryOutcome::kRetry},  // max_attempts is 3
      {40, false, absl::Seconds(1), RetryOutcome::kRetry},
      // reserve 5 ms + minimum 10 ms: room while 15 ms are left, not after
      {7, true, absl::Milliseconds(15), RetryOutcome::kRetry},
      {7, true, absl::Milliseconds(15) - absl::Nanoseconds(1), RetryOutcome::kNoRoom},
      {7, true, absl::ZeroDuration(), RetryOutcome::kNoRoom},
  };
  for (const Row& r : rows) {
    const RetryDecision d = Decide(r.attempt, no_backend, r.throttle_allows, r.left);
    EXPECT_EQ(d.outcome, r.want) << "attempt " << r.attempt << ", left " << r.left;
    EXPECT_EQ(d.backoff, absl::ZeroDuration()) << "attempt " << r.attempt;
  }
  // Any other budget that fired is still final.
  EXPECT_EQ(
      Decide(1, Failed(absl::StatusCode::kDeadlineExceeded, DeadlineSource::kRequest)).outcome,
      RetryOutcome::kBudgetFired);
  // An attempt timeout (it reached a server) still stops at max_attempts.
  EXPECT_EQ(Decide(3, AttemptTimeout()).outcome, RetryOutcome::kAttemptsExhausted);
}

TEST_F(DecideRetryTest, UnlistedCodeIsNotRetryableBeforePushbackIsLookedAt) {
  AttemptResult r = WithPushback(Failed(absl::StatusCode::kInvalidArgument), DoNotRetry());
  EXPECT_EQ(Decide(1, r).outcome, RetryOutcome::kNotRetryableCode);
  r = WithPushback(Failed(absl::StatusCode::kInternal), Delay(absl::Milliseconds(1)));
  EXPECT_EQ(Decide(1, r).outcome, RetryOutcome::kNotRetryableCode);
  EXPECT_EQ(Decide(1, Failed(absl::StatusCode::kCancelled, DeadlineSource::kAttempt)).outcome,
            RetryOutcome::kNotRetryableCode);  // `fired` matters only for DEADLINE_EXCEEDED
}

TEST_F(DecideRetryTest, ListedCodeIsRetried) {
  retry_.retryable_codes = {absl::StatusCode::kResourceExhausted, absl::StatusCode::kAborted};
  EXPECT_EQ(Decide(1, Failed(absl::StatusCode::kAborted)).outcome, RetryOutcome::kRetry);
  EXPECT_EQ(Decide(1, Unavailable()).outcome, RetryOutcome::kNotRetryableCode);
}

TEST_F(DecideRetryTest, PushbackDoNotRetryStopsARetryableFailureBeforeAttemptsRunOut) {
  EXPECT_EQ(Decide(1, WithPushback(Unavailable(), DoNotRetry())).outcome,
            RetryOutcome::kPushbackDoNotRetry);
  EXPECT_EQ(Decide(3, WithPushback(AttemptTimeout(), DoNotRetry()), false).outcome,
            RetryOutcome::kPushbackDoNotRetry);
}

TEST_F(DecideRetryTest, LastAttemptIsExhaustedBeforeTheThrottleIsAsked) {
  EXPECT_EQ(Decide(3, Unavailable()).outcome, RetryOutcome::kAttemptsExhausted);
  EXPECT_EQ(Decide(3, Unavailable(), /*throttle_allows=*/false).outcome,
            RetryOutcome::kAttemptsExhausted);
  EXPECT_EQ(Decide(7, Unavailable()).outcome, RetryOutcome::kAttemptsExhausted);
  // A pushback delay does not extend max_attempts (A6).
  EXPECT_EQ(Decide(3, WithPushback(Unavailable(), Delay(absl::Milliseconds(1)))).outcome,
            RetryOutcome::kAttemptsExhausted);
}

TEST_F(DecideRetryTest, ThrottledBeforeRoomIsLookedAt) {
  EXPECT_EQ(Decide(1, Unavailable(), /*throttle_allows=*/false).outcome, RetryOutcome::kThrottled);
  EXPECT_EQ(Decide(1, Unavailable(), false, /*left=*/absl::Milliseconds(-1)).outcome,
            RetryOutcome::kThrottled);
}

TEST_F(DecideRetryTest, NoRoomWhenEvenAnImmediateRetryWouldStartBelowTheMinimum) {
  // 5 ms reserve + 9 ms: an immediate attempt would get 9 ms < 10 ms.
  EXPECT_EQ(Decide(1, Unavailable(), true, absl::Milliseconds(14)).outcome, RetryOutcome::kNoRoom);
  // 15 ms: exactly the minimum, at once.
  RetryDecision d = Decide(1, Unavailable(), true, absl::Milliseconds(15));
  EXPECT_EQ(d.outcome, RetryOutcome::kRetry);
  EXPECT_EQ(d.backoff, absl::ZeroDuration());
  EXPECT_TRUE(d.backoff_clipped);  // the 5 ms jittered wait did not fit
}

TEST_F(DecideRetryTest, ExpiredOrInfinitePastParentIsNoRoom) {
  EXPECT_EQ(Decide(1, Unavailable(), true, absl::ZeroDuration()).outcome, RetryOutcome::kNoRoom);
  EXPECT_EQ(Decide(1, Unavailable(), true, -absl::Seconds(1)).outcome, RetryOutcome::kNoRoom);
  EXPECT_EQ(
      DecideRetry(budget_, retry_, 1, Unavailable(), true, absl::InfinitePast(), clock_.Now(), 0.5)
          .outcome,
      RetryOutcome::kNoRoom);
}

TEST_F(DecideRetryTest, ZeroMinimumStillNeedsSomeTimeLeft) {
  budget_.min_attempt_budget = absl::ZeroDuration();
  EXPECT_EQ(Decide(1, Unavailable(), true, absl::Milliseconds(5)).outcome,
            RetryOutcome::kNoRoom);  // exactly the reserve: nothing for the attempt
  RetryDecision d = Decide(1, Unavailable(), true, absl::Milliseconds(6));
  ASSERT_EQ(d.outcome, RetryOutcome::kRetry);
  EXPECT_TRUE(d.backoff_clipped);
  EXPECT_EQ(d.backoff, absl::Milliseconds(1) - absl::Nanoseconds(1));
  const absl::Time start = clock_.Now() + d.backoff;
  EXPECT_EQ(DeriveCallDeadline(budget_, clock_.Now() + absl::Milliseconds(6),
                               DeadlineSource::kRequest, start)
                .outcome,
            CallOutcome::kProceed);
}

TEST_F(DecideRetryTest, RetryWaitsTheJitteredBackoffOfItsRetryIndex) {
  RetryDecision d = Decide(1, Unavailable(), true, absl::Seconds(1), 0.5);
  EXPECT_EQ(d.outcome, RetryOutcome::kRetry);
  EXPECT_EQ(d.backoff, absl::Milliseconds(5));  // retry 0: half of 10 ms
  EXPECT_FALSE(d.backoff_clipped);
  d = Decide(2, Unavailable(), true, absl::Seconds(1), 0.5);
  EXPECT_EQ(d.backoff, absl::Milliseconds(10));  // retry 1: half of 20 ms
  d = Decide(2, Unavailable(), true, absl::Seconds(1), 0.0);
  EXPECT_EQ(d.backoff, absl::ZeroDuration());
}

TEST_F(DecideRetryTest, PushbackDelayIsHonouredInsteadOfTheBackoff) {
  // Longer than max_backoff: the server decides (A6), while it fits.
  RetryDecision d = Decide(1, WithPushback(Unavailable(), Delay(absl::Milliseconds(1500))), true,
                           absl::Seconds(10), 0.0);
  EXPECT_EQ(d.outcome, RetryOutcome::kRetry);
  EXPECT_EQ(d.backoff, absl::Milliseconds(1500));
  EXPECT_FALSE(d.backoff_clipped);
  // Zero: retry at once, whatever the jitter would have said.
  d = Decide(2, WithPushback(AttemptTimeout(), Delay(absl::ZeroDuration())), true,
             absl::Seconds(10), 0.99);
  EXPECT_EQ(d.backoff, absl::ZeroDuration());
}

TEST_F(DecideRetryTest, PushbackDelayThatDoesNotFitEndsTheRetries) {
  // 1 s left - 5 ms reserve - 10 ms minimum = 985 ms at most: the server
  // asked for 5 s, and retrying sooner would defy it.
  RetryDecision d =
      Decide(1, WithPushback(Unavailable(), Delay(absl::Seconds(5))), true, absl::Seconds(1));
  EXPECT_EQ(d.outcome, RetryOutcome::kNoRoom);
  d = Decide(1, WithPushback(Unavailable(), Delay(absl::Milliseconds(985))), true,
             absl::Seconds(1));
  EXPECT_EQ(d.outcome, RetryOutcome::kRetry);
  EXPECT_EQ(d.backoff, absl::Milliseconds(985));
  EXPECT_FALSE(d.backoff_clipped);
}

TEST_F(DecideRetryTest, InfiniteParentDeadlineNeverClips) {
  const absl::Time now = clock_.Now();
  RetryDecision d =
      DecideRetry(budget_, retry_, 1, WithPushback(Unavailable(), Delay(absl::Hours(1))), true,
                  absl::InfiniteFuture(), now, 0.5);
  EXPECT_EQ(d.outcome, RetryOutcome::kRetry);
  EXPECT_EQ(d.backoff, absl::Hours(1));
  EXPECT_FALSE(d.backoff_clipped);
  d = DecideRetry(budget_, retry_, 2, Unavailable(), true, absl::InfiniteFuture(), now, 1.0);
  EXPECT_EQ(d.backoff, absl::Milliseconds(20));
}

TEST_F(DecideRetryTest, BackoffNeverCrossesTheDeadline) {
  // Property: over many deadlines, random values, attempts and pushbacks, a
  // retry always starts with at least min_attempt_budget before the parent
  // deadline - reserve, and its DeriveCallDeadline proceeds; otherwise the
  // answer is no_room, and only when even an immediate attempt could not.
  retry_ = Retry(5, absl::Milliseconds(3), 3.0, absl::Seconds(2));
  const absl::Time now = clock_.Now();
  const Pushback pushbacks[] = {Pushback(), Delay(absl::Milliseconds(40)),
                                Delay(absl::Seconds(30))};
  int retries = 0, clipped = 0, no_room = 0;
  for (int64_t left_us = -2000; left_us <= 3'000'000; left_us += 997) {
    const absl::Time parent = now + absl::Microseconds(left_us);
    for (int attempt = 1; attempt <= 4; ++attempt) {
      for (const Pushback& pushback : pushbacks) {
        for (int i = 0; i < 20; ++i) {
          const double u = i / 20.0 + 0.013;
          const RetryDecision d =
              DecideRetry(budget_, retry_, attempt, WithPushback(Unavailable(), pushback), true,
                          parent, now, u);
          const absl::Duration room = parent - budget_.hop_reserve - now;
          if (d.outcome == RetryOutcome::kNoRoom) {
            // Either even an immediate attempt would not fit, or the server's
            // pushback asked for a longer wait than the deadline allows.
            if (pushback.kind == PushbackKind::kDelay) {
              ASSERT_GT(now + pushback.delay + budget_.min_attempt_budget,
                        parent - budget_.hop_reserve)
                  << left_us;
            } else {
              ASSERT_LT(room, budget_.min_attempt_budget) << left_us;
            }
            ++no_room;
            continue;
          }
          ASSERT_EQ(d.outcome, RetryOutcome::kRetry) << left_us;
          ++retries;
          if (d.backoff_clipped) ++clipped;
          ASSERT_GE(d.backoff, absl::ZeroDuration());
          const absl::Time start = now + d.backoff;
          ASSERT_LE(start + budget_.min_attempt_budget, parent - budget_.hop_reserve)
              << left_us << " " << attempt << " " << u;
          const CallDeadline next =
              DeriveCallDeadline(budget_, parent, DeadlineSource::kRequest, start);
          ASSERT_EQ(next.outcome, CallOutcome::kProceed) << left_us;
          ASSERT_GE(next.budget, budget_.min_attempt_budget);
          ASSERT_LE(next.deadline, parent - budget_.hop_reserve);
          if (!d.backoff_clipped) {
            const absl::Duration wanted = pushback.kind == PushbackKind::kDelay
                                              ? pushback.delay
                                              : JitteredBackoff(retry_, attempt - 1, u);
            ASSERT_EQ(d.backoff, wanted);
          }
        }
      }
    }
  }
  // Every branch was exercised.
  EXPECT_GT(retries, 0);
  EXPECT_GT(clipped, 0);
  EXPECT_GT(no_room, 0);
}

TEST_F(DecideRetryTest, TheAttemptAfterAClippedBackoffGetsTheRemainder) {
  retry_.max_backoff = absl::Seconds(10);
  retry_.initial_backoff = absl::Seconds(10);  // any jitter is far too long
  const absl::Time parent = clock_.Now() + absl::Milliseconds(100);
  RetryDecision d =
      DecideRetry(budget_, retry_, 1, AttemptTimeout(), true, parent, clock_.Now(), 0.9);
  ASSERT_EQ(d.outcome, RetryOutcome::kRetry);
  EXPECT_TRUE(d.backoff_clipped);
  EXPECT_EQ(d.backoff, absl::Milliseconds(85));  // 100 - 5 reserve - 10 minimum
  clock_.Advance(d.backoff);
  CallDeadline last = DeriveCallDeadline(budget_, parent, DeadlineSource::kRequest, clock_.Now());
  EXPECT_EQ(last.outcome, CallOutcome::kProceed);
  // The 500 ms attempt cap is bigger: the last attempt gets the parent's
  // remainder minus the reserve, which is the minimum.
  EXPECT_EQ(last.budget, (parent - clock_.Now()) - budget_.hop_reserve);
  EXPECT_EQ(last.budget, budget_.min_attempt_budget);
  EXPECT_EQ(last.source, DeadlineSource::kRequest);
  EXPECT_EQ(last.deadline, parent - budget_.hop_reserve);
}

TEST_F(DecideRetryTest, EveryAttemptTimingOutRetriesInsideTheRequestBudgetAsTheFitSays) {
  // The cure for the incident: attempt budgets derive from the one request
  // deadline, so attempts that hang are cut by their own cap and retried,
  // and the last one gets the remainder. Worst-case waits (unit_random 1).
  const BudgetPolicy budget = Budget(absl::Seconds(2), absl::Milliseconds(600));
  const RetryPolicy retry = Retry(5, absl::Milliseconds(300), 2.0, absl::Seconds(1));
  absl::StatusOr<RetryFit> fit = ValidateRetryPolicy(budget, retry);
  ASSERT_TRUE(fit.ok()) << fit.status();
  const RequestBudget request = DeriveRequestBudget(budget, absl::InfiniteFuture(), clock_.Now());
  int attempts = 0;
  RetryDecision d;
  for (int attempt = 1;; ++attempt) {
    const CallDeadline call =
        DeriveCallDeadline(budget, request.deadline, request.source, clock_.Now());
    ASSERT_EQ(call.outcome, CallOutcome::kProceed);
    ++attempts;
    clock_.Advance(call.budget);  // the server never answers
    d = DecideRetry(budget, retry, attempt,
                    Failed(absl::StatusCode::kDeadlineExceeded, call.source), true,
                    request.deadline, clock_.Now(), 1.0);
    if (d.outcome != RetryOutcome::kRetry) break;
    clock_.Advance(d.backoff);
  }
  EXPECT_EQ(attempts, fit->attempts_if_all_time_out);
  EXPECT_EQ(attempts, 3);
  EXPECT_EQ(d.outcome, RetryOutcome::kBudgetFired);  // the last one ran to the request deadline
  EXPECT_EQ(clock_.Now(), request.deadline - budget.hop_reserve);
}

// ---------------------------------------------------------------------------
// ThrottleEffectOf

TEST(ThrottleEffectOfTest, OnlySuccessesAndRetryableFailuresCount) {
  const RetryPolicy retry;
  EXPECT_EQ(ThrottleEffectOf(retry, AttemptResult()), ThrottleEffect::kSuccess);
  EXPECT_EQ(ThrottleEffectOf(retry, Unavailable()), ThrottleEffect::kFailure);
  EXPECT_EQ(ThrottleEffectOf(retry, AttemptTimeout()), ThrottleEffect::kFailure);
  AttemptResult committed = Unavailable();
  committed.committed = true;
  EXPECT_EQ(ThrottleEffectOf(retry, committed), ThrottleEffect::kFailure);
  // A malformed request is not the server failing; a budget that fired
  // upstream of the attempt is ours.
  EXPECT_EQ(ThrottleEffectOf(retry, Failed(absl::StatusCode::kInvalidArgument)),
            ThrottleEffect::kNone);
  EXPECT_EQ(ThrottleEffectOf(retry,
                             Failed(absl::StatusCode::kDeadlineExceeded, DeadlineSource::kRequest)),
            ThrottleEffect::kNone);
}

// It waited for a backend and reached no server: nothing to count.
TEST(ThrottleEffectOfTest, AnAttemptThatFoundNoBackendIsNotCounted) {
  EXPECT_EQ(ThrottleEffectOf(RetryPolicy(), Failed(absl::StatusCode::kDeadlineExceeded,
                                                   DeadlineSource::kNoBackend)),
            ThrottleEffect::kNone);
}

TEST(ThrottleEffectOfTest, PushbackDoNotRetryCountsAsAFailure) {
  EXPECT_EQ(ThrottleEffectOf(RetryPolicy(),
                             WithPushback(Failed(absl::StatusCode::kInternal), DoNotRetry())),
            ThrottleEffect::kFailure);
}

// An admission shed: RESOURCE_EXHAUSTED (not retryable by default) with a
// pushback delay. It drains the throttle, so that callers of a hop that
// sheds load do not retry into it harder.
TEST(ThrottleEffectOfTest, ShedWithPushbackDelayCountsAsAFailure) {
  EXPECT_EQ(
      ThrottleEffectOf(RetryPolicy(), WithPushback(Failed(absl::StatusCode::kResourceExhausted),
                                                   Delay(absl::Milliseconds(100)))),
      ThrottleEffect::kFailure);
  EXPECT_EQ(ThrottleEffectOf(RetryPolicy(), Failed(absl::StatusCode::kResourceExhausted)),
            ThrottleEffect::kNone);
}

// ---------------------------------------------------------------------------
// RetryThrottle

TEST(RetryThrottleTest, StartsFull) {
  RetryThrottle t;
  EXPECT_DOUBLE_EQ(t.tokens(), 10.0);
  EXPECT_TRUE(t.RetryAllowed());
}

TEST(RetryThrottleTest, FiveFailuresOfTenTokensReachHalfAndThrottle) {
  RetryThrottle t;  // 10 tokens: threshold 5, retries only while tokens > 5
  for (int i = 1; i <= 4; ++i) {
    t.RecordFailure();
    EXPECT_TRUE(t.RetryAllowed()) << i;
  }
  t.RecordFailure();
  EXPECT_DOUBLE_EQ(t.tokens(), 5.0);
  EXPECT_FALSE(t.RetryAllowed());  // equal to half is not above it
}

TEST(RetryThrottleTest, SuccessesRecoverAtTheTokenRatio) {
  RetryThrottle t;  // ratio 0.1
  for (int i = 0; i < 6; ++i) t.RecordFailure();
  EXPECT_DOUBLE_EQ(t.tokens(), 4.0);
  for (int i = 1; i <= 10; ++i) {
    t.RecordSuccess();
    EXPECT_FALSE(t.RetryAllowed()) << i;  // 4.1 .. 5.0
  }
  EXPECT_DOUBLE_EQ(t.tokens(), 5.0);  // exact: milli-tokens, no drift
  t.RecordSuccess();
  EXPECT_DOUBLE_EQ(t.tokens(), 5.1);
  EXPECT_TRUE(t.RetryAllowed());
}

TEST(RetryThrottleTest, NeverBelowZeroNorAboveMax) {
  RetryThrottle t({/*max_tokens=*/3, /*token_ratio=*/1.0});
  for (int i = 0; i < 100; ++i) t.RecordFailure();
  EXPECT_DOUBLE_EQ(t.tokens(), 0.0);
  t.RecordSuccess();
  EXPECT_DOUBLE_EQ(t.tokens(), 1.0);  // the floor did not go negative
  for (int i = 0; i < 100; ++i) t.RecordSuccess();
  EXPECT_DOUBLE_EQ(t.tokens(), 3.0);
  t.RecordFailure();
  EXPECT_DOUBLE_EQ(t.tokens(), 2.0);  // the ceiling did not overshoot
}

TEST(RetryThrottleTest, OddMaxTokensThresholdIsTheExactHalf) {
  RetryThrottle t({/*max_tokens=*/3, /*token_ratio=*/0.5});  // threshold 1.5
  t.RecordFailure();
  EXPECT_TRUE(t.RetryAllowed());  // 2
  t.RecordFailure();
  EXPECT_FALSE(t.RetryAllowed());  // 1
  t.RecordSuccess();
  EXPECT_FALSE(t.RetryAllowed());  // 1.5
  t.RecordSuccess();
  EXPECT_TRUE(t.RetryAllowed());  // 2
}

TEST(RetryThrottleTest, RatioIsKeptToThreeDecimals) {
  RetryThrottle t({/*max_tokens=*/10, /*token_ratio=*/0.0014});  // 0.001
  t.RecordFailure();
  t.RecordSuccess();
  EXPECT_DOUBLE_EQ(t.tokens(), 9.001);
}

TEST(RetryThrottleTest, ConcurrentUpdatesAreAllCounted) {
  RetryThrottle t({/*max_tokens=*/1000, /*token_ratio=*/1.0});
  const auto run = [](int threads, int per_thread, const std::function<void()>& op) {
    std::vector<std::thread> pool;
    for (int i = 0; i < threads; ++i) {
      pool.emplace_back([&] {
        for (int j = 0; j < per_thread; ++j) op();
      });
    }
    for (std::thread& th : pool) th.join();
  };
  run(4, 200, [&] { t.RecordFailure(); });
  EXPECT_DOUBLE_EQ(t.tokens(), 200.0);
  run(4, 100, [&] { t.RecordSuccess(); });
  EXPECT_DOUBLE_EQ(t.tokens(), 600.0);
  // Mixed, never near a bound: every update lands.
  std::thread a([&] {
    for (int j = 0; j < 150; ++j) t.RecordFailure();
  });
  std::thread b([&] {
    for (int j = 0; j < 150; ++j) t.RecordSuccess();
  });
  std::thread c([&] {
    for (int j = 0; j < 50; ++j) t.RecordFailure();
  });
  std::thread e([&] {
    for (int j = 0; j < 100; ++j) (void)t.RetryAllowed();
  });
  a.join();
  b.join();
  c.join();
  e.join();
  EXPECT_DOUBLE_EQ(t.tokens(), 550.0);
}

TEST(RetryThrottleTest, ValidateAcceptsTheRangeEnds) {
  EXPECT_TRUE(RetryThrottle::Validate({}).ok());
  EXPECT_TRUE(RetryThrottle::Validate({1, 1.0}).ok());
  EXPECT_TRUE(RetryThrottle::Validate({1000, 0.001}).ok());
}

TEST(RetryThrottleTest, ValidateRejectsEachFieldByName) {
  for (int n : {0, -1, 1001}) {
    absl::Status s = RetryThrottle::Validate({n, 0.1});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("max_tokens (" + std::to_string(n) + ")"));
  }
  for (double r : {0.0, -0.1, 1.5, 0.0004, std::nan(""), std::numeric_limits<double>::infinity()}) {
    absl::Status s = RetryThrottle::Validate({10, r});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << r;
    EXPECT_THAT(s.message(), HasSubstr("token_ratio")) << r;
  }
}

TEST(RetryThrottleTest, OutOfRangeOptionsAreClamped) {
  RetryThrottle t({/*max_tokens=*/5000, /*token_ratio=*/0.0});
  EXPECT_DOUBLE_EQ(t.tokens(), 1000.0);
  t.RecordFailure();
  t.RecordSuccess();
  EXPECT_DOUBLE_EQ(t.tokens(), 999.001);
}

// Test failures name the value, not its integer.
TEST(RetryNamesTest, PushbackThrottleAndSetupPrintByName) {
  EXPECT_EQ(::testing::PrintToString(PushbackKind::kDoNotRetry), "do_not_retry");
  EXPECT_EQ(::testing::PrintToString(ThrottleEffect::kFailure), "failure");
  EXPECT_EQ(::testing::PrintToString(RetrySetup::kUnfitAccepted), "unfit_accepted");
}

}  // namespace
}  // namespace hopbudget
