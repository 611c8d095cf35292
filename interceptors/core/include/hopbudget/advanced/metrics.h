// Copyright hopbudget authors.
//
// metrics.h: what hopbudget observes, counted for Prometheus and for tests.
//
// One `Metrics` registry per process is the usual set-up: every interceptor
// and Shield writes to the one named in its options (a Hop's), or to
// `Metrics::Default()`. To its users a registry is read-only: Snapshot()
// and RecentCalls(); the recording side is the library's own. exposition.h
// turns a Snapshot() into the Prometheus text format; http_exporter.h
// serves it.
//
// Cost: an increment is a relaxed atomic add on a fixed array; no lock and no
// allocation on the hot path. Label values are interned into small indexes
// without a lock (first sight of a value allocates once).
//
// Label cardinality is bounded:
//   - `method` values are methods known to the binary's generated protobuf
//     descriptor pool (the services it registers or calls), at most
//     kMaxMethodLabels of them; anything else folds into "other".
//   - `hop` values (where a budget fired, from attribution) are valid hop
//     names, at most kMaxHopLabels; the rest fold into "other", and an unknown
//     origin is "unknown".
//
// Thread safety: all methods may be called concurrently.
//
// Example:
//   hopbudget::Metrics metrics;
//   ... server_options.metrics = &metrics; client_options.metrics = &metrics; ...
//   hopbudget::MetricsSnapshot s = metrics.Snapshot();
//   s.deadline_exceeded(hopbudget::Side::kClient, hopbudget::DeadlineSource::kAttempt);
#ifndef HOPBUDGET_ADVANCED_METRICS_H_
#define HOPBUDGET_ADVANCED_METRICS_H_

#include <array>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "hopbudget/advanced/admission.h"
#include "hopbudget/advanced/budget.h"
#include "hopbudget/advanced/clock.h"
#include "hopbudget/advanced/deadline_source.h"
#include "hopbudget/advanced/hedge.h"
#include "hopbudget/advanced/race.h"
#include "hopbudget/advanced/retry_policy.h"
#include "hopbudget/advanced/trace.h"
#include "hopbudget/advanced/wire.h"

namespace hopbudget {

namespace internal {
struct MetricsCells;
class MetricsRecorder;
}  // namespace internal

enum class Side : uint8_t { kClient = 0, kServer = 1 };
inline constexpr int kSideCount = 2;
absl::string_view SideName(Side side);  // the `side` label: "client", "server"
inline constexpr int kHeaderParseCount = 6;
inline constexpr int kStatusCodeCount = 17;  // OK .. UNAUTHENTICATED

enum class LeakKind : uint8_t {
  kNoDeadline = 0,    // a call inside a handler with no deadline at all
  kLaterThanInbound,  // a call whose deadline is later than the inbound one
};
inline constexpr int kLeakKindCount = 2;
absl::string_view LeakKindName(LeakKind kind);  // "no_deadline", "later_than_inbound"

// Events of shielded work (shield.h), counted by every Shield whose options
// name this registry.
enum class ShieldEvent : uint8_t {
  kStarted = 0,    // accepted by Run()
  kCompleted,      // outcome: completed
  kFailed,         // outcome: failed
  kExceededBound,  // outcome: exceeded its bound
  kRefused,        // refused by Run(): at capacity or draining
  kUnobserved,     // an outcome nobody waited for
  kDrained,        // a Drain() that saw every operation end
  kDrainTimedOut,  // a Drain() that returned with operations left
};
inline constexpr int kShieldEventCount = 8;
// The label values: "started", "completed", "failed", "exceeded_bound",
// "refused", "unobserved", "drained", "timed_out".
absl::string_view ShieldEventName(ShieldEvent event);

// What became of a service config reload (Hop::ReloadServiceConfig).
enum class ConfigReload : uint8_t {
  kApplied = 0,  // the new table is in force
  kRefused,      // it did not read or did not validate: the table in force kept
};
inline constexpr int kConfigReloadCount = 2;
// The `result` label: "applied", "refused".
absl::string_view ConfigReloadName(ConfigReload result);

// Attempts per logical call are counted in buckets 1..kMaxAttemptBuckets.
inline constexpr int kMaxAttemptBuckets = 10;
inline constexpr int kMaxMethodLabels = 64;  // index 0 is "other"
inline constexpr int kMaxHopLabels = 32;     // index 0 is "other"
// Every histogram in seconds (budgets and latencies) has exponential
// buckets: upper bounds 2^(k / 2^schema) seconds for integer k, the bucket
// boundaries of Prometheus native histograms and OpenTelemetry exponential
// histograms of the same schema (scale). The default, schema 3, grows by
// 2^(1/8) = 1.09 per bucket from the first bound >= 1 ms (1.09 ms) to the
// first >= 60 s (64 s): 128 buckets and +Inf, and a quantile read with
// histogram_quantile() is off by at most half a bucket, 4.5 %. The bucket of
// a value is computed (its binary exponent, and a table lookup and one
// comparison for its mantissa), not searched among the bounds.
struct HistogramBuckets {
  int schema = 3;              // 0..8: each bound is 2^(2^-schema) times the last
  double min_seconds = 0.001;  // first bound: the least 2^(k/2^schema) >= min_seconds
  double max_seconds = 60;     // last bound: the least 2^(k/2^schema) >= max_seconds
};
inline constexpr int kMaxHistogramBuckets = 512;  // bounds, +Inf not counted

// What a latency histogram measures; A66 names in docs/metrics.md.
enum class LatencyKind : uint8_t {
  kClientAttempt = 0,  // grpc.client.attempt.duration: one attempt on the wire
  kClientCall,         // grpc.client.call.duration: the logical call, all attempts
  kServerCall,         // grpc.server.call.duration: arrival to status sent
};
inline constexpr int kLatencyKindCount = 3;
// "client_attempt", "client_call", "server_call".
absl::string_view LatencyKindName(LatencyKind kind);

// Whether a method serves the application or operates the process (health
// checks, reflection, channelz, an admin service): kept apart so that the
// budgets and latencies of application calls are read without them.
enum class MethodRole : uint8_t { kApplication = 0, kInfrastructure };
absl::string_view MethodRoleName(MethodRole role);  // "application", "infrastructure"

// What a client-side call that ended was to its caller.
enum class ClientCallKind : uint8_t {
  kPlainCall = 0,  // a call of its own: its one attempt is also the logical call
  kRetryAttempt,   // one attempt of a retrying layer's logical call
};
absl::string_view ClientCallKindName(ClientCallKind kind);  // "plain_call", "retry_attempt"

// Calls remembered for /deadlinez, and how often at most (a sample, so that
// the ring costs nothing at tens of thousands of calls per second).
inline constexpr int kRecentCallCapacity = 64;
inline constexpr absl::Duration kRecentCallInterval = absl::Milliseconds(1);
inline constexpr absl::Duration kRecentFailureInterval = absl::Microseconds(100);

// Why a caller got no concurrency slot (slots_grpc.h).
enum class SlotRefusalReason : uint8_t {
  kNoTimeToWait = 0,  // its give-up time came first (source slot-wait)
  kQueueFull,         // max_waiters already waiting
};
inline constexpr int kSlotRefusalReasonCount = 2;
// The `reason` label: "no_time_to_wait", "queue_full".
absl::string_view SlotRefusalReasonName(SlotRefusalReason reason);

// The enums above print as their names (absl::StrCat, absl::StrFormat("%v")
// through AbslStringify; GoogleTest and streams through operator<<).
#define HOPBUDGET_METRICS_PRINTS_AS_NAME(Enum, Name) \
  template <typename Sink>                           \
  void AbslStringify(Sink& sink, Enum value) {       \
    sink.Append(Name(value));                        \
  }                                                  \
  inline std::ostream& operator<<(std::ostream& os, Enum value) { return os << Name(value); }
HOPBUDGET_METRICS_PRINTS_AS_NAME(Side, SideName)
HOPBUDGET_METRICS_PRINTS_AS_NAME(LeakKind, LeakKindName)
HOPBUDGET_METRICS_PRINTS_AS_NAME(ShieldEvent, ShieldEventName)
HOPBUDGET_METRICS_PRINTS_AS_NAME(ConfigReload, ConfigReloadName)
HOPBUDGET_METRICS_PRINTS_AS_NAME(LatencyKind, LatencyKindName)
HOPBUDGET_METRICS_PRINTS_AS_NAME(MethodRole, MethodRoleName)
HOPBUDGET_METRICS_PRINTS_AS_NAME(ClientCallKind, ClientCallKindName)
HOPBUDGET_METRICS_PRINTS_AS_NAME(SlotRefusalReason, SlotRefusalReasonName)
#undef HOPBUDGET_METRICS_PRINTS_AS_NAME

// An interned method label: Metrics::Method() once per call, then pass it.
struct MethodId {
  int index = 0;  // 0: "other"
};

struct HistogramSnapshot {
  std::vector<double> bounds;    // upper bounds; the +Inf bucket is implied
  std::vector<uint64_t> counts;  // per bucket, not cumulative; bounds.size() + 1
  uint64_t count = 0;
  double sum = 0;  // in the histogram's unit (seconds; attempts)
};

// The latency of `method`'s calls of one kind that ended with `code`.
struct LatencySnapshot {
  LatencyKind kind;
  absl::StatusCode code;
  HistogramSnapshot seconds;
};

struct MethodSnapshot {
  std::string method;  // "/pkg.Service/Method" or "other"
  // calls finished, by side and canonical code
  std::array<std::array<uint64_t, kStatusCodeCount>, kSideCount> calls{};
  uint64_t calls_without_deadline = 0;  // server side: the caller set no deadline
  // Infrastructure methods (MetricsOptions::infrastructure_method_prefixes:
  // health, reflection, channelz, admin) are labelled role="infrastructure".
  MethodRole role = MethodRole::kApplication;
  HistogramSnapshot budget_at_arrival;  // seconds, server side: what the caller brought
  HistogramSnapshot request_budget;     // seconds, server side: after this hop's caps
  HistogramSnapshot budget_remaining;   // seconds, server side at completion
  HistogramSnapshot attempts;           // per logical call, retrying client
  // retries started, by the code of the attempt that failed
  std::array<uint64_t, kStatusCodeCount> retries{};
  uint64_t succeeded_after_retry = 0;  // logical calls OK after 2 or more attempts
  // Latency histograms observed, by kind then code; none for a pair never seen.
  std::vector<LatencySnapshot> latency;
  // The (kind, code) histogram, or nullptr when nothing was observed.
  const HistogramSnapshot* latency_of(LatencyKind kind, absl::StatusCode code) const;
};

struct DeadlineExceededCount {
  Side side;
  DeadlineSource source;
  std::string hop;  // where it fired; "other" or "unknown" when folded
  uint64_t count;
};

// One finished server call, for /deadlinez.
struct RecentCall {
  std::string method;
  absl::Time start;
  absl::StatusCode code = absl::StatusCode::kOk;
  DeadlineSource source = DeadlineSource::kNone;  // the budget that fired, if any
  BudgetTrace trace;                              // this hop first
  // Why a failed attempt of a retrying call this hop made for it was not
  // retried (RetrySkipReason); kSucceeded: no attempt went unretried.
  RetryOutcome retry_skipped = RetryOutcome::kSucceeded;
};

struct MetricsSnapshot {
  // Aggregates over every label.
  std::array<uint64_t, kSideCount> calls{};  // finished calls
  std::array<std::array<uint64_t, kDeadlineSourceCount>, kSideCount> deadline_exceeded_by_source{};
  std::array<uint64_t, kHeaderParseCount> bad_budget_header{};  // index: HeaderParse
  uint64_t bad_attribution = 0;  // inbound attribution detail refused
  std::array<uint64_t, kLeakKindCount> deadline_leaks{};
  uint64_t timers_armed = 0;       // calls that needed hopbudget's own timer
  HistogramSnapshot backend_wait;  // seconds a call waited for a ready backend
  // Seconds an inbound call waited on its way beyond the fastest from its
  // sender (transit.h), taken off its budget.
  HistogramSnapshot transit_delay;
  // Retrying channels: one decision per ended attempt, by outcome; attempts
  // per logical call (index = attempts - 1).
  std::array<uint64_t, kRetryOutcomeCount> retry_decisions{};
  std::array<uint64_t, kMaxAttemptBuckets> attempts_per_call{};
  uint64_t backoff_clipped = 0;     // backoffs shortened to fit the deadline
  uint64_t pushback_honoured = 0;   // waits taken from grpc-retry-pushback-ms
  uint64_t unfit_policy_calls = 0;  // calls on a policy that validation rejected
  std::array<uint64_t, kTraceDropCount> trace_dropped{};    // index: TraceDrop
  std::array<uint64_t, kShieldEventCount> shield_events{};  // index: ShieldEvent
  int64_t shield_in_flight = 0;
  // Service config reloads (hop.h), by result; the generation of the table
  // in force (1 for the one read at start; 0 before any Hop).
  std::array<uint64_t, kConfigReloadCount> config_reloads{};  // index: ConfigReload
  int64_t config_generation = 0;
  // What hopbudget would have done to calls in shadow mode (policy_table.h),
  // and did not, by action.
  std::array<uint64_t, kShadowActionCount> shadow_actions{};  // index: ShadowAction
  // By label.
  std::vector<MethodSnapshot> methods;                          // methods seen, "other" first
  std::vector<DeadlineExceededCount> deadline_exceeded_by_hop;  // non-zero only

  uint64_t retry_decision(RetryOutcome o) const { return retry_decisions[static_cast<int>(o)]; }
  uint64_t calls_with_attempts(int n) const { return attempts_per_call[n - 1]; }
  uint64_t deadline_exceeded(Side side, DeadlineSource source) const {
    return deadline_exceeded_by_source[static_cast<int>(side)][static_cast<int>(source)];
  }
  uint64_t deadline_exceeded(Side side, DeadlineSource source, absl::string_view hop) const;
  uint64_t bad_header(HeaderParse kind) const { return bad_budget_header[static_cast<int>(kind)]; }
  uint64_t leaks(LeakKind kind) const { return deadline_leaks[static_cast<int>(kind)]; }
  uint64_t shield(ShieldEvent e) const { return shield_events[static_cast<int>(e)]; }
  uint64_t config_reload(ConfigReload r) const { return config_reloads[static_cast<int>(r)]; }
  uint64_t shadow(ShadowAction a) const { return shadow_actions[static_cast<int>(a)]; }
  uint64_t dropped_traces(TraceDrop d) const { return trace_dropped[static_cast<int>(d)]; }
  // The method's entry, or nullptr when it was never counted.
  const MethodSnapshot* method(absl::string_view name) const;
  // Finished calls of `method` on `side` with `code`.
  uint64_t calls_with_code(Side side, absl::string_view method, absl::StatusCode code) const;

  // Races, hedges and concurrency slots (race_grpc.h, hedge_grpc.h,
  // slots_grpc.h).
  std::array<uint64_t, kRaceOutcomeCount> races{};  // index: RaceOutcome
  uint64_t race_losers_cancelled = 0;
  uint64_t hedged_calls = 0;  // calls started by a Hedger
  uint64_t hedges_sent = 0;   // attempts after the first
  uint64_t hedges_won = 0;    // calls answered by a hedge rather than the first attempt
  std::array<uint64_t, kHedgeOutcomeCount> hedges_skipped{};  // index: HedgeOutcome (not kSend)
  uint64_t hedge_losers_cancelled = 0;
  HistogramSnapshot slot_wait;  // seconds, waits that ended in a grant
  std::array<uint64_t, kSlotRefusalReasonCount> slot_refusals{};  // index: SlotRefusalReason

  // Admission (admission.h; server.h AdmissionOptions). With several
  // servers admitting in one process, the counters add up and the gauges
  // are the last one's.
  std::array<uint64_t, kArrivalDecisionCount> admission_decisions{};  // index: ArrivalDecision
  uint64_t admission_admitted_after_wait = 0;
  int64_t admission_in_progress = 0;
  int64_t admission_waiting = 0;
  int64_t admission_limit = 0;
  HistogramSnapshot admission_queue_wait;      // seconds, calls admitted after waiting
  HistogramSnapshot admission_handler_time;    // seconds, admitted calls
  HistogramSnapshot admission_predicted_time;  // seconds, the prediction they were checked against
  uint64_t admission(ArrivalDecision d) const { return admission_decisions[static_cast<int>(d)]; }
  uint64_t race(RaceOutcome o) const { return races[static_cast<int>(o)]; }
  uint64_t hedge_skipped(HedgeOutcome o) const { return hedges_skipped[static_cast<int>(o)]; }
  // hedges_sent / hedged_calls (0 before any call).
  double extra_load() const {
    return hedged_calls == 0 ? 0.0
                             : static_cast<double>(hedges_sent) / static_cast<double>(hedged_calls);
  }
};

struct MetricsOptions {
  // Times the recent-calls sample; default (nullptr) Clock::Real(). Not
  // owned; must outlive the registry.
  Clock* clock = nullptr;
  // Buckets of each histogram in seconds.
  HistogramBuckets budget_at_arrival;
  HistogramBuckets request_budget;
  HistogramBuckets budget_remaining;
  HistogramBuckets client_attempt_duration;
  HistogramBuckets client_call_duration;
  HistogramBuckets server_call_duration;
  // Full method names starting with one of these are infrastructure
  // (MethodRole). Each must start with '/'.
  std::vector<std::string> infrastructure_method_prefixes = {
      "/grpc.health.v1.", "/grpc.reflection.", "/grpc.channelz."};
};

// OK, or InvalidArgument naming the field: a schema outside 0..8, a bound
// that is not finite and positive, max_seconds <= min_seconds, more than
// kMaxHistogramBuckets buckets, a prefix without a leading '/'.
absl::Status ValidateMetricsOptions(const MetricsOptions& options);

class Metrics {
 public:
  // A registry with `options`, validated (ValidateMetricsOptions()).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Metrics>> Create(MetricsOptions options);
  // Default options but `clock` (default Clock::Real()), which times the
  // recent-calls sample; not owned, it must outlive the registry.
  explicit Metrics(Clock* clock = nullptr);
  // The upper bounds of a latency histogram's buckets (+Inf implied).
  [[nodiscard]] const std::vector<double>& latency_bounds(LatencyKind kind) const;
  // The upper bounds of the budget histograms' buckets.
  [[nodiscard]] const std::vector<double>& budget_at_arrival_bounds() const;
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // The process-wide instance used when options name none. Never destroyed.
  static Metrics& Default();

  // Interns a full method name ("/pkg.Service/Method"). Methods unknown to
  // the generated descriptor pool, and any beyond kMaxMethodLabels, give the
  // "other" label.
  MethodId Method(absl::string_view full_method);

  MetricsSnapshot Snapshot() const;
  // Newest first.
  std::vector<RecentCall> RecentCalls() const;

 private:
  // Recording is the library's: its interceptors, channels, loops and
  // shields write here through internal::MetricsRecorder
  // (interceptors/core/metrics_recorder.h), so a user of the registry reads
  // it and cannot skew it.
  friend class internal::MetricsRecorder;

  // Counts a finished call (hopbudget_calls_total) without its latency; the
  // adapters use the End* calls below.
  void CountCallEnd(Side side, MethodId method, absl::StatusCode code);
  // Server side: a call of `method` answered `code` `elapsed` after it
  // arrived. Counts the call and observes its latency (kServerCall).
  void EndServerCall(MethodId method, absl::StatusCode code, absl::Duration elapsed);
  // Client side: a call of `method` ended with `code` `elapsed` after it
  // started. Counts it and observes kClientAttempt; a kPlainCall is its own
  // logical call and is observed as kClientCall too.
  void EndClientAttempt(MethodId method, absl::StatusCode code, absl::Duration elapsed,
                        ClientCallKind kind);
  // A retrying layer's logical call of `method` ended with `code` after
  // `attempts` attempts, `elapsed` after it started: attempts per call,
  // kClientCall latency, and a success after a retry when OK with
  // attempts >= 2.
  void EndRetryingCall(MethodId method, absl::StatusCode code, int attempts,
                       absl::Duration elapsed);
  // One latency observation without counting a call. Negative durations
  // count as zero; an infinite one falls into +Inf. Lock-free; the first
  // observation of a (kind, method, code) allocates its buckets once.
  void ObserveLatency(LatencyKind kind, MethodId method, absl::StatusCode code,
                      absl::Duration elapsed);
  // `hop`: where the budget fired ("" when the origin is unknown).
  void CountDeadlineExceeded(Side side, DeadlineSource source, absl::string_view hop);
  // Server side, once per call: the budget the caller brought (its deadline
  // narrowed by the exact budget header, before this hop's caps).
  // InfiniteDuration() counts a call without a deadline; negative budgets
  // count as zero.
  void ObserveBudgetAtArrival(MethodId method, absl::Duration budget);
  // Server side, once per call: the effective request budget after this
  // hop's caps. Infinite budgets are not observed; negative count as zero.
  void ObserveRequestBudget(MethodId method, absl::Duration budget);
  // Server side, once per call: both of the above. When the two are equal
  // (no cap of this hop's cut the caller's budget) and the two histograms
  // have the same buckets, it is one observation that both read.
  void ObserveArrivalBudgets(MethodId method, absl::Duration at_arrival,
                             absl::Duration request_budget);
  void ObserveBudgetRemaining(MethodId method, absl::Duration remaining);
  void CountBadBudgetHeader(HeaderParse kind);
  void CountBadAttribution();
  void CountLeak(LeakKind kind);
  void CountTimerArmed();
  // A call that found no ready backend waited `waited`, until one was ready
  // or it gave up (ClientOptions::backend_wait).
  void ObserveBackendWait(absl::Duration waited);
  // An inbound call stamped by a hopbudget sender waited `delay` on its way
  // beyond the fastest call from that sender (wire.h, hopbudget-sent-us).
  void ObserveTransitDelay(absl::Duration delay);
  void CountRetryDecision(RetryOutcome o);
  // A retry started after an attempt of `method` failed with `failed_code`.
  void CountRetry(MethodId method, absl::StatusCode failed_code);
  void CountAttemptsPerCall(MethodId method, int attempts);
  void CountBackoffClipped();
  void CountPushbackHonoured();
  void CountUnfitPolicyCall();
  void CountTraceDropped(TraceDrop reason);
  void CountShield(ShieldEvent event);
  // A Hop's service config (hop.h): each reload's result, and the generation
  // of the table in force.
  void CountConfigReload(ConfigReload result);
  void SetConfigGeneration(int64_t generation);
  // A call in shadow mode that hopbudget would have refused, cut or failed
  // fast, and did not.
  void CountShadow(ShadowAction action);
  // +1 when shielded work starts, -1 when it ends.
  void AddShieldInFlight(int delta);
  // Whether a call arriving at `now` is kept in the recent-calls sample
  // whatever its outcome: true when kRecentCallInterval passed since the
  // last call so chosen. `now` is the arrival time the caller has just read
  // from its clock (callers sharing a Metrics should share a clock).
  // Decided on arrival so that the hop can ask its downstream calls for
  // their traces (the waterfall is then complete); one relaxed load per
  // call, a compare-exchange at most once per interval.
  bool SampleOnArrival(absl::Time now);
  // Remembers a finished server call in a ring of kRecentCallCapacity; the
  // oldest is overwritten. Each slot has its own lock: writers meet only when
  // the ring wraps onto a slot being read or written. At high rates the ring
  // keeps a sample: a call is kept when it was `sampled` on arrival, or, for a
  // failed call, when kRecentFailureInterval passed since the last failure
  // kept. `make` builds the entry only for calls kept.
  void RecordRecentCall(absl::StatusCode code, bool sampled, absl::FunctionRef<RecentCall()> make);

  // Races, hedges and concurrency slots.
  void CountRace(RaceOutcome outcome, int losers_cancelled);
  // One hedged call ended: `sent` attempts, won by attempt `winner` (-1:
  // none), `losers` cancelled.
  void CountHedgedCall(int sent, int winner, int losers);
  void CountHedgeSkipped(HedgeOutcome reason);
  // A slot granted after waiting `waited` (zero when free at once).
  void ObserveSlotWait(absl::Duration waited);
  void CountSlotRefusal(SlotRefusalReason reason);

  // Admission: a decision on an arriving call (or a waiting one that was
  // shed); a waiting call admitted after `waited`; the admission's state
  // after a change; an admitted call's handler time and the prediction it
  // was admitted against (nullopt: none yet).
  void CountAdmission(ArrivalDecision decision);
  void CountAdmittedAfterWait(absl::Duration waited);
  void SetAdmissionState(int in_progress, int waiting, int limit);
  void ObserveAdmittedHandler(absl::Duration actual, absl::optional<absl::Duration> predicted);

  explicit Metrics(const MetricsOptions& options);
  Clock& clock_;
  std::unique_ptr<internal::MetricsCells> cells_;
};

}  // namespace hopbudget

#endif  // HOPBUDGET_ADVANCED_METRICS_H_
