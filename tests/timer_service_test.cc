// Copyright hopbudget authors.
#include "timer_service.h"

#include <gtest/gtest.h>

#include <vector>

#include "eventually.h"
#include "sync.h"

namespace hopbudget {
namespace internal {
namespace {

class TimerServiceTest : public ::testing::Test {
 protected:
  FakeClock clock_;
  TimerService timers_{clock_, TimerService::Options{/*start_thread=*/false}};
};

TEST_F(TimerServiceTest, RunsNothingBeforeItsTime) {
  int ran = 0;
  timers_.Schedule(clock_.Now() + absl::Milliseconds(10), [&ran] { ++ran; });
  clock_.Advance(absl::Milliseconds(9));
  EXPECT_EQ(timers_.RunDue(), 0);
  clock_.Advance(absl::Milliseconds(1));
  EXPECT_EQ(timers_.RunDue(), 1);
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(timers_.pending(), 0u);
}

TEST_F(TimerServiceTest, RunsInDeadlineOrderThenIdOrder) {
  std::vector<int> order;
  const absl::Time t = clock_.Now() + absl::Milliseconds(5);
  timers_.Schedule(t + absl::Milliseconds(1), [&order] { order.push_back(3); });
  timers_.Schedule(t, [&order] { order.push_back(1); });
  timers_.Schedule(t, [&order] { order.push_back(2); });
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(timers_.RunDue(), 3);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

TEST_F(TimerServiceTest, PastDeadlineRunsAtOnce) {
  int ran = 0;
  timers_.Schedule(clock_.Now() - absl::Seconds(1), [&ran] { ++ran; });
  EXPECT_EQ(timers_.RunDue(), 1);
  EXPECT_EQ(ran, 1);
}

TEST_F(TimerServiceTest, InfiniteDeadlineNeverRunsAndIsNotQueued) {
  TimerService::TimerId id = timers_.Schedule(absl::InfiniteFuture(), [] { FAIL(); });
  EXPECT_NE(id, 0u);
  EXPECT_EQ(timers_.pending(), 0u);
  clock_.Advance(absl::Hours(1000));
  EXPECT_EQ(timers_.RunDue(), 0);
}

TEST_F(TimerServiceTest, CancelledTimerNeverRuns) {
  TimerService::TimerId id = timers_.Schedule(clock_.Now() + absl::Milliseconds(1), [] { FAIL(); });
  EXPECT_EQ(timers_.Cancel(id), TimerService::CancelOutcome::kCancelled);
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(timers_.RunDue(), 0);
}

TEST_F(TimerServiceTest, CancelAfterRunIsTooLate) {
  TimerService::TimerId id = timers_.Schedule(clock_.Now(), [] {});
  timers_.RunDue();
  EXPECT_EQ(timers_.Cancel(id), TimerService::CancelOutcome::kTooLate);
}

TEST_F(TimerServiceTest, CallbackMayScheduleAndCancelItself) {
  int ran = 0;
  TimerService::TimerId self = 0;
  self = timers_.Schedule(clock_.Now(), [&] {
    ++ran;
    EXPECT_EQ(timers_.Cancel(self), TimerService::CancelOutcome::kTooLate);  // no deadlock
    timers_.Schedule(clock_.Now(), [&ran] { ++ran; });
  });
  EXPECT_EQ(timers_.RunDue(), 2);
  EXPECT_EQ(ran, 2);
}

TEST_F(TimerServiceTest, SlackDoesNotDelayATimerPastItsTimeWhenAsked) {
  int ran = 0;
  timers_.Schedule(clock_.Now() + absl::Milliseconds(10), absl::Seconds(5), [&ran] { ++ran; });
  clock_.Advance(absl::Milliseconds(9));
  EXPECT_EQ(timers_.RunDue(), 0);  // never before its time
  clock_.Advance(absl::Milliseconds(1));
  EXPECT_EQ(timers_.RunDue(), 1);
  EXPECT_EQ(ran, 1);
}

TEST_F(TimerServiceTest, WithoutAThreadNothingIsWoken) {
  timers_.Schedule(clock_.Now() + absl::Milliseconds(10), [] {});
  EXPECT_EQ(timers_.wakeups(), 0u);
  EXPECT_EQ(timers_.next_wake(), absl::InfinitePast());
}

TEST(TimerServiceThreadTest, ThreadRunsDueTimersOnTheRealClock) {
  TimerService timers(Clock::Real());
  hopbudget::internal::Notification done;
  timers.Schedule(Clock::Real().Now() + absl::Milliseconds(1), [&done] { done.Notify(); });
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
}

TEST(TimerServiceThreadTest, CancelWaitsForARunningCallback) {
  TimerService timers(Clock::Real());
  hopbudget::internal::Notification started, release;
  bool finished = false;
  TimerService::TimerId id = timers.Schedule(Clock::Real().Now(), [&] {
    started.Notify();
    release.WaitForNotification();
    finished = true;
  });
  started.WaitForNotification();
  std::thread releaser([&release] { release.Notify(); });
  EXPECT_EQ(timers.Cancel(id), TimerService::CancelOutcome::kTooLate);
  EXPECT_TRUE(finished);  // Cancel returned only after the callback did
  releaser.join();
}

// The thread sleeps until `far`; timers whose slack reaches past that are
// queued without waking it, a precise one earlier than that wakes it once.
TEST(TimerServiceThreadTest, OnlyATimerThatCannotWaitForTheNextWakeWakesTheThread) {
  TimerService timers(Clock::Real());
  const absl::Time far = Clock::Real().Now() + absl::Minutes(10);
  timers.Schedule(far, [] {});
  ASSERT_TRUE(hopbudget::testing::Eventually([&] { return timers.next_wake() == far; }));
  const uint64_t before = timers.wakeups();
  for (int i = 0; i < 100; ++i) {
    timers.Schedule(Clock::Real().Now() + absl::Minutes(1), absl::Minutes(20), [] {});
  }
  EXPECT_EQ(timers.wakeups(), before);
  EXPECT_EQ(timers.next_wake(), far);

  hopbudget::internal::Notification ran;
  timers.Schedule(Clock::Real().Now(), [&ran] { ran.Notify(); });
  EXPECT_EQ(timers.wakeups(), before + 1);
  EXPECT_TRUE(ran.WaitForNotificationWithTimeout(absl::Seconds(30)));
}

// A slack timer behind the thread's next wake-up still runs: at that wake.
TEST(TimerServiceThreadTest, ASlackTimerRunsAtTheThreadsNextWake) {
  TimerService timers(Clock::Real());
  hopbudget::internal::Notification first, second;
  const absl::Time soon = Clock::Real().Now() + absl::Milliseconds(50);
  timers.Schedule(soon, [&first] { first.Notify(); });
  ASSERT_TRUE(hopbudget::testing::Eventually(
      [&] { return timers.next_wake() == soon || first.HasBeenNotified(); }));
  timers.Schedule(Clock::Real().Now() + absl::Milliseconds(1), absl::Hours(1),
                  [&second] { second.Notify(); });
  EXPECT_TRUE(second.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_TRUE(first.WaitForNotificationWithTimeout(absl::Seconds(30)));
}

// After its front was cancelled the thread still wakes at the old time; a
// timer behind that needs no signal and runs all the same.
TEST(TimerServiceThreadTest, ATimerBehindACancelledFrontRunsWithoutAWake) {
  TimerService timers(Clock::Real());
  // Far enough that a stalled machine does not run it before the Cancel().
  const absl::Time front = Clock::Real().Now() + absl::Seconds(1);
  const TimerService::TimerId id = timers.Schedule(front, [] {});
  ASSERT_TRUE(hopbudget::testing::Eventually([&] { return timers.next_wake() == front; }));
  EXPECT_EQ(timers.Cancel(id), TimerService::CancelOutcome::kCancelled);
  const uint64_t before = timers.wakeups();
  hopbudget::internal::Notification ran;
  timers.Schedule(front + absl::Milliseconds(10), [&ran] { ran.Notify(); });
  EXPECT_EQ(timers.wakeups(), before);
  EXPECT_TRUE(ran.WaitForNotificationWithTimeout(absl::Seconds(30)));
}

}  // namespace
}  // namespace internal
}  // namespace hopbudget
