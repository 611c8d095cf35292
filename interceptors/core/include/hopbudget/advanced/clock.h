// Copyright hopbudget authors.
//
// clock.h: where hopbudget reads the time.
//
// Every hopbudget component takes a `Clock&` instead of calling absl::Now(),
// so tests drive time with a `FakeClock` and never sleep.
//
// `Clock::Real()` returns wall-clock time (absl::Now()): the time base of
// the deadlines gRPC reports and accepts (system_clock), which gRPC converts
// to its monotonic clock when a call starts. Budgets are differences between
// those deadlines and now, so they must be read on the same base; a clock
// anchored once to a monotonic source would drift from gRPC's deadlines by
// whatever NTP corrects over the life of a process. Once a call has
// started, gRPC measures its deadline on its monotonic clock, and so does
// the client interceptor, on `Steady()`: its wait for a ready backend, the
// attempt latency it observes and the elapsed time it attributes. What a
// step of the wall clock still affects: docs/clock.md.
//
// Thread safety: all methods of both clocks may be called concurrently.
//
// Example:
//   hopbudget::FakeClock clock(absl::FromUnixSeconds(1000));
//   clock.Advance(absl::Milliseconds(5));
//   assert(clock.Now() == absl::FromUnixSeconds(1000) + absl::Milliseconds(5));
#ifndef HOPBUDGET_ADVANCED_CLOCK_H_
#define HOPBUDGET_ADVANCED_CLOCK_H_

#include <atomic>
#include <cstdint>

#include "absl/time/time.h"

namespace hopbudget {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
  // The time on a clock that never steps, for intervals that span two
  // processes (a call's transit, transit.h): its epoch is arbitrary, so only
  // differences between two of its readings mean anything. Clock::Real():
  // std::chrono::steady_clock (CLOCK_MONOTONIC), which NTP slews but never
  // sets back. The default is Now(), which is what a FakeClock reads.
  virtual absl::Time Steady() const { return Now(); }

  // The process-wide real clock (absl::Now(), see above). Never null,
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

#endif  // HOPBUDGET_ADVANCED_CLOCK_H_
