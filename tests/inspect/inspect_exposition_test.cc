// Copyright hopbudget authors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "exposition.h"

namespace hopbudget::inspect {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

TEST(ExpositionTest, ParsesFamiliesSamplesAndLabels) {
  absl::StatusOr<Exposition> e = ParseExposition(
      "# HELP hopbudget_calls_total Finished calls.\n"
      "# TYPE hopbudget_calls_total counter\n"
      "hopbudget_calls_total{side=\"server\",method=\"/demo.Orders/Create\",code=\"OK\"} 12\n"
      "hopbudget_calls_total{side=\"client\",method=\"other\",code=\"DEADLINE_EXCEEDED\"} 3 "
      "1700000000000\n"
      "# TYPE hopbudget_shield_in_flight gauge\n"
      "hopbudget_shield_in_flight 2\n");
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_EQ(e->families.size(), 2u);
  const Family* calls = e->Find("hopbudget_calls_total");
  ASSERT_NE(calls, nullptr);
  EXPECT_EQ(calls->type, MetricType::kCounter);
  EXPECT_EQ(calls->help, "Finished calls.");
  ASSERT_EQ(calls->samples.size(), 2u);
  EXPECT_THAT(calls->samples[0].labels,
              ElementsAre(Pair("side", "server"), Pair("method", "/demo.Orders/Create"),
                          Pair("code", "OK")));
  EXPECT_EQ(calls->samples[0].value, 12);
  EXPECT_FALSE(calls->samples[0].timestamp_ms.has_value());
  EXPECT_EQ(calls->samples[1].Label("code"), "DEADLINE_EXCEEDED");
  EXPECT_EQ(calls->samples[1].timestamp_ms, 1700000000000);
  EXPECT_EQ(calls->samples[1].Label("absent"), "");
  EXPECT_FALSE(calls->samples[1].HasLabel("absent"));
  EXPECT_EQ(e->Find("hopbudget_shield_in_flight")->type, MetricType::kGauge);
  EXPECT_EQ(e->Find("hopbudget_shield_in_flight")->samples[0].value, 2);
  EXPECT_EQ(e->Find("nope"), nullptr);
}

TEST(ExpositionTest, GroupsHistogramSamplesUnderTheirFamily) {
  absl::StatusOr<Exposition> e = ParseExposition(
      "# TYPE h histogram\n"
      "h_bucket{le=\"0.1\"} 1\n"
      "h_bucket{le=\"+Inf\"} 3\n"
      "h_sum 0.9\n"
      "h_count 3\n"
      "# TYPE s summary\n"
      "s{quantile=\"0.5\"} 1\n"
      "s_sum 2\n"
      "s_count 2\n"
      "h_other 1\n");
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_EQ(e->families.size(), 3u);
  EXPECT_EQ(e->Find("h")->samples.size(), 4u);
  EXPECT_EQ(e->Find("h")->samples[1].Label("le"), "+Inf");
  EXPECT_EQ(e->Find("s")->samples.size(), 3u);
  EXPECT_EQ(e->Find("h_other")->type, MetricType::kUntyped);
}

TEST(ExpositionTest, UndeclaredSuffixesStayTheirOwnFamily) {
  absl::StatusOr<Exposition> e = ParseExposition("x_count 1\nx_bucket 2\n");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_NE(e->Find("x_count"), nullptr);
  EXPECT_NE(e->Find("x_bucket"), nullptr);
  EXPECT_EQ(e->Find("x"), nullptr);
}

TEST(ExpositionTest, LabelEscapesAndBlanks) {
  absl::StatusOr<Exposition> e = ParseExposition(
      "m { a = \"q\\\"uote\" , b=\"back\\\\slash\",c=\"new\\nline\", } \t 1.5e3\r\n"
      "m{} 2\n"
      "\n"
      "   \n"
      "# a free comment\n"
      "#\n");
  ASSERT_TRUE(e.ok()) << e.status();
  const Family* m = e->Find("m");
  ASSERT_EQ(m->samples.size(), 2u);
  EXPECT_THAT(m->samples[0].labels,
              ElementsAre(Pair("a", "q\"uote"), Pair("b", "back\\slash"), Pair("c", "new\nline")));
  EXPECT_EQ(m->samples[0].value, 1500);
  EXPECT_TRUE(m->samples[1].labels.empty());
}

TEST(ExpositionTest, SpecialValues) {
  absl::StatusOr<Exposition> e =
      ParseExposition("a NaN\nb +Inf\nc -Inf\nd Inf\ne -0.5\nf 1e-3\ng 7 -5\n");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_TRUE(std::isnan(e->Find("a")->samples[0].value));
  EXPECT_EQ(e->Find("b")->samples[0].value, INFINITY);
  EXPECT_EQ(e->Find("c")->samples[0].value, -INFINITY);
  EXPECT_EQ(e->Find("d")->samples[0].value, INFINITY);
  EXPECT_EQ(e->Find("e")->samples[0].value, -0.5);
  EXPECT_DOUBLE_EQ(e->Find("f")->samples[0].value, 0.001);
  EXPECT_EQ(e->Find("g")->samples[0].timestamp_ms, -5);
}

TEST(ExpositionTest, HelpEscapesAndEmptyDocument) {
  absl::StatusOr<Exposition> e = ParseExposition("# HELP m a\\\\b\\nc \\t\nm 1\n");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->Find("m")->help, "a\\b\nc \\t");
  absl::StatusOr<Exposition> empty = ParseExposition("");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->families.empty());
}

struct Malformed {
  const char* text;
  const char* message;
};

class MalformedTest : public ::testing::TestWithParam<Malformed> {};

TEST_P(MalformedTest, IsRejectedWithLineAndReason) {
  absl::StatusOr<Exposition> e = ParseExposition(GetParam().text);
  ASSERT_FALSE(e.ok()) << GetParam().text;
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(e.status().message()), HasSubstr(GetParam().message));
}

INSTANTIATE_TEST_SUITE_P(
    Exposition, MalformedTest,
    ::testing::Values(
        Malformed{"ok 1\n9bad 1\n", "line 2: expected a metric name"},
        Malformed{"m-x 1\n", "invalid character after metric name"},
        Malformed{"m\n", "expected a sample value"},
        Malformed{"m one\n", "invalid sample value \"one\""},
        Malformed{"m nan\n", "invalid sample value \"nan\""},
        Malformed{"m 0x10\n", "invalid sample value"},
        Malformed{"m 1 2 3\n", "unexpected text after the timestamp"},
        Malformed{"m 1 soon\n", "invalid timestamp \"soon\""},
        Malformed{"m{a=\"x\" 1\n", "expected ',' or '}'"},
        Malformed{"m{a=\"x\n", "unterminated label value"},
        Malformed{"m{a=\"x\\", "unterminated escape"},
        Malformed{"m{a=\"\\t\"} 1\n", "unknown escape \\t"},
        Malformed{"m{a=x} 1\n", "expected '\"' to open the value of label a"},
        Malformed{"m{a} 1\n", "expected '=' after label a"},
        Malformed{"m{1a=\"x\"} 1\n", "expected a label name"},
        Malformed{"m{a:b=\"x\"} 1\n", "expected '=' after label a"},
        Malformed{"m{a=\"1\",a=\"2\"} 1\n", "duplicate label a"},
        Malformed{"# TYPE m countr\n", "unknown metric type \"countr\""},
        Malformed{"# TYPE m\n", "unknown metric type"},
        Malformed{"# TYPE m counter extra\n", "unknown metric type"},
        Malformed{"# TYPE\n", "expected a metric name after # TYPE"},
        Malformed{"# TYPE m counter\n# TYPE m gauge\n", "line 2: second TYPE line for m"},
        Malformed{"m 1\n# TYPE m counter\n", "TYPE line for m after its samples"},
        Malformed{"# TYPE h histogram\nh_bucket 1\n", "histogram bucket h_bucket without le"},
        Malformed{"# TYPE h histogram\nh_bucket{le=\"x\"} 1\n", "invalid le \"x\""},
        Malformed{"<html>not metrics</html>\n", "line 1: expected a metric name"}));

}  // namespace
}  // namespace hopbudget::inspect
