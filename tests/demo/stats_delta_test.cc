// Copyright hopbudget authors.
#include "stats_delta.h"

#include "gtest/gtest.h"

namespace hopbudget::chainctl {
namespace {

// A service's Admin that answers `first` for its first `times` reads, then
// its stats; counts the reads.
struct Admin {
  absl::Status first;
  int times = 0;
  int reads = 0;
  absl::StatusOr<demo::Stats> operator()() {
    if (reads++ < times) return first;
    demo::Stats stats;
    stats.set_hop("gateway");
    stats.set_calls(7);
    return stats;
  }
};

TEST(StatsAfterRunTest, AsksAgainWhileTheServersThreadsAreAllBusy) {
  Admin admin{absl::ResourceExhaustedError("Server Threadpool Exhausted"), 3};
  absl::StatusOr<demo::Stats> s =
      StatsAfterRun([&admin] { return admin(); }, absl::Seconds(30), absl::ZeroDuration());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->calls(), 7);
  EXPECT_EQ(admin.reads, 4);
}

TEST(StatsAfterRunTest, AnyOtherErrorIsReturnedAtOnce) {
  Admin admin{absl::UnavailableError("connection refused"), 3};
  absl::StatusOr<demo::Stats> s =
      StatsAfterRun([&admin] { return admin(); }, absl::Seconds(30), absl::ZeroDuration());
  EXPECT_EQ(s.status(), absl::UnavailableError("connection refused"));
  EXPECT_EQ(admin.reads, 1);
}

TEST(StatsAfterRunTest, PastItsBoundTheLastExhaustedAnswerIsReturned) {
  Admin admin{absl::ResourceExhaustedError("Server Threadpool Exhausted"), 1000};
  absl::StatusOr<demo::Stats> s =
      StatsAfterRun([&admin] { return admin(); }, absl::ZeroDuration(), absl::ZeroDuration());
  EXPECT_EQ(s.status(), absl::ResourceExhaustedError("Server Threadpool Exhausted"));
  EXPECT_EQ(admin.reads, 1);
}

TEST(StatsDeltaTest, AfterMinusBeforeWithTheHopOfAfter) {
  demo::Stats before, after;
  before.set_calls(10);
  before.set_refused(2);
  after.set_hop("orders");
  after.set_calls(25);
  after.set_refused(5);
  const ServiceDelta d = StatsDelta(before, after);
  EXPECT_EQ(d.hop, "orders");
  EXPECT_EQ(d.calls, 15);
  EXPECT_EQ(d.refused, 3);
}

}  // namespace
}  // namespace hopbudget::chainctl
