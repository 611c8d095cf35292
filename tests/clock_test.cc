// Copyright hopbudget authors.
#include "hopbudget/advanced/clock.h"

#include <gtest/gtest.h>

#include "absl/time/clock.h"

namespace hopbudget {
namespace {

TEST(FakeClockTest, MovesOnlyWhenAdvanced) {
  FakeClock clock(absl::FromUnixSeconds(1000));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(1000));
  clock.Advance(absl::Milliseconds(5));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(1000) + absl::Milliseconds(5));
}

TEST(FakeClockTest, NeverGoesBack) {
  FakeClock clock(absl::FromUnixSeconds(1000));
  clock.Advance(absl::Seconds(-1));
  clock.Set(absl::FromUnixSeconds(999));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(1000));
  clock.Set(absl::FromUnixSeconds(1001));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(1001));
}

TEST(RealClockTest, ReadsTheWallClockThatGrpcDeadlinesUse) {
  EXPECT_LT(absl::AbsDuration(Clock::Real().Now() - absl::Now()), absl::Seconds(1));
}

TEST(FakeClockTest, SteadyIsNow) {
  FakeClock clock;
  clock.Advance(absl::Milliseconds(3));
  EXPECT_EQ(clock.Steady(), clock.Now());
}

TEST(RealClockTest, SteadyNeverGoesBack) {
  absl::Time last = Clock::Real().Steady();
  for (int i = 0; i < 1000; ++i) {
    const absl::Time now = Clock::Real().Steady();
    ASSERT_GE(now, last);
    last = now;
  }
}

}  // namespace
}  // namespace hopbudget
