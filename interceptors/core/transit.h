// Copyright hopbudget authors.
//
// transit.h (internal): how long an inbound call waited on its way to this
// hop, from its sender's stamp, with clocks that are not synchronised.
//
// gRPC's grpc-timeout is relative: a server starts the caller's budget when
// its transport reads the call. What the call waited before that, in the
// sender's transport or in this hop's socket buffer while its CPU was busy,
// the caller has spent and the server cannot see; under overload that wait
// reaches seconds, and the hop starts work its caller gave up on.
//
// A hopbudget sender stamps each call with its steady clock (wire.h,
// hopbudget-sent-us). `arrival - sent`, the one-way delay, is the wait plus
// the unknown offset between the two clocks. The smallest one-way delay seen
// lately from the same sender clock, its base delay, is that offset plus the
// fastest transit (LEDBAT's base delay, RFC 6817), so the one-way delay less
// the base is how much longer this call took than the fastest: its transit
// delay, which the server takes off the budget the call brought.
//
// The base is the minimum over the current window and the one before it, so
// that it follows two clocks that drift apart and forgets a sender gone for
// two windows. Errors fall on the caller's side: a sender seen for the first
// time has no base, so its first call's delay is 0; a clock id of 0, or one
// that finds no slot in a full table, is not tracked (delay 0); a queue that
// stands for longer than two windows becomes part of the base, and its wait
// is no longer seen. The delay exceeds the true wait by at most the drift of
// the two steady clocks over two windows (NTP slews a clock by 500 ppm at
// most).
//
// Thread safety: the free functions are pure; TransitDelays is safe for
// concurrent use, with one small lock per sender clock.
#ifndef HOPBUDGET_INTERNAL_TRANSIT_H_
#define HOPBUDGET_INTERNAL_TRANSIT_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "hopbudget/advanced/wire.h"

namespace hopbudget {
namespace internal {

// The base delay of one sender clock: the smallest one-way delay of the
// current window and of the one before it.
struct BaseDelay {
  absl::Duration current = absl::InfiniteDuration();
  absl::Duration previous = absl::InfiniteDuration();
  absl::Time window_start = absl::InfinitePast();
};

// The state after a call with one-way delay `one_way` arrived at `now`: a
// window that has lasted `window` ends and the sample starts the next one
// (the ended window becomes `previous`, or nothing when it ended two windows
// ago or more); otherwise the sample joins the current window's minimum.
BaseDelay NextBaseDelay(const BaseDelay& state, absl::Duration one_way, absl::Time now,
                        absl::Duration window);

// max(0, one_way - min(current, previous)); 0 when there is no base yet.
absl::Duration TransitDelayOf(const BaseDelay& state, absl::Duration one_way);

// The base delays of the sender clocks this hop hears from: a fixed table,
// each sender clock in one slot (hashed, a few probes), a slot unused for
// two windows taken by a new clock.
class TransitDelays {
 public:
  struct Options {
    absl::Duration window = absl::Seconds(30);  // > 0
    int slots = 256;                            // 1..65536
  };
  // InvalidArgument for a window <= 0 or slots outside 1..65536.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<TransitDelays>> Create(Options options);
  ~TransitDelays();
  TransitDelays(const TransitDelays&) = delete;
  TransitDelays& operator=(const TransitDelays&) = delete;

  // The transit delay of a call stamped `stamp` that arrived at `arrival`,
  // a reading of this hop's Clock::Steady(); the sample joins its sender's
  // base delay.
  absl::Duration Observe(const SentStamp& stamp, absl::Time arrival);

 private:
  struct Slot;
  explicit TransitDelays(Options options);
  const Options options_;
  const std::unique_ptr<Slot[]> slots_;
};

// The clock id this process stamps its calls with: random, never 0, the
// same for the life of the process.
uint64_t ProcessClockId();

}  // namespace internal
}  // namespace hopbudget

#endif  // HOPBUDGET_INTERNAL_TRANSIT_H_
