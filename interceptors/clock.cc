// Copyright hopbudget authors.
#include "hopbudget/clock.h"

#include <chrono>

#include "absl/time/clock.h"

namespace hopbudget {
namespace {

// Anchored once: wall time for comparability with gRPC deadlines, steady time
// for monotonic progress (see clock.h).
class RealClock final : public Clock {
 public:
  RealClock()
      : wall_anchor_(absl::Now()), steady_anchor_(std::chrono::steady_clock::now()) {}

  absl::Time Now() const override {
    return wall_anchor_ +
           absl::FromChrono(std::chrono::steady_clock::now() - steady_anchor_);
  }

 private:
  const absl::Time wall_anchor_;
  const std::chrono::steady_clock::time_point steady_anchor_;
};

}  // namespace

Clock& Clock::Real() {
  static Clock* const clock = new RealClock();
  return *clock;
}

FakeClock::FakeClock(absl::Time start)
    : now_ns_(absl::ToUnixNanos(start)) {}

absl::Time FakeClock::Now() const {
  return absl::FromUnixNanos(now_ns_.load(std::memory_order_acquire));
}

void FakeClock::Advance(absl::Duration d) {
  if (d <= absl::ZeroDuration()) return;
  now_ns_.fetch_add(absl::ToInt64Nanoseconds(d), std::memory_order_acq_rel);
}

void FakeClock::Set(absl::Time t) {
  const int64_t target = absl::ToUnixNanos(t);
  int64_t cur = now_ns_.load(std::memory_order_acquire);
  while (target > cur &&
         !now_ns_.compare_exchange_weak(cur, target, std::memory_order_acq_rel)) {
  }
}

}  // namespace hopbudget
