// Copyright hopbudget authors.
//
// metrics.cc: a registry's creation (its options validated) and the
// recording methods the library calls on every call. The storage they write
// is metrics_cells.h; the rest of Metrics is in units of its own, each doing
// one thing: method interning (method_interning.cc), the recent-call ring
// (recent_calls.cc), the snapshot (metrics_snapshot.cc), the enums' names
// (metrics_names.cc) and the histograms (histogram_cells.h).
#include "hopbudget/advanced/metrics.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "metric_table.h"
#include "metrics_cells.h"

namespace hopbudget {

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

const std::vector<double>& Metrics::latency_bounds(LatencyKind kind) const {
  return cells_->latency_layouts[static_cast<int>(kind)].bounds();
}

const std::vector<double>& Metrics::budget_at_arrival_bounds() const {
  return cells_->budget_layouts[internal::kAtArrival].bounds();
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

}  // namespace hopbudget
