// Copyright hopbudget authors.
#include "summary.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hopbudget::chainctl {
namespace {

using ::testing::HasSubstr;

TEST(PercentileTest, NearestRank) {
  EXPECT_EQ(Percentile({}, 0.5), 0);
  EXPECT_EQ(Percentile({5}, 0.99), 5);
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);
  EXPECT_EQ(Percentile(v, 0.5), 50);
  EXPECT_EQ(Percentile(v, 0.99), 99);
  EXPECT_EQ(Percentile(v, 1.0), 100);
  EXPECT_EQ(Percentile(v, 0.0), 1);
}

TEST(SummaryBuilderTest, Aggregates) {
  SummaryBuilder b;
  b.Add({absl::StatusCode::kOk, absl::Milliseconds(10)});
  b.Add({absl::StatusCode::kOk, absl::Milliseconds(30)});
  b.Add({absl::StatusCode::kUnavailable, absl::Milliseconds(20)});
  b.Add({absl::StatusCode::kDeadlineExceeded, absl::Milliseconds(800), "attempt", "orders"});
  b.Add({absl::StatusCode::kDeadlineExceeded, absl::Milliseconds(800), "attempt", "orders"});
  b.Add({absl::StatusCode::kDeadlineExceeded, absl::Milliseconds(800)});
  b.CountNotSent();
  b.AddService({"gateway", 0, 1.5, 0});
  b.AddService({"ledger", 2, 10, 3});
  LoadSummary s = b.Build();
  EXPECT_EQ(s.sent, 6);
  EXPECT_EQ(s.ok, 2);
  EXPECT_EQ(s.not_sent, 1);
  EXPECT_EQ(s.errors_by_code["UNAVAILABLE"], 1);
  EXPECT_EQ(s.errors_by_code["DEADLINE_EXCEEDED"], 3);
  EXPECT_EQ(s.deadline_exceeded_by_source["attempt"]["orders"], 2);
  EXPECT_EQ(s.deadline_exceeded_by_source["unattributed"]["?"], 1);
  EXPECT_EQ(s.retries, 3);
  EXPECT_EQ(s.calls_started_after_deadline, 2);
  EXPECT_DOUBLE_EQ(s.work_after_deadline_ms, 11.5);
  EXPECT_EQ(s.p50_ms, 30);
  EXPECT_EQ(s.p99_ms, 800);
}

TEST(SummaryFormatTest, JsonHasTheDocumentedKeys) {
  SummaryBuilder b;
  b.Add({absl::StatusCode::kDeadlineExceeded, absl::Milliseconds(5), "client", "ledger"});
  const std::string json = FormatSummaryJson(b.Build());
  for (const char* key :
       {"\"sent\":1", "\"ok\":0", "\"errors_by_code\":{\"DEADLINE_EXCEEDED\":1}",
        "\"deadline_exceeded_by_source\":{\"client\":{\"ledger\":1}}", "\"retries\":0",
        "\"latency_ms\":{\"p50\":5.000,\"p99\":5.000}", "\"calls_started_after_deadline\":0",
        "\"work_after_deadline_ms\":0.000"}) {
    EXPECT_THAT(json, HasSubstr(key));
  }
  EXPECT_THAT(FormatSummaryTable(b.Build()), HasSubstr("DEADLINE_EXCEEDED source=client hop=ledger"));
}

TEST(ParseTargetListTest, AcceptsAndRejects) {
  EXPECT_THAT(*ParseTargetList("127.0.0.1:1,localhost:65535"),
              ::testing::ElementsAre("127.0.0.1:1", "localhost:65535"));
  for (const char* bad : {"", "host", ":80", "h:0", "h:70000", "h:80,", "h:x"}) {
    EXPECT_FALSE(ParseTargetList(bad).ok()) << bad;
  }
}

TEST(ParseItemsTest, AcceptsAndRejects) {
  absl::StatusOr<std::vector<ItemSpec>> items = ParseItems("a:2,b");
  ASSERT_TRUE(items.ok());
  ASSERT_EQ(items->size(), 2u);
  EXPECT_EQ((*items)[0].quantity, 2);
  EXPECT_EQ((*items)[1].quantity, 1);
  for (const char* bad : {"", ":2", "a:0", "a:x", "a:1001"}) {
    EXPECT_FALSE(ParseItems(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace hopbudget::chainctl
