// Copyright hopbudget authors.
#include "hopbudget/advanced/deadline_source.h"

#include <gtest/gtest.h>

namespace hopbudget {
namespace {

TEST(DeadlineSourceTest, NamesAndReasonsRoundTripForEverySource) {
  for (int i = 0; i < kDeadlineSourceCount; ++i) {
    const auto s = static_cast<DeadlineSource>(i);
    EXPECT_EQ(ParseDeadlineSource(DeadlineSourceName(s)), s);
    if (s != DeadlineSource::kNone) {
      EXPECT_EQ(DeadlineSourceFromReason(DeadlineSourceReason(s)), s);
    }
  }
}

TEST(DeadlineSourceTest, WireNamesAreStable) {
  EXPECT_EQ(DeadlineSourceName(DeadlineSource::kExhaustedBeforeCall), "exhausted-before-call");
  EXPECT_EQ(DeadlineSourceName(DeadlineSource::kArrivedExpired), "arrived-expired");
  EXPECT_EQ(DeadlineSourceReason(DeadlineSource::kAttempt), "ATTEMPT_BUDGET_EXHAUSTED");
  EXPECT_EQ(DeadlineSourceName(DeadlineSource::kSlotWait), "slot-wait");
  EXPECT_EQ(DeadlineSourceReason(DeadlineSource::kSlotWait), "SLOT_WAIT_EXHAUSTED");
}

TEST(DeadlineSourceTest, UnknownInputsGiveNullopt) {
  EXPECT_FALSE(ParseDeadlineSource("Attempt").has_value());
  EXPECT_FALSE(DeadlineSourceFromReason("").has_value());
  EXPECT_FALSE(DeadlineSourceFromReason("attempt").has_value());
}

TEST(DeadlineSourceTest, OutOfRangeValueIsNamedNone) {
  EXPECT_EQ(DeadlineSourceName(static_cast<DeadlineSource>(200)), "none");
  EXPECT_EQ(DeadlineSourceReason(static_cast<DeadlineSource>(200)), "");
}

}  // namespace
}  // namespace hopbudget

namespace hopbudget {
namespace {

// Test failures and logs print the names, not the enum values.
TEST(DeadlineSourcePrintTest, PrintsItsName) {
  EXPECT_EQ(::testing::PrintToString(DeadlineSource::kAttempt), "attempt");
  EXPECT_EQ(::testing::PrintToString(DeadlineSource::kArrivedExpired), "arrived-expired");
}

}  // namespace
}  // namespace hopbudget
