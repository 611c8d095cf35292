// Copyright hopbudget authors.
#include "hopbudget/exposition.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_format.h"

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
  m.CountCallEnd(Side::kServer, MethodId{}, absl::StatusCode::kDeadlineExceeded);
  m.CountDeadlineExceeded(Side::kClient, DeadlineSource::kExhaustedBeforeCall, "orders");
  m.CountRetryDecision(RetryOutcome::kThrottled);
  m.CountRetry(MethodId{}, absl::StatusCode::kUnavailable);
  const std::string text = FormatPrometheusText(m.Snapshot(), "orders");
  EXPECT_THAT(
      text, HasSubstr("hopbudget_calls_total{side=\"server\",method=\"other\",role=\"application\","
                      "code=\"DEADLINE_EXCEEDED\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("hopbudget_deadline_exceeded_total{side=\"client\","
                              "source=\"exhausted-before-call\",hop=\"orders\"} 1\n"));
  EXPECT_THAT(text,
              HasSubstr("hopbudget_retries_skipped_total{reason=\"throttled\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("hopbudget_retries_total{method=\"other\",role=\"application\","
                              "code=\"UNAVAILABLE\"} 1\n"));
}

TEST(PrometheusTextTest, HistogramBucketsAreCumulativeWithSumAndCount) {
  Metrics m;
  m.ObserveBudgetAtArrival(MethodId{}, absl::Milliseconds(20));
  m.ObserveBudgetAtArrival(MethodId{}, absl::Milliseconds(800));
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
  m.EndServerCall(MethodId{}, absl::StatusCode::kOk, absl::Milliseconds(800));
  m.EndClientAttempt(MethodId{}, absl::StatusCode::kUnavailable, absl::Seconds(1),
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
    if (skipped) EXPECT_EQ(RetrySkipReason(outcome), RetryOutcomeName(outcome)) << o;
  }
  EXPECT_EQ(RetrySkipReason(RetryOutcome::kNoRoom), "no_room");
  EXPECT_EQ(RetrySkipReason(RetryOutcome::kThrottled), "throttled");
}

TEST(JsonStringTest, EscapesQuotesBackslashesAndControls) {
  EXPECT_EQ(JsonString(""), "\"\"");
  EXPECT_EQ(JsonString("a\"b\\c\nd\re\tf\x01\x7f"),
            "\"a\\\"b\\\\c\\nd\\re\\tf\\u0001\\u007f\"");
}

TEST(JsonStringTest, KeepsValidUtf8AndReplacesInvalidBytes) {
  EXPECT_EQ(JsonString("h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80"),
            "\"h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80\"");
  EXPECT_EQ(JsonString("bad\xFF\xC3"), "\"bad\xEF\xBF\xBD\xEF\xBF\xBD\"");  // stray, cut short
  EXPECT_EQ(JsonString("\xC0\xAF"), "\"\xEF\xBF\xBD\xEF\xBF\xBD\"");         // overlong
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
  m.CountDeadlineExceeded(Side::kServer, DeadlineSource::kRequest, "orders");
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
  EXPECT_THAT(json, HasSubstr("{\"hop\":\"orders\",\"budget_ms\":780.500,\"spent_ms\":12.250,"
                              "\"attempts\":2,\"code\":\"DEADLINE_EXCEEDED\",\"source\":\"request\"}"));
  EXPECT_THAT(json, HasSubstr("{\"hop\":\"ledger\",\"budget_ms\":null,"));
  EXPECT_THAT(json, HasSubstr("\"server\":{\"client\":0,\"request\":1,"));
}

TEST(DeadlinezJsonTest, RetriesSayHowManyStartedSavedAndWhyOthersDidNot) {
  Metrics m;
  m.CountRetryDecision(RetryOutcome::kRetry);
  m.CountRetryDecision(RetryOutcome::kThrottled);
  m.CountRetryDecision(RetryOutcome::kThrottled);
  m.CountRetryDecision(RetryOutcome::kNoRoom);
  m.EndRetryingCall(MethodId{}, absl::StatusCode::kOk, 2, absl::Milliseconds(3));
  const std::string json = FormatDeadlinezJson(m.Snapshot(), {}, "orders", absl::UnixEpoch());
  EXPECT_THAT(json, HasSubstr("\"retries\":{\"started\":1,\"succeeded_after_retry\":1,"
                              "\"skipped\":{"));
  EXPECT_THAT(json, HasSubstr("\"throttled\":2"));
  EXPECT_THAT(json, HasSubstr("\"no_room\":1"));
  EXPECT_THAT(json, HasSubstr("\"attempts_exhausted\":0"));
  EXPECT_THAT(json, ::testing::EndsWith("}}}"));
}

TEST(DeadlinezJsonTest, EachCallSaysWhyItsFailedAttemptWasNotRetried) {
  RecentCall throttled{"/a.B/C", absl::UnixEpoch(), absl::StatusCode::kUnavailable,
                       DeadlineSource::kNone, {}, RetryOutcome::kThrottled};
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
  m.CountRace(RaceOutcome::kWon, 2);
  m.CountHedgedCall(2, 1, 1);
  m.CountHedgedCall(1, 0, 0);
  m.CountHedgeSkipped(HedgeOutcome::kNoBudget);
  m.ObserveSlotWait(absl::Milliseconds(20));
  m.CountSlotRefusal(SlotRefusalReason::kQueueFull);
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

}  // namespace
}  // namespace hopbudget
