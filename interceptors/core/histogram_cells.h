// Copyright hopbudget authors.
//
// histogram_cells.h (internal): the cells of one histogram and the
// exponential layout that places a value in its bucket, apart from the
// registry that holds them so that each can be read and tested on its own.
// What an observation runs (Observe, Index, ObserveSeconds) is defined here,
// inline: the recording methods in metrics.cc make one or three observations
// on every call, and a call across translation units would cost more than
// the observation itself. Building a layout and reading a snapshot are rare;
// they are in histogram_cells.cc.
#ifndef HOPBUDGET_INTERNAL_HISTOGRAM_CELLS_H_
#define HOPBUDGET_INTERNAL_HISTOGRAM_CELLS_H_

#include <atomic>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/time/time.h"
#include "hopbudget/advanced/metrics.h"
#include "striped_cells.h"

namespace hopbudget {
namespace internal {

// A histogram's cells, striped (striped_cells.h): the buckets, then the sum
// in the histogram's unit (nanoseconds, or attempts x 1e6). The count is the
// buckets' sum, read at snapshot time: one atomic add fewer per observation,
// and a snapshot's count always agrees with its buckets.
class HistogramCells {
 public:
  explicit HistogramCells(int buckets) : buckets_(buckets), cells_(buckets + 1) {}
  void Observe(int bucket, uint64_t units) {
    const int stripe = CurrentStripe();  // once for both adds
    cells_.AddAt(stripe, bucket, 1);
    cells_.AddAt(stripe, buckets_, units);
  }
  // `bounds` has one bound fewer than there are buckets (+Inf is implied);
  // the sum is divided by `units_per_unit`.
  HistogramSnapshot Snapshot(std::vector<double> bounds, double units_per_unit) const;

 private:
  const int buckets_;
  StripedCells cells_;
};

// Bounds 2^(k/n) seconds, n = 2^schema, k in [k_min, k_max]. The bucket of a
// value is computed, not searched: the exponent of the double gives the
// power of two, and the mantissa m in [0.5, 1) is placed among the n
// thresholds t_j = 2^(-j/n) of that power by a table indexed by the
// mantissa's leading bits. The table has 2n cells: the thresholds are at
// least 0.35/n apart and a cell is 0.25/n wide, so a cell holds at most one
// of them, and one comparison with it finishes the count. Bounds are built
// from the same thresholds, so a value equal to a bound falls into that
// bound's bucket (le: <=).
class ExponentialLayout {
 public:
  // `b` must have passed ValidateMetricsOptions().
  explicit ExponentialLayout(const HistogramBuckets& b);
  // 0 .. bounds().size(); the last is +Inf.
  int Index(double seconds) const {
    if (!(seconds > bounds_.front())) return 0;  // also NaN
    if (seconds > bounds_.back()) return static_cast<int>(bounds_.size());
    // frexp(), inline: every value that reaches here is above the first
    // bound, so a positive normal number. The library call cost a tenth of
    // an observation.
    uint64_t bits = 0;
    std::memcpy(&bits, &seconds, sizeof bits);
    const int e = static_cast<int>(bits >> 52) - 1022;
    constexpr uint64_t kFraction = (uint64_t{1} << 52) - 1;
    const Cell& cell = cells_[(bits & kFraction) >> (52 - cell_bits_)];
    bits = (bits & kFraction) | (uint64_t{1022} << 52);
    double m = 0;
    std::memcpy(&m, &bits, sizeof m);
    // below: how many thresholds are < m; j: how many are >= m.
    const int below = cell.below + (cell.threshold < m ? 1 : 0);
    const int j = n_ - below;
    return n_ * e - j - k_min_;
  }
  const std::vector<double>& bounds() const { return bounds_; }

 private:
  // The mantissas [low, high) of one cell of the table.
  struct Cell {
    double threshold = 2;  // the one threshold in [low, high), or above every mantissa
    int below = 0;         // thresholds < low
  };
  double Bound(const std::vector<double>& descending, int k) const;
  const int n_;
  const int cell_bits_;  // the table has 2^cell_bits_ = 2n cells
  std::vector<Cell> cells_;
  int k_min_ = 0;
  std::vector<double> bounds_;
};

// One histogram in seconds (its sum in nanoseconds), allocated on its first
// observation.
using SecondsCells = HistogramCells;

// Observes `d` (negative: zero; infinite: +Inf, not summed) in the histogram
// of `slot`, allocating it on first use: the thread whose compare-exchange
// wins installs its cells, the others free theirs.
inline void ObserveSeconds(std::atomic<SecondsCells*>& slot, const ExponentialLayout& layout,
                           absl::Duration d) {
  SecondsCells* cells = slot.load(std::memory_order_acquire);
  if (cells == nullptr) {
    auto* mine = new SecondsCells(static_cast<int>(layout.bounds().size()) + 1);
    if (slot.compare_exchange_strong(cells, mine, std::memory_order_acq_rel)) {
      cells = mine;
    } else {
      delete mine;  // `cells` now holds the winner's
    }
  }
  if (d == absl::InfiniteDuration()) {
    cells->Observe(static_cast<int>(layout.bounds().size()), 0);
    return;
  }
  // One conversion serves the bucket and the sum (the sum was in whole
  // nanoseconds already); ToDoubleSeconds() was a second library call.
  const int64_t ns = d > absl::ZeroDuration() ? absl::ToInt64Nanoseconds(d) : 0;
  cells->Observe(layout.Index(static_cast<double>(ns) / 1e9), static_cast<uint64_t>(ns));
}

// The histogram of `cells` (null: never observed, all zeros) in seconds.
HistogramSnapshot SnapshotSeconds(const SecondsCells* cells, const ExponentialLayout& layout);

// Histograms with the same bounds compute the same bucket for every value.
bool SameBounds(const HistogramBuckets& a, const HistogramBuckets& b);

// Adds `from`'s observations to `into`, of the same bounds.
void AddObservations(const HistogramSnapshot& from, HistogramSnapshot& into);

}  // namespace internal
}  // namespace hopbudget

#endif  // HOPBUDGET_INTERNAL_HISTOGRAM_CELLS_H_
