// Copyright hopbudget authors.
//
// capacity_ramp.h: a chain's capacity, as the benchmarks measure it (chainctl
// overload and saved-work).
//
// The capacity is the highest rate at which at least 90 % of the calls
// succeed: a doubling ramp from `start` (up to `max`) until a step falls
// short, then two bisection steps between the last rate that held and the
// first that did not. Each step is one run of `step(rps)`, which returns the
// run's OK share (OK / calls made, 0..1).
//
// Edge cases: when even `start` falls short the capacity is start / 2; when
// every step up to `max` holds it is the last rate tried. A step's error ends
// the ramp with that error.
//
// Thread safety: a pure function of its arguments; `step` is called in turn
// on the caller's thread.
//
// Example:
//   absl::StatusOr<int64_t> capacity = CapacityRamp(400, 51200, [&](int64_t rps) {
//     return OkShareOfOneRun(rps);
//   });
#ifndef HOPBUDGET_CHAINCTL_CAPACITY_RAMP_H_
#define HOPBUDGET_CHAINCTL_CAPACITY_RAMP_H_

#include <cstdint>
#include <functional>

#include "absl/status/statusor.h"

namespace hopbudget::chainctl {

// The OK share a step must reach.
inline constexpr double kCapacityOkShare = 0.9;

[[nodiscard]] absl::StatusOr<int64_t> CapacityRamp(
    int64_t start, int64_t max, const std::function<absl::StatusOr<double>(int64_t rps)>& step);

}  // namespace hopbudget::chainctl

#endif  // HOPBUDGET_CHAINCTL_CAPACITY_RAMP_H_
