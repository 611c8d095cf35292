// Copyright hopbudget authors.
//
// The conversions of grpc_glue.h that are not the source tag's (that is
// source_tag_test.cc): a context's deadline, on whichever clock gRPC keeps
// it, in the terms of the caller's clock.
#include "grpc_glue.h"

#include <grpc/support/time.h>
#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace hopbudget {
namespace internal {
namespace {

TEST(DeadlineOfTest, RealtimeDeadlineConvertsExactly) {
  const gpr_timespec raw = {1700000000, 123456789, GPR_CLOCK_REALTIME};
  // `now` plays no part: the deadline is already on the realtime clock.
  EXPECT_EQ(DeadlineOf(raw, absl::UnixEpoch()),
            absl::FromUnixSeconds(1700000000) + absl::Nanoseconds(123456789));
}

TEST(DeadlineOfTest, InfiniteAndPastInfiniteOnEitherClock) {
  for (gpr_clock_type clock : {GPR_CLOCK_REALTIME, GPR_CLOCK_MONOTONIC}) {
    SCOPED_TRACE(clock);
    EXPECT_EQ(DeadlineOf(gpr_inf_future(clock), absl::Now()), absl::InfiniteFuture());
    EXPECT_EQ(DeadlineOf(gpr_inf_past(clock), absl::Now()), absl::InfinitePast());
  }
}

// A monotonic deadline is what remains of it, counted from the caller's
// `now`, whatever that clock reads (a fake one in tests).
TEST(DeadlineOfTest, MonotonicDeadlineIsWhatRemainsFromNow) {
  const absl::Time now = absl::FromUnixSeconds(1000);  // a fake clock's reading
  const gpr_timespec raw =
      gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(5000, GPR_TIMESPAN));
  const absl::Time deadline = DeadlineOf(raw, now);
  // Between the two monotonic reads only this test's own instructions run:
  // what remains is 5 s less that, never more than 5 s.
  EXPECT_LE(deadline, now + absl::Seconds(5));
  EXPECT_GT(deadline, now + absl::Seconds(4));
}

TEST(DeadlineOfTest, ExpiredMonotonicDeadlineIsInThePastOfNow) {
  const absl::Time now = absl::FromUnixSeconds(1000);
  const gpr_timespec raw =
      gpr_time_sub(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(250, GPR_TIMESPAN));
  const absl::Time deadline = DeadlineOf(raw, now);
  EXPECT_LE(deadline, now - absl::Milliseconds(250));
  EXPECT_GT(deadline, now - absl::Seconds(1));
}

// Beyond what int64 nanoseconds hold (285 years), as a grpc-timeout of
// 99 999 999 hours sets it: still the deadline, not an overflow.
TEST(DeadlineOfTest, MonotonicDeadlineCenturiesAwayDoesNotOverflow) {
  const absl::Time now = absl::FromUnixSeconds(1000);
  for (int64_t hours : {int64_t{24 * 365 * 200}, int64_t{24 * 365 * 300}, int64_t{99999999}}) {
    SCOPED_TRACE(hours);
    const gpr_timespec raw =
        gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_hours(hours, GPR_TIMESPAN));
    const absl::Time deadline = DeadlineOf(raw, now);
    EXPECT_LE(deadline, now + absl::Hours(hours));
    EXPECT_GT(deadline, now + absl::Hours(hours) - absl::Seconds(1));
  }
}

}  // namespace
}  // namespace internal
}  // namespace hopbudget
