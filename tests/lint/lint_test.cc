#include "lint.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hopbudget/advanced/service_config.h"

namespace hopbudget::lint {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

ServiceConfigEntries Read(absl::string_view json) {
  absl::StatusOr<ServiceConfigEntries> c = ReadServiceConfig(json, MethodPolicy{});
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *std::move(c) : ServiceConfigEntries{};
}

constexpr char kBackoff[] =
    R"("initialBackoff": "0.01s", "maxBackoff": "0.1s", "backoffMultiplier": 2,
       "retryableStatusCodes": ["UNAVAILABLE"])";

// One methodConfig for "a.S/M" with `fields`.
std::string One(const std::string& fields) {
  return R"({"methodConfig": [{"name": [{"service": "a.S", "method": "M"}], )" + fields + "}]}";
}

TEST(LintTest, EachMethodTable) {
  struct Case {
    std::string name;
    std::string json;
    Verdict verdict;
    int fast, timed_out;
    bool never_run;
    std::string problem_or_warning;  // "" for none
  };
  const std::string b = kBackoff;
  const Case cases[] = {
      {"timeout alone", One(R"("timeout": "1s")"), Verdict::kFits, 1, 1, false, ""},
      {"three attempts fit",
       One(R"("timeout": "2s", "retryPolicy": {"maxAttempts": 3, "perAttemptRecvTimeout": "0.5s", )" +
           b + "}"),
       Verdict::kFits, 3, 3, false, ""},
      {"two of four fit when they time out",
       One(R"("timeout": "1s", "retryPolicy": {"maxAttempts": 4, "perAttemptRecvTimeout": "0.4s", )" +
           b + "}"),
       Verdict::kFits, 4, 3, false, "only 3 of 4 attempts fit when each one times out"},
      {"the seeds' incident",
       One(R"("timeout": "5s", "retryPolicy": {"maxAttempts": 3, "perAttemptRecvTimeout": "10s", )" +
           b + "}"),
       Verdict::kUnfit, 3, 1, true, "retries after a timeout never run: the timeout (5s)"},
      {"attempt equal to the timeout",
       One(R"("timeout": "1s", "retryPolicy": {"maxAttempts": 2, "perAttemptRecvTimeout": "1s", )" +
           b + "}"),
       Verdict::kUnfit, 2, 1, true, "never run"},
      {"no perAttemptRecvTimeout",
       One(R"("timeout": "1s", "retryPolicy": {"maxAttempts": 3, )" + b + "}"), Verdict::kFits, 3,
       1, false, "only fast failures are retried"},
      {"no timeout",
       One(R"("retryPolicy": {"maxAttempts": 3, "perAttemptRecvTimeout": "1s", )" + b + "}"),
       Verdict::kFits, 3, 3, false, "up to each caller's deadline"},
      {"hedge fits",
       One(R"("timeout": "0.1s", "hedgingPolicy": {"maxAttempts": 3, "hedgingDelay": "0.02s"})"),
       Verdict::kFits, 3, 3, false, ""},
      {"hedge too late",
       One(R"("timeout": "0.1s", "hedgingPolicy": {"maxAttempts": 2, "hedgingDelay": "0.2s"})"),
       Verdict::kFits, 2, 1, false, "leaves no time for a hedge"},
      {"reserve eats the timeout",
       R"({"methodConfig": [{"name": [{"service": "a.S", "method": "M"}], "timeout": "0.004s"}],
          "hopbudget": {"methodPolicy": [{"name": [{}], "hopReserve": "0.005s"}]}})",
       Verdict::kUnfit, 0, 0, false, "every downstream call would fail before it starts"},
  };
  for (const Case& c : cases) {
    const Report r = LintServiceConfig(Read(c.json));
    ASSERT_FALSE(r.methods.empty()) << c.name;
    const MethodReport& m = r.methods[0];
    EXPECT_EQ(m.name, "a.S/M") << c.name;
    EXPECT_EQ(m.verdict, c.verdict) << c.name;
    EXPECT_EQ(m.attempts_if_fast_failures, c.fast) << c.name;
    EXPECT_EQ(m.attempts_if_all_time_out, c.timed_out) << c.name;
    EXPECT_EQ(m.retries_never_run, c.never_run) << c.name;
    EXPECT_EQ(r.AllFit(), c.verdict == Verdict::kFits) << c.name;
    const std::string said = m.problem + (m.warnings.empty() ? "" : m.warnings[0]);
    if (c.problem_or_warning.empty()) {
      EXPECT_EQ(said, "") << c.name;
    } else {
      EXPECT_THAT(said, HasSubstr(c.problem_or_warning)) << c.name;
    }
  }
}

TEST(LintTest, EveryEntryIsReportedEvenAfterAnUnfitOne) {
  const Report r = LintServiceConfig(Read(R"({"methodConfig": [
      {"name": [{"service": "a.S", "method": "Bad"}], "timeout": "5s",
       "retryPolicy": {"maxAttempts": 3, "perAttemptRecvTimeout": "10s",
                       "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2,
                       "retryableStatusCodes": ["UNAVAILABLE"]}},
      {"name": [{"service": "a.S"}], "timeout": "1s"},
      {"name": [{}], "timeout": "9s"}]})"));
  ASSERT_EQ(r.methods.size(), 3u);
  EXPECT_EQ(r.methods[0].verdict, Verdict::kUnfit);
  EXPECT_EQ(r.methods[1].name, "a.S/*");
  EXPECT_EQ(r.methods[1].verdict, Verdict::kFits);
  EXPECT_EQ(r.methods[2].name, "*");
  EXPECT_FALSE(r.AllFit());
  const std::string text = FormatText("cfg.json", r);
  EXPECT_THAT(text, HasSubstr("UNFIT  a.S/Bad\n"));
  EXPECT_THAT(text, HasSubstr("fits   a.S/*\n       timeout 1s, reserve 5ms, minBudget 1ms\n"));
  EXPECT_THAT(text, HasSubstr("cfg.json: 3 entries: 2 fit, 1 unfit\n"));
}

// The hopbudget section's fields that shape no nesting are still shown, so
// a reader sees every number the hop will use.
TEST(LintTest, ShieldBoundAndAdmissionAreShown) {
  const Report r = LintServiceConfig(Read(R"({"methodConfig": [
      {"name": [{"service": "a.S", "method": "Write"}], "timeout": "1s"}],
      "hopbudget": {"methodPolicy": [{"name": [{"service": "a.S", "method": "Write"}],
                                      "shieldBound": "2s", "admission": false}]}})"));
  ASSERT_EQ(r.methods.size(), 1u);
  EXPECT_EQ(r.methods[0].verdict, Verdict::kFits);
  EXPECT_THAT(FormatText("cfg.json", r),
              HasSubstr("timeout 1s, reserve 5ms, minBudget 1ms, shieldBound 2s, no admission\n"));
}

TEST(LintTest, NotesAndAnEmptyConfigAreSaid) {
  const Report empty = LintServiceConfig(Read("{}"));
  EXPECT_THAT(empty.methods, IsEmpty());
  EXPECT_TRUE(empty.AllFit());
  EXPECT_EQ(FormatText("-", empty), "-: names no method (no methodConfig, no hopbudget section)\n");

  const Report r = LintServiceConfig(Read(
      One(R"("timeout": "9s", "retryPolicy": {"maxAttempts": 9, "perAttemptRecvTimeout": "1s", )" +
          std::string(kBackoff) + "}")));
  EXPECT_THAT(r.notes,
              ElementsAre("methodConfig[0]: retryPolicy.maxAttempts 9 counts as 5, as in gRPC"));
  EXPECT_THAT(FormatText("-", r), HasSubstr("note: methodConfig[0]: retryPolicy.maxAttempts 9"));
}

TEST(LintTest, JsonReportHasEveryFieldAndEscapes) {
  const Report r = LintServiceConfig(Read(R"({"methodConfig": [
      {"name": [{"service": "a.S", "method": "M"}], "timeout": "5s",
       "retryPolicy": {"maxAttempts": 3, "perAttemptRecvTimeout": "10s",
                       "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2,
                       "retryableStatusCodes": ["UNAVAILABLE"]}},
      {"name": [{"service": "a.S"}]}]})"));
  EXPECT_EQ(
      FormatJson("dir/\"q\".json", r),
      R"({"file":"dir/\"q\".json","fits":false,"methods":[{"name":"a.S/M","verdict":"unfit",)"
      R"("budgets":"timeout 5s, 3 attempts of perAttemptRecvTimeout 10s, backoff 100ms..1s x2, )"
      R"(reserve 5ms, minBudget 1ms","timeout_ms":5000,"per_attempt_timeout_ms":10000,)"
      R"("attempts_configured":3,"attempts_if_fast_failures":3,"attempts_if_all_time_out":1,)"
      R"("retries_never_run":true,"problem":"retries after a timeout never run: the timeout (5s) )"
      R"(fires during the first attempt (perAttemptRecvTimeout 10s). retry policy: attempt_cap )"
      R"((10s) + hop_reserve (5ms) + min_attempt_budget (1ms) > request_cap (5s): an attempt that )"
      R"(times out leaves no room for a retry; at most 1 of 3 attempts can run","warnings":[]},)"
      R"({"name":"a.S/*","verdict":"fits","budgets":"no timeout, reserve 5ms, minBudget 1ms",)"
      R"("timeout_ms":null,"per_attempt_timeout_ms":null,"attempts_configured":1,)"
      R"("attempts_if_fast_failures":1,"attempts_if_all_time_out":1,"retries_never_run":false,)"
      R"("problem":null,"warnings":[]}],"notes":[]})"
      "\n");
  EXPECT_EQ(FormatJsonError("-", "line 1, column 2: \"x\""),
            "{\"file\":\"-\",\"error\":\"line 1, column 2: \\\"x\\\"\"}\n");
}

TEST(LintTest, VerdictNamesAreStable) {
  EXPECT_EQ(VerdictName(Verdict::kFits), "fits");
  EXPECT_EQ(VerdictName(Verdict::kUnfit), "unfit");
  EXPECT_EQ(::testing::PrintToString(Verdict::kUnfit), "unfit");
}

}  // namespace
}  // namespace hopbudget::lint
