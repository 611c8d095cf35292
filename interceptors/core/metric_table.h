// Copyright hopbudget authors.
//
// metric_table.h (internal): the process-wide metric families, declared as
// one table per subsystem. Each row names a family (name, type, help, its
// label and the enum values it exposes, the unit in the name's suffix) and
// the MetricsSnapshot field it fills; from the tables follow
//   - the cells: one relaxed atomic per exposed enum value, in one flat
//     array at offsets computed at compile time (metrics_cells.h), so that an
//     increment is still one `fetch_add` at a constant address: no lock, no
//     allocation, no lookup;
//   - the snapshot: every row copies its cells into its field
//     (metrics_snapshot.cc);
//   - the exposition: HELP, TYPE and one sample per exposed value, in table
//     order (exposition.cc), zeros included.
// The families labelled by method, side, code or hop (calls, latencies,
// budgets, deadline_exceeded, retries by code) have labels that are only
// known at run time; exposition.cc writes them from MethodSnapshot.
//
// One label function per enum: the label value of an enum value is its
// `...Name()` function (RetryOutcomeName, ShieldEventName, ...), the same
// name logs, /deadlinez and gtest print.
//
// How to add a counter to an existing subsystem:
//   1. a field in MetricsSnapshot (metrics.h);
//   2. a row here, and its id in the subsystem's row enum (same order: a
//      static_assert checks the count);
//   3. the Count method on Metrics that calls `cells_->Add(Row::kX, value)`;
//   4. the metrics table of docs/metrics.md.
// How to add a subsystem (e.g. admission: admitted/queued/shed{reason}, a
// queue-wait histogram, a current-limit gauge):
//   1. its enums and their label functions (`FooName`, AbslStringify) and its
//      snapshot fields in metrics.h;
//   2. a row enum `FooMetric`, a table `kFooMetrics` and a `TableOf<FooMetric>`
//      specialisation below, and the table's entry in kMetricTables (its
//      place in the list is its place in the exposition);
//   3. its Count/Observe/Set methods on Metrics, each one `Add`, `Set` or
//      `Observe` on cells_ with a row id;
//   4. the metrics table of docs/metrics.md. Nothing in exposition.cc changes.
// Kinds of rows: Counter (one cell, or one per enum value with a label),
// Gauge (cells that are added to or set; signed), Derived (a gauge computed
// from other snapshot fields at exposition, no cells), Histogram (seconds,
// exponential buckets from a MetricsOptions field, allocated on first use).
// A row with an empty name is stored and snapshotted but not exposed (values
// of an enum that another row does not expose, e.g. RetryOutcome::kRetry).
#ifndef HOPBUDGET_INTERNAL_METRIC_TABLE_H_
#define HOPBUDGET_INTERNAL_METRIC_TABLE_H_

#include <array>
#include <cstdint>
#include <type_traits>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "hopbudget/advanced/metrics.h"

namespace hopbudget {
namespace internal {

enum class MetricType : uint8_t { kCounter, kGauge, kHistogram };
absl::string_view MetricTypeName(MetricType type);  // "counter", "gauge", "histogram"

// Reads and writes a MetricsSnapshot field: a uint64_t or int64_t (one
// value), or a std::array of them indexed by enum value.
template <auto kMember>
struct FieldOf {
  static void Store(MetricsSnapshot& s, int index, uint64_t value) {
    auto& field = s.*kMember;
    using T = std::decay_t<decltype(field)>;
    if constexpr (std::is_integral_v<T>) {
      field = static_cast<T>(value);  // int64_t gauges: two's complement
    } else {
      field[index] = static_cast<typename T::value_type>(value);
    }
  }
  static double Load(const MetricsSnapshot& s, int index) {
    const auto& field = s.*kMember;
    using T = std::decay_t<decltype(field)>;
    if constexpr (std::is_integral_v<T>) {
      return static_cast<double>(field);
    } else {
      return static_cast<double>(field[index]);
    }
  }
};

// The label function of an enum, on its integer value.
template <typename Enum, auto kName>
absl::string_view EnumLabel(int value) {
  return kName(static_cast<Enum>(value));
}

struct MetricRow {
  absl::string_view name;  // "" : stored and snapshotted, not exposed
  MetricType type;
  absl::string_view help;
  absl::string_view label;  // "" : one series without labels
  absl::string_view (*label_value)(int value) = nullptr;
  // The enum values this row stores and exposes: [first, first + count).
  int first = 0;
  int count = 1;
  // Counters and gauges: the snapshot field. Derived gauges: load only.
  void (*store)(MetricsSnapshot&, int index, uint64_t value) = nullptr;
  double (*load)(const MetricsSnapshot&, int index) = nullptr;
  // Histograms: the snapshot field and the options field of its buckets.
  HistogramSnapshot MetricsSnapshot::*histogram = nullptr;
  HistogramBuckets MetricsOptions::*buckets = nullptr;
  // Atomic cells the row owns: `count` for counters and gauges, none for
  // derived gauges and histograms. Set by the factories below (a constant
  // expression that does not compare function pointers, which GCC's UBSan
  // build refuses in constexpr).
  bool has_cells = false;

  constexpr int cells() const { return has_cells ? count : 0; }
  constexpr bool exposed() const { return !name.empty(); }
};

// A counter without labels.
template <auto kMember>
constexpr MetricRow Counter(absl::string_view name, absl::string_view help) {
  return {name,
          MetricType::kCounter,
          help,
          "",
          nullptr,
          0,
          1,
          &FieldOf<kMember>::Store,
          &FieldOf<kMember>::Load,
          nullptr,
          nullptr,
          true};
}
// A counter per enum value in [first, first + count), labelled `label`.
template <auto kMember, typename Enum, auto kName>
constexpr MetricRow Counter(absl::string_view name, absl::string_view help, absl::string_view label,
                            Enum first, int count) {
  return {name,
          MetricType::kCounter,
          help,
          label,
          &EnumLabel<Enum, kName>,
          static_cast<int>(first),
          count,
          &FieldOf<kMember>::Store,
          &FieldOf<kMember>::Load,
          nullptr,
          nullptr,
          true};
}
// A counter's cells kept for the snapshot only (not exposed).
template <auto kMember>
constexpr MetricRow Hidden(int first, int count) {
  return {"",
          MetricType::kCounter,
          "",
          "",
          nullptr,
          first,
          count,
          &FieldOf<kMember>::Store,
          &FieldOf<kMember>::Load,
          nullptr,
          nullptr,
          true};
}
// A gauge without labels: Add (signed deltas) or Set.
template <auto kMember>
constexpr MetricRow Gauge(absl::string_view name, absl::string_view help) {
  return {name,
          MetricType::kGauge,
          help,
          "",
          nullptr,
          0,
          1,
          &FieldOf<kMember>::Store,
          &FieldOf<kMember>::Load,
          nullptr,
          nullptr,
          true};
}
// A gauge computed from the snapshot at exposition (no cells).
inline constexpr MetricRow Derived(absl::string_view name, absl::string_view help,
                                   double (*load)(const MetricsSnapshot&, int)) {
  return {name, MetricType::kGauge, help, "", nullptr, 0, 1, nullptr, load};
}
// A histogram in seconds without labels.
inline constexpr MetricRow Histogram(absl::string_view name, absl::string_view help,
                                     HistogramSnapshot MetricsSnapshot::*field,
                                     HistogramBuckets MetricsOptions::*buckets) {
  MetricRow row{name, MetricType::kHistogram, help, ""};
  row.histogram = field;
  row.buckets = buckets;
  return row;
}

using S = MetricsSnapshot;

// Retries (retry_interceptor.cc, retry_loop.cc).
enum class RetryMetric : int {
  kDecisionsNotSkipped,  // RetryOutcome kRetry, kSucceeded: the snapshot only
  kSkipped,
  kBackoffClipped,
  kPushbackHonoured,
  kUnfitPolicyCalls,
};
inline constexpr MetricRow kRetryMetrics[] = {
    Hidden<&S::retry_decisions>(0, 2),
    Counter<&S::retry_decisions, RetryOutcome, RetryOutcomeName>(
        "hopbudget_retries_skipped_total",
        "Failed attempts not retried, by reason (RetryOutcomeName: no_room, no room left in the "
        "deadline; throttled, the retry throttle; attempts_exhausted; ...).",
        "reason", RetryOutcome::kNotRetryableCode, kRetryOutcomeCount - 2),
    Counter<&S::backoff_clipped>("hopbudget_backoff_clipped_total",
                                 "Retry backoffs shortened to fit the deadline."),
    Counter<&S::pushback_honoured>("hopbudget_pushback_honoured_total",
                                   "Retry waits taken from grpc-retry-pushback-ms."),
    Counter<&S::unfit_policy_calls>(
        "hopbudget_unfit_policy_calls_total",
        "Calls on a retry policy that start-up validation rejected (accept_unfit_policy)."),
};

// What arrives from callers and callees: leaks, headers, details, traces,
// timers (server_interceptor.cc, client_interceptor.cc).
enum class PropagationMetric : int {
  kLeaks,
  kBadBudgetHeader,
  kBadAttribution,
  kTraceDropped,
  kTimersArmed,
  kBackendWait,
  kTransitDelay,
};
inline constexpr MetricRow kPropagationMetrics[] = {
    Counter<&S::deadline_leaks, LeakKind, LeakKindName>(
        "hopbudget_deadline_leaks_total",
        "Calls made inside a handler with no deadline or one later than the inbound call's.",
        "kind", LeakKind::kNoDeadline, kLeakKindCount),
    Counter<&S::bad_budget_header, HeaderParse, HeaderParseName>(
        "hopbudget_bad_budget_header_total",
        "Inbound hopbudget-budget-us headers refused, by reason.", "kind",
        static_cast<HeaderParse>(1), kHeaderParseCount - 1),  // all but kOk
    Counter<&S::bad_attribution>("hopbudget_bad_attribution_total",
                                 "Attribution details from a callee that could not be decoded."),
    Counter<&S::trace_dropped, TraceDrop, TraceDropName>(
        "hopbudget_trace_dropped_total",
        "Per-hop traces from callees that were dropped, by reason.", "reason",
        TraceDrop::kMalformed, kTraceDropCount),
    Counter<&S::timers_armed>(
        "hopbudget_timers_armed_total",
        "Calls that needed hopbudget's shared timer (request caps, leaks, idle budgets)."),
    Histogram("hopbudget_backend_wait_seconds",
              "Time a call that found no ready backend waited for one (until sent, or until it "
              "gave up with source no-backend).",
              &S::backend_wait, &MetricsOptions::budget_remaining),
    Histogram("hopbudget_server_transit_delay_seconds",
              "Time an inbound call from a hopbudget sender waited on its way beyond the fastest "
              "call from that sender (its queue, the network, this hop's socket), taken off its "
              "budget.",
              &S::transit_delay, &MetricsOptions::budget_remaining),
};

// Shielded work (shield.h). ShieldEvent values are split over four families.
enum class ShieldMetric : int { kStarted, kOperations, kInFlight, kUnobserved, kDrains };
inline constexpr MetricRow kShieldMetrics[] = {
    Counter<&S::shield_events, ShieldEvent, ShieldEventName>("hopbudget_shield_started_total",
                                                             "Shielded operations accepted.", "",
                                                             ShieldEvent::kStarted, 1),
    Counter<&S::shield_events, ShieldEvent, ShieldEventName>(
        "hopbudget_shield_operations_total",
        "Shielded operations by outcome (refused: at capacity or draining).", "outcome",
        ShieldEvent::kCompleted, 4),
    Gauge<&S::shield_in_flight>("hopbudget_shield_in_flight",
                                "Shielded operations queued or running."),
    Counter<&S::shield_events, ShieldEvent, ShieldEventName>(
        "hopbudget_shield_unobserved_total", "Shielded outcomes nobody waited for (logged).", "",
        ShieldEvent::kUnobserved, 1),
    Counter<&S::shield_events, ShieldEvent, ShieldEventName>(
        "hopbudget_shield_drains_total", "Shield drains, by whether every operation ended in time.",
        "result", ShieldEvent::kDrained, 2),
};

// A Hop's service config (hop.h).
enum class ConfigMetric : int { kReloads, kGeneration, kShadow };
inline constexpr MetricRow kConfigMetrics[] = {
    Counter<&S::config_reloads, ConfigReload, ConfigReloadName>(
        "hopbudget_config_reloads_total",
        "Service config reloads, by result (refused: did not read or validate; the table in "
        "force kept).",
        "result", ConfigReload::kApplied, kConfigReloadCount),
    Gauge<&S::config_generation>("hopbudget_config_generation",
                                 "The policy table in force: 1 for the one read at start, one "
                                 "more per applied reload."),
    Counter<&S::shadow_actions, ShadowAction, ShadowActionName>(
        "hopbudget_shadow_total",
        "Calls of methods in shadow mode that hopbudget would have refused, cut at this hop's "
        "request cap, or failed fast downstream, and let run.",
        "action", ShadowAction::kRefuse, kShadowActionCount - 1),
};

// Races, hedges and concurrency slots (race_grpc.h, hedge_grpc.h,
// slots_grpc.h).
enum class FanOutMetric : int {
  kRaces,
  kRaceLosersCancelled,
  kHedgedCalls,
  kHedgesSent,
  kHedgesWon,
  kHedgesSkipped,
  kHedgeLosersCancelled,
  kHedgeExtraLoad,
  kSlotWait,
  kSlotRefusals,
};
inline constexpr MetricRow kFanOutMetrics[] = {
    Counter<&S::races, RaceOutcome, RaceOutcomeName>("hopbudget_races_total",
                                                     "First-success races, by outcome.", "outcome",
                                                     RaceOutcome{}, kRaceOutcomeCount),
    Counter<&S::race_losers_cancelled>(
        "hopbudget_race_losers_cancelled_total",
        "Race attempts cancelled because another answered first (not failures)."),
    Counter<&S::hedged_calls>("hopbudget_hedged_calls_total", "Calls started by a Hedger."),
    Counter<&S::hedges_sent>("hopbudget_hedges_sent_total",
                             "Hedges sent (attempts after the first)."),
    Counter<&S::hedges_won>("hopbudget_hedges_won_total", "Hedged calls answered by a hedge."),
    Counter<&S::hedges_skipped, HedgeOutcome, HedgeOutcomeName>(
        "hopbudget_hedges_skipped_total",
        "Hedges held back or not sent, by reason (one held back by the extra-load bucket counts "
        "once, even when it goes out later).",
        "reason", static_cast<HedgeOutcome>(1), kHedgeOutcomeCount - 1),  // all but kSend
    Counter<&S::hedge_losers_cancelled>(
        "hopbudget_hedge_losers_cancelled_total",
        "Hedged attempts cancelled because another answered first."),
    Derived("hopbudget_hedge_extra_load_ratio",
            "Hedges sent per hedged call since start (the extra load).",
            [](const MetricsSnapshot& s, int) { return s.extra_load(); }),
    Histogram("hopbudget_slot_wait_seconds",
              "Time a call waited for a concurrency slot towards a downstream, when granted.",
              &S::slot_wait, &MetricsOptions::budget_remaining),
    Counter<&S::slot_refusals, SlotRefusalReason, SlotRefusalReasonName>(
        "hopbudget_slot_refusals_total",
        "Calls that got no concurrency slot, by reason (no_time_to_wait: source slot-wait).",
        "reason", SlotRefusalReason::kNoTimeToWait, kSlotRefusalReasonCount),
};

// Deadline-aware admission (admission.h, server_interceptor.cc).
enum class AdmissionMetric : int {
  kAdmitted,
  kQueued,
  kShed,
  kAdmittedAfterWait,
  kInProgress,
  kWaiting,
  kLimit,
  kQueueWait,
  kHandlerTime,
  kPredictedTime,
};
inline constexpr MetricRow kAdmissionMetrics[] = {
    Counter<&S::admission_decisions, ArrivalDecision, ArrivalDecisionName>(
        "hopbudget_admission_admitted_total", "Calls admitted at once on arrival.", "",
        ArrivalDecision::kAdmit, 1),
    Counter<&S::admission_decisions, ArrivalDecision, ArrivalDecisionName>(
        "hopbudget_admission_queued_total",
        "Calls that waited for admission (then admitted, or shed as queue_expired, "
        "queue_timeout, overload_wait or cannot_finish).",
        "", ArrivalDecision::kQueue, 1),
    Counter<&S::admission_decisions, ArrivalDecision, ArrivalDecisionName>(
        "hopbudget_admission_shed_total",
        "Calls refused by admission before their work started, by reason (cannot_finish and "
        "queue_expired: DEADLINE_EXCEEDED, sources cannot-finish and queue-wait; queue_full, "
        "over_limit, queue_timeout, overload_wait: RESOURCE_EXHAUSTED with a pushback).",
        "reason", ArrivalDecision::kShedCannotFinish, kArrivalDecisionCount - 2),
    Counter<&S::admission_admitted_after_wait>("hopbudget_admission_admitted_after_wait_total",
                                               "Waiting calls admitted when a place came free."),
    Gauge<&S::admission_in_progress>("hopbudget_admission_in_progress",
                                     "Admitted calls whose handler has not answered yet."),
    Gauge<&S::admission_waiting>("hopbudget_admission_waiting",
                                 "Calls waiting for admission (holding no thread)."),
    Gauge<&S::admission_limit>(
        "hopbudget_admission_limit",
        "The limit of calls in progress (adaptive: follows measured handler time)."),
    Histogram("hopbudget_admission_queue_wait_seconds",
              "Time a call waited for admission before it started.", &S::admission_queue_wait,
              &MetricsOptions::budget_remaining),
    Histogram("hopbudget_admission_handler_seconds",
              "Handler time of admitted calls, from admission to answer.",
              &S::admission_handler_time, &MetricsOptions::server_call_duration),
    Histogram("hopbudget_admission_predicted_seconds",
              "The predicted handler time each admitted call was checked against (compare "
              "with hopbudget_admission_handler_seconds).",
              &S::admission_predicted_time, &MetricsOptions::server_call_duration),
};

// Every table, in exposition order (after the families labelled by method).
inline constexpr absl::Span<const MetricRow> kMetricTables[] = {
    kRetryMetrics,  kPropagationMetrics, kShieldMetrics,
    kFanOutMetrics, kAdmissionMetrics,   kConfigMetrics};
inline constexpr int kMetricTableCount = static_cast<int>(std::size(kMetricTables));

// The table of a row enum: its index in kMetricTables and its row count.
template <typename Row>
struct TableOf;
template <>
struct TableOf<RetryMetric> {
  static constexpr int kIndex = 0;
  static constexpr int kRows = static_cast<int>(RetryMetric::kUnfitPolicyCalls) + 1;
};
template <>
struct TableOf<PropagationMetric> {
  static constexpr int kIndex = 1;
  static constexpr int kRows = static_cast<int>(PropagationMetric::kTransitDelay) + 1;
};
template <>
struct TableOf<ShieldMetric> {
  static constexpr int kIndex = 2;
  static constexpr int kRows = static_cast<int>(ShieldMetric::kDrains) + 1;
};
template <>
struct TableOf<FanOutMetric> {
  static constexpr int kIndex = 3;
  static constexpr int kRows = static_cast<int>(FanOutMetric::kSlotRefusals) + 1;
};
template <>
struct TableOf<AdmissionMetric> {
  static constexpr int kIndex = 4;
  static constexpr int kRows = static_cast<int>(AdmissionMetric::kPredictedTime) + 1;
};
template <>
struct TableOf<ConfigMetric> {
  static constexpr int kIndex = 5;
  static constexpr int kRows = static_cast<int>(ConfigMetric::kShadow) + 1;
};
static_assert(std::size(kRetryMetrics) == TableOf<RetryMetric>::kRows);
static_assert(std::size(kConfigMetrics) == TableOf<ConfigMetric>::kRows);
static_assert(std::size(kAdmissionMetrics) == TableOf<AdmissionMetric>::kRows);
static_assert(std::size(kPropagationMetrics) == TableOf<PropagationMetric>::kRows);
static_assert(std::size(kShieldMetrics) == TableOf<ShieldMetric>::kRows);
static_assert(std::size(kFanOutMetrics) == TableOf<FanOutMetric>::kRows);

// Where a row's cells start in the flat array: the cells of every row before
// it, in table order. Constant when `table` and `row` are.
constexpr int CellOffset(int table, int row) {
  int offset = 0;
  for (int t = 0; t < table; ++t) {
    for (const MetricRow& r : kMetricTables[t]) offset += r.cells();
  }
  for (int r = 0; r < row; ++r) offset += kMetricTables[table][r].cells();
  return offset;
}
inline constexpr int kMetricCellCount = CellOffset(kMetricTableCount, 0);

// Histogram rows are numbered the same way, in their own array.
constexpr int HistogramOffset(int table, int row) {
  int offset = 0;
  for (int t = 0; t < table; ++t) {
    for (const MetricRow& r : kMetricTables[t]) offset += r.type == MetricType::kHistogram;
  }
  for (int r = 0; r < row; ++r) offset += kMetricTables[table][r].type == MetricType::kHistogram;
  return offset;
}
inline constexpr int kMetricHistogramCount = HistogramOffset(kMetricTableCount, 0);

template <typename Row>
constexpr const MetricRow& RowOf(Row row) {
  return kMetricTables[TableOf<Row>::kIndex][static_cast<int>(row)];
}

}  // namespace internal
}  // namespace hopbudget

#endif  // HOPBUDGET_INTERNAL_METRIC_TABLE_H_
