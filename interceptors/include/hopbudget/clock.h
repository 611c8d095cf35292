// Copyright hopbudget authors.
//
// clock.h: where hopbudget reads the time.
//
// Every hopbudget component takes a `Clock&` instead of calling absl::Now(),
// so tests drive time with a `FakeClock` and never sleep.
//
// `Clock::Real()` returns wall-clock time (comparable with gRPC deadlines,
// which are wall-clock `system_clock` instants) that advances monotonically:
// it is anchored to absl::Now() once and then moved by std::chrono::steady_clock.
// Intervals measured with it (time spent in a hop, lateness of a timeout) are
// therefore immune to NTP steps. The cost is that a wall-clock step after the
// anchor is not followed; gRPC itself converts deadlines to its monotonic clock
// when a call starts, so this matches what the transport enforces.
//
// Thread safety: all methods of both clocks may be called concurrently.
//
// Example:
//   hopbudget::FakeClock clock(absl::FromUnixSeconds(1000));
//   clock.Advance(absl::Milliseconds(5));
//   assert(clock.Now() == absl::FromUnixSeconds(1000) + absl::Milliseconds(5));
#ifndef HOPBUDGET_CLOCK_H_
#define HOPBUDGET_CLOCK_H_

#include <atomic>
#include <cstdint>

#include "absl/time/time.h"

namespace hopbudget {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;

  // The process-wide real clock (wall-clock anchored, monotonic). Never null,
  // never destroyed.
  static Clock& Real();
};

// A clock that moves only when told. Starts at `start` (default: the Unix
// epoch plus one day, so that `Now() - d` never underflows in tests).
class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::UnixEpoch() + absl::Hours(24));

  absl::Time Now() const override;

  // Moves time forward by `d`. A negative `d` is ignored: time never goes back.
  void Advance(absl::Duration d);

  // Sets the time. A time earlier than Now() is ignored.
  void Set(absl::Time t);

 private:
  std::atomic<int64_t> now_ns_;  // nanoseconds since the Unix epoch
};

}  // namespace hopbudget

#endif  // HOPBUDGET_CLOCK_H_
