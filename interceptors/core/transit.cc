// Copyright hopbudget authors.
#include "transit.h"

#include <algorithm>

#include "absl/hash/hash.h"
#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "call_mutex.h"

namespace hopbudget {
namespace internal {

BaseDelay NextBaseDelay(const BaseDelay& state, absl::Duration one_way, absl::Time now,
                        absl::Duration window) {
  BaseDelay next = state;
  const absl::Duration lasted = now - state.window_start;
  if (lasted >= window) {
    next.previous = lasted >= 2 * window ? absl::InfiniteDuration() : state.current;
    next.current = one_way;
    next.window_start = now;
  } else {
    next.current = std::min(state.current, one_way);
  }
  return next;
}

absl::Duration TransitDelayOf(const BaseDelay& state, absl::Duration one_way) {
  const absl::Duration base = std::min(state.current, state.previous);
  if (base == absl::InfiniteDuration()) return absl::ZeroDuration();
  return std::max(absl::ZeroDuration(), one_way - base);
}

struct TransitDelays::Slot {
  CallMutex mu;
  uint64_t clock_id ABSL_GUARDED_BY(mu) = 0;  // 0: free
  absl::Time last_seen ABSL_GUARDED_BY(mu) = absl::InfinitePast();
  BaseDelay base ABSL_GUARDED_BY(mu);
};

absl::StatusOr<std::unique_ptr<TransitDelays>> TransitDelays::Create(Options options) {
  if (options.window <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("transit window must be > 0, got ", absl::FormatDuration(options.window)));
  }
  if (options.slots < 1 || options.slots > 65536) {
    return absl::InvalidArgumentError(
        absl::StrCat("transit slots must be in 1..65536, got ", options.slots));
  }
  return std::unique_ptr<TransitDelays>(new TransitDelays(options));
}

TransitDelays::TransitDelays(Options options)
    : options_(options), slots_(new Slot[static_cast<size_t>(options.slots)]) {}

TransitDelays::~TransitDelays() = default;

absl::Duration TransitDelays::Observe(const SentStamp& stamp, absl::Time arrival) {
  if (stamp.clock_id == 0) return absl::ZeroDuration();
  const absl::Duration one_way = arrival - stamp.sent;
  constexpr int kProbes = 4;
  const size_t n = static_cast<size_t>(options_.slots);
  const size_t first = absl::Hash<uint64_t>()(stamp.clock_id) % n;
  for (int probe = 0; probe < kProbes && static_cast<size_t>(probe) < n; ++probe) {
    Slot& slot = slots_[(first + static_cast<size_t>(probe)) % n];
    CallMutexLock lock(&slot.mu);
    if (slot.clock_id != stamp.clock_id) {
      // A slot is taken over once its clock has been silent for two
      // windows: by then its base would have been forgotten anyway.
      const bool free = slot.clock_id == 0 || arrival - slot.last_seen >= 2 * options_.window;
      if (!free) continue;
      slot.clock_id = stamp.clock_id;
      slot.base = BaseDelay{};
    }
    slot.last_seen = std::max(slot.last_seen, arrival);
    slot.base = NextBaseDelay(slot.base, one_way, arrival, options_.window);
    return TransitDelayOf(slot.base, one_way);
  }
  return absl::ZeroDuration();  // the table is full around this clock's slot
}

uint64_t ProcessClockId() {
  static const uint64_t id = [] {
    absl::BitGen gen;
    uint64_t v = 0;
    while (v == 0) v = absl::Uniform<uint64_t>(gen);
    return v;
  }();
  return id;
}

}  // namespace internal
}  // namespace hopbudget
