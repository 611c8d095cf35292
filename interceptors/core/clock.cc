// Copyright hopbudget authors.
#include "hopbudget/advanced/clock.h"

#include <chrono>

#include "absl/time/clock.h"

namespace hopbudget {
namespace {

// Wall time, like the deadlines gRPC hands out (ServerContext::deadline(),
// ClientContext::deadline()) and converts to its own monotonic clock when a
// call starts. Anchoring to a monotonic clock instead would drift from those
// deadlines by whatever NTP corrects over the life of the process.
class RealClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  absl::Time Steady() const override {
    return absl::UnixEpoch() +
           absl::FromChrono(std::chrono::steady_clock::now().time_since_epoch());
  }
};

}  // namespace

Clock& Clock::Real() {
  static Clock* const clock = new RealClock();
  return *clock;
}

FakeClock::FakeClock(absl::Time start) : now_ns_(absl::ToUnixNanos(start)) {}

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
  while (target > cur && !now_ns_.compare_exchange_weak(cur, target, std::memory_order_acq_rel)) {
  }
}

}  // namespace hopbudget
