// Copyright hopbudget authors.
#include "hopbudget/advanced/exposition.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "hopbudget/advanced/process_metrics.h"
#include "metric_table.h"  // internal
#include "metrics_recorder.h"

namespace hopbudget {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(PrometheusTextTest, EmptyRegistryStillDescribesEveryFamily) {
  Metrics m;
  const std::string text = FormatPrometheusText(m.Snapshot(), "orders");
  EXPECT_THAT(text, HasSubstr("# TYPE hopbudget_info gauge\nhopbudget_info{hop=\"orders\"} 1\n"));
  for (const char* family :
       {"hopbudget_calls_total counter", "hopbudget_deadline_exceeded_total counter",
        "hopbudget_budget_at_arrival_seconds histogram",
        "hopbudget_budget_remaining_seconds histogram", "hopbudget_attempts_per_call histogram",
        "hopbudget_retries_total counter", "hopbudget_retries_skipped_total counter",
        "hopbudget_shield_in_flight gauge", "hopbudget_shield_operations_total counter",
        "hopbudget_trace_dropped_total counter"}) {
    EXPECT_THAT(text, HasSubstr(std::string("# TYPE ") + family + "\n")) << family;
  }
  EXPECT_THAT(text, HasSubstr("hopbudget_retries_skipped_total{reason=\"no_room\"} 0\n"));
  EXPECT_THAT(text, Not(HasSubstr("hopbudget_calls_total{")));
}

TEST(PrometheusTextTest, CountersCarryTheirLabels) {
  Metrics m;
  internal::Record(m).CountCallEnd(Side::kServer, MethodId{}, absl::StatusCode::kDeadlineExceeded);
  internal::Record(m).CountDeadlineExceeded(Side::kClient, DeadlineSource::kExhaustedBeforeCall,
                                            "orders");
  internal::Record(m).CountRetryDecision(RetryOutcome::kThrottled);
  internal::Record(m).CountRetry(MethodId{}, absl::StatusCode::kUnavailable);
  const std::string text = FormatPrometheusText(m.Snapshot(), "orders");
  EXPECT_THAT(
      text, HasSubstr("hopbudget_calls_total{side=\"server\",method=\"other\",role=\"application\","
                      "code=\"DEADLINE_EXCEEDED\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("hopbudget_deadline_exceeded_total{side=\"client\","
                              "source=\"exhausted-before-call\",hop=\"orders\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("hopbudget_retries_skipped_total{reason=\"throttled\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("hopbudget_retries_total{method=\"other\",role=\"application\","
                              "code=\"UNAVAILABLE\"} 1\n"));
}

TEST(PrometheusTextTest, HistogramBucketsAreCumulativeWithSumAndCount) {
  Metrics m;
  internal::Record(m).ObserveBudgetAtArrival(MethodId{}, absl::Milliseconds(20));
  internal::Record(m).ObserveBudgetAtArrival(MethodId{}, absl::Milliseconds(800));
  const std::string text = FormatPrometheusText(m.Snapshot(), "gateway");
  const std::string name = "hopbudget_budget_at_arrival_seconds";
  const std::string labels = "method=\"other\",role=\"application\"";
  // Powers of two are bounds: 20 ms is in (0.0156, 0.0313], 800 ms under 1.
  EXPECT_THAT(text, HasSubstr(name + "_bucket{" + labels + ",le=\"0.015625\"} 0\n"));
  EXPECT_THAT(text, HasSubstr(name + "_bucket{" + labels + ",le=\"0.03125\"} 1\n"));
  EXPECT_THAT(text, HasSubstr(name + "_bucket{" + labels + ",le=\"1\"} 2\n"));
  EXPECT_THAT(text, HasSubstr(name + "_bucket{" + labels + ",le=\"+Inf\"} 2\n"));
  EXPECT_THAT(text, HasSubstr(name + "_sum{" + labels + "} 0.82"));
  EXPECT_THAT(text, HasSubstr(name + "_count{" + labels + "} 2\n"));
}

TEST(PrometheusTextTest, LatencyHistogramsAreLabelledByMethodAndCode) {
  Metrics m;
  internal::Record(m).EndServerCall(MethodId{}, absl::StatusCode::kOk, absl::Milliseconds(800));
  internal::Record(m).EndClientAttempt(MethodId{}, absl::StatusCode::kUnavailable, absl::Seconds(1),
                                       ClientCallKind::kPlainCall);
  const std::string text = FormatPrometheusText(m.Snapshot(), "orders");
  for (const char* family :
       {"hopbudget_client_attempt_duration_seconds", "hopbudget_client_call_duration_seconds",
        "hopbudget_server_call_duration_seconds"}) {
    EXPECT_THAT(text, HasSubstr(std::string("# TYPE ") + family + " histogram\n")) << family;
  }
  const std::string server = "hopbudget_server_call_duration_seconds";
  // 0.8 s lies in (2^(-3/8), 2^(-2/8)] = (0.7711, 0.8409]: the bounds as
  // written, shortest form that reads back as the same double.
  auto le = [](double v) {
    std::string out = absl::StrFormat("%.15g", v);
    if (std::strtod(out.c_str(), nullptr) != v) out = absl::StrFormat("%.17g", v);
    return out;
  };
  const std::vector<double>& b = m.latency_bounds(LatencyKind::kServerCall);
  const size_t i = std::find(b.begin(), b.end(), 1.0) - b.begin();
  EXPECT_THAT(text,
              HasSubstr(server + "_bucket{method=\"other\",role=\"application\",code=\"OK\",le=\"" +
                        le(b[i - 3]) + "\"} 0\n"));
  EXPECT_THAT(text,
              HasSubstr(server + "_bucket{method=\"other\",role=\"application\",code=\"OK\",le=\"" +
                        le(b[i - 2]) + "\"} 1\n"));
  EXPECT_THAT(
      text,
      HasSubstr(server +
                "_bucket{method=\"other\",role=\"application\",code=\"OK\",le=\"+Inf\"} 1\n"));
  EXPECT_THAT(text,
              HasSubstr(server + "_sum{method=\"other\",role=\"application\",code=\"OK\"} 0.8\n"));
  const std::string other = "{method=\"other\",role=\"application\",";
  EXPECT_THAT(text, HasSubstr(server + "_count" + other + "code=\"OK\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("hopbudget_client_attempt_duration_seconds_bucket" + other +
                              "code=\"UNAVAILABLE\",le=\"1\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("hopbudget_client_call_duration_seconds_count" + other +
                              "code=\"UNAVAILABLE\"} 1\n"));
  EXPECT_THAT(text, Not(HasSubstr("hopbudget_server_call_duration_seconds_count" + other +
                                  "code=\"UNAVAILABLE\"}")));
}

TEST(PrometheusTextTest, LabelValuesAreEscaped) {
  Metrics m;
  const std::string text = FormatPrometheusText(m.Snapshot(), "a\"b\\c\nd");
  EXPECT_THAT(text, HasSubstr("hopbudget_info{hop=\"a\\\"b\\\\c\\nd\"} 1\n"));
}

TEST(PrometheusTextTest, SkipReasonsCoverEveryNonRetryOutcome) {
  for (int o = 0; o < kRetryOutcomeCount; ++o) {
    const auto outcome = static_cast<RetryOutcome>(o);
    const bool skipped = outcome != RetryOutcome::kRetry && outcome != RetryOutcome::kSucceeded;
    EXPECT_EQ(!RetrySkipReason(outcome).empty(), skipped) << o;
    // One vocabulary: the metric's reasons are the retry policy's names.
    if (skipped) {
      EXPECT_EQ(RetrySkipReason(outcome), RetryOutcomeName(outcome)) << o;
    }
  }
  EXPECT_EQ(RetrySkipReason(RetryOutcome::kNoRoom), "no_room");
  EXPECT_EQ(RetrySkipReason(RetryOutcome::kThrottled), "throttled");
}

TEST(JsonStringTest, EscapesQuotesBackslashesAndControls) {
  EXPECT_EQ(JsonString(""), "\"\"");
  EXPECT_EQ(JsonString("a\"b\\c\nd\re\tf\x01\x7f"), "\"a\\\"b\\\\c\\nd\\re\\tf\\u0001\\u007f\"");
}

TEST(JsonStringTest, KeepsValidUtf8AndReplacesInvalidBytes) {
  EXPECT_EQ(JsonString("h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80"),
            "\"h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80\"");
  EXPECT_EQ(JsonString("bad\xFF\xC3"), "\"bad\xEF\xBF\xBD\xEF\xBF\xBD\"");  // stray, cut short
  EXPECT_EQ(JsonString("\xC0\xAF"), "\"\xEF\xBF\xBD\xEF\xBF\xBD\"");        // overlong
  EXPECT_EQ(JsonString("\xE0\x80\xAF"), "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"");  // overlong
  EXPECT_EQ(JsonString("\xED\xA0\x80"), "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"");  // surrogate
  EXPECT_EQ(JsonString("\xF4\x90\x80\x80"),
            "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"");  // U+110000
  EXPECT_EQ(JsonString("\xF5\x80\x80\x80"),
            "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"");  // beyond U+10FFFF
}

TEST(DeadlinezJsonTest, HopWithInvalidUtf8StillGivesValidJson) {
  MetricsSnapshot empty;
  const std::string json = FormatDeadlinezJson(empty, {}, "we\"ird\xFF", absl::UnixEpoch());
  EXPECT_THAT(json, ::testing::StartsWith("{\"hop\":\"we\\\"ird\xEF\xBF\xBD\""));
}

TEST(DeadlinezJsonTest, EmptyRegistryGivesAnEmptyRecentList) {
  Metrics m;
  const std::string json =
      FormatDeadlinezJson(m.Snapshot(), {}, "ledger", absl::FromUnixMillis(1700000000000));
  EXPECT_THAT(json, HasSubstr("{\"hop\":\"ledger\",\"now_unix_ms\":1700000000000,\"recent\":[],"));
  EXPECT_THAT(json, HasSubstr("\"timeouts_by_source\":{\"client\":{\"client\":0,"));
  EXPECT_THAT(json, HasSubstr("\"shield\":{\"in_flight\":0,\"started\":0,"));
}

TEST(DeadlinezJsonTest, RecentCallsCarryTheirTraceWithNullForNoBudget) {
  Metrics m;
  internal::Record(m).CountDeadlineExceeded(Side::kServer, DeadlineSource::kRequest, "orders");
  RecentCall c;
  c.method = "/demo.Orders/Create\"x";
  c.start = absl::FromUnixMillis(1700000000000);
  c.code = absl::StatusCode::kDeadlineExceeded;
  c.source = DeadlineSource::kRequest;
  HopTrace self;
  self.hop = "orders";
  self.budget_at_arrival = absl::Milliseconds(780.5);
  self.spent = absl::Milliseconds(12.25);
  self.attempts = 2;
  self.code = absl::StatusCode::kDeadlineExceeded;
  self.source = DeadlineSource::kRequest;
  HopTrace below;
  below.hop = "ledger";
  c.trace.hops = {self, below};
  const std::string json = FormatDeadlinezJson(m.Snapshot(), {c}, "orders", absl::Now());
  EXPECT_THAT(json, HasSubstr("\"method\":\"/demo.Orders/Create\\\"x\""));
  EXPECT_THAT(json, HasSubstr("\"start_unix_ms\":1700000000000.000"));
  EXPECT_THAT(json, HasSubstr("\"code\":\"DEADLINE_EXCEEDED\",\"source\":\"request\""));
  EXPECT_THAT(json,
              HasSubstr("{\"hop\":\"orders\",\"budget_ms\":780.500,\"spent_ms\":12.250,"
                        "\"attempts\":2,\"code\":\"DEADLINE_EXCEEDED\",\"source\":\"request\"}"));
  EXPECT_THAT(json, HasSubstr("{\"hop\":\"ledger\",\"budget_ms\":null,"));
  EXPECT_THAT(json, HasSubstr("\"server\":{\"client\":0,\"request\":1,"));
}

TEST(DeadlinezJsonTest, RetriesSayHowManyStartedSavedAndWhyOthersDidNot) {
  Metrics m;
  internal::Record(m).CountRetryDecision(RetryOutcome::kRetry);
  internal::Record(m).CountRetryDecision(RetryOutcome::kThrottled);
  internal::Record(m).CountRetryDecision(RetryOutcome::kThrottled);
  internal::Record(m).CountRetryDecision(RetryOutcome::kNoRoom);
  internal::Record(m).EndRetryingCall(MethodId{}, absl::StatusCode::kOk, 2, absl::Milliseconds(3));
  const std::string json = FormatDeadlinezJson(m.Snapshot(), {}, "orders", absl::UnixEpoch());
  EXPECT_THAT(json, HasSubstr("\"retries\":{\"started\":1,\"succeeded_after_retry\":1,"
                              "\"skipped\":{"));
  EXPECT_THAT(json, HasSubstr("\"throttled\":2"));
  EXPECT_THAT(json, HasSubstr("\"no_room\":1"));
  EXPECT_THAT(json, HasSubstr("\"attempts_exhausted\":0"));
  EXPECT_THAT(json, ::testing::EndsWith("}}}"));
}

TEST(DeadlinezJsonTest, EachCallSaysWhyItsFailedAttemptWasNotRetried) {
  RecentCall throttled{
      "/a.B/C", absl::UnixEpoch(),       absl::StatusCode::kUnavailable, DeadlineSource::kNone,
      {},       RetryOutcome::kThrottled};
  RecentCall ok{"/a.B/C", absl::UnixEpoch(), absl::StatusCode::kOk, DeadlineSource::kNone, {}};
  const std::string json =
      FormatDeadlinezJson(Metrics().Snapshot(), {throttled, ok}, "orders", absl::UnixEpoch());
  EXPECT_THAT(json, HasSubstr("\"code\":\"UNAVAILABLE\",\"source\":\"none\","
                              "\"retry_skipped\":\"throttled\",\"trace\":[]"));
  EXPECT_THAT(json, HasSubstr("\"code\":\"OK\",\"source\":\"none\",\"retry_skipped\":\"\","));
}

}  // namespace
}  // namespace hopbudget

namespace hopbudget {
namespace {

TEST(PrometheusTextTest, RacesHedgesAndSlotsHaveTheirFamilies) {
  Metrics m;
  internal::Record(m).CountRace(RaceOutcome::kWon, 2);
  internal::Record(m).CountHedgedCall(2, 1, 1);
  internal::Record(m).CountHedgedCall(1, 0, 0);
  internal::Record(m).CountHedgeSkipped(HedgeOutcome::kNoBudget);
  internal::Record(m).ObserveSlotWait(absl::Milliseconds(20));
  internal::Record(m).CountSlotRefusal(SlotRefusalReason::kQueueFull);
  const std::string text = FormatPrometheusText(m.Snapshot(), "orders");
  for (const char* line :
       {"hopbudget_races_total{outcome=\"won\"} 1\n",
        "hopbudget_races_total{outcome=\"all_failed\"} 0\n",
        "hopbudget_race_losers_cancelled_total 2\n", "hopbudget_hedged_calls_total 2\n",
        "hopbudget_hedges_sent_total 1\n", "hopbudget_hedges_won_total 1\n",
        "hopbudget_hedges_skipped_total{reason=\"no_budget\"} 1\n",
        "hopbudget_hedges_skipped_total{reason=\"extra_load\"} 0\n",
        "hopbudget_hedge_losers_cancelled_total 1\n", "hopbudget_hedge_extra_load_ratio 0.5\n",
        "# TYPE hopbudget_slot_wait_seconds histogram\n",
        // 20 ms, in the bucket whose bound is the first above it
        "hopbudget_slot_wait_seconds_bucket{le=\"0.018581361171917516\"} 0\n",
        "hopbudget_slot_wait_seconds_bucket{le=\"0.020263118041422026\"} 1\n",
        "hopbudget_slot_wait_seconds_count 1\n",
        "hopbudget_slot_refusals_total{reason=\"queue_full\"} 1\n",
        "hopbudget_slot_refusals_total{reason=\"no_time_to_wait\"} 0\n"}) {
    EXPECT_THAT(text, ::testing::HasSubstr(line)) << line;
  }
  EXPECT_THAT(text, ::testing::Not(::testing::HasSubstr("reason=\"send\"")));
}

// Every process-wide counter, gauge and histogram of the registry at a
// distinct value, counted through the public API: each series must come out
// under its own name and labels with its own value (a row of metric_table.h
// that reads another row's cells, or a cell offset that overlaps, changes a
// number here).
MetricsSnapshot EveryScalarAtADistinctValue() {
  Metrics m;
  for (int k = 0; k < kHeaderParseCount; ++k) {
    for (int j = 0; j <= k; ++j)
      internal::Record(m).CountBadBudgetHeader(static_cast<HeaderParse>(k));
  }
  internal::Record(m).CountBadAttribution();
  internal::Record(m).CountBadAttribution();
  internal::Record(m).CountLeak(LeakKind::kNoDeadline);
  for (int j = 0; j < 3; ++j) internal::Record(m).CountLeak(LeakKind::kLaterThanInbound);
  for (int j = 0; j < 4; ++j) internal::Record(m).CountTimerArmed();
  internal::Record(m).ObserveBackendWait(absl::Milliseconds(30));
  for (int o = 0; o < kRetryOutcomeCount; ++o) {
    for (int j = 0; j <= o; ++j)
      internal::Record(m).CountRetryDecision(static_cast<RetryOutcome>(o));
  }
  for (int j = 0; j < 5; ++j) internal::Record(m).CountBackoffClipped();
  for (int j = 0; j < 6; ++j) internal::Record(m).CountPushbackHonoured();
  for (int j = 0; j < 7; ++j) internal::Record(m).CountUnfitPolicyCall();
  internal::Record(m).CountTraceDropped(TraceDrop::kMalformed);
  for (int j = 0; j < 2; ++j) internal::Record(m).CountTraceDropped(TraceDrop::kOversized);
  for (int e = 0; e < kShieldEventCount; ++e) {
    for (int j = 0; j <= e + 10; ++j) internal::Record(m).CountShield(static_cast<ShieldEvent>(e));
  }
  internal::Record(m).AddShieldInFlight(3);
  internal::Record(m).AddShieldInFlight(-5);
  for (int o = 0; o < kRaceOutcomeCount; ++o) {
    for (int j = 0; j <= o + 20; ++j)
      internal::Record(m).CountRace(static_cast<RaceOutcome>(o), j % 3);
  }
  internal::Record(m).CountHedgedCall(3, 1, 2);
  internal::Record(m).CountHedgedCall(1, 0, 0);
  internal::Record(m).CountHedgedCall(2, -1, 1);
  internal::Record(m).CountHedgedCall(2, 1, 1);
  for (int o = 0; o < kHedgeOutcomeCount; ++o) {
    for (int j = 0; j <= o + 30; ++j)
      internal::Record(m).CountHedgeSkipped(static_cast<HedgeOutcome>(o));
  }
  internal::Record(m).ObserveSlotWait(absl::Milliseconds(12));
  internal::Record(m).ObserveSlotWait(absl::ZeroDuration());
  internal::Record(m).CountSlotRefusal(SlotRefusalReason::kNoTimeToWait);
  for (int j = 0; j < 4; ++j) internal::Record(m).CountSlotRefusal(SlotRefusalReason::kQueueFull);
  for (int d = 0; d < kArrivalDecisionCount; ++d) {
    for (int j = 0; j <= d + 40; ++j)
      internal::Record(m).CountAdmission(static_cast<ArrivalDecision>(d));
  }
  internal::Record(m).CountAdmittedAfterWait(absl::Milliseconds(3));
  internal::Record(m).SetAdmissionState(7, 8, 9);
  internal::Record(m).ObserveAdmittedHandler(absl::Milliseconds(20), absl::Milliseconds(25));
  internal::Record(m).ObserveAdmittedHandler(absl::Milliseconds(30), absl::nullopt);
  for (int j = 0; j < 3; ++j) internal::Record(m).CountConfigReload(ConfigReload::kApplied);
  internal::Record(m).CountConfigReload(ConfigReload::kRefused);
  internal::Record(m).SetConfigGeneration(4);
  for (int j = 0; j < 5; ++j) internal::Record(m).CountShadow(ShadowAction::kRefuse);
  for (int j = 0; j < 6; ++j) internal::Record(m).CountShadow(ShadowAction::kCut);
  for (int j = 0; j < 7; ++j) internal::Record(m).CountShadow(ShadowAction::kFailFast);
  return m.Snapshot();
}

// The process-wide families as they were written before they came from
// tables, and the admission and config families added since (buckets left out:
// HistogramBucketsAreCumulativeWithSumAndCount), in the order of
// kMetricTables. A change here is a change of what
// Prometheus, the rules and the dashboards see.
constexpr char kScalarFamilies[] =
    R"(# HELP hopbudget_retries_skipped_total Failed attempts not retried, by reason (RetryOutcomeName: no_room, no room left in the deadline; throttled, the retry throttle; attempts_exhausted; ...).
# TYPE hopbudget_retries_skipped_total counter
hopbudget_retries_skipped_total{reason="not_retryable_code"} 3
hopbudget_retries_skipped_total{reason="budget_fired"} 4
hopbudget_retries_skipped_total{reason="committed"} 5
hopbudget_retries_skipped_total{reason="attempts_exhausted"} 6
hopbudget_retries_skipped_total{reason="pushback_do_not_retry"} 7
hopbudget_retries_skipped_total{reason="throttled"} 8
hopbudget_retries_skipped_total{reason="no_room"} 9
# HELP hopbudget_backoff_clipped_total Retry backoffs shortened to fit the deadline.
# TYPE hopbudget_backoff_clipped_total counter
hopbudget_backoff_clipped_total 5
# HELP hopbudget_pushback_honoured_total Retry waits taken from grpc-retry-pushback-ms.
# TYPE hopbudget_pushback_honoured_total counter
hopbudget_pushback_honoured_total 6
# HELP hopbudget_unfit_policy_calls_total Calls on a retry policy that start-up validation rejected (accept_unfit_policy).
# TYPE hopbudget_unfit_policy_calls_total counter
hopbudget_unfit_policy_calls_total 7
# HELP hopbudget_deadline_leaks_total Calls made inside a handler with no deadline or one later than the inbound call's.
# TYPE hopbudget_deadline_leaks_total counter
hopbudget_deadline_leaks_total{kind="no_deadline"} 1
hopbudget_deadline_leaks_total{kind="later_than_inbound"} 3
# HELP hopbudget_bad_budget_header_total Inbound hopbudget-budget-us headers refused, by reason.
# TYPE hopbudget_bad_budget_header_total counter
hopbudget_bad_budget_header_total{kind="empty"} 2
hopbudget_bad_budget_header_total{kind="too_long"} 3
hopbudget_bad_budget_header_total{kind="malformed"} 4
hopbudget_bad_budget_header_total{kind="negative"} 5
hopbudget_bad_budget_header_total{kind="too_large"} 6
# HELP hopbudget_bad_attribution_total Attribution details from a callee that could not be decoded.
# TYPE hopbudget_bad_attribution_total counter
hopbudget_bad_attribution_total 2
# HELP hopbudget_trace_dropped_total Per-hop traces from callees that were dropped, by reason.
# TYPE hopbudget_trace_dropped_total counter
hopbudget_trace_dropped_total{reason="malformed"} 1
hopbudget_trace_dropped_total{reason="oversized"} 2
# HELP hopbudget_timers_armed_total Calls that needed hopbudget's shared timer (request caps, leaks, idle budgets).
# TYPE hopbudget_timers_armed_total counter
hopbudget_timers_armed_total 4
# HELP hopbudget_backend_wait_seconds Time a call that found no ready backend waited for one (until sent, or until it gave up with source no-backend).
# TYPE hopbudget_backend_wait_seconds histogram
hopbudget_backend_wait_seconds_sum 0.03
hopbudget_backend_wait_seconds_count 1
# HELP hopbudget_server_transit_delay_seconds Time an inbound call from a hopbudget sender waited on its way beyond the fastest call from that sender (its queue, the network, this hop's socket), taken off its budget.
# TYPE hopbudget_server_transit_delay_seconds histogram
hopbudget_server_transit_delay_seconds_sum 0
hopbudget_server_transit_delay_seconds_count 0
# HELP hopbudget_shield_started_total Shielded operations accepted.
# TYPE hopbudget_shield_started_total counter
hopbudget_shield_started_total 11
# HELP hopbudget_shield_operations_total Shielded operations by outcome (refused: at capacity or draining).
# TYPE hopbudget_shield_operations_total counter
hopbudget_shield_operations_total{outcome="completed"} 12
hopbudget_shield_operations_total{outcome="failed"} 13
hopbudget_shield_operations_total{outcome="exceeded_bound"} 14
hopbudget_shield_operations_total{outcome="refused"} 15
# HELP hopbudget_shield_in_flight Shielded operations queued or running.
# TYPE hopbudget_shield_in_flight gauge
hopbudget_shield_in_flight -2
# HELP hopbudget_shield_unobserved_total Shielded outcomes nobody waited for (logged).
# TYPE hopbudget_shield_unobserved_total counter
hopbudget_shield_unobserved_total 16
# HELP hopbudget_shield_drains_total Shield drains, by whether every operation ended in time.
# TYPE hopbudget_shield_drains_total counter
hopbudget_shield_drains_total{result="drained"} 17
hopbudget_shield_drains_total{result="timed_out"} 18
# HELP hopbudget_races_total First-success races, by outcome.
# TYPE hopbudget_races_total counter
hopbudget_races_total{outcome="won"} 21
hopbudget_races_total{outcome="all_failed"} 22
hopbudget_races_total{outcome="cancelled"} 23
# HELP hopbudget_race_losers_cancelled_total Race attempts cancelled because another answered first (not failures).
# TYPE hopbudget_race_losers_cancelled_total counter
hopbudget_race_losers_cancelled_total 64
# HELP hopbudget_hedged_calls_total Calls started by a Hedger.
# TYPE hopbudget_hedged_calls_total counter
hopbudget_hedged_calls_total 4
# HELP hopbudget_hedges_sent_total Hedges sent (attempts after the first).
# TYPE hopbudget_hedges_sent_total counter
hopbudget_hedges_sent_total 4
# HELP hopbudget_hedges_won_total Hedged calls answered by a hedge.
# TYPE hopbudget_hedges_won_total counter
hopbudget_hedges_won_total 2
# HELP hopbudget_hedges_skipped_total Hedges held back or not sent, by reason (one held back by the extra-load bucket counts once, even when it goes out later).
# TYPE hopbudget_hedges_skipped_total counter
hopbudget_hedges_skipped_total{reason="max_attempts"} 32
hopbudget_hedges_skipped_total{reason="stopped"} 33
hopbudget_hedges_skipped_total{reason="no_budget"} 34
hopbudget_hedges_skipped_total{reason="extra_load"} 35
# HELP hopbudget_hedge_losers_cancelled_total Hedged attempts cancelled because another answered first.
# TYPE hopbudget_hedge_losers_cancelled_total counter
hopbudget_hedge_losers_cancelled_total 4
# HELP hopbudget_hedge_extra_load_ratio Hedges sent per hedged call since start (the extra load).
# TYPE hopbudget_hedge_extra_load_ratio gauge
hopbudget_hedge_extra_load_ratio 1
# HELP hopbudget_slot_wait_seconds Time a call waited for a concurrency slot towards a downstream, when granted.
# TYPE hopbudget_slot_wait_seconds histogram
hopbudget_slot_wait_seconds_sum 0.012
hopbudget_slot_wait_seconds_count 2
# HELP hopbudget_slot_refusals_total Calls that got no concurrency slot, by reason (no_time_to_wait: source slot-wait).
# TYPE hopbudget_slot_refusals_total counter
hopbudget_slot_refusals_total{reason="no_time_to_wait"} 1
hopbudget_slot_refusals_total{reason="queue_full"} 4
# HELP hopbudget_admission_admitted_total Calls admitted at once on arrival.
# TYPE hopbudget_admission_admitted_total counter
hopbudget_admission_admitted_total 41
# HELP hopbudget_admission_queued_total Calls that waited for admission (then admitted, or shed as queue_expired, queue_timeout, overload_wait or cannot_finish).
# TYPE hopbudget_admission_queued_total counter
hopbudget_admission_queued_total 42
# HELP hopbudget_admission_shed_total Calls refused by admission before their work started, by reason (cannot_finish and queue_expired: DEADLINE_EXCEEDED, sources cannot-finish and queue-wait; queue_full, over_limit, queue_timeout, overload_wait: RESOURCE_EXHAUSTED with a pushback).
# TYPE hopbudget_admission_shed_total counter
hopbudget_admission_shed_total{reason="cannot_finish"} 43
hopbudget_admission_shed_total{reason="queue_full"} 44
hopbudget_admission_shed_total{reason="over_limit"} 45
hopbudget_admission_shed_total{reason="queue_expired"} 46
hopbudget_admission_shed_total{reason="queue_timeout"} 47
hopbudget_admission_shed_total{reason="overload_wait"} 48
# HELP hopbudget_admission_admitted_after_wait_total Waiting calls admitted when a place came free.
# TYPE hopbudget_admission_admitted_after_wait_total counter
hopbudget_admission_admitted_after_wait_total 1
# HELP hopbudget_admission_in_progress Admitted calls whose handler has not answered yet.
# TYPE hopbudget_admission_in_progress gauge
hopbudget_admission_in_progress 7
# HELP hopbudget_admission_waiting Calls waiting for admission (holding no thread).
# TYPE hopbudget_admission_waiting gauge
hopbudget_admission_waiting 8
# HELP hopbudget_admission_limit The limit of calls in progress (adaptive: follows measured handler time).
# TYPE hopbudget_admission_limit gauge
hopbudget_admission_limit 9
# HELP hopbudget_admission_queue_wait_seconds Time a call waited for admission before it started.
# TYPE hopbudget_admission_queue_wait_seconds histogram
hopbudget_admission_queue_wait_seconds_sum 0.003
hopbudget_admission_queue_wait_seconds_count 1
# HELP hopbudget_admission_handler_seconds Handler time of admitted calls, from admission to answer.
# TYPE hopbudget_admission_handler_seconds histogram
hopbudget_admission_handler_seconds_sum 0.05
hopbudget_admission_handler_seconds_count 2
# HELP hopbudget_admission_predicted_seconds The predicted handler time each admitted call was checked against (compare with hopbudget_admission_handler_seconds).
# TYPE hopbudget_admission_predicted_seconds histogram
hopbudget_admission_predicted_seconds_sum 0.025
hopbudget_admission_predicted_seconds_count 1
# HELP hopbudget_config_reloads_total Service config reloads, by result (refused: did not read or validate; the table in force kept).
# TYPE hopbudget_config_reloads_total counter
hopbudget_config_reloads_total{result="applied"} 3
hopbudget_config_reloads_total{result="refused"} 1
# HELP hopbudget_config_generation The policy table in force: 1 for the one read at start, one more per applied reload.
# TYPE hopbudget_config_generation gauge
hopbudget_config_generation 4
# HELP hopbudget_shadow_total Calls of methods in shadow mode that hopbudget would have refused, cut at this hop's request cap, or failed fast downstream, and let run.
# TYPE hopbudget_shadow_total counter
hopbudget_shadow_total{action="refuse"} 5
hopbudget_shadow_total{action="cut"} 6
hopbudget_shadow_total{action="fail_fast"} 7
)";

TEST(PrometheusTextTest, ProcessWideFamiliesAreWrittenAsBeforeTheTables) {
  const std::string text = FormatPrometheusText(EveryScalarAtADistinctValue(), "orders");
  // From the first family of the tables to the end, without bucket lines.
  const size_t from = text.find("# HELP hopbudget_retries_skipped_total");
  ASSERT_NE(from, std::string::npos);
  std::vector<absl::string_view> lines;
  for (absl::string_view line : absl::StrSplit(absl::string_view(text).substr(from), '\n')) {
    if (!absl::StrContains(line, "_bucket{")) lines.push_back(line);
  }
  EXPECT_EQ(absl::StrJoin(lines, "\n"), kScalarFamilies);
}

TEST(MetricTablesTest, RowsAreWellFormed) {
  absl::flat_hash_set<absl::string_view> names;
  for (absl::Span<const internal::MetricRow> table : internal::kMetricTables) {
    for (const internal::MetricRow& row : table) {
      EXPECT_GT(row.count, 0) << row.name;
      if (row.type == internal::MetricType::kHistogram) {
        EXPECT_NE(row.histogram, nullptr) << row.name;
        EXPECT_NE(row.buckets, nullptr) << row.name;
        EXPECT_TRUE(absl::EndsWith(row.name, "_seconds")) << row.name;
      } else {
        EXPECT_NE(row.load, nullptr) << row.name;
        EXPECT_EQ(row.has_cells, row.store != nullptr) << row.name;
      }
      if (!row.exposed()) {
        EXPECT_GT(row.cells(), 0) << "a hidden row stores something";
        continue;
      }
      EXPECT_TRUE(names.insert(row.name).second) << "two rows name " << row.name;
      EXPECT_TRUE(absl::StartsWith(row.name, "hopbudget_")) << row.name;
      EXPECT_FALSE(row.help.empty()) << row.name;
      EXPECT_EQ(absl::EndsWith(row.name, "_total"), row.type == internal::MetricType::kCounter)
          << row.name << ": counters, and only counters, end in _total";
      if (!row.label.empty()) {
        ASSERT_NE(row.label_value, nullptr) << row.name;
        absl::flat_hash_set<absl::string_view> values;
        for (int v = row.first; v < row.first + row.count; ++v) {
          const absl::string_view value = row.label_value(v);
          EXPECT_FALSE(value.empty()) << row.name << " value " << v;
          EXPECT_NE(value, "unknown") << row.name << " value " << v;
          EXPECT_TRUE(values.insert(value).second) << row.name << ": " << value << " twice";
        }
      } else {
        EXPECT_EQ(row.count, 1) << row.name << ": several cells need a label";
      }
    }
  }
}

TEST(MetricTablesTest, EveryEnumPrintsItsLabelName) {
  EXPECT_EQ(::testing::PrintToString(ShieldEvent::kDrainTimedOut), "timed_out");
  EXPECT_EQ(::testing::PrintToString(SlotRefusalReason::kQueueFull), "queue_full");
  EXPECT_EQ(::testing::PrintToString(LeakKind::kLaterThanInbound), "later_than_inbound");
  EXPECT_EQ(::testing::PrintToString(TraceDrop::kOversized), "oversized");
  EXPECT_EQ(::testing::PrintToString(Side::kServer), "server");
  EXPECT_EQ(::testing::PrintToString(LatencyKind::kClientCall), "client_call");
  EXPECT_EQ(::testing::PrintToString(ClientCallKind::kRetryAttempt), "retry_attempt");
  EXPECT_EQ(::testing::PrintToString(MethodRole::kInfrastructure), "infrastructure");
}

}  // namespace
}  // namespace hopbudget
