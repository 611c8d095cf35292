// Copyright hopbudget authors.
//
// stepped_clock.h: the real clock, except that a test can step its wall
// time (Now()) as NTP or a resumed virtual machine steps the system's,
// while its steady time (Steady()) runs on untouched, as CLOCK_MONOTONIC
// does. gRPC keeps measuring a started call's deadline on its own monotonic
// clock: a step must not end early what gRPC would still let run.
#ifndef HOPBUDGET_TESTS_STEPPED_CLOCK_H_
#define HOPBUDGET_TESTS_STEPPED_CLOCK_H_

#include <atomic>
#include <cstdint>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "hopbudget/advanced/clock.h"

namespace hopbudget {
namespace testing {

class SteppedClock final : public Clock {
 public:
  absl::Time Now() const override {
    return absl::Now() + absl::Nanoseconds(offset_ns_.load(std::memory_order_acquire));
  }
  absl::Time Steady() const override { return Clock::Real().Steady(); }
  // Moves the wall time by `d`, forward or back, at once.
  void Step(absl::Duration d) {
    offset_ns_.fetch_add(absl::ToInt64Nanoseconds(d), std::memory_order_acq_rel);
  }

 private:
  std::atomic<int64_t> offset_ns_{0};
};

}  // namespace testing
}  // namespace hopbudget

#endif  // HOPBUDGET_TESTS_STEPPED_CLOCK_H_
