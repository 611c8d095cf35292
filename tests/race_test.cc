// Copyright hopbudget authors.
//
// RaceTracker and FormatRaceFailure: the first OK wins, the rest are
// cancelled losers, all-failed names every attempt, a cancel decides.
#include "hopbudget/advanced/race.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hopbudget {
namespace {

using absl::StatusCode;

TEST(RaceTrackerTest, FirstOkWinsAndTheRunningAreCancelledLosers) {
  RaceTracker race(3);
  RaceStep step = race.OnEnd(1, StatusCode::kUnavailable);  // a failure before the win
  EXPECT_FALSE(step.cancel_running);
  EXPECT_FALSE(step.finished);
  step = race.OnEnd(2, StatusCode::kOk);
  EXPECT_TRUE(step.cancel_running);
  EXPECT_FALSE(step.finished);
  EXPECT_EQ(race.outcome(), RaceOutcome::kWon);
  EXPECT_EQ(race.winner(), 2);
  // The loser answers CANCELLED (or anything, even OK): a loser, not a failure.
  step = race.OnEnd(0, StatusCode::kOk);
  EXPECT_FALSE(step.cancel_running);
  EXPECT_TRUE(step.finished);
  EXPECT_EQ(race.fate(0), RaceFate::kLoser);
  EXPECT_EQ(race.fate(1), RaceFate::kFailed);
  EXPECT_EQ(race.fate(2), RaceFate::kWon);
  EXPECT_EQ(race.losers(), 1);
  EXPECT_EQ(race.winner(), 2);
}

TEST(RaceTrackerTest, TheLastToWinHasNobodyToCancel) {
  RaceTracker race(2);
  race.OnEnd(0, StatusCode::kInternal);
  const RaceStep step = race.OnEnd(1, StatusCode::kOk);
  EXPECT_FALSE(step.cancel_running);
  EXPECT_TRUE(step.finished);
  EXPECT_EQ(race.outcome(), RaceOutcome::kWon);
  EXPECT_EQ(race.losers(), 0);
}

TEST(RaceTrackerTest, AllFailedOnlyOnceEveryAttemptEnded) {
  RaceTracker race(2);
  EXPECT_FALSE(race.OnEnd(0, StatusCode::kDeadlineExceeded).finished);
  EXPECT_FALSE(race.decided());
  const RaceStep step = race.OnEnd(1, StatusCode::kUnavailable);
  EXPECT_TRUE(step.finished);
  EXPECT_EQ(race.outcome(), RaceOutcome::kAllFailed);
  EXPECT_EQ(race.winner(), -1);
}

TEST(RaceTrackerTest, CancelDecidesAndLaterEndsAreCancelledNotFailed) {
  RaceTracker race(3);
  race.OnEnd(0, StatusCode::kUnavailable);
  EXPECT_TRUE(race.Cancel());
  EXPECT_FALSE(race.Cancel());  // once
  EXPECT_FALSE(race.OnEnd(1, StatusCode::kCancelled).finished);
  EXPECT_TRUE(race.OnEnd(2, StatusCode::kOk).finished);  // too late to win
  EXPECT_EQ(race.outcome(), RaceOutcome::kCancelled);
  EXPECT_EQ(race.fate(0), RaceFate::kFailed);
  EXPECT_EQ(race.fate(1), RaceFate::kCancelled);
  EXPECT_EQ(race.fate(2), RaceFate::kCancelled);
}

TEST(RaceTrackerTest, CancelAfterTheWinChangesNothing) {
  RaceTracker race(1);
  race.OnEnd(0, StatusCode::kOk);
  EXPECT_FALSE(race.Cancel());
  EXPECT_EQ(race.outcome(), RaceOutcome::kWon);
}

TEST(RaceTrackerTest, DuplicateAndOutOfRangeEndsAreIgnored) {
  RaceTracker race(2);
  race.OnEnd(0, StatusCode::kUnavailable);
  EXPECT_FALSE(race.OnEnd(0, StatusCode::kOk).finished);
  EXPECT_EQ(race.fate(0), RaceFate::kFailed);
  EXPECT_FALSE(race.OnEnd(5, StatusCode::kOk).finished);
  EXPECT_FALSE(race.OnEnd(-1, StatusCode::kOk).finished);
  EXPECT_EQ(race.running(), 1);
}

TEST(RaceTrackerTest, SizeIsValidated) {
  EXPECT_TRUE(ValidateRaceSize(1).ok());
  EXPECT_TRUE(ValidateRaceSize(kMaxRaceAttempts).ok());
  EXPECT_THAT(ValidateRaceSize(0).message(), ::testing::HasSubstr("got 0"));
  EXPECT_FALSE(ValidateRaceSize(kMaxRaceAttempts + 1).ok());
}

TEST(RaceFailureTest, NamesEveryAttemptsCodeAndAttribution) {
  std::vector<RaceAttemptSummary> attempts(2);
  attempts[0].code = StatusCode::kUnavailable;
  attempts[1].code = StatusCode::kDeadlineExceeded;
  attempts[1].attribution = Attribution{DeadlineSource::kAttempt, "orders", absl::Milliseconds(100),
                                        absl::Milliseconds(101)};
  EXPECT_EQ(FormatRaceFailure(attempts),
            "race of 2 lost by every attempt: #0 UNAVAILABLE; #1 DEADLINE_EXCEEDED "
            "source=attempt hop=orders budget_ms=100 elapsed_ms=101");
  // As a note after an attribution message, it keeps that message parseable.
  const std::string message =
      FormatAttributionMessage(*attempts[1].attribution) + " (" + FormatRaceFailure(attempts) + ")";
  EXPECT_EQ(ParseAttributionMessage(message), attempts[1].attribution);
}

TEST(RaceNamesTest, OutcomesAndFatesHaveStableNames) {
  EXPECT_STREQ(RaceOutcomeName(RaceOutcome::kAllFailed), "all_failed");
  EXPECT_STREQ(RaceFateName(RaceFate::kLoser), "loser");
}

// Test failures name the value, not its integer.
TEST(RaceNamesTest, OutcomesAndFatesPrintByName) {
  EXPECT_EQ(::testing::PrintToString(RaceOutcome::kAllFailed), "all_failed");
  EXPECT_EQ(::testing::PrintToString(RaceFate::kLoser), "loser");
}

}  // namespace
}  // namespace hopbudget
