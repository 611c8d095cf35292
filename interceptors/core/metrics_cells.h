// Copyright hopbudget authors.
//
// metrics_cells.h (internal): the storage behind a Metrics registry
// (MetricsCells, one MethodCells per method label), shared by the units that
// write and read it: recording and creation (metrics.cc), method interning
// (method_interning.cc), the recent-call ring (recent_calls.cc) and the
// snapshot (metrics_snapshot.cc). The public header only names MetricsCells,
// so that its layout can change without touching users. Whatever a recording
// method runs on every call (Add, Set, Observe, CodeIndex) is inline here, so
// that it stays one relaxed add at a constant offset in the recording method.
#ifndef HOPBUDGET_INTERNAL_METRICS_CELLS_H_
#define HOPBUDGET_INTERNAL_METRICS_CELLS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "absl/types/span.h"
#include "call_mutex.h"
#include "histogram_cells.h"
#include "hopbudget/advanced/attribution.h"
#include "hopbudget/advanced/metrics.h"
#include "label_table.h"
#include "metric_table.h"
#include "striped_cells.h"

namespace hopbudget {
namespace internal {

inline constexpr std::memory_order kRelaxed = std::memory_order_relaxed;

// The budget histograms of a method. An arrival whose request budget is its
// budget at arrival (no cap of this hop's cut it: the common case) is one
// observation, in kArrivalIsRequest, which Snapshot() adds to both.
enum BudgetHistogram {
  kAtArrival = 0,
  kRequestBudget,
  kRemaining,
  kArrivalIsRequest,  // only when the two histograms have the same buckets
  kBudgetHistogramCount
};

// Where latencies are stored. One observation serves every series that it
// belongs to: a plain call's one attempt is also its logical call, and a
// call ended through an End*() is also a call of hopbudget_calls_total.
// Snapshot() adds the slots up. The first three are the LatencyKinds.
enum LatencySlot {
  kAttemptOnly = 0,  // ObserveLatency(kClientAttempt)
  kCallOnly,         // ObserveLatency(kClientCall), EndRetryingCall()
  kServerOnly,       // ObserveLatency(kServerCall)
  kAttemptEnded,     // EndClientAttempt(): kClientAttempt and a client call
  kPlainCallEnded,   // EndClientAttempt(kPlainCall): and kClientCall too
  kServerCallEnded,  // EndServerCall(): kServerCall and a server call
  kLatencySlotCount
};
// The kind whose buckets a slot has.
constexpr std::array<LatencyKind, kLatencySlotCount> kSlotKind = {
    LatencyKind::kClientAttempt, LatencyKind::kClientCall,    LatencyKind::kServerCall,
    LatencyKind::kClientAttempt, LatencyKind::kClientAttempt, LatencyKind::kServerCall};
// Whether the observations of `slot` belong to the histograms of `kind`.
constexpr bool SlotServes(LatencySlot slot, LatencyKind kind) {
  return kSlotKind[slot] == kind || (slot == kPlainCallEnded && kind == LatencyKind::kClientCall);
}
// The side whose calls a slot counts, if any.
constexpr absl::optional<Side> SlotCountsCallsOf(LatencySlot slot) {
  switch (slot) {
    case kAttemptEnded:
    case kPlainCallEnded:
      return Side::kClient;
    case kServerCallEnded:
      return Side::kServer;
    default:
      return absl::nullopt;
  }
}

struct MethodCells {
  // Calls counted by CountCallEnd(), by side and code: cell
  // side * kStatusCodeCount + code. The End*() calls are counted from their
  // latency slots instead (LatencySlot).
  StripedCells calls{kSideCount * kStatusCodeCount};
  std::atomic<uint64_t> without_deadline{0};
  std::array<std::atomic<SecondsCells*>, kBudgetHistogramCount> budgets{};  // null until used
  HistogramCells attempts{kMaxAttemptBuckets + 1};
  std::array<std::atomic<uint64_t>, kStatusCodeCount> retries{};
  std::atomic<uint64_t> succeeded_after_retry{0};
};

// Whether the generated descriptor pool knows "/pkg.Service/Method"
// (method_interning.cc): the method label table admits only those.
bool KnownToDescriptorPool(absl::string_view method);

inline int CodeIndex(absl::StatusCode code) {
  const int c = static_cast<int>(code);
  return c >= 0 && c < kStatusCodeCount ? c : static_cast<int>(absl::StatusCode::kUnknown);
}

// One entry of the recent-call ring (recent_calls.cc).
struct RecentSlot {
  mutable CallMutex mu;
  bool used ABSL_GUARDED_BY(mu) = false;
  uint64_t seq ABSL_GUARDED_BY(mu) = 0;
  RecentCall call ABSL_GUARDED_BY(mu);
};

struct MetricsCells {
  explicit MetricsCells(const MetricsOptions& o)
      : budget_layouts{ExponentialLayout(o.budget_at_arrival), ExponentialLayout(o.request_budget),
                       ExponentialLayout(o.budget_remaining),
                       ExponentialLayout(o.budget_at_arrival)},
        latency_layouts{ExponentialLayout(o.client_attempt_duration),
                        ExponentialLayout(o.client_call_duration),
                        ExponentialLayout(o.server_call_duration)},
        arrival_is_request_shared(SameBounds(o.budget_at_arrival, o.request_budget)),
        plain_call_shared(SameBounds(o.client_attempt_duration, o.client_call_duration)),
        infrastructure_prefixes(o.infrastructure_method_prefixes) {
    for (absl::Span<const MetricRow> table : kMetricTables) {
      for (const MetricRow& row : table) {
        if (row.type == MetricType::kHistogram) table_layouts.emplace_back(o.*row.buckets);
      }
    }
  }

  // Adds `n` to the cell of enum value `value` of `kRow`; a value the row
  // does not store is not counted. Constant offsets: one relaxed add.
  template <auto kRow>
  void Add(int value, uint64_t n = 1) {
    constexpr const MetricRow& row = RowOf(kRow);
    static_assert(row.cells() > 0, "a row with cells");
    constexpr int offset = CellOffset(TableOf<decltype(kRow)>::kIndex, static_cast<int>(kRow));
    const int i = value - row.first;
    if (i < 0 || i >= row.count) return;
    table_cells.Add(offset + i, n);
  }
  // Sets the one cell of gauge `kRow` (the snapshot reads it signed).
  template <auto kRow>
  void Set(int64_t v) {
    constexpr const MetricRow& row = RowOf(kRow);
    static_assert(row.type == MetricType::kGauge && row.cells() == 1, "a gauge with one cell");
    constexpr int offset = CellOffset(TableOf<decltype(kRow)>::kIndex, static_cast<int>(kRow));
    table_cells.Set(offset, static_cast<uint64_t>(v));
  }
  // The enum value counted by the first of `kRows` that stores it.
  template <auto... kRows>
  void AddToRowOf(int value) {
    (void)((Covers(RowOf(kRows), value) && (Add<kRows>(value), true)) || ...);
  }
  static constexpr bool Covers(const MetricRow& row, int value) {
    return value >= row.first && value < row.first + row.count;
  }
  template <auto kRow>
  void Observe(absl::Duration d) {
    static_assert(RowOf(kRow).type == MetricType::kHistogram, "a histogram row");
    constexpr int h = HistogramOffset(TableOf<decltype(kRow)>::kIndex, static_cast<int>(kRow));
    ObserveSeconds(table_histograms[h], table_layouts[h], d);
  }
  LabelTable<kMaxMethodLabels> method_labels{KnownToDescriptorPool};
  // In front of method_labels, by the address of the name: gRPC passes
  // each call's method name from its method table, the same address for
  // every call of a method, so a lookup is a pointer and a string compare
  // instead of a hash. A slot is filled once and never replaced, so an
  // entry lives as long as the cells; names at other addresses (or whose
  // slot is taken) go to method_labels.
  struct MethodCacheEntry {
    const char* data;
    std::string name;
    MethodId id;
  };
  std::array<std::atomic<const MethodCacheEntry*>, 16> method_cache{};
  LabelTable<kMaxHopLabels> hop_labels{
      [](absl::string_view hop) { return ValidateHopName(hop).ok(); }};
  std::array<MethodCells, kMaxMethodLabels> methods;
  std::array<std::array<std::array<std::atomic<uint64_t>, kMaxHopLabels + 1>, kDeadlineSourceCount>,
             kSideCount>
      deadline_exceeded{};  // hop index kMaxHopLabels: "unknown"
  // The rows of metric_table.h: counters and gauges, then histograms (null
  // until first observed) with their layouts.
  StripedCells table_cells{kMetricCellCount};  // counters added on every call: striped
  std::array<std::atomic<SecondsCells*>, kMetricHistogramCount> table_histograms{};
  std::vector<ExponentialLayout> table_layouts;
  std::atomic<uint64_t> recent_next{0};
  std::atomic<int64_t> recent_last_ns{0};
  std::atomic<int64_t> recent_last_failure_ns{0};
  std::array<RecentSlot, kRecentCallCapacity> recent;
  const std::array<ExponentialLayout, kBudgetHistogramCount> budget_layouts;
  const std::array<ExponentialLayout, kLatencyKindCount> latency_layouts;
  // Whether one observation may serve both histograms (same buckets).
  const bool arrival_is_request_shared;  // kArrivalIsRequest
  const bool plain_call_shared;          // kPlainCallEnded
  const std::vector<std::string> infrastructure_prefixes;
  // Latency, by slot, method and code: null until first observed.
  std::array<std::array<std::array<std::atomic<SecondsCells*>, kStatusCodeCount>, kMaxMethodLabels>,
             kLatencySlotCount>
      latency{};

  void ObserveLatency(LatencySlot slot, MethodId method, absl::StatusCode code, absl::Duration d) {
    ObserveSeconds(latency[slot][method.index][CodeIndex(code)],
                   latency_layouts[static_cast<int>(kSlotKind[slot])], d);
  }
  void ObserveBudget(BudgetHistogram h, MethodId method, absl::Duration d) {
    ObserveSeconds(methods[method.index].budgets[h], budget_layouts[h], d);
  }

  ~MetricsCells() {
    for (auto& by_method : latency) {
      for (auto& by_code : by_method) {
        for (auto& cells : by_code) delete cells.load(std::memory_order_acquire);
      }
    }
    for (auto& m : methods) {
      for (auto& cells : m.budgets) delete cells.load(std::memory_order_acquire);
    }
    for (auto& cells : table_histograms) delete cells.load(std::memory_order_acquire);
    for (auto& entry : method_cache) delete entry.load(std::memory_order_acquire);
  }
};

}  // namespace internal
}  // namespace hopbudget

#endif  // HOPBUDGET_INTERNAL_METRICS_CELLS_H_
