// Copyright hopbudget authors.
//
// histogram_cells.cc: the rare half of histogram_cells.h, building a layout
// (once per histogram, when the registry is made) and reading cells back
// (once per scrape); out of line, since no call pays for it.
#include "histogram_cells.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace hopbudget {
namespace internal {

HistogramSnapshot HistogramCells::Snapshot(std::vector<double> bounds,
                                           double units_per_unit) const {
  HistogramSnapshot s;
  s.bounds = std::move(bounds);
  s.counts.reserve(buckets_);
  s.count = 0;
  for (int b = 0; b < buckets_; ++b) {
    s.counts.push_back(cells_.Sum(b));
    s.count += s.counts.back();
  }
  s.sum = static_cast<double>(cells_.Sum(buckets_)) / units_per_unit;
  return s;
}

ExponentialLayout::ExponentialLayout(const HistogramBuckets& b)
    : n_(1 << b.schema), cell_bits_(b.schema + 1) {
  std::vector<double> descending;  // t_j, j = 0..n
  for (int j = 0; j <= n_; ++j) descending.push_back(std::exp2(-static_cast<double>(j) / n_));
  const std::vector<double> ascending(descending.rbegin(), descending.rend() - 1);  // t_n..t_1
  const int cells = 2 * n_;
  for (int c = 0; c < cells; ++c) {
    // Exact: a double holds 0.5 + c / (4n) for n <= 256.
    const double low = 0.5 + 0.5 * c / cells;
    const double high = 0.5 + 0.5 * (c + 1) / cells;
    Cell cell;
    cell.below = static_cast<int>(std::lower_bound(ascending.begin(), ascending.end(), low) -
                                  ascending.begin());
    if (cell.below < n_ && ascending[cell.below] < high) cell.threshold = ascending[cell.below];
    cells_.push_back(cell);
  }
  k_min_ = static_cast<int>(std::ceil(n_ * std::log2(b.min_seconds))) - 1;
  while (Bound(descending, k_min_) < b.min_seconds) ++k_min_;
  int k_max = k_min_;
  while (Bound(descending, k_max) < b.max_seconds) ++k_max;
  for (int k = k_min_; k <= k_max; ++k) bounds_.push_back(Bound(descending, k));
}

double ExponentialLayout::Bound(const std::vector<double>& descending, int k) const {
  // k = n * e - j with j in [0, n).
  const int e = k >= 0 ? (k + n_ - 1) / n_ : -((-k) / n_);
  return std::ldexp(descending[n_ * e - k], e);
}

HistogramSnapshot SnapshotSeconds(const SecondsCells* cells, const ExponentialLayout& layout) {
  if (cells != nullptr) return cells->Snapshot(layout.bounds(), 1e9);
  HistogramSnapshot s;
  s.bounds = layout.bounds();
  s.counts.assign(s.bounds.size() + 1, 0);
  return s;
}

bool SameBounds(const HistogramBuckets& a, const HistogramBuckets& b) {
  return ExponentialLayout(a).bounds() == ExponentialLayout(b).bounds();
}

void AddObservations(const HistogramSnapshot& from, HistogramSnapshot& into) {
  for (size_t b = 0; b < into.counts.size(); ++b) into.counts[b] += from.counts[b];
  into.count += from.count;
  into.sum += from.sum;
}

}  // namespace internal
}  // namespace hopbudget
