// Copyright hopbudget authors.
//
// eventually.h: the tests' one bounded wait for a condition. Asks `pred`
// every `poll` until it holds or `max` has passed; returns its last answer.
// A real wait, but bounded and without a tolerance window: a regression
// fails the test after `max` instead of hanging it to ctest's timeout.
//
//   EXPECT_TRUE(testing::Eventually([&] { return slots->in_flight() == 0; }));
#ifndef HOPBUDGET_TESTS_EVENTUALLY_H_
#define HOPBUDGET_TESTS_EVENTUALLY_H_

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace hopbudget::testing {

template <typename Pred>
bool Eventually(Pred pred, absl::Duration max = absl::Seconds(20),
                absl::Duration poll = absl::Milliseconds(5)) {
  const absl::Time end = absl::Now() + max;
  while (absl::Now() < end) {
    if (pred()) return true;
    absl::SleepFor(poll);
  }
  return pred();
}

}  // namespace hopbudget::testing

#endif  // HOPBUDGET_TESTS_EVENTUALLY_H_
