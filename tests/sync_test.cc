// Copyright hopbudget authors.
//
// interceptors/core/sync.h: the library's locks. In a normal build these are
// absl's types; in a TSan build (HOPBUDGET_TSAN) they are std::mutex-based
// and these tests check that they keep the absl semantics the library relies
// on (./scripts/test.sh --tsan runs them there).
#include "sync.h"

#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace hopbudget::internal {
namespace {

struct Shared {
  Mutex mu;
  CondVar cv;
  int value ABSL_GUARDED_BY(mu) = 0;
  bool flag ABSL_GUARDED_BY(mu) = false;
};

bool ValueIsThree(Shared* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) { return s->value == 3; }

TEST(SyncTest, AwaitWakesWhenAnotherThreadMakesTheConditionTrue) {
  Shared s;
  std::thread writer;
  {
    MutexLock lock(&s.mu);  // held before the writer starts: Await waits first
    writer = std::thread([&] {
      for (int i = 1; i <= 3; ++i) {
        MutexLock writer_lock(&s.mu);
        s.value = i;  // each unlock re-evaluates the waiter's condition
      }
    });
    s.mu.Await(Condition(&ValueIsThree, &s));
    EXPECT_EQ(s.value, 3);
  }
  writer.join();
}

TEST(SyncTest, AwaitOnABoolAndOnALambda) {
  Shared s;
  std::thread writer([&] {
    MutexLock lock(&s.mu);
    s.flag = true;
  });
  {
    MutexLock lock(&s.mu);
    s.mu.Await(Condition(&s.flag));
    auto set = [&s]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) { return s.flag; };
    EXPECT_TRUE(s.mu.AwaitWithTimeout(Condition(&set), absl::ZeroDuration()));
  }
  writer.join();
}

TEST(SyncTest, AwaitWithTimeoutReturnsTheConditionWhenTimeRunsOut) {
  Shared s;
  MutexLock lock(&s.mu);
  EXPECT_FALSE(s.mu.AwaitWithTimeout(Condition(&ValueIsThree, &s), absl::Milliseconds(5)));
  EXPECT_FALSE(
      s.mu.AwaitWithDeadline(Condition(&ValueIsThree, &s), absl::Now() - absl::Seconds(1)));
  s.value = 3;
  EXPECT_TRUE(s.mu.AwaitWithTimeout(Condition(&ValueIsThree, &s), absl::ZeroDuration()));
}

TEST(SyncTest, AwaitWakesWhenTheWriterWaitsOnACondVarInstead) {
  // The writer changes the state, then releases the lock by waiting on a
  // CondVar (not by Unlock): the waiter in Await must still re-check. The
  // waiter holds the lock before the writer starts, so it is waiting first.
  Shared s;
  std::thread writer;
  {
    MutexLock lock(&s.mu);
    writer = std::thread([&] {
      MutexLock writer_lock(&s.mu);
      s.value = 3;
      while (!s.flag) s.cv.Wait(&s.mu);
    });
    s.mu.Await(Condition(&ValueIsThree, &s));
    s.flag = true;
    s.cv.SignalAll();
  }
  writer.join();
}

TEST(SyncTest, CondVarWaitWithTimeoutSaysWhetherItTimedOut) {
  Shared s;
  MutexLock lock(&s.mu);
  EXPECT_TRUE(s.cv.WaitWithTimeout(&s.mu, absl::Milliseconds(1)));
  EXPECT_TRUE(s.cv.WaitWithDeadline(&s.mu, absl::Now() - absl::Seconds(1)));
}

TEST(SyncTest, CondVarSignalWakesAWaiter) {
  Shared s;
  std::thread signaller([&] {
    MutexLock lock(&s.mu);
    s.flag = true;
    s.cv.Signal();
  });
  {
    MutexLock lock(&s.mu);
    while (!s.flag) s.cv.Wait(&s.mu);
  }
  signaller.join();
}

TEST(SyncTest, NotificationPublishesWhatWasWrittenBeforeIt) {
  // Under TSan, this plain int read is a race unless Notify -> Wait is a
  // happens-before edge TSan can see (with absl's own Notification in a TSan
  // build over Debian's Abseil, it is reported).
  int payload = 0;
  Notification done;
  EXPECT_FALSE(done.HasBeenNotified());
  std::thread writer([&] {
    payload = 42;
    done.Notify();
  });
  done.WaitForNotification();
  EXPECT_EQ(payload, 42);
  EXPECT_TRUE(done.HasBeenNotified());
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::ZeroDuration()));
  writer.join();
}

TEST(SyncTest, NotificationWaitWithTimeoutGivesUp) {
  Notification never;
  EXPECT_FALSE(never.WaitForNotificationWithTimeout(absl::Milliseconds(1)));
  EXPECT_FALSE(never.WaitForNotificationWithDeadline(absl::Now() - absl::Seconds(1)));
}

TEST(SyncTest, ConstInitMutexLocks) {
  static Mutex mu(absl::kConstInit);
  MutexLock lock(&mu);
  mu.AssertHeld();
}

}  // namespace
}  // namespace hopbudget::internal
