// Copyright hopbudget authors.
//
// metrics_snapshot.cc: a registry's cells read back as a MetricsSnapshot,
// and the snapshot's lookups. Apart from the recording because it is the
// other direction: it runs once per scrape or test, may allocate, and is
// where the layout's shortcuts (shared latency slots and budget histograms,
// calls counted from their latency) are undone into the series users see.
#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "absl/types/span.h"
#include "histogram_cells.h"
#include "hopbudget/advanced/metrics.h"
#include "metric_table.h"
#include "metrics_cells.h"

namespace hopbudget {
namespace internal {
namespace {

constexpr char kUnknownHop[] = "unknown";

template <typename T, size_t N>
void Copy(const std::array<std::atomic<T>, N>& from, std::array<T, N>& to) {
  for (size_t i = 0; i < N; ++i) to[i] = from[i].load(kRelaxed);
}

// Fills the fields of every row of metric_table.h.
void SnapshotTables(const MetricsCells& c, MetricsSnapshot& s) {
  int cell = 0;
  int histogram = 0;
  for (absl::Span<const MetricRow> table : kMetricTables) {
    for (const MetricRow& row : table) {
      if (row.type == MetricType::kHistogram) {
        s.*row.histogram =
            SnapshotSeconds(c.table_histograms[histogram].load(std::memory_order_acquire),
                            c.table_layouts[histogram]);
        ++histogram;
        continue;
      }
      for (int i = 0; i < row.cells(); ++i) {
        row.store(s, row.first + i, c.table_cells.Sum(cell++));
      }
    }
  }
}

}  // namespace
}  // namespace internal

using internal::Copy;
using internal::kRelaxed;

MetricsSnapshot Metrics::Snapshot() const {
  const internal::MetricsCells& c = *cells_;
  MetricsSnapshot s;
  internal::SnapshotTables(c, s);

  std::vector<double> attempt_bounds;
  for (int i = 1; i <= kMaxAttemptBuckets; ++i) attempt_bounds.push_back(i);

  std::vector<std::string> names = c.method_labels.Names();
  names[0] = "other";
  for (int i = 0; i < kMaxMethodLabels; ++i) {
    if (i > 0 && names[i].empty()) continue;
    const internal::MethodCells& m = c.methods[i];
    MethodSnapshot ms;
    ms.method = names[i];
    uint64_t total = 0;
    for (int side = 0; side < kSideCount; ++side) {
      for (int code = 0; code < kStatusCodeCount; ++code) {
        ms.calls[side][code] = m.calls.Sum(side * kStatusCodeCount + code);  // CountCallEnd()
      }
    }
    // Each latency slot read once; the calls ended through End*() are
    // counted from their slots.
    std::array<std::array<absl::optional<HistogramSnapshot>, internal::kLatencySlotCount>,
               kStatusCodeCount>
        slots;
    for (int code = 0; code < kStatusCodeCount; ++code) {
      for (int slot = 0; slot < internal::kLatencySlotCount; ++slot) {
        const internal::SecondsCells* l = c.latency[slot][i][code].load(std::memory_order_acquire);
        if (l == nullptr) continue;
        slots[code][slot] = internal::SnapshotSeconds(
            l, c.latency_layouts[static_cast<int>(internal::kSlotKind[slot])]);
        const auto side = internal::SlotCountsCallsOf(static_cast<internal::LatencySlot>(slot));
        if (side.has_value()) ms.calls[static_cast<int>(*side)][code] += slots[code][slot]->count;
      }
    }
    for (int side = 0; side < kSideCount; ++side) {
      for (uint64_t n : ms.calls[side]) {
        s.calls[side] += n;
        total += n;
      }
    }
    ms.calls_without_deadline = m.without_deadline.load(kRelaxed);
    for (const std::string& prefix : c.infrastructure_prefixes) {
      if (absl::StartsWith(ms.method, prefix)) ms.role = MethodRole::kInfrastructure;
    }
    auto budget = [&](internal::BudgetHistogram h) {
      HistogramSnapshot b = internal::SnapshotSeconds(m.budgets[h].load(std::memory_order_acquire),
                                                      c.budget_layouts[h]);
      if (h != internal::kRemaining) {
        const internal::SecondsCells* both =
            m.budgets[internal::kArrivalIsRequest].load(std::memory_order_acquire);
        if (both != nullptr) {
          internal::AddObservations(
              internal::SnapshotSeconds(both, c.budget_layouts[internal::kArrivalIsRequest]), b);
        }
      }
      return b;
    };
    ms.budget_at_arrival = budget(internal::kAtArrival);
    ms.request_budget = budget(internal::kRequestBudget);
    ms.budget_remaining = budget(internal::kRemaining);
    ms.attempts = m.attempts.Snapshot(attempt_bounds, 1e6);
    for (int b = 0; b < kMaxAttemptBuckets; ++b) s.attempts_per_call[b] += ms.attempts.counts[b];
    s.attempts_per_call[kMaxAttemptBuckets - 1] += ms.attempts.counts[kMaxAttemptBuckets];
    Copy(m.retries, ms.retries);
    ms.succeeded_after_retry = m.succeeded_after_retry.load(kRelaxed);
    total += ms.calls_without_deadline + ms.budget_at_arrival.count + ms.request_budget.count +
             ms.budget_remaining.count + ms.attempts.count;
    for (uint64_t n : ms.retries) total += n;
    for (int kind = 0; kind < kLatencyKindCount; ++kind) {
      for (int code = 0; code < kStatusCodeCount; ++code) {
        absl::optional<HistogramSnapshot> sum;
        for (int slot = 0; slot < internal::kLatencySlotCount; ++slot) {
          if (!slots[code][slot].has_value() ||
              !internal::SlotServes(static_cast<internal::LatencySlot>(slot),
                                    static_cast<LatencyKind>(kind))) {
            continue;
          }
          if (sum.has_value()) {
            internal::AddObservations(*slots[code][slot], *sum);
          } else {
            sum = slots[code][slot];
          }
        }
        if (!sum.has_value()) continue;
        total += sum->count;
        ms.latency.push_back(LatencySnapshot{static_cast<LatencyKind>(kind),
                                             static_cast<absl::StatusCode>(code), std::move(*sum)});
      }
    }
    if (i == 0 && total == 0) continue;  // "other" only when something folded into it
    s.methods.push_back(std::move(ms));
  }

  std::vector<std::string> hops = c.hop_labels.Names();
  hops[0] = "other";
  hops.push_back(internal::kUnknownHop);
  for (int side = 0; side < kSideCount; ++side) {
    for (int src = 0; src < kDeadlineSourceCount; ++src) {
      for (int h = 0; h <= kMaxHopLabels; ++h) {
        const uint64_t n = c.deadline_exceeded[side][src][h].load(kRelaxed);
        if (n == 0) continue;
        s.deadline_exceeded_by_source[side][src] += n;
        s.deadline_exceeded_by_hop.push_back(DeadlineExceededCount{
            static_cast<Side>(side), static_cast<DeadlineSource>(src), hops[h], n});
      }
    }
  }
  return s;
}

uint64_t MetricsSnapshot::deadline_exceeded(Side side, DeadlineSource source,
                                            absl::string_view hop) const {
  uint64_t n = 0;
  for (const DeadlineExceededCount& d : deadline_exceeded_by_hop) {
    if (d.side == side && d.source == source && d.hop == hop) n += d.count;
  }
  return n;
}

const HistogramSnapshot* MethodSnapshot::latency_of(LatencyKind kind, absl::StatusCode code) const {
  for (const LatencySnapshot& l : latency) {
    if (l.kind == kind && l.code == code) return &l.seconds;
  }
  return nullptr;
}

const MethodSnapshot* MetricsSnapshot::method(absl::string_view name) const {
  for (const MethodSnapshot& m : methods) {
    if (m.method == name) return &m;
  }
  return nullptr;
}

uint64_t MetricsSnapshot::calls_with_code(Side side, absl::string_view name,
                                          absl::StatusCode code) const {
  const MethodSnapshot* m = method(name);
  return m == nullptr ? 0 : m->calls[static_cast<int>(side)][internal::CodeIndex(code)];
}

}  // namespace hopbudget
