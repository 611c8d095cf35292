// Copyright hopbudget authors.
#include "capacity_ramp.h"

namespace hopbudget::chainctl {

absl::StatusOr<int64_t> CapacityRamp(
    int64_t start, int64_t max, const std::function<absl::StatusOr<double>(int64_t rps)>& step) {
  int64_t held = 0, fell_short = 0;
  // true when the run at `rps` fell short.
  auto short_at = [&](int64_t rps) -> absl::StatusOr<bool> {
    absl::StatusOr<double> share = step(rps);
    if (!share.ok()) return share.status();
    return *share < kCapacityOkShare;
  };
  for (int64_t rps = start; rps <= max; rps *= 2) {
    absl::StatusOr<bool> fell = short_at(rps);
    if (!fell.ok()) return fell.status();
    if (*fell) {
      fell_short = rps;
      break;
    }
    held = rps;
  }
  for (int i = 0; i < 2 && held > 0 && fell_short > 0; ++i) {
    const int64_t mid = (held + fell_short) / 2;
    absl::StatusOr<bool> fell = short_at(mid);
    if (!fell.ok()) return fell.status();
    (*fell ? fell_short : held) = mid;
  }
  return held > 0 ? held : start / 2;
}

}  // namespace hopbudget::chainctl
