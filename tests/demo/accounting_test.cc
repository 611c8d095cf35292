// Copyright hopbudget authors.
#include "accounting.h"

#include <thread>

#include "gtest/gtest.h"

namespace hopbudget::demo {
namespace {

TEST(ClientDeadlineHeaderTest, ParsesDigitsOnly) {
  EXPECT_EQ(*ParseClientDeadline("1700000000000000"), absl::FromUnixMicros(1700000000000000));
  EXPECT_EQ(FormatClientDeadline(absl::FromUnixMicros(42)), "42");
  for (const char* bad : {"", "-5", "12a", " 12", "1e6", "99999999999999999999"}) {
    EXPECT_FALSE(ParseClientDeadline(bad).has_value()) << bad;
  }
}

TEST(DeadlineAccountingTest, WorkBeforeTheDeadlineCountsNothing) {
  FakeClock clock;
  DeadlineAccounting a(&clock);
  {
    auto w = a.Begin(clock.Now() + absl::Seconds(1));
    clock.Advance(absl::Milliseconds(500));
  }
  AccountingSnapshot s = a.Snapshot();
  EXPECT_EQ(s.calls, 1);
  EXPECT_EQ(s.started_after_deadline, 0);
  EXPECT_EQ(s.work_after_deadline, absl::ZeroDuration());
  EXPECT_EQ(s.in_flight, 0);
}

TEST(DeadlineAccountingTest, WorkPastTheDeadlineCountsThePartAfterIt) {
  FakeClock clock;
  DeadlineAccounting a(&clock);
  auto w = a.Begin(clock.Now() + absl::Milliseconds(300));
  EXPECT_EQ(a.Snapshot().in_flight, 1);
  clock.Advance(absl::Milliseconds(1000));
  w.reset();
  EXPECT_EQ(a.Snapshot().work_after_deadline, absl::Milliseconds(700));
  EXPECT_EQ(a.Snapshot().last_end, clock.Now());
}

TEST(DeadlineAccountingTest, WorkStartedLateCountsWhollyAndAsLate) {
  FakeClock clock;
  DeadlineAccounting a(&clock);
  auto w = a.Begin(clock.Now() - absl::Milliseconds(10));
  EXPECT_TRUE(w->started_late());
  clock.Advance(absl::Milliseconds(200));
  w.reset();
  EXPECT_EQ(a.Snapshot().started_after_deadline, 1);
  EXPECT_EQ(a.Snapshot().work_after_deadline, absl::Milliseconds(200));
}

TEST(DeadlineAccountingTest, EndsWhenTheLastCopyGoes) {
  FakeClock clock;
  DeadlineAccounting a(&clock);
  auto w = a.Begin(clock.Now());
  auto shielded = w;  // e.g. shielded work outliving the handler
  clock.Advance(absl::Milliseconds(100));
  w.reset();
  EXPECT_EQ(a.Snapshot().in_flight, 1);
  clock.Advance(absl::Milliseconds(100));
  shielded.reset();
  EXPECT_EQ(a.Snapshot().work_after_deadline, absl::Milliseconds(200));
}

TEST(DeadlineAccountingTest, NoDeadlineNoAccounting) {
  FakeClock clock;
  DeadlineAccounting a(&clock);
  {
    auto w = a.Begin(absl::nullopt);
    clock.Advance(absl::Seconds(5));
  }
  EXPECT_EQ(a.Snapshot().work_after_deadline, absl::ZeroDuration());
  EXPECT_EQ(a.Snapshot().calls, 1);
}

TEST(DeadlineAccountingTest, ResetKeepsInFlight) {
  FakeClock clock;
  DeadlineAccounting a(&clock);
  auto w = a.Begin(clock.Now());
  { auto done = a.Begin(clock.Now()); }
  a.Reset();
  EXPECT_EQ(a.Snapshot().calls, 0);
  EXPECT_EQ(a.Snapshot().in_flight, 1);
  clock.Advance(absl::Milliseconds(50));
  w.reset();
  EXPECT_EQ(a.Snapshot().in_flight, 0);
  EXPECT_EQ(a.Snapshot().work_after_deadline, absl::Milliseconds(50));
}

TEST(DeadlineAccountingTest, AwaitIdleReturnsWhenTheLastWorkEnds) {
  DeadlineAccounting accounting;
  EXPECT_TRUE(accounting.AwaitIdle(absl::ZeroDuration()));
  auto work = accounting.Begin(absl::nullopt);
  EXPECT_FALSE(accounting.AwaitIdle(absl::Milliseconds(1)));  // held throughout
  std::thread ender([&work] { work.reset(); });
  EXPECT_TRUE(accounting.AwaitIdle(absl::Seconds(60)));
  ender.join();
  EXPECT_EQ(accounting.Snapshot().in_flight, 0);
}

}  // namespace
}  // namespace hopbudget::demo
