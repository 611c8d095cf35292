// Copyright hopbudget authors.
#include "transit.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace hopbudget {
namespace internal {
namespace {

using absl::Milliseconds;
using absl::Seconds;

constexpr absl::Duration kWindow = absl::Seconds(30);
const absl::Time kT0 = absl::UnixEpoch() + absl::Hours(24);

// One sample after another, each at its time: the delay it is given.
struct Sample {
  absl::Duration at;       // since kT0
  absl::Duration one_way;  // arrival - sent, offset between the clocks included
  absl::Duration want;     // its transit delay
};

TEST(TransitDelayTest, TableOfOneSendersSamples) {
  const struct {
    const char* name;
    std::vector<Sample> samples;
  } rows[] = {
      {"the first call has no base: 0", {{Seconds(0), Seconds(3600), absl::ZeroDuration()}}},
      {"a clock an hour ahead: only the wait beyond the fastest counts",
       {{Seconds(0), Seconds(-3600) + Milliseconds(1), absl::ZeroDuration()},
        {Seconds(1), Seconds(-3600) + Milliseconds(401), Milliseconds(400)},
        {Seconds(2), Seconds(-3600) + Milliseconds(1), absl::ZeroDuration()}}},
      {"a faster call lowers the base at once",
       {{Seconds(0), Milliseconds(5), absl::ZeroDuration()},
        {Seconds(1), Milliseconds(2), absl::ZeroDuration()},
        {Seconds(2), Milliseconds(12), Milliseconds(10)}}},
      {"the window before still counts",
       {{Seconds(0), Milliseconds(2), absl::ZeroDuration()},
        {Seconds(31), Milliseconds(300), Milliseconds(298)},
        {Seconds(40), Milliseconds(300), Milliseconds(298)}}},
      {"two windows on, the old base is forgotten (a drifted clock, a standing queue)",
       {{Seconds(0), Milliseconds(2), absl::ZeroDuration()},
        {Seconds(31), Milliseconds(300), Milliseconds(298)},
        {Seconds(62), Milliseconds(300), absl::ZeroDuration()}}},
      {"a sender silent for two windows starts afresh",
       {{Seconds(0), Milliseconds(2), absl::ZeroDuration()},
        {Seconds(60), Milliseconds(300), absl::ZeroDuration()},
        {Seconds(61), Milliseconds(305), Milliseconds(5)}}},
  };
  for (const auto& row : rows) {
    auto table = TransitDelays::Create({kWindow, 16});
    ASSERT_TRUE(table.ok());
    for (const Sample& s : row.samples) {
      const absl::Time arrival = kT0 + s.at;
      EXPECT_EQ((*table)->Observe(SentStamp{7, arrival - s.one_way}, arrival), s.want)
          << row.name << ", sample at " << s.at;
    }
  }
}

TEST(TransitDelayTest, SendersKeepTheirOwnBases) {
  auto table = *TransitDelays::Create({kWindow, 16});
  // Clock 1 is an hour behind this hop's, clock 2 an hour ahead.
  EXPECT_EQ(table->Observe({1, kT0 - Seconds(3600)}, kT0), absl::ZeroDuration());
  EXPECT_EQ(table->Observe({2, kT0 + Seconds(3600)}, kT0), absl::ZeroDuration());
  const absl::Time later = kT0 + Seconds(1);
  EXPECT_EQ(table->Observe({1, later - Seconds(3600) - Milliseconds(250)}, later),
            Milliseconds(250));
  EXPECT_EQ(table->Observe({2, later + Seconds(3600)}, later), absl::ZeroDuration());
}

TEST(TransitDelayTest, ClockIdZeroIsNotTracked) {
  auto table = *TransitDelays::Create({kWindow, 16});
  EXPECT_EQ(table->Observe({0, kT0}, kT0), absl::ZeroDuration());
  EXPECT_EQ(table->Observe({0, kT0}, kT0 + Seconds(5)), absl::ZeroDuration());
}

TEST(TransitDelayTest, AFullTableTracksNoNewcomerUntilASlotGoesQuiet) {
  auto table = *TransitDelays::Create({kWindow, 1});
  EXPECT_EQ(table->Observe({1, kT0}, kT0), absl::ZeroDuration());
  // Clock 2 finds the one slot taken: not tracked, however late its calls.
  EXPECT_EQ(table->Observe({2, kT0}, kT0 + Milliseconds(1)), absl::ZeroDuration());
  EXPECT_EQ(table->Observe({2, kT0}, kT0 + Seconds(2)), absl::ZeroDuration());
  // Clock 1 keeps its base.
  EXPECT_EQ(table->Observe({1, kT0}, kT0 + Seconds(3)), Seconds(3));
  // Two windows after clock 1 was last heard, clock 2 takes the slot.
  const absl::Time quiet = kT0 + Seconds(3) + 2 * kWindow;
  EXPECT_EQ(table->Observe({2, quiet}, quiet), absl::ZeroDuration());
  EXPECT_EQ(table->Observe({2, quiet}, quiet + Milliseconds(40)), Milliseconds(40));
}

TEST(TransitDelayTest, BadOptionsAreRefusedByName) {
  auto zero = TransitDelays::Create({absl::ZeroDuration(), 16});
  EXPECT_EQ(zero.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(zero.status().message(), "transit window must be > 0, got 0");
  auto none = TransitDelays::Create({kWindow, 0});
  EXPECT_EQ(none.status().message(), "transit slots must be in 1..65536, got 0");
  auto many = TransitDelays::Create({kWindow, 65537});
  EXPECT_EQ(many.status().message(), "transit slots must be in 1..65536, got 65537");
}

TEST(NextBaseDelayTest, AWindowEndsAfterItsLengthAndTheOneBeforeIsKept) {
  BaseDelay b;
  b = NextBaseDelay(b, Milliseconds(9), kT0, kWindow);
  EXPECT_EQ(b.current, Milliseconds(9));
  EXPECT_EQ(b.previous, absl::InfiniteDuration());
  b = NextBaseDelay(b, Milliseconds(4), kT0 + kWindow - absl::Nanoseconds(1), kWindow);
  EXPECT_EQ(b.current, Milliseconds(4));
  b = NextBaseDelay(b, Milliseconds(20), kT0 + kWindow, kWindow);
  EXPECT_EQ(b.previous, Milliseconds(4));
  EXPECT_EQ(b.current, Milliseconds(20));
  EXPECT_EQ(b.window_start, kT0 + kWindow);
  EXPECT_EQ(TransitDelayOf(b, Milliseconds(20)), Milliseconds(16));
  EXPECT_EQ(TransitDelayOf(BaseDelay{}, Milliseconds(20)), absl::ZeroDuration());
}

TEST(TransitDelayTest, ConcurrentSendersAndReadersAgreeOnTheirBases) {
  auto table = *TransitDelays::Create({kWindow, 64});
  std::vector<std::thread> threads;
  for (uint64_t id = 1; id <= 4; ++id) {
    threads.emplace_back([&table, id] {
      // Each sender's first call sets its base; every later one waited 7 ms.
      table->Observe({id, kT0}, kT0 + Milliseconds(id));
      for (int i = 1; i <= 2000; ++i) {
        const absl::Time sent = kT0 + Milliseconds(i);
        ASSERT_EQ(table->Observe({id, sent}, sent + Milliseconds(id + 7)), Milliseconds(7));
      }
    });
  }
  for (std::thread& t : threads) t.join();
}

TEST(ProcessClockIdTest, IsNeverZeroAndNeverChanges) {
  EXPECT_NE(ProcessClockId(), 0u);
  EXPECT_EQ(ProcessClockId(), ProcessClockId());
}

}  // namespace
}  // namespace internal
}  // namespace hopbudget
