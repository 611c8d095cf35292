// Copyright hopbudget authors.
//
// RemainingOf: what is left of a request budget and which budget bounds it,
// table-style on fixed times.
#include "hopbudget/advanced/remaining.h"

#include <gtest/gtest.h>

#include "hopbudget/advanced/clock.h"

namespace hopbudget {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);

RequestBudget Budget(absl::Duration budget, DeadlineSource source,
                     ArrivalOutcome outcome = ArrivalOutcome::kAccepted) {
  RequestBudget b;
  b.outcome = outcome;
  b.arrival = kT0;
  b.deadline = budget == absl::InfiniteDuration() ? absl::InfiniteFuture() : kT0 + budget;
  b.source = budget == absl::InfiniteDuration() ? DeadlineSource::kNone : source;
  b.budget_on_arrival = budget;
  return b;
}

struct Case {
  const char* name;
  RequestBudget budget;
  absl::Duration reserve;
  absl::Duration elapsed;
  RemainingOutcome outcome;
  absl::Duration left;
  absl::Duration usable;
  DeadlineSource source;
};

TEST(RemainingTest, TableOfBudgetsReserveAndElapsedTime) {
  const auto ms = [](int n) { return absl::Milliseconds(n); };
  const Case cases[] = {
      {"client deadline, half spent", Budget(ms(200), DeadlineSource::kClient), ms(5), ms(100),
       RemainingOutcome::kOpen, ms(100), ms(95), DeadlineSource::kClient},
      {"request cap bounds it", Budget(ms(300), DeadlineSource::kRequest), ms(5), ms(0),
       RemainingOutcome::kOpen, ms(300), ms(295), DeadlineSource::kRequest},
      {"less than the reserve left: usable is zero, not negative",
       Budget(ms(100), DeadlineSource::kClient), ms(5), ms(97), RemainingOutcome::kOpen, ms(3),
       ms(0), DeadlineSource::kClient},
      {"exactly at the deadline", Budget(ms(100), DeadlineSource::kClient), ms(5), ms(100),
       RemainingOutcome::kExhausted, ms(0), ms(0), DeadlineSource::kClient},
      {"past the deadline keeps the signed overrun", Budget(ms(100), DeadlineSource::kRequest),
       ms(5), ms(130), RemainingOutcome::kExhausted, ms(-30), ms(0), DeadlineSource::kRequest},
      {"no deadline", Budget(absl::InfiniteDuration(), DeadlineSource::kClient), ms(5), ms(10),
       RemainingOutcome::kUnbounded, absl::InfiniteDuration(), absl::InfiniteDuration(),
       DeadlineSource::kNone},
      {"refused on arrival", Budget(ms(1), DeadlineSource::kClient, ArrivalOutcome::kBelowMinimum),
       ms(5), ms(0), RemainingOutcome::kExhausted, ms(1), ms(0), DeadlineSource::kArrivedExpired},
      {"negative reserve counts as none", Budget(ms(50), DeadlineSource::kClient), ms(-5), ms(0),
       RemainingOutcome::kOpen, ms(50), ms(50), DeadlineSource::kClient},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const RemainingTime r = RemainingOf(c.budget, c.reserve, kT0 + c.elapsed);
    EXPECT_EQ(r.outcome, c.outcome);
    EXPECT_EQ(r.left, c.left);
    EXPECT_EQ(r.usable, c.usable);
    EXPECT_EQ(r.source, c.source);
    EXPECT_EQ(r.deadline, c.budget.deadline);
  }
}

TEST(RemainingTest, FollowsTheInjectedClock) {
  FakeClock clock;
  RequestBudget b;
  b.arrival = clock.Now();
  b.deadline = clock.Now() + absl::Milliseconds(40);
  b.source = DeadlineSource::kClient;
  EXPECT_EQ(RemainingOf(b, absl::ZeroDuration(), clock.Now()).left, absl::Milliseconds(40));
  clock.Advance(absl::Milliseconds(15));
  EXPECT_EQ(RemainingOf(b, absl::ZeroDuration(), clock.Now()).left, absl::Milliseconds(25));
}

// Test failures name the value, not its integer.
TEST(RemainingNamesTest, OutcomesPrintByName) {
  EXPECT_EQ(::testing::PrintToString(RemainingOutcome::kUnbounded), "unbounded");
}

}  // namespace
}  // namespace hopbudget
