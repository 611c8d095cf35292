// Copyright hopbudget authors.
#include "hopbudget/advanced/metrics.h"

#include <google/protobuf/descriptor.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/types/optional.h"
#include "call_mutex.h"
#include "hopbudget/advanced/attribution.h"
#include "label_table.h"
#include "metric_table.h"
#include "striped_cells.h"

namespace hopbudget {
namespace internal {
namespace {

constexpr std::memory_order kRelaxed = std::memory_order_relaxed;
constexpr char kUnknownHop[] = "unknown";

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
  HistogramSnapshot Snapshot(std::vector<double> bounds, double units_per_unit) const {
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
  explicit ExponentialLayout(const HistogramBuckets& b)
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
  double Bound(const std::vector<double>& descending, int k) const {
    // k = n * e - j with j in [0, n).
    const int e = k >= 0 ? (k + n_ - 1) / n_ : -((-k) / n_);
    return std::ldexp(descending[n_ * e - k], e);
  }
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
void ObserveSeconds(std::atomic<SecondsCells*>& slot, const ExponentialLayout& layout,
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

// Histograms with the same bounds compute the same bucket for every value.
bool SameBounds(const HistogramBuckets& a, const HistogramBuckets& b) {
  return ExponentialLayout(a).bounds() == ExponentialLayout(b).bounds();
}

// Adds `from`'s observations to `into`, of the same bounds.
void AddObservations(const HistogramSnapshot& from, HistogramSnapshot& into) {
  for (size_t b = 0; b < into.counts.size(); ++b) into.counts[b] += from.counts[b];
  into.count += from.count;
  into.sum += from.sum;
}

HistogramSnapshot SnapshotSeconds(const SecondsCells* cells, const ExponentialLayout& layout) {
  if (cells != nullptr) return cells->Snapshot(layout.bounds(), 1e9);
  HistogramSnapshot s;
  s.bounds = layout.bounds();
  s.counts.assign(s.bounds.size() + 1, 0);
  return s;
}

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

// "/pkg.Service/Method" -> "pkg.Service.Method", the descriptor's full name.
bool KnownToDescriptorPool(absl::string_view method) {
  if (method.size() < 4 || method[0] != '/') return false;
  std::string name(method.substr(1));
  const size_t slash = name.rfind('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == name.size()) return false;
  name[slash] = '.';
  return google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(name) != nullptr;
}

int CodeIndex(absl::StatusCode code) {
  const int c = static_cast<int>(code);
  return c >= 0 && c < kStatusCodeCount ? c : static_cast<int>(absl::StatusCode::kUnknown);
}

template <typename T, size_t N>
void Copy(const std::array<std::atomic<T>, N>& from, std::array<T, N>& to) {
  for (size_t i = 0; i < N; ++i) to[i] = from[i].load(kRelaxed);
}

}  // namespace

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

// Fills the fields of every row of metric_table.h.
void SnapshotTables(const MetricsCells& c, MetricsSnapshot& s);

}  // namespace internal

using internal::Copy;
using internal::kRelaxed;

namespace {
absl::Status ValidateBuckets(absl::string_view field, const HistogramBuckets& b) {
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("MetricsOptions.", field, ".", what));
  };
  if (b.schema < 0 || b.schema > 8) {
    return bad(absl::StrCat("schema: ", b.schema, " is outside 0..8"));
  }
  if (!(b.min_seconds > 0) || !std::isfinite(b.min_seconds)) {
    return bad(absl::StrCat("min_seconds: ", b.min_seconds, " is not a finite positive number"));
  }
  if (!(b.max_seconds > b.min_seconds) || !std::isfinite(b.max_seconds)) {
    return bad(absl::StrCat("max_seconds: ", b.max_seconds,
                            " is not finite and above min_seconds (", b.min_seconds, ")"));
  }
  const double buckets = std::ceil((std::log2(b.max_seconds) - std::log2(b.min_seconds)) *
                                   static_cast<double>(1 << b.schema)) +
                         1;
  if (buckets > kMaxHistogramBuckets) {
    return bad(absl::StrCat("schema: ", b.schema, " from ", b.min_seconds, " s to ", b.max_seconds,
                            " s makes ", buckets, " buckets, more than ", kMaxHistogramBuckets));
  }
  return absl::OkStatus();
}
}  // namespace

absl::string_view MethodRoleName(MethodRole role) {
  return role == MethodRole::kInfrastructure ? "infrastructure" : "application";
}

absl::string_view SideName(Side side) { return side == Side::kServer ? "server" : "client"; }

absl::string_view LeakKindName(LeakKind kind) {
  return kind == LeakKind::kLaterThanInbound ? "later_than_inbound" : "no_deadline";
}

absl::string_view ConfigReloadName(ConfigReload result) {
  switch (result) {
    case ConfigReload::kApplied:
      return "applied";
    case ConfigReload::kRefused:
      return "refused";
  }
  return "unknown";
}

absl::string_view ShieldEventName(ShieldEvent event) {
  switch (event) {
    case ShieldEvent::kStarted:
      return "started";
    case ShieldEvent::kCompleted:
      return "completed";
    case ShieldEvent::kFailed:
      return "failed";
    case ShieldEvent::kExceededBound:
      return "exceeded_bound";
    case ShieldEvent::kRefused:
      return "refused";
    case ShieldEvent::kUnobserved:
      return "unobserved";
    case ShieldEvent::kDrained:
      return "drained";
    case ShieldEvent::kDrainTimedOut:
      return "timed_out";
  }
  return "unknown";
}

absl::string_view LatencyKindName(LatencyKind kind) {
  switch (kind) {
    case LatencyKind::kClientAttempt:
      return "client_attempt";
    case LatencyKind::kClientCall:
      return "client_call";
    case LatencyKind::kServerCall:
      return "server_call";
  }
  return "unknown";
}

absl::string_view ClientCallKindName(ClientCallKind kind) {
  return kind == ClientCallKind::kRetryAttempt ? "retry_attempt" : "plain_call";
}

absl::string_view SlotRefusalReasonName(SlotRefusalReason reason) {
  return reason == SlotRefusalReason::kQueueFull ? "queue_full" : "no_time_to_wait";
}

namespace internal {
absl::string_view MetricTypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}
}  // namespace internal

absl::Status ValidateMetricsOptions(const MetricsOptions& o) {
  const std::pair<absl::string_view, const HistogramBuckets*> histograms[] = {
      {"budget_at_arrival", &o.budget_at_arrival},
      {"request_budget", &o.request_budget},
      {"budget_remaining", &o.budget_remaining},
      {"client_attempt_duration", &o.client_attempt_duration},
      {"client_call_duration", &o.client_call_duration},
      {"server_call_duration", &o.server_call_duration}};
  for (const auto& [field, buckets] : histograms) {
    if (absl::Status s = ValidateBuckets(field, *buckets); !s.ok()) return s;
  }
  // A table's histogram on buckets of its own (metric_table.h) is checked too.
  for (absl::Span<const internal::MetricRow> table : internal::kMetricTables) {
    for (const internal::MetricRow& row : table) {
      if (row.type != internal::MetricType::kHistogram) continue;
      if (absl::Status s = ValidateBuckets(row.name, o.*row.buckets); !s.ok()) return s;
    }
  }
  for (size_t i = 0; i < o.infrastructure_method_prefixes.size(); ++i) {
    const std::string& p = o.infrastructure_method_prefixes[i];
    if (p.empty() || p[0] != '/') {
      return absl::InvalidArgumentError(
          absl::StrCat("MetricsOptions.infrastructure_method_prefixes[", i, "]: \"", p,
                       "\" does not start with '/' (full method names do)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Metrics>> Metrics::Create(MetricsOptions options) {
  if (absl::Status s = ValidateMetricsOptions(options); !s.ok()) return s;
  return std::unique_ptr<Metrics>(new Metrics(options));
}

Metrics::Metrics(Clock* clock)
    : Metrics([clock] {
        MetricsOptions o;
        o.clock = clock;
        return o;
      }()) {}

Metrics::Metrics(const MetricsOptions& options)
    : clock_(options.clock != nullptr ? *options.clock : Clock::Real()),
      cells_(std::make_unique<internal::MetricsCells>(options)) {}
Metrics::~Metrics() = default;

Metrics& Metrics::Default() {
  static Metrics* const metrics = new Metrics();
  return *metrics;
}

MethodId Metrics::Method(absl::string_view full_method) {
  auto& slot = cells_->method_cache[(reinterpret_cast<uintptr_t>(full_method.data()) >> 4) %
                                    cells_->method_cache.size()];
  const internal::MetricsCells::MethodCacheEntry* cached = slot.load(std::memory_order_acquire);
  // The name is compared too: an address may hold another name later (a
  // generic call's method string).
  if (cached != nullptr && cached->data == full_method.data() && cached->name == full_method) {
    return cached->id;
  }
  const MethodId id{cells_->method_labels.Intern(full_method)};
  if (cached == nullptr) {
    auto* mine = new internal::MetricsCells::MethodCacheEntry{full_method.data(),
                                                              std::string(full_method), id};
    if (!slot.compare_exchange_strong(cached, mine, std::memory_order_acq_rel)) delete mine;
  }
  return id;
}

void Metrics::CountCallEnd(Side side, MethodId method, absl::StatusCode code) {
  cells_->methods[method.index].calls.Add(
      static_cast<int>(side) * kStatusCodeCount + internal::CodeIndex(code), 1);
}

// The End*() calls are one observation each: the call count is the count
// of their slots (see LatencySlot).
void Metrics::EndServerCall(MethodId method, absl::StatusCode code, absl::Duration elapsed) {
  cells_->ObserveLatency(internal::kServerCallEnded, method, code, elapsed);
}

void Metrics::EndClientAttempt(MethodId method, absl::StatusCode code, absl::Duration elapsed,
                               ClientCallKind kind) {
  if (kind == ClientCallKind::kPlainCall && cells_->plain_call_shared) {
    cells_->ObserveLatency(internal::kPlainCallEnded, method, code, elapsed);
    return;
  }
  cells_->ObserveLatency(internal::kAttemptEnded, method, code, elapsed);
  if (kind == ClientCallKind::kPlainCall) {
    cells_->ObserveLatency(internal::kCallOnly, method, code, elapsed);
  }
}

void Metrics::EndRetryingCall(MethodId method, absl::StatusCode code, int attempts,
                              absl::Duration elapsed) {
  CountAttemptsPerCall(method, attempts);
  cells_->ObserveLatency(internal::kCallOnly, method, code, elapsed);
  if (code == absl::StatusCode::kOk && attempts > 1) {
    cells_->methods[method.index].succeeded_after_retry.fetch_add(1, kRelaxed);
  }
}

void Metrics::ObserveLatency(LatencyKind kind, MethodId method, absl::StatusCode code,
                             absl::Duration elapsed) {
  cells_->ObserveLatency(static_cast<internal::LatencySlot>(kind), method, code, elapsed);
}

const std::vector<double>& Metrics::latency_bounds(LatencyKind kind) const {
  return cells_->latency_layouts[static_cast<int>(kind)].bounds();
}

const std::vector<double>& Metrics::budget_at_arrival_bounds() const {
  return cells_->budget_layouts[internal::kAtArrival].bounds();
}

void Metrics::CountDeadlineExceeded(Side side, DeadlineSource source, absl::string_view hop) {
  const int h = hop.empty() ? kMaxHopLabels : cells_->hop_labels.Intern(hop);
  cells_->deadline_exceeded[static_cast<int>(side)][static_cast<int>(source)][h].fetch_add(
      1, kRelaxed);
}

void Metrics::ObserveBudgetAtArrival(MethodId method, absl::Duration budget) {
  internal::MethodCells& m = cells_->methods[method.index];
  if (budget == absl::InfiniteDuration()) {
    m.without_deadline.fetch_add(1, kRelaxed);
    return;
  }
  cells_->ObserveBudget(internal::kAtArrival, method, budget);
}

void Metrics::ObserveRequestBudget(MethodId method, absl::Duration budget) {
  if (budget == absl::InfiniteDuration()) return;
  cells_->ObserveBudget(internal::kRequestBudget, method, budget);
}

void Metrics::ObserveArrivalBudgets(MethodId method, absl::Duration at_arrival,
                                    absl::Duration request_budget) {
  if (at_arrival == request_budget && at_arrival != absl::InfiniteDuration() &&
      cells_->arrival_is_request_shared) {
    cells_->ObserveBudget(internal::kArrivalIsRequest, method, at_arrival);
    return;
  }
  ObserveBudgetAtArrival(method, at_arrival);
  ObserveRequestBudget(method, request_budget);
}

void Metrics::ObserveBudgetRemaining(MethodId method, absl::Duration remaining) {
  if (remaining == absl::InfiniteDuration()) return;
  cells_->ObserveBudget(internal::kRemaining, method, remaining);
}

using internal::AdmissionMetric;
using internal::ConfigMetric;
using internal::FanOutMetric;
using internal::PropagationMetric;
using internal::RetryMetric;
using internal::ShieldMetric;

void Metrics::CountBadBudgetHeader(HeaderParse kind) {
  cells_->Add<PropagationMetric::kBadBudgetHeader>(static_cast<int>(kind));
}
void Metrics::CountBadAttribution() { cells_->Add<PropagationMetric::kBadAttribution>(0); }
void Metrics::CountLeak(LeakKind kind) {
  cells_->Add<PropagationMetric::kLeaks>(static_cast<int>(kind));
}
void Metrics::CountTimerArmed() { cells_->Add<PropagationMetric::kTimersArmed>(0); }
void Metrics::ObserveBackendWait(absl::Duration waited) {
  cells_->Observe<PropagationMetric::kBackendWait>(waited);
}
void Metrics::ObserveTransitDelay(absl::Duration delay) {
  cells_->Observe<PropagationMetric::kTransitDelay>(delay);
}
void Metrics::CountRetryDecision(RetryOutcome o) {
  cells_->AddToRowOf<RetryMetric::kDecisionsNotSkipped, RetryMetric::kSkipped>(static_cast<int>(o));
}
void Metrics::CountRetry(MethodId method, absl::StatusCode failed_code) {
  cells_->methods[method.index].retries[internal::CodeIndex(failed_code)].fetch_add(1, kRelaxed);
}
void Metrics::CountAttemptsPerCall(MethodId method, int attempts) {
  const int clamped = std::clamp(attempts, 1, kMaxAttemptBuckets + 1);
  // Buckets le="1".."10", then +Inf.
  cells_->methods[method.index].attempts.Observe(clamped - 1,
                                                 static_cast<uint64_t>(attempts) * 1000000);
}
void Metrics::CountBackoffClipped() { cells_->Add<RetryMetric::kBackoffClipped>(0); }
void Metrics::CountPushbackHonoured() { cells_->Add<RetryMetric::kPushbackHonoured>(0); }
void Metrics::CountUnfitPolicyCall() { cells_->Add<RetryMetric::kUnfitPolicyCalls>(0); }
void Metrics::CountTraceDropped(TraceDrop reason) {
  cells_->Add<PropagationMetric::kTraceDropped>(static_cast<int>(reason));
}
void Metrics::CountShield(ShieldEvent event) {
  cells_->AddToRowOf<ShieldMetric::kStarted, ShieldMetric::kOperations, ShieldMetric::kUnobserved,
                     ShieldMetric::kDrains>(static_cast<int>(event));
}
void Metrics::CountConfigReload(ConfigReload result) {
  cells_->Add<ConfigMetric::kReloads>(static_cast<int>(result));
}
void Metrics::SetConfigGeneration(int64_t generation) {
  cells_->Set<ConfigMetric::kGeneration>(generation);
}
void Metrics::CountShadow(ShadowAction action) {
  cells_->Add<ConfigMetric::kShadow>(static_cast<int>(action));
}
void Metrics::AddShieldInFlight(int delta) {
  // Two's complement: a negative delta wraps, the snapshot reads it signed.
  cells_->Add<ShieldMetric::kInFlight>(0, static_cast<uint64_t>(static_cast<int64_t>(delta)));
}

namespace {
// Claims the right to record with a compare-exchange on the last time, so
// that of many calls arriving or finishing together one is kept.
bool Claim(std::atomic<int64_t>& last, int64_t now, absl::Duration interval) {
  int64_t seen = last.load(kRelaxed);
  return now - seen >= absl::ToInt64Nanoseconds(interval) &&
         last.compare_exchange_strong(seen, now, kRelaxed);
}
}  // namespace

bool Metrics::SampleOnArrival(absl::Time now) {
  return Claim(cells_->recent_last_ns, absl::ToUnixNanos(now), kRecentCallInterval);
}

void Metrics::RecordRecentCall(absl::StatusCode code, bool sampled,
                               absl::FunctionRef<RecentCall()> make) {
  const bool keep = sampled || (code != absl::StatusCode::kOk &&
                                Claim(cells_->recent_last_failure_ns,
                                      absl::ToUnixNanos(clock_.Now()), kRecentFailureInterval));
  if (!keep) return;
  RecentCall call = make();
  const uint64_t seq = cells_->recent_next.fetch_add(1, kRelaxed);
  internal::RecentSlot& slot = cells_->recent[seq % kRecentCallCapacity];
  internal::CallMutexLock lock(&slot.mu);
  if (slot.used && slot.seq > seq) return;  // a newer call already took the slot
  slot.used = true;
  slot.seq = seq;
  slot.call = std::move(call);
}

std::vector<RecentCall> Metrics::RecentCalls() const {
  std::vector<std::pair<uint64_t, RecentCall>> calls;
  for (const internal::RecentSlot& slot : cells_->recent) {
    internal::CallMutexLock lock(&slot.mu);
    if (slot.used) calls.emplace_back(slot.seq, slot.call);
  }
  std::sort(calls.begin(), calls.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<RecentCall> out;
  out.reserve(calls.size());
  for (auto& c : calls) out.push_back(std::move(c.second));
  return out;
}

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

// Races, hedges and concurrency slots.
void Metrics::CountRace(RaceOutcome outcome, int losers_cancelled) {
  cells_->Add<FanOutMetric::kRaces>(static_cast<int>(outcome));
  if (losers_cancelled > 0) {
    cells_->Add<FanOutMetric::kRaceLosersCancelled>(0, static_cast<uint64_t>(losers_cancelled));
  }
}
void Metrics::CountHedgedCall(int sent, int winner, int losers) {
  cells_->Add<FanOutMetric::kHedgedCalls>(0);
  if (sent > 1) cells_->Add<FanOutMetric::kHedgesSent>(0, static_cast<uint64_t>(sent - 1));
  if (winner > 0) cells_->Add<FanOutMetric::kHedgesWon>(0);
  if (losers > 0)
    cells_->Add<FanOutMetric::kHedgeLosersCancelled>(0, static_cast<uint64_t>(losers));
}
void Metrics::CountHedgeSkipped(HedgeOutcome reason) {
  cells_->Add<FanOutMetric::kHedgesSkipped>(static_cast<int>(reason));
}
void Metrics::ObserveSlotWait(absl::Duration waited) {
  cells_->Observe<FanOutMetric::kSlotWait>(waited);
}
void Metrics::CountSlotRefusal(SlotRefusalReason reason) {
  cells_->Add<FanOutMetric::kSlotRefusals>(static_cast<int>(reason));
}
void Metrics::CountAdmission(ArrivalDecision decision) {
  cells_->AddToRowOf<AdmissionMetric::kAdmitted, AdmissionMetric::kQueued, AdmissionMetric::kShed>(
      static_cast<int>(decision));
}
void Metrics::CountAdmittedAfterWait(absl::Duration waited) {
  cells_->Add<AdmissionMetric::kAdmittedAfterWait>(0);
  cells_->Observe<AdmissionMetric::kQueueWait>(waited);
}
void Metrics::SetAdmissionState(int in_progress, int waiting, int limit) {
  cells_->Set<AdmissionMetric::kInProgress>(in_progress);
  cells_->Set<AdmissionMetric::kWaiting>(waiting);
  cells_->Set<AdmissionMetric::kLimit>(limit);
}
void Metrics::ObserveAdmittedHandler(absl::Duration actual,
                                     absl::optional<absl::Duration> predicted) {
  cells_->Observe<AdmissionMetric::kHandlerTime>(actual);
  if (predicted.has_value()) cells_->Observe<AdmissionMetric::kPredictedTime>(*predicted);
}

namespace internal {
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
}  // namespace internal

}  // namespace hopbudget
