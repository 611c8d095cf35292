// Copyright hopbudget authors.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "summary.h"

namespace hopbudget::chainctl {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

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

// What ghz prints: achieved rate, average, fastest, slowest, the quantiles,
// a histogram of ten even buckets and the error rate.
TEST(SummaryBuilderTest, RateQuantilesAndHistogramLikeGhz) {
  SummaryBuilder b;
  for (int ms = 1; ms <= 100; ++ms) {
    b.Add({ms % 10 == 0 ? absl::StatusCode::kUnavailable : absl::StatusCode::kOk,
           absl::Milliseconds(ms)});
  }
  b.SetTotal(absl::Seconds(4));
  const LoadSummary s = b.Build();
  EXPECT_DOUBLE_EQ(s.rps, 25);
  EXPECT_DOUBLE_EQ(s.error_rate, 0.1);
  EXPECT_DOUBLE_EQ(s.fastest_ms, 1);
  EXPECT_DOUBLE_EQ(s.slowest_ms, 100);
  EXPECT_DOUBLE_EQ(s.average_ms, 50.5);
  EXPECT_EQ(s.p90_ms, 90);
  EXPECT_EQ(s.p95_ms, 95);
  EXPECT_EQ(s.p999_ms, 100);
  ASSERT_EQ(s.histogram.size(), 10u);
  int64_t counted = 0;
  for (const LoadSummary::Bucket& bucket : s.histogram) counted += bucket.count;
  EXPECT_EQ(counted, 100);
  EXPECT_DOUBLE_EQ(s.histogram.back().le_ms, 100);
  EXPECT_EQ(s.histogram.front().count, 10);  // 1 .. 10 ms, at or below 10.9
  const std::string table = FormatSummaryTable(s);
  EXPECT_THAT(table, HasSubstr("25.0 calls/s"));
  EXPECT_THAT(table, HasSubstr("latency histogram (ms)"));
}

TEST(LoadFailedTest, ThresholdOrEveryCall) {
  LoadSummary s;
  EXPECT_FALSE(LoadFailed(s, -1)) << "nothing sent";
  s.sent = 10;
  s.ok = 0;
  s.error_rate = 1;
  EXPECT_TRUE(LoadFailed(s, -1)) << "every call failed";
  s.ok = 9;
  s.error_rate = 0.1;
  EXPECT_FALSE(LoadFailed(s, -1));
  EXPECT_TRUE(LoadFailed(s, 0.05));
  EXPECT_FALSE(LoadFailed(s, 0.1));
}

TEST(SummaryFormatTest, JsonHasTheDocumentedKeys) {
  SummaryBuilder b;
  b.Add({absl::StatusCode::kDeadlineExceeded, absl::Milliseconds(5), "client", "ledger"});
  const std::string json = FormatSummaryJson(b.Build());
  for (const char* key :
       {"\"sent\":1", "\"ok\":0", "\"errors_by_code\":{\"DEADLINE_EXCEEDED\":1}",
        "\"deadline_exceeded_by_source\":{\"client\":{\"ledger\":1}}", "\"retries\":0",
        "\"latency_ms\":{\"p50\":5.000,\"p90\":5.000,\"p95\":5.000,\"p99\":5.000,"
        "\"p999\":5.000,\"average\":5.000,\"fastest\":5.000,\"slowest\":5.000}",
        "\"error_rate\":1.000", "\"histogram_ms\":[{\"le\":5.000,\"count\":1}",
        "\"calls_started_after_deadline\":0", "\"work_after_deadline_ms\":0.000"}) {
    EXPECT_THAT(json, HasSubstr(key));
  }
  EXPECT_THAT(FormatSummaryTable(b.Build()),
              HasSubstr("DEADLINE_EXCEEDED: the client's own deadline, at ledger  1\n"));
}

TEST(SummaryBuilderTest, SendLagAndExpiredUnsent) {
  SummaryBuilder b;
  EXPECT_THAT(FormatSummaryJson(b.Build()),
              HasSubstr("\"send_lag_ms\":{\"p99\":0.000,\"max\":0.000},\"expired_unsent\":0"));
  for (int i = 1; i <= 100; ++i) b.AddSendLag(absl::Milliseconds(i));
  b.AddSendLag(absl::Milliseconds(500));
  b.Add({absl::StatusCode::kDeadlineExceeded, absl::Milliseconds(500), "client", "h2-load"});
  b.CountExpiredUnsent();
  const LoadSummary s = b.Build();
  EXPECT_EQ(s.send_lag_p99_ms, 100);  // nearest rank: the 100th of 101
  EXPECT_EQ(s.send_lag_max_ms, 500);
  EXPECT_EQ(s.expired_unsent, 1);
  EXPECT_EQ(s.errors_by_code.at("DEADLINE_EXCEEDED"), 1);
  EXPECT_THAT(FormatSummaryJson(s), HasSubstr("\"send_lag_ms\":{\"p99\":100.000,\"max\":500.000},"
                                              "\"expired_unsent\":1"));
  EXPECT_THAT(FormatSummaryTable(s),
              ::testing::ContainsRegex("expired waiting for a stream \\(never sent\\) +1\n"));
}

TEST(LoadClientThrottleTest, OffAtZeroAFiveSecondWindowOtherwiseAndBadValuesNamed) {
  absl::StatusOr<absl::optional<ClientThrottlePolicy>> off = LoadClientThrottle(0);
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->has_value());
  absl::StatusOr<absl::optional<ClientThrottlePolicy>> on = LoadClientThrottle(2);
  ASSERT_TRUE(on.ok());
  ASSERT_TRUE(on->has_value());
  EXPECT_EQ((*on)->k, 2);
  EXPECT_EQ((*on)->window, absl::Seconds(5));
  for (double bad : {0.5, -1.0}) {
    absl::StatusOr<absl::optional<ClientThrottlePolicy>> r = LoadClientThrottle(bad);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(r.status().message()),
                HasSubstr(absl::StrCat("--client-throttle=", bad, ": 0 (off) or a number >= 1")));
  }
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

TEST(FormatItemsTest, IsTheInverseOfParseItems) {
  const std::vector<ItemSpec> items = {{"sku-1", 2}, {"b", 1}};
  EXPECT_EQ(FormatItems(items), "sku-1:2,b:1");
  absl::StatusOr<std::vector<ItemSpec>> back = ParseItems(FormatItems(items));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(FormatItems(*back), "sku-1:2,b:1");
  EXPECT_EQ(LedgerItemsText(items), "sku-1 x2, b x1");
  EXPECT_EQ(LedgerItemsText(WithOrderReference(items, "k-7")), "sku-1 x2, b x1, ref-k-7 x1");
}

TEST(RequestRecordTest, RoundTrips) {
  const RequestRecord r{
      "load-1-7", {{"sku-1", 1}, {"ref-load-1-7", 1}}, absl::StatusCode::kDeadlineExceeded, 0};
  const RequestRecord ok{"load-1-8", {{"sku-1", 1}}, absl::StatusCode::kOk, 42};
  EXPECT_EQ(FormatRequestRecord(ok), "load-1-8\tsku-1:1\tOK\t42");
  absl::StatusOr<std::vector<RequestRecord>> back =
      ParseRequestRecords(FormatRequestRecord(r) + "\n\n" + FormatRequestRecord(ok) + "\n");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0].key, "load-1-7");
  EXPECT_EQ(FormatItems((*back)[0].items), "sku-1:1,ref-load-1-7:1");
  EXPECT_EQ((*back)[0].code, absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ((*back)[1].code, absl::StatusCode::kOk);
  EXPECT_EQ((*back)[1].order_id, 42);
}

TEST(RequestRecordTest, BadLinesNameTheLineAndTheReason) {
  const struct {
    const char* text;
    const char* message;
  } cases[] = {
      {"k\tsku:1\tOK", "line 1: want 4 tab-separated fields"},
      {"k\tsku:1\tOK\t1\n\tsku:1\tOK\t1", "line 2: empty key"},
      {"k\tsku:0\tOK\t1", "line 1: bad item"},
      {"k\tsku:1\tFINE\t1", "unknown status code \"FINE\""},
      {"k\tsku:1\tOK\t-3", "bad order_id \"-3\""},
      {"k\tsku:1\tOK\tx", "bad order_id \"x\""},
  };
  for (const auto& c : cases) {
    absl::StatusOr<std::vector<RequestRecord>> r = ParseRequestRecords(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr(c.message)) << c.text;
  }
}

// An order as the audit's callers send it: a key and items naming it.
RequestRecord Sent(const std::string& key, absl::StatusCode code, int64_t order_id = 0) {
  return {key, WithOrderReference({{"sku-1", 1}}, key), code, order_id};
}
LedgerRow Row(int64_t id, const std::string& key, const std::string& items_of) {
  return {id, key, LedgerItemsText(WithOrderReference({{"sku-1", 1}}, items_of))};
}

TEST(AuditExactlyOnceTest, EachOrderInExactlyOneRowIsClean) {
  const std::vector<RequestRecord> sent = {
      Sent("a", absl::StatusCode::kOk, 1),
      Sent("b", absl::StatusCode::kDeadlineExceeded),  // committed behind the client's back
      Sent("c", absl::StatusCode::kUnavailable),       // never committed
      Sent("a", absl::StatusCode::kOk, 1),             // the client sent "a" again: a replay
  };
  const std::vector<LedgerRow> rows = {
      Row(1, "a", "a"), Row(2, "b", "b"), {3, "other", "sku-9 x1"}};
  absl::StatusOr<AuditResult> a = AuditExactlyOnce(sent, rows);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->violations, ::testing::IsEmpty());
  EXPECT_EQ(a->requests, 4);
  EXPECT_EQ(a->orders, 3);
  EXPECT_EQ(a->acknowledged, 1);
  EXPECT_EQ(a->committed, 2);
  EXPECT_EQ(a->committed_unacknowledged, 1);
  EXPECT_EQ(a->other_rows, 1);
  EXPECT_THAT(FormatAudit(*a), HasSubstr("0 violation(s)"));
}

// Each way of breaking "exactly once" is caught, with a sentence that says how.
TEST(AuditExactlyOnceTest, CatchesEveryWayOfBreakingExactlyOnce) {
  const struct {
    const char* name;
    std::vector<RequestRecord> sent;
    std::vector<LedgerRow> rows;
    const char* violation;
  } cases[] = {
      {"the same order committed again under a key nobody sent",
       {Sent("a", absl::StatusCode::kOk, 1)},
       {Row(1, "a", "a"), Row(2, "a-retry", "a")},
       "order a committed 2 times: order_id 1 key a, order_id 2 key a-retry"},
      {"the only row of an order is under another key",
       {Sent("a", absl::StatusCode::kDeadlineExceeded)},
       {Row(5, "gw-123", "a")},
       "order a committed under another key: order_id 5 key gw-123"},
      {"an unacknowledged order committed twice",
       {Sent("a", absl::StatusCode::kCancelled)},
       {Row(1, "a", "a"), Row(2, "a2", "a")},
       "order a committed 2 times"},
      {"an acknowledged order missing",
       {Sent("a", absl::StatusCode::kOk, 1)},
       {},
       "order a acknowledged (order_id 1) but not in the ledger"},
      {"acknowledged with another row's id",
       {Sent("a", absl::StatusCode::kOk, 7)},
       {Row(1, "a", "a")},
       "order a acknowledged as order_id 7 but committed as order_id 1"},
      {"a replay answered with a different id",
       {Sent("a", absl::StatusCode::kOk, 1), Sent("a", absl::StatusCode::kOk, 2)},
       {Row(1, "a", "a")},
       "order a acknowledged as order_id 2 but committed as order_id 1"},
      {"the key holds another order's items",
       {Sent("a", absl::StatusCode::kOk, 1), Sent("b", absl::StatusCode::kUnavailable)},
       {Row(1, "a", "b")},
       "key a committed with items \"sku-1 x1, ref-b x1\""},
  };
  for (const auto& c : cases) {
    absl::StatusOr<AuditResult> a = AuditExactlyOnce(c.sent, c.rows);
    ASSERT_TRUE(a.ok()) << c.name << ": " << a.status();
    EXPECT_THAT(a->violations, ::testing::Contains(HasSubstr(c.violation))) << c.name;
    EXPECT_THAT(FormatAudit(*a), HasSubstr(c.violation)) << c.name;
  }
}

TEST(AuditExactlyOnceTest, RefusesRecordsItCannotTellApart) {
  absl::StatusOr<AuditResult> same_items =
      AuditExactlyOnce({{"a", {{"sku-1", 1}}, absl::StatusCode::kOk, 1},
                        {"b", {{"sku-1", 1}}, absl::StatusCode::kOk, 2}},
                       {});
  EXPECT_EQ(same_items.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(same_items.status().message(), HasSubstr("orders a and b have the same items"));
  absl::StatusOr<AuditResult> two_lists =
      AuditExactlyOnce({{"a", {{"sku-1", 1}}, absl::StatusCode::kOk, 1},
                        {"a", {{"sku-2", 1}}, absl::StatusCode::kOk, 1}},
                       {});
  EXPECT_EQ(two_lists.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(two_lists.status().message(), HasSubstr("key a was sent with two item lists"));
}

TEST(AuditFormatTest, ListsAtMostTheGivenNumberOfViolations) {
  AuditResult a;
  a.violations = {"one", "two", "three"};
  const std::string text = FormatAudit(a, 2);
  EXPECT_THAT(text, HasSubstr("3 violation(s)"));
  EXPECT_THAT(text, HasSubstr("\n  two"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("three")));
  EXPECT_THAT(text, HasSubstr("... and 1 more"));
}

TEST(ScenarioTextTest, TheBudgetThatFiredIsSaidPlainly) {
  struct Case {
    const char* source;
    const char* hop;
    const char* text;
  };
  const Case cases[] = {
      {"client", "chainctl", "the client's own deadline, at chainctl"},
      {"attempt", "orders", "an attempt cap, at orders"},
      {"request", "gateway", "the request cap, at gateway"},
      {"shield", "ledger", "the shield's bound, at ledger"},
      {"downstream", "", "a budget further down, at ?"},
      {"something-new", "orders", "something-new, at orders"},
  };
  for (const Case& k : cases) EXPECT_EQ(PlainSource(k.source, k.hop), k.text) << k.source;
}

TEST(ScenarioTextTest, ALongCellNeverRunsIntoTheNextColumn) {
  const std::string text = AlignColumns(
      {{"", "baseline", "hopbudget"},
       {"client: errors", "3x DEADLINE_EXCEEDED: the client's own deadline, at chainctl", "-"},
       {"rows committed", "1", "3"}},
      "   ");
  EXPECT_EQ(text,
            "                   baseline                                                      "
            "hopbudget\n"
            "   client: errors  3x DEADLINE_EXCEEDED: the client's own deadline, at chainctl  -\n"
            "   rows committed  1                                                             3\n");
}

TEST(ScenarioTextTest, ErrorsAreGroupedByCodeAndBudgetWithTheirHops) {
  EXPECT_EQ(ErrorKinds({}), "-");
  EXPECT_EQ(ErrorKinds({{"DEADLINE_EXCEEDED", "client", "chainctl"},
                        {"DEADLINE_EXCEEDED", "client", "chainctl"},
                        {"DEADLINE_EXCEEDED", "client", "chainctl"}}),
            "3x DEADLINE_EXCEEDED, the client's own deadline (at chainctl)");
  EXPECT_EQ(ErrorKinds({{"UNAVAILABLE", "", ""},
                        {"DEADLINE_EXCEEDED", "client", "orders"},
                        {"DEADLINE_EXCEEDED", "client", "ledger"},
                        {"DEADLINE_EXCEEDED", "client", "orders"},
                        {"DEADLINE_EXCEEDED", "attempt", "orders"}}),
            "3x DEADLINE_EXCEEDED, the client's own deadline (1 at ledger, 2 at orders); "
            "1x UNAVAILABLE; 1x DEADLINE_EXCEEDED, an attempt cap (at orders)");
  EXPECT_EQ(ErrorKinds({{"CANCELLED", "", ""}, {"CANCELLED", "", ""}}), "2x CANCELLED");
}

TEST(SummaryFormatTest, ALongLabelNeverRunsIntoItsValue) {
  LoadSummary s;
  s.sent = 1;
  s.per_hop.push_back({"gateway", 0, 1209.3, 0});
  const std::string table = FormatSummaryTable(s);
  // Every value starts in the same column, after at least two spaces.
  const size_t sent = table.find("  sent");
  ASSERT_NE(sent, std::string::npos);
  const size_t value_column = table.find('1', sent) - sent;
  EXPECT_THAT(table,
              HasSubstr("  gateway: started late / work after / retries  0 / 1209.3 ms / 0\n"));
  const size_t hop = table.find("\n    gateway:") + 1;
  EXPECT_EQ(table.find("0 / 1209.3", hop) - hop, value_column);
}

TEST(SummaryBuilderTest, ReadsAndHedgesGiveTheExtraLoad) {
  SummaryBuilder b;
  b.Add({absl::StatusCode::kOk, absl::Milliseconds(2), "", ""});
  ServiceDelta orders{"orders", 0, 0, 0};
  orders.reads = 200;
  orders.read_hedges = 9;
  orders.slot_refusals = 4;
  b.AddService({"gateway", 0, 0, 0});
  b.AddService(orders);
  const LoadSummary s = b.Build();
  EXPECT_EQ(s.reads, 200);
  EXPECT_EQ(s.read_hedges, 9);
  EXPECT_DOUBLE_EQ(s.extra_load, 0.045);
  EXPECT_EQ(s.slot_refusals, 4);
  EXPECT_THAT(
      FormatSummaryTable(s),
      ContainsRegex("hedges / reads sent downstream \\(extra load\\) +9 / 200 \\(4.5 %\\)"));
  EXPECT_THAT(FormatSummaryTable(s), HasSubstr("refused a downstream slot (slot-wait)"));
  EXPECT_THAT(FormatSummaryJson(s),
              HasSubstr("\"reads\":200,\"read_hedges\":9,\"extra_load\":0.045,"
                        "\"slot_refusals\":4"));
  // Per hop, what the CPU fit of the overload benchmark reads.
  SummaryBuilder priced;
  ServiceDelta gateway{"gateway", 0, 0, 0};
  gateway.calls = 120;
  gateway.refused = 880;
  gateway.cpu_ms = 61.25;
  priced.AddService(gateway);
  priced.SetClientCpu(absl::Milliseconds(1500));
  EXPECT_THAT(FormatSummaryJson(priced.Build()),
              HasSubstr("{\"hop\":\"gateway\",\"calls\":120,\"refused\":880,\"cpu_ms\":61.250,"));
  EXPECT_THAT(FormatSummaryJson(priced.Build()), HasSubstr("\"client_cpu_s\":1.500,"));
  // Without reads or refusals: no rows about them, an extra load of 0.
  SummaryBuilder none;
  none.Add({absl::StatusCode::kOk, absl::Milliseconds(2), "", ""});
  const LoadSummary n = none.Build();
  EXPECT_EQ(n.extra_load, 0);
  EXPECT_THAT(FormatSummaryTable(n), Not(HasSubstr("extra load")));
  EXPECT_THAT(FormatSummaryTable(n), Not(HasSubstr("slot-wait")));
}

TEST(ParseSummaryJsonTest, ReadsBackWhatFormatSummaryJsonWrote) {
  SummaryBuilder b;
  b.Add({absl::StatusCode::kOk, absl::Milliseconds(10)});
  b.Add({absl::StatusCode::kUnavailable, absl::Milliseconds(20)});
  b.Add({absl::StatusCode::kDeadlineExceeded, absl::Milliseconds(800), "attempt", "orders"});
  b.Add({absl::StatusCode::kDeadlineExceeded, absl::Milliseconds(800)});
  b.CountNotSent();
  b.CountClientThrottled();
  ServiceDelta orders{"orders", 2, 12.5, 3};
  orders.reads = 40;
  orders.read_hedges = 2;
  orders.slot_refusals = 1;
  orders.calls = 7;
  orders.refused = 5;
  orders.cpu_ms = 3.25;
  b.AddService(orders);
  b.SetClientCpu(absl::Milliseconds(1500));
  const LoadSummary written = b.Build();
  const std::string json = FormatSummaryJson(written);
  absl::StatusOr<LoadSummary> read = ParseSummaryJson(json);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(FormatSummaryJson(*read), json);
  EXPECT_EQ(read->sent, written.sent);
  EXPECT_EQ(read->errors_by_code.at("UNAVAILABLE"), 1);
  EXPECT_EQ(read->deadline_exceeded_by_source.at("attempt").at("orders"), 1);
  EXPECT_EQ(read->per_hop.at(0).hop, "orders");
  EXPECT_DOUBLE_EQ(read->per_hop.at(0).cpu_ms, 3.25);
  EXPECT_EQ(read->read_hedges, 2);
  EXPECT_EQ(read->client_cpu, absl::Milliseconds(1500));
}

TEST(ParseSummaryJsonTest, AFieldThatIsNotThereStaysAtItsDefault) {
  absl::StatusOr<LoadSummary> read = ParseSummaryJson(R"({"ok": 3, "latency_ms": {"p99": 1.5}})");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->ok, 3);
  EXPECT_EQ(read->sent, 0);
  EXPECT_DOUBLE_EQ(read->p99_ms, 1.5);
  EXPECT_EQ(read->p50_ms, 0);
  EXPECT_TRUE(read->errors_by_code.empty());
  EXPECT_TRUE(read->per_hop.empty());
}

TEST(ParseSummaryJsonTest, BadInputIsAnErrorNamingTheField) {
  const struct {
    const char* json;
    const char* error;
  } kCases[] = {
      {"not json", "load summary: not JSON"},
      {"", "load summary: not JSON"},
      {"[1, 2]", "load summary: the top level must be a JSON object"},
      {R"({"ok": "3"})", "load summary: ok: not a number"},
      {R"({"latency_ms": 5})", "load summary: latency_ms: not an object"},
      {R"({"latency_ms": {"p99": "x"}})", "load summary: latency_ms.p99: not a number"},
      {R"({"errors_by_code": {"UNAVAILABLE": true}})",
       "load summary: errors_by_code.UNAVAILABLE: not a number"},
      {R"({"deadline_exceeded_by_source": {"client": 1}})",
       "load summary: deadline_exceeded_by_source.client: not an object"},
      {R"({"histogram_ms": [{"le": 1, "count": "2"}]})",
       "load summary: histogram_ms[0].count: not a number"},
      {R"({"per_hop": [1]})", "load summary: per_hop[0]: not an object"},
      {R"({"per_hop": [{"hop": 7}]})", "load summary: per_hop[0].hop: not a string"},
  };
  for (const auto& c : kCases) {
    absl::StatusOr<LoadSummary> read = ParseSummaryJson(c.json);
    ASSERT_FALSE(read.ok()) << c.json;
    EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument) << c.json;
    EXPECT_THAT(read.status().message(), HasSubstr(c.error)) << c.json;
    EXPECT_THAT(read.status().message(), Not(HasSubstr("\n"))) << c.json;
  }
}

TEST(ShortestDecimalTest, TheShortestTextThatReadsBackWithoutAnExponent) {
  const struct {
    double v;
    const char* text;
  } kCases[] = {
      {0, "0"},
      {2430, "2430"},
      {61.25, "61.25"},
      {29059.394, "29059.394"},
      {-1.5, "-1.5"},
      {1e20, "100000000000000000000"},
      {0.1, "0.1"},
      {5335.0 / 6360, "0.8388364779874213"},
      {std::nan(""), "0"},
      {1.0 / 0.0, "0"},
  };
  for (const auto& c : kCases) EXPECT_EQ(ShortestDecimal(c.v), c.text) << c.v;
}

TEST(OkShareTest, OkOfTheCallsMadeThrottledOnesIncluded) {
  LoadSummary s;
  EXPECT_EQ(OkShare(s), 0);
  s.sent = 80;
  s.ok = 60;
  EXPECT_DOUBLE_EQ(OkShare(s), 0.75);
  s.client_throttled = 20;
  EXPECT_DOUBLE_EQ(OkShare(s), 0.6);
}

}  // namespace
}  // namespace hopbudget::chainctl
