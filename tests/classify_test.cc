// Copyright hopbudget authors.
//
// ClassifyClientDeadline, table-style on fixed times (the way Envoy tests
// FilterUtility::finalTimeout): every input a client can see when a call
// ends DEADLINE_EXCEEDED, and what it concludes.
#include "hopbudget/classify.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hopbudget {
namespace {

const absl::Time kStart = absl::UnixEpoch() + absl::Hours(1);

ParsedAttribution Ok(DeadlineSource source, std::string hop, int budget_ms, int elapsed_ms) {
  ParsedAttribution p;
  p.result = AttributionParse::kOk;
  p.value = {source, std::move(hop), absl::Milliseconds(budget_ms),
             absl::Milliseconds(elapsed_ms)};
  return p;
}

ParsedAttribution Malformed() {
  ParsedAttribution p;
  p.result = AttributionParse::kMalformed;
  return p;
}

// A call of `budget_ms` started at kStart, whose deadline is `source`'s.
ClientCall Call(DeadlineSource source, int budget_ms) {
  ClientCall c;
  c.start = kStart;
  c.deadline = kStart + absl::Milliseconds(budget_ms);
  c.deadline_source = source;
  c.budget = absl::Milliseconds(budget_ms);
  c.budget_start = kStart;
  c.hop = "orders";
  return c;
}

struct Case {
  const char* name;
  ClientCall call;
  ReceivedAttribution received;
  int now_ms;  // after kStart
  ClientVerdictKind kind;
  DeadlineSource source;  // of the attribution the status carries
  std::string hop;
  bool rewrite;
  DeadlineSource counted;
  int malformed;
};

TEST(ClassifyClientDeadlineTest, Table) {
  const ClientCall edge = Call(DeadlineSource::kNone, 100);
  const ClientCall attempt = Call(DeadlineSource::kAttempt, 100);
  ClientCall infinite = Call(DeadlineSource::kNone, 100);
  infinite.deadline = absl::InfiniteFuture();
  const ParsedAttribution none;
  const std::vector<Case> cases = {
      {"own deadline passed, nothing from the callee", edge, {none, none, none}, 101,
       ClientVerdictKind::kOwnBudget, DeadlineSource::kClient, "orders", true,
       DeadlineSource::kClient, 0},
      {"own deadline nearly passed: inside the 10 ms slack", edge, {none, none, none}, 91,
       ClientVerdictKind::kOwnBudget, DeadlineSource::kClient, "orders", true,
       DeadlineSource::kClient, 0},
      {"a foreign timeout well before ours", edge, {none, none, none}, 50,
       ClientVerdictKind::kUnknownOrigin, DeadlineSource::kDownstream, "", true,
       DeadlineSource::kDownstream, 0},
      {"no deadline never passes", infinite, {none, none, none}, 100000,
       ClientVerdictKind::kUnknownOrigin, DeadlineSource::kDownstream, "", true,
       DeadlineSource::kDownstream, 0},
      {"relayed in details: the status already says it",
       edge, {Ok(DeadlineSource::kRequest, "ledger", 50, 51), none, none}, 60,
       ClientVerdictKind::kRelayed, DeadlineSource::kRequest, "ledger", false,
       DeadlineSource::kDownstream, 0},
      {"relayed in the message alone: details added",
       edge, {none, Ok(DeadlineSource::kRequest, "ledger", 50, 51), none}, 60,
       ClientVerdictKind::kRelayed, DeadlineSource::kRequest, "ledger", true,
       DeadlineSource::kDownstream, 0},
      {"relayed in the trailers alone",
       edge, {none, none, Ok(DeadlineSource::kShield, "ledger", 50, 51)}, 60,
       ClientVerdictKind::kRelayed, DeadlineSource::kShield, "ledger", true,
       DeadlineSource::kDownstream, 0},
      {"details first when forms disagree",
       edge,
       {Ok(DeadlineSource::kIdle, "a", 1, 1), Ok(DeadlineSource::kRequest, "b", 1, 1), none}, 60,
       ClientVerdictKind::kRelayed, DeadlineSource::kIdle, "a", false,
       DeadlineSource::kDownstream, 0},
      {"garbage details, a valid message",
       edge, {Malformed(), Ok(DeadlineSource::kRequest, "ledger", 50, 51), none}, 60,
       ClientVerdictKind::kRelayed, DeadlineSource::kRequest, "ledger", true,
       DeadlineSource::kDownstream, 1},
      {"every form garbage, before our deadline",
       edge, {Malformed(), Malformed(), Malformed()}, 50,
       ClientVerdictKind::kUnknownOrigin, DeadlineSource::kDownstream, "", true,
       DeadlineSource::kDownstream, 3},
      {"every form garbage, our deadline passed",
       edge, {Malformed(), Malformed(), Malformed()}, 100,
       ClientVerdictKind::kOwnBudget, DeadlineSource::kClient, "orders", true,
       DeadlineSource::kClient, 3},
      {"callee's client deadline was our attempt budget",
       attempt, {Ok(DeadlineSource::kClient, "ledger", 99, 99), none, none}, 100,
       ClientVerdictKind::kOwnBudget, DeadlineSource::kAttempt, "orders", true,
       DeadlineSource::kAttempt, 0},
      {"callee refused our attempt as arrived expired",
       attempt, {Ok(DeadlineSource::kArrivedExpired, "ledger", 0, 0), none, none}, 99,
       ClientVerdictKind::kOwnBudget, DeadlineSource::kAttempt, "orders", true,
       DeadlineSource::kAttempt, 0},
      {"callee's client deadline long before our attempt budget",
       attempt, {Ok(DeadlineSource::kClient, "ledger", 20, 20), none, none}, 30,
       ClientVerdictKind::kRelayed, DeadlineSource::kClient, "ledger", false,
       DeadlineSource::kDownstream, 0},
      {"callee's request budget at our attempt deadline is still theirs",
       attempt, {Ok(DeadlineSource::kRequest, "ledger", 99, 99), none, none}, 100,
       ClientVerdictKind::kRelayed, DeadlineSource::kRequest, "ledger", false,
       DeadlineSource::kDownstream, 0},
      {"our attempt budget, nothing from the callee", attempt, {none, none, none}, 100,
       ClientVerdictKind::kOwnBudget, DeadlineSource::kAttempt, "orders", true,
       DeadlineSource::kAttempt, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const ClientVerdict v =
        ClassifyClientDeadline(c.call, c.received, kStart + absl::Milliseconds(c.now_ms));
    EXPECT_EQ(v.kind, c.kind);
    EXPECT_EQ(v.attribution.source, c.source);
    EXPECT_EQ(v.attribution.hop, c.hop);
    EXPECT_EQ(v.rewrite, c.rewrite);
    EXPECT_EQ(v.counted_source, c.counted);
    EXPECT_EQ(v.counted_hop, c.kind == ClientVerdictKind::kRelayed ? c.hop
                             : c.kind == ClientVerdictKind::kOwnBudget ? "orders"
                                                                       : "");
    EXPECT_EQ(v.malformed_forms, c.malformed);
  }
}

// Elapsed counts from the start of the budget that fired: a request budget
// handed down started when the inbound call arrived, before this call.
TEST(ClassifyClientDeadlineTest, ElapsedCountsFromTheBudgetsStartNotTheCalls) {
  ClientCall call = Call(DeadlineSource::kRequest, 100);
  call.budget = absl::Milliseconds(300);
  call.budget_start = kStart - absl::Milliseconds(200);  // the request arrived 200 ms earlier
  const ClientVerdict v = ClassifyClientDeadline(call, {}, kStart + absl::Milliseconds(100));
  EXPECT_EQ(v.kind, ClientVerdictKind::kOwnBudget);
  EXPECT_EQ(v.attribution.budget, absl::Milliseconds(300));
  EXPECT_EQ(v.attribution.elapsed, absl::Milliseconds(300));
}

TEST(ClientVerdictKindTest, PrintsItsName) {
  EXPECT_EQ(::testing::PrintToString(ClientVerdictKind::kOwnBudget), "own_budget");
}

TEST(DeadlineSlackTest, ATenthOfTheBudgetAtLeastFiveMilliseconds) {
  EXPECT_EQ(DeadlineSlack(kStart, kStart + absl::Milliseconds(300)), absl::Milliseconds(30));
  EXPECT_EQ(DeadlineSlack(kStart, kStart + absl::Milliseconds(20)), absl::Milliseconds(5));
  EXPECT_EQ(DeadlineSlack(kStart, kStart), absl::Milliseconds(5));
  EXPECT_EQ(DeadlineSlack(kStart, absl::InfiniteFuture()), absl::ZeroDuration());
}

}  // namespace
}  // namespace hopbudget
