// Copyright hopbudget authors.
#include "timer_service.h"

#include <gtest/gtest.h>

#include <vector>

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

}  // namespace
}  // namespace internal
}  // namespace hopbudget
