// Copyright hopbudget authors.
//
// SlotQueue on a FakeClock: FIFO order, no barging, expiry while waiting,
// cancel while waiting, refusals, bad options.
#include "hopbudget/advanced/slots.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "hopbudget/advanced/clock.h"

namespace hopbudget {
namespace {

using ::testing::ElementsAre;

std::vector<uint64_t> Tickets(const std::vector<SlotWaiter>& ws) {
  std::vector<uint64_t> out;
  for (const SlotWaiter& w : ws) out.push_back(w.ticket);
  return out;
}

SlotQueue Queue(int capacity, size_t max_waiters = 1 << 20) {
  absl::StatusOr<SlotQueue> q = SlotQueue::Create({capacity, max_waiters});
  EXPECT_TRUE(q.ok()) << q.status();
  return *std::move(q);
}

TEST(SlotQueueTest, BadOptionsAreRefusedWithTheirValue) {
  absl::StatusOr<SlotQueue> q = SlotQueue::Create({0, 10});
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(q.status().message(), ::testing::HasSubstr("capacity must be >= 1, got 0"));
  q = SlotQueue::Create({-3, 10});
  EXPECT_THAT(q.status().message(), ::testing::HasSubstr("got -3"));
  q = SlotQueue::Create({1, 0});
  EXPECT_THAT(q.status().message(), ::testing::HasSubstr("max_waiters"));
}

TEST(SlotQueueTest, GrantsUpToCapacityThenQueuesAndServesInArrivalOrder) {
  FakeClock clock;
  SlotQueue q = Queue(2);
  const absl::Time far = clock.Now() + absl::Seconds(10);
  EXPECT_EQ(q.Acquire(clock.Now(), far).outcome, SlotOutcome::kGranted);
  EXPECT_EQ(q.Acquire(clock.Now(), far).outcome, SlotOutcome::kGranted);
  const SlotRequest a = q.Acquire(clock.Now(), far);
  clock.Advance(absl::Milliseconds(1));
  const SlotRequest b = q.Acquire(clock.Now(), far);
  ASSERT_EQ(a.outcome, SlotOutcome::kQueued);
  ASSERT_EQ(b.outcome, SlotOutcome::kQueued);
  EXPECT_EQ(q.waiting(), 2u);
  clock.Advance(absl::Milliseconds(9));
  SlotHandoff h = q.Release(clock.Now());
  ASSERT_TRUE(h.granted.has_value());
  EXPECT_EQ(h.granted->ticket, a.ticket);
  EXPECT_EQ(h.granted->waited, absl::Milliseconds(10));  // queue wait measured
  EXPECT_EQ(q.in_use(), 2);                              // the slot changed hands
  h = q.Release(clock.Now());
  EXPECT_EQ(h.granted->ticket, b.ticket);
  EXPECT_EQ(h.granted->waited, absl::Milliseconds(9));
  EXPECT_FALSE(q.Release(clock.Now()).granted.has_value());
  EXPECT_EQ(q.in_use(), 1);
}

TEST(SlotQueueTest, AFreedSlotGoesToTheWaiterNotToANewcomer) {
  FakeClock clock;
  SlotQueue q = Queue(1);
  const absl::Time far = clock.Now() + absl::Seconds(10);
  ASSERT_EQ(q.Acquire(clock.Now(), far).outcome, SlotOutcome::kGranted);
  const SlotRequest waiter = q.Acquire(clock.Now(), far);
  ASSERT_EQ(waiter.outcome, SlotOutcome::kQueued);
  EXPECT_EQ(q.Release(clock.Now()).granted->ticket, waiter.ticket);
  // The newcomer finds the slot taken by the waiter.
  EXPECT_EQ(q.Acquire(clock.Now(), far).outcome, SlotOutcome::kQueued);
}

TEST(SlotQueueTest, WaitersExpireAtTheirGiveUpTimeInExpiryOrder) {
  FakeClock clock;
  SlotQueue q = Queue(1);
  const absl::Time t0 = clock.Now();
  ASSERT_EQ(q.Acquire(t0, t0 + absl::Seconds(1)).outcome, SlotOutcome::kGranted);
  const SlotRequest late = q.Acquire(t0, t0 + absl::Milliseconds(300));
  const SlotRequest early = q.Acquire(t0, t0 + absl::Milliseconds(100));
  EXPECT_EQ(q.NextExpiry(), t0 + absl::Milliseconds(100));
  clock.Advance(absl::Milliseconds(99));
  EXPECT_TRUE(q.Expire(clock.Now()).empty());
  clock.Advance(absl::Milliseconds(1));  // exactly at the give-up time
  std::vector<SlotWaiter> expired = q.Expire(clock.Now());
  EXPECT_THAT(Tickets(expired), ElementsAre(early.ticket));
  EXPECT_EQ(expired[0].waited, absl::Milliseconds(100));
  EXPECT_EQ(q.NextExpiry(), t0 + absl::Milliseconds(300));
  clock.Advance(absl::Seconds(1));
  EXPECT_THAT(Tickets(q.Expire(clock.Now())), ElementsAre(late.ticket));
  EXPECT_EQ(q.NextExpiry(), absl::InfiniteFuture());
  EXPECT_EQ(q.in_use(), 1);  // expiry never touches the slots in use
}

TEST(SlotQueueTest, ReleasePassesOverWaitersWhoseTimeCameAndReportsThem) {
  FakeClock clock;
  SlotQueue q = Queue(1);
  const absl::Time t0 = clock.Now();
  ASSERT_EQ(q.Acquire(t0, absl::InfiniteFuture()).outcome, SlotOutcome::kGranted);
  const SlotRequest first = q.Acquire(t0, t0 + absl::Milliseconds(50));
  const SlotRequest second = q.Acquire(t0, t0 + absl::Seconds(5));
  clock.Advance(absl::Milliseconds(60));  // no timer ran Expire in between
  const SlotHandoff h = q.Release(clock.Now());
  EXPECT_THAT(Tickets(h.expired), ElementsAre(first.ticket));
  ASSERT_TRUE(h.granted.has_value());
  EXPECT_EQ(h.granted->ticket, second.ticket);
}

TEST(SlotQueueTest, ReleaseWithOnlyExpiredWaitersFreesTheSlot) {
  FakeClock clock;
  SlotQueue q = Queue(1);
  const absl::Time t0 = clock.Now();
  ASSERT_EQ(q.Acquire(t0, absl::InfiniteFuture()).outcome, SlotOutcome::kGranted);
  q.Acquire(t0, t0 + absl::Milliseconds(5));
  clock.Advance(absl::Milliseconds(5));
  const SlotHandoff h = q.Release(clock.Now());
  EXPECT_EQ(h.expired.size(), 1u);
  EXPECT_FALSE(h.granted.has_value());
  EXPECT_EQ(q.in_use(), 0);
}

TEST(SlotQueueTest, CancelWhileWaitingRemovesTheWaiterOnce) {
  FakeClock clock;
  SlotQueue q = Queue(1);
  const absl::Time far = clock.Now() + absl::Seconds(1);
  ASSERT_EQ(q.Acquire(clock.Now(), far).outcome, SlotOutcome::kGranted);
  const SlotRequest a = q.Acquire(clock.Now(), far);
  const SlotRequest b = q.Acquire(clock.Now(), far);
  EXPECT_TRUE(q.Cancel(a.ticket));
  EXPECT_FALSE(q.Cancel(a.ticket));
  EXPECT_FALSE(q.Cancel(12345));
  EXPECT_EQ(q.Release(clock.Now()).granted->ticket, b.ticket);
  clock.Advance(absl::Seconds(2));
  EXPECT_TRUE(q.Expire(clock.Now()).empty());  // the cancelled one is not reported again
}

TEST(SlotQueueTest, RefusesAtOnceWhenNoTimeToWaitOrTheQueueIsFull) {
  FakeClock clock;
  SlotQueue q = Queue(1, /*max_waiters=*/1);
  const absl::Time now = clock.Now();
  ASSERT_EQ(q.Acquire(now, now).outcome, SlotOutcome::kGranted);  // a free slot is granted
  SlotRequest r = q.Acquire(now, now);
  EXPECT_EQ(r.outcome, SlotOutcome::kRefused);
  EXPECT_EQ(r.refusal, SlotRefusal::kNoTimeToWait);
  r = q.Acquire(now, now - absl::Milliseconds(1));
  EXPECT_EQ(r.refusal, SlotRefusal::kNoTimeToWait);
  ASSERT_EQ(q.Acquire(now, now + absl::Seconds(1)).outcome, SlotOutcome::kQueued);
  r = q.Acquire(now, now + absl::Seconds(1));
  EXPECT_EQ(r.outcome, SlotOutcome::kRefused);
  EXPECT_EQ(r.refusal, SlotRefusal::kQueueFull);
}

TEST(SlotQueueTest, GiveUpTimeKeepsMinAttemptBudgetAndInfinity) {
  const absl::Time t = absl::FromUnixSeconds(100);
  EXPECT_EQ(GiveUpTime(t, absl::Milliseconds(3)), t - absl::Milliseconds(3));
  EXPECT_EQ(GiveUpTime(absl::InfiniteFuture(), absl::Milliseconds(3)), absl::InfiniteFuture());
}

TEST(SlotQueueTest, StrayReleaseIsIgnored) {
  FakeClock clock;
  SlotQueue q = Queue(1);
  EXPECT_FALSE(q.Release(clock.Now()).granted.has_value());
  EXPECT_EQ(q.in_use(), 0);
}

// Test failures name the value, not its integer.
TEST(SlotNamesTest, OutcomesAndRefusalsPrintByName) {
  EXPECT_EQ(::testing::PrintToString(SlotOutcome::kQueued), "queued");
  EXPECT_EQ(::testing::PrintToString(SlotRefusal::kNoTimeToWait), "no_time_to_wait");
}

}  // namespace
}  // namespace hopbudget
