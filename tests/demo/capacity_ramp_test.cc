// Copyright hopbudget authors.
#include "capacity_ramp.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hopbudget::chainctl {
namespace {

using ::testing::ElementsAreArray;

// A chain that serves everything up to `capacity` calls/s and that share of
// what it is offered above it; the rates the ramp tried, in order.
struct Chain {
  double capacity;
  std::vector<int64_t> tried;
  absl::StatusOr<double> operator()(int64_t rps) {
    tried.push_back(rps);
    return rps <= capacity ? 1.0 : capacity / rps;
  }
};

TEST(CapacityRampTest, DoublesThenBisectsTwiceBetweenWhatHeldAndWhatFellShort) {
  const struct {
    double capacity;
    int64_t start, max, want;
    std::vector<int64_t> tried;
  } kCases[] = {
      // 3 200 holds at 94 %, 6 400 falls short; 4 800 and 4 000 fall short.
      {3000, 400, 51200, 3200, {400, 800, 1600, 3200, 6400, 4800, 4000}},
      // 3 200 falls short at 87.5 %; 2 400 and 2 800 hold.
      {2800, 400, 51200, 2800, {400, 800, 1600, 3200, 2400, 2800}},
      {1000, 400, 51200, 1000, {400, 800, 1600, 1200, 1000}},
      // Even the first step falls short: half of it.
      {100, 400, 51200, 200, {400}},
      // Every step up to max holds: the last one tried.
      {1e9, 50, 400, 400, {50, 100, 200, 400}},
  };
  for (const auto& c : kCases) {
    Chain chain{c.capacity, {}};
    absl::StatusOr<int64_t> capacity =
        CapacityRamp(c.start, c.max, [&chain](int64_t rps) { return chain(rps); });
    ASSERT_TRUE(capacity.ok()) << capacity.status();
    EXPECT_EQ(*capacity, c.want) << c.capacity;
    EXPECT_THAT(chain.tried, ElementsAreArray(c.tried)) << c.capacity;
  }
}

TEST(CapacityRampTest, AStepThatFailsEndsTheRampWithItsError) {
  int calls = 0;
  absl::StatusOr<int64_t> capacity =
      CapacityRamp(400, 51200, [&calls](int64_t rps) -> absl::StatusOr<double> {
        ++calls;
        if (rps == 1600) return absl::InternalError("h2_load failed");
        return 1.0;
      });
  EXPECT_EQ(capacity.status(), absl::InternalError("h2_load failed"));
  EXPECT_EQ(calls, 3);
}

}  // namespace
}  // namespace hopbudget::chainctl
