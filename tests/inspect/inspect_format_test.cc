// Copyright hopbudget authors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "absl/strings/str_split.h"
#include "format.h"
#include "sample_exposition.h"

namespace hopbudget::inspect {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::vector<TargetResult> SampleResults() {
  absl::StatusOr<Exposition> e = ParseExposition(testing::kOrdersExposition);
  EXPECT_TRUE(e.ok()) << e.status();
  std::vector<TargetResult> results;
  results.push_back({"127.0.0.1:9101", Summarize(*e)});
  HopSummary idle;  // a hop that has served nothing yet
  idle.hop = "ledger";
  idle.budget_p50_seconds = idle.budget_p99_seconds = NAN;
  results.push_back({"http://127.0.0.1:9102/metrics", idle});
  results.push_back(
      {"127.0.0.1:1",
       absl::UnavailableError("http://127.0.0.1:1/metrics: Could not establish connection")});
  return results;
}

TEST(FormatTableTest, OneAlignedRowPerTarget) {
  const std::string table = FormatTable(SampleResults());
  const std::vector<std::string> lines = absl::StrSplit(table, '\n');
  ASSERT_EQ(lines.size(), 5u) << table;  // header, 3 rows, "" after the last newline
  EXPECT_EQ(lines[0],
            "HOP     TARGET                         CALLS  OK  SUCCESS  TIMEOUTS(SERVER)        "
            "TIMEOUTS(CLIENT)    RETRIES  SKIPPED  BUDGET_P50  BUDGET_P99  SHIELD");
  EXPECT_EQ(lines[1],
            "orders  127.0.0.1:9101                 10     7   70.0%    request=1 downstream=1  "
            "client=1 attempt=2  3        1        125ms       247.5ms     2");
  EXPECT_EQ(lines[2],
            "ledger  http://127.0.0.1:9102/metrics  0      0   -        -                       "
            "-                   0        0        -           -           0");
  EXPECT_EQ(lines[3],
            "-       127.0.0.1:1                    error: http://127.0.0.1:1/metrics: Could not "
            "establish connection");
  EXPECT_EQ(lines[4], "");
}

TEST(FormatTableTest, UnknownHopAndUnknownSource) {
  HopSummary s;
  s.timeouts["server"]["martian"] = 2;
  s.timeouts["server"]["client"] = 1;
  s.budget_p50_seconds = 1.5;
  s.budget_p99_seconds = 0.0004;
  const std::string table = FormatTable({{"h:1", s}});
  EXPECT_THAT(table, HasSubstr("\n?  "));
  EXPECT_THAT(table, HasSubstr("client=1 martian=2"));
  EXPECT_THAT(table, HasSubstr("1.5s"));
  EXPECT_THAT(table, HasSubstr("400us"));
}

TEST(FormatTableTest, NoTargetsGivesTheHeaderOnly) {
  EXPECT_THAT(FormatTable({}), StartsWith("HOP  TARGET  CALLS"));
}

TEST(FormatJsonTest, OneLineDocument) {
  const std::string json = FormatJson(SampleResults());
  EXPECT_EQ(
      json,
      "{\"targets\":["
      "{\"target\":\"127.0.0.1:9101\",\"ok\":true,\"hop\":\"orders\",\"calls\":10,\"success\":7,"
      "\"success_ratio\":0.7,\"client_calls\":11,\"client_success\":8,"
      "\"timeouts\":{\"server\":{\"client\":0,\"request\":1,\"attempt\":0,\"idle\":0,"
      "\"downstream\":1,\"exhausted-before-call\":0,\"arrived-expired\":0,\"shield\":0,\"slot-"
      "wait\":0,\"queue-wait\":0,\"cannot-finish\":0,\"no-backend\":0},"
      "\"client\":{\"client\":1,\"request\":0,\"attempt\":2,\"idle\":0,\"downstream\":0,"
      "\"exhausted-before-call\":0,\"arrived-expired\":0,\"shield\":0,\"slot-wait\":0,\"queue-"
      "wait\":0,\"cannot-finish\":0,\"no-backend\":0}},"
      "\"retries\":{\"total\":3,\"by_code\":{\"DEADLINE_EXCEEDED\":2,\"UNAVAILABLE\":1}},"
      "\"retries_skipped\":{\"total\":1,\"by_reason\":{\"attempts_exhausted\":0,\"no_room\":1}},"
      "\"budget_at_arrival_seconds\":{\"count\":10,\"p50\":0.125,\"p99\":0.2475},"
      "\"calls_without_deadline\":1,"
      "\"shield\":{\"in_flight\":2,\"outcomes\":{\"completed\":4,\"exceeded_bound\":1,"
      "\"failed\":0,\"refused\":0}}},"
      "{\"target\":\"http://127.0.0.1:9102/metrics\",\"ok\":true,\"hop\":\"ledger\",\"calls\":0,"
      "\"success\":0,\"success_ratio\":null,\"client_calls\":0,\"client_success\":0,"
      "\"timeouts\":{\"server\":{\"client\":0,\"request\":0,\"attempt\":0,\"idle\":0,"
      "\"downstream\":0,\"exhausted-before-call\":0,\"arrived-expired\":0,\"shield\":0,\"slot-"
      "wait\":0,\"queue-wait\":0,\"cannot-finish\":0,\"no-backend\":0},"
      "\"client\":{\"client\":0,\"request\":0,\"attempt\":0,\"idle\":0,\"downstream\":0,"
      "\"exhausted-before-call\":0,\"arrived-expired\":0,\"shield\":0,\"slot-wait\":0,\"queue-"
      "wait\":0,\"cannot-finish\":0,\"no-backend\":0}},"
      "\"retries\":{\"total\":0,\"by_code\":{}},"
      "\"retries_skipped\":{\"total\":0,\"by_reason\":{}},"
      "\"budget_at_arrival_seconds\":{\"count\":0,\"p50\":null,\"p99\":null},"
      "\"calls_without_deadline\":0,\"shield\":{\"in_flight\":0,\"outcomes\":{}}},"
      "{\"target\":\"127.0.0.1:1\",\"ok\":false,"
      "\"error\":\"http://127.0.0.1:1/metrics: Could not establish connection\"}"
      "]}\n");
}

TEST(FormatJsonTest, EscapesStrings) {
  HopSummary s;
  s.hop = "we\"ird";
  s.budget_p50_seconds = s.budget_p99_seconds = NAN;
  EXPECT_THAT(FormatJson({{"t:1", s}}), HasSubstr("\"hop\":\"we\\\"ird\""));
}

TEST(FormatSecondsTest, PicksAReadableUnit) {
  EXPECT_EQ(FormatSeconds(NAN), "-");
  EXPECT_EQ(FormatSeconds(0), "0s");
  EXPECT_EQ(FormatSeconds(0.00025), "250us");
  EXPECT_EQ(FormatSeconds(0.1499), "149.9ms");
  EXPECT_EQ(FormatSeconds(2.5), "2.5s");
  EXPECT_EQ(FormatSeconds(60), "60s");
  EXPECT_EQ(FormatSeconds(INFINITY), "+Inf");
}

}  // namespace
}  // namespace hopbudget::inspect
