// Copyright hopbudget authors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "sample_exposition.h"
#include "summary.h"

namespace hopbudget::inspect {
namespace {

using ::testing::HasSubstr;

HopSummary MustSummarize(absl::string_view text) {
  absl::StatusOr<Exposition> e = ParseExposition(text);
  EXPECT_TRUE(e.ok()) << e.status();
  if (!e.ok()) return {};
  absl::StatusOr<HopSummary> s = Summarize(*e);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : HopSummary();
}

TEST(SummaryTest, SummarizesOneHop) {
  const HopSummary s = MustSummarize(testing::kOrdersExposition);
  EXPECT_EQ(s.hop, "orders");
  EXPECT_EQ(s.calls, 10);
  EXPECT_EQ(s.ok, 7);
  EXPECT_EQ(s.client_calls, 11);
  EXPECT_EQ(s.client_ok, 8);
  EXPECT_EQ(s.timeouts.at("server").at("request"), 1);
  EXPECT_EQ(s.timeouts.at("server").at("downstream"), 1);
  EXPECT_EQ(s.timeouts.at("server").at("client"), 0);
  EXPECT_EQ(s.timeouts.at("client").at("attempt"), 2);  // summed over the hop label
  EXPECT_EQ(s.timeouts.at("client").at("client"), 1);
  EXPECT_EQ(s.timeouts.at("client").at("shield"), 0);
  EXPECT_EQ(s.retries, 3);
  EXPECT_EQ(s.retries_by_code.at("DEADLINE_EXCEEDED"), 2);
  EXPECT_EQ(s.retries_by_code.at("UNAVAILABLE"), 1);  // `reason`, as exporters before 0.2 wrote it
  EXPECT_EQ(s.retries_skipped, 1);
  EXPECT_EQ(s.retries_skipped_by_reason.at("no_room"), 1);
  EXPECT_EQ(s.budget_observations, 10);
  EXPECT_EQ(s.calls_without_deadline, 1);
  // Buckets summed over methods: 0.1 -> 4, 0.25 -> 10 (see sample_exposition.h).
  EXPECT_DOUBLE_EQ(s.budget_p50_seconds, 0.1 + 0.15 * 1.0 / 6.0);
  EXPECT_DOUBLE_EQ(s.budget_p99_seconds, 0.1 + 0.15 * 5.9 / 6.0);
  EXPECT_EQ(s.shield_in_flight, 2);
  EXPECT_EQ(s.shield_outcomes.at("completed"), 4);
  EXPECT_EQ(s.shield_outcomes.at("exceeded_bound"), 1);
}

// Health checks and admin calls (role="infrastructure") do not move the
// budget percentiles of the application's calls.
TEST(SummaryTest, InfrastructureMethodsAreLeftOutOfBudgetPercentiles) {
  const HopSummary s = MustSummarize(
      "# TYPE hopbudget_budget_at_arrival_seconds histogram\n"
      "hopbudget_budget_at_arrival_seconds_bucket{method=\"/a.B/C\",role=\"application\","
      "le=\"0.5\"} 0\n"
      "hopbudget_budget_at_arrival_seconds_bucket{method=\"/a.B/C\",role=\"application\","
      "le=\"1\"} 4\n"
      "hopbudget_budget_at_arrival_seconds_bucket{method=\"/a.B/C\",role=\"application\","
      "le=\"+Inf\"} 4\n"
      "hopbudget_budget_at_arrival_seconds_count{method=\"/a.B/C\",role=\"application\"} 4\n"
      "hopbudget_budget_at_arrival_seconds_bucket{method=\"/grpc.health.v1.Health/Check\","
      "role=\"infrastructure\",le=\"0.5\"} 100\n"
      "hopbudget_budget_at_arrival_seconds_bucket{method=\"/grpc.health.v1.Health/Check\","
      "role=\"infrastructure\",le=\"1\"} 100\n"
      "hopbudget_budget_at_arrival_seconds_bucket{method=\"/grpc.health.v1.Health/Check\","
      "role=\"infrastructure\",le=\"+Inf\"} 100\n"
      "hopbudget_budget_at_arrival_seconds_count{method=\"/grpc.health.v1.Health/Check\","
      "role=\"infrastructure\"} 100\n");
  EXPECT_DOUBLE_EQ(s.budget_p50_seconds, 0.75);
  EXPECT_EQ(s.budget_observations, 4);
}

TEST(SummaryTest, MissingFamiliesCountAsZero) {
  const HopSummary s = MustSummarize("up 1\n");
  EXPECT_EQ(s.hop, "");
  EXPECT_EQ(s.calls, 0);
  EXPECT_EQ(s.retries, 0);
  EXPECT_EQ(s.timeouts.at("server").size(), KnownSources().size());
  EXPECT_TRUE(std::isnan(s.budget_p50_seconds));
  EXPECT_TRUE(std::isnan(s.budget_p99_seconds));
  EXPECT_EQ(s.shield_outcomes.at("refused"), 0);
}

TEST(SummaryTest, UnknownSourceIsKeptAndBrokenCountersCountZero) {
  const HopSummary s = MustSummarize(
      "hopbudget_deadline_exceeded_total{side=\"server\",source=\"martian\",hop=\"x\"} 4\n"
      "hopbudget_deadline_exceeded_total{side=\"server\",hop=\"x\"} 1\n"
      "hopbudget_deadline_exceeded_total{side=\"sideways\",source=\"client\"} 9\n"
      "hopbudget_calls_total{side=\"server\",code=\"OK\"} NaN\n"
      "hopbudget_calls_total{side=\"server\",code=\"OK\"} -3\n");
  EXPECT_EQ(s.timeouts.at("server").at("martian"), 4);
  EXPECT_EQ(s.timeouts.at("server").at("unknown"), 1);
  EXPECT_EQ(s.timeouts.count("sideways"), 0u);
  EXPECT_EQ(s.calls, 0);
}

TEST(SummaryTest, FamilyOfTheWrongTypeIsAnError) {
  absl::StatusOr<Exposition> e =
      ParseExposition("# TYPE hopbudget_calls_total gauge\nhopbudget_calls_total 1\n");
  ASSERT_TRUE(e.ok());
  absl::StatusOr<HopSummary> s = Summarize(*e);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()),
              HasSubstr("hopbudget_calls_total is a gauge, expected a counter"));
}

TEST(HistogramQuantileTest, InterpolatesLinearlyInsideTheBucket) {
  // 100 observations uniformly in (0, 1]: quantile q is q.
  const std::vector<Bucket> b = {{0.25, 25}, {0.5, 50}, {1, 100}, {INFINITY, 100}};
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.5, b), 0.5);
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.1, b), 0.1);  // first bucket starts at 0
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.75, b), 0.75);
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.99, b), 0.99);
  EXPECT_DOUBLE_EQ(HistogramQuantile(0, b), 0);
  EXPECT_DOUBLE_EQ(HistogramQuantile(1, b), 1);
}

TEST(HistogramQuantileTest, RankInTheInfBucketGivesTheHighestFiniteBound) {
  const std::vector<Bucket> b = {{0.1, 1}, {60, 2}, {INFINITY, 10}};
  EXPECT_EQ(HistogramQuantile(0.99, b), 60);
}

TEST(HistogramQuantileTest, UnsortedDuplicateAndNonMonotonicBuckets) {
  // Sorted, equal bounds summed, a dip flattened to the running maximum.
  const std::vector<Bucket> b = {{INFINITY, 4}, {1, 2}, {0.5, 1}, {1, 2}, {0.5, 1}, {0.75, 1}};
  // merged: 0.5 -> 2, 0.75 -> 1 (raised to 2), 1 -> 4, +Inf -> 4
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.5, b), 0.5);
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.75, b), 0.75 + 0.25 * 1.0 / 2.0);
}

TEST(HistogramQuantileTest, UndefinedCases) {
  EXPECT_TRUE(std::isnan(HistogramQuantile(0.5, {})));
  EXPECT_TRUE(std::isnan(HistogramQuantile(0.5, {{INFINITY, 3}})));            // one bucket
  EXPECT_TRUE(std::isnan(HistogramQuantile(0.5, {{0.1, 1}, {1, 3}})));         // no +Inf
  EXPECT_TRUE(std::isnan(HistogramQuantile(0.5, {{0.1, 0}, {INFINITY, 0}})));  // empty
  EXPECT_TRUE(std::isnan(HistogramQuantile(NAN, {{0.1, 1}, {INFINITY, 1}})));
  EXPECT_EQ(HistogramQuantile(-0.1, {{0.1, 1}, {INFINITY, 1}}), -INFINITY);
  EXPECT_EQ(HistogramQuantile(1.1, {{0.1, 1}, {INFINITY, 1}}), INFINITY);
  // A first bucket at or below zero is returned as is.
  EXPECT_EQ(HistogramQuantile(0.5, {{0, 5}, {1, 6}, {INFINITY, 6}}), 0);
}

TEST(RatesTest, PerSecondBetweenTwoScrapes) {
  HopSummary before;
  before.hop = "orders";
  before.calls = 10;
  before.ok = 8;
  before.timeouts["server"]["request"] = 1;
  before.timeouts["client"]["downstream"] = 5;  // client side: not in the rate
  before.retries = 2;
  HopSummary after = before;
  after.calls = 30;
  after.ok = 24;
  after.timeouts["server"]["request"] = 3;
  after.timeouts["server"]["downstream"] = 2;
  after.timeouts["client"]["downstream"] = 50;
  after.retries = 6;
  absl::StatusOr<HopRates> r = RatesBetween(before, after, absl::Seconds(2));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->over, absl::Seconds(2));
  EXPECT_DOUBLE_EQ(r->calls_per_second, 10);
  EXPECT_DOUBLE_EQ(r->ok_per_second, 8);
  EXPECT_DOUBLE_EQ(r->timeouts_per_second, 2);  // (3 + 2 - 1) / 2 s
  EXPECT_DOUBLE_EQ(r->retries_per_second, 2);

  // Nothing happened: zero, not an error.
  r = RatesBetween(after, after, absl::Milliseconds(500));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->calls_per_second, 0);
}

TEST(RatesTest, NoRateAcrossARestartAnotherHopOrNoTime) {
  HopSummary before;
  before.hop = "orders";
  before.calls = 10;
  HopSummary restarted = before;
  restarted.calls = 3;
  HopSummary other = before;
  other.hop = "ledger";
  EXPECT_FALSE(RatesBetween(before, restarted, absl::Seconds(2)).ok());
  EXPECT_FALSE(RatesBetween(before, other, absl::Seconds(2)).ok());
  EXPECT_FALSE(RatesBetween(before, before, absl::ZeroDuration()).ok());
  EXPECT_FALSE(RatesBetween(before, before, -absl::Seconds(1)).ok());
}

}  // namespace
}  // namespace hopbudget::inspect
