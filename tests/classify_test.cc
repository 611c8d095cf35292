// Copyright hopbudget authors.
//
// ClassifyClientDeadline, table-style on fixed times (the way Envoy tests
// FilterUtility::finalTimeout): every input a client can see when a call
// ends DEADLINE_EXCEEDED, and what it concludes.
#include "hopbudget/advanced/classify.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hopbudget {
namespace {

const absl::Time kStart = absl::UnixEpoch() + absl::Hours(1);

ParsedAttribution Ok(DeadlineSource source, std::string hop, int budget_ms, int elapsed_ms) {
  ParsedAttribution p;
  p.result = AttributionParse::kOk;
  p.value = {source, std::move(hop), absl::Milliseconds(budget_ms), absl::Milliseconds(elapsed_ms)};
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
      {"own deadline passed, nothing from the callee",
       edge,
       {none, none, none},
       101,
       ClientVerdictKind::kOwnBudget,
       DeadlineSource::kClient,
       "orders",
       true,
       DeadlineSource::kClient,
       0},
      {"own deadline nearly passed: inside the 10 ms slack",
       edge,
       {none, none, none},
       91,
       ClientVerdictKind::kOwnBudget,
       DeadlineSource::kClient,
       "orders",
       true,
       DeadlineSource::kClient,
       0},
      {"a foreign timeout well before ours",
       edge,
       {none, none, none},
       50,
       ClientVerdictKind::kUnknownOrigin,
       DeadlineSource::kDownstream,
       "",
       true,
       DeadlineSource::kDownstream,
       0},
      {"no deadline never passes",
       infinite,
       {none, none, none},
       100000,
       ClientVerdictKind::kUnknownOrigin,
       DeadlineSource::kDownstream,
       "",
       true,
       DeadlineSource::kDownstream,
       0},
      {"relayed in details: the status already says it",
       edge,
       {Ok(DeadlineSource::kRequest, "ledger", 50, 51), none, none},
       60,
       ClientVerdictKind::kRelayed,
       DeadlineSource::kRequest,
       "ledger",
       false,
       DeadlineSource::kDownstream,
       0},
      {"relayed in the message alone: details added",
       edge,
       {none, Ok(DeadlineSource::kRequest, "ledger", 50, 51), none},
       60,
       ClientVerdictKind::kRelayed,
       DeadlineSource::kRequest,
       "ledger",
       true,
       DeadlineSource::kDownstream,
       0},
      {"relayed in the trailers alone",
       edge,
       {none, none, Ok(DeadlineSource::kShield, "ledger", 50, 51)},
       60,
       ClientVerdictKind::kRelayed,
       DeadlineSource::kShield,
       "ledger",
       true,
       DeadlineSource::kDownstream,
       0},
      {"details first when forms disagree",
       edge,
       {Ok(DeadlineSource::kIdle, "a", 1, 1), Ok(DeadlineSource::kRequest, "b", 1, 1), none},
       60,
       ClientVerdictKind::kRelayed,
       DeadlineSource::kIdle,
       "a",
       false,
       DeadlineSource::kDownstream,
       0},
      {"garbage details, a valid message",
       edge,
       {Malformed(), Ok(DeadlineSource::kRequest, "ledger", 50, 51), none},
       60,
       ClientVerdictKind::kRelayed,
       DeadlineSource::kRequest,
       "ledger",
       true,
       DeadlineSource::kDownstream,
       1},
      {"every form garbage, before our deadline",
       edge,
       {Malformed(), Malformed(), Malformed()},
       50,
       ClientVerdictKind::kUnknownOrigin,
       DeadlineSource::kDownstream,
       "",
       true,
       DeadlineSource::kDownstream,
       3},
      {"every form garbage, our deadline passed",
       edge,
       {Malformed(), Malformed(), Malformed()},
       100,
       ClientVerdictKind::kOwnBudget,
       DeadlineSource::kClient,
       "orders",
       true,
       DeadlineSource::kClient,
       3},
      {"callee's client deadline was our attempt budget",
       attempt,
       {Ok(DeadlineSource::kClient, "ledger", 99, 99), none, none},
       100,
       ClientVerdictKind::kOwnBudget,
       DeadlineSource::kAttempt,
       "orders",
       true,
       DeadlineSource::kAttempt,
       0},
      {"callee refused our attempt as arrived expired",
       attempt,
       {Ok(DeadlineSource::kArrivedExpired, "ledger", 0, 0), none, none},
       99,
       ClientVerdictKind::kOwnBudget,
       DeadlineSource::kAttempt,
       "orders",
       true,
       DeadlineSource::kAttempt,
       0},
      {"callee's client deadline long before our attempt budget",
       attempt,
       {Ok(DeadlineSource::kClient, "ledger", 20, 20), none, none},
       30,
       ClientVerdictKind::kRelayed,
       DeadlineSource::kClient,
       "ledger",
       false,
       DeadlineSource::kDownstream,
       0},
      {"callee's request budget at our attempt deadline is still theirs",
       attempt,
       {Ok(DeadlineSource::kRequest, "ledger", 99, 99), none, none},
       100,
       ClientVerdictKind::kRelayed,
       DeadlineSource::kRequest,
       "ledger",
       false,
       DeadlineSource::kDownstream,
       0},
      {"our attempt budget, nothing from the callee",
       attempt,
       {none, none, none},
       100,
       ClientVerdictKind::kOwnBudget,
       DeadlineSource::kAttempt,
       "orders",
       true,
       DeadlineSource::kAttempt,
       0},
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
    EXPECT_EQ(v.counted_hop, c.kind == ClientVerdictKind::kRelayed     ? c.hop
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

namespace hopbudget {
namespace {

// A call that arrived at kStart with `budget_ms` of request budget from
// `source` (kRequest: this hop's cap), or refused.
ServerCall Inbound(DeadlineSource source, int budget_ms, bool refused = false, bool cut = false) {
  ServerCall c;
  c.budget.arrival = kStart;
  c.budget.deadline = kStart + absl::Milliseconds(budget_ms);
  c.budget.source = source;
  c.budget.budget_on_arrival = absl::Milliseconds(budget_ms);
  c.budget.outcome = refused ? ArrivalOutcome::kBelowMinimum : ArrivalOutcome::kAccepted;
  c.hop = "orders";
  c.cut_by_this_hop = cut;
  return c;
}

struct ServerCase {
  const char* name;
  ServerCall call;
  absl::StatusCode handler;
  ReceivedAttribution relayed;
  int now_ms;
  absl::StatusCode code;
  DeadlineSource fired;
  bool replace;
  bool count;
  DeadlineSource counted;
  std::string counted_hop;
};

TEST(ClassifyServerAnswerTest, Table) {
  const ParsedAttribution none;
  const std::vector<ServerCase> cases = {
      {"OK stands",
       Inbound(DeadlineSource::kClient, 100),
       absl::StatusCode::kOk,
       {},
       10,
       absl::StatusCode::kOk,
       DeadlineSource::kNone,
       false,
       false,
       DeadlineSource::kNone,
       ""},
      {"another error stands",
       Inbound(DeadlineSource::kClient, 100),
       absl::StatusCode::kUnavailable,
       {},
       10,
       absl::StatusCode::kUnavailable,
       DeadlineSource::kNone,
       false,
       false,
       DeadlineSource::kNone,
       ""},
      {"refused: the refusal goes out whatever the handler says",
       Inbound(DeadlineSource::kClient, 20, /*refused=*/true),
       absl::StatusCode::kCancelled,
       {},
       1,
       absl::StatusCode::kDeadlineExceeded,
       DeadlineSource::kArrivedExpired,
       true,
       false,
       DeadlineSource::kNone,
       ""},
      {"cut by the request cap: the cut stands, nothing replaced, counted when it fired",
       Inbound(DeadlineSource::kRequest, 100, false, /*cut=*/true),
       absl::StatusCode::kOk,
       {},
       100,
       absl::StatusCode::kDeadlineExceeded,
       DeadlineSource::kRequest,
       false,
       false,
       DeadlineSource::kNone,
       ""},
      {"relayed origin",
       Inbound(DeadlineSource::kClient, 100),
       absl::StatusCode::kDeadlineExceeded,
       {Ok(DeadlineSource::kAttempt, "ledger", 30, 31), none, none},
       40,
       absl::StatusCode::kDeadlineExceeded,
       DeadlineSource::kAttempt,
       true,
       true,
       DeadlineSource::kDownstream,
       "ledger"},
      {"relayed in the message",
       Inbound(DeadlineSource::kClient, 100),
       absl::StatusCode::kDeadlineExceeded,
       {none, Ok(DeadlineSource::kShield, "ledger", 30, 31), none},
       40,
       absl::StatusCode::kDeadlineExceeded,
       DeadlineSource::kShield,
       true,
       true,
       DeadlineSource::kDownstream,
       "ledger"},
      {"no origin after our request deadline: our budget",
       Inbound(DeadlineSource::kRequest, 100),
       absl::StatusCode::kDeadlineExceeded,
       {},
       100,
       absl::StatusCode::kDeadlineExceeded,
       DeadlineSource::kRequest,
       true,
       true,
       DeadlineSource::kRequest,
       "orders"},
      {"no origin before it: downstream, unknown",
       Inbound(DeadlineSource::kClient, 100),
       absl::StatusCode::kDeadlineExceeded,
       {},
       50,
       absl::StatusCode::kDeadlineExceeded,
       DeadlineSource::kDownstream,
       true,
       true,
       DeadlineSource::kDownstream,
       ""},
      {"CANCELLED after the deadline: gRPC enforced it",
       Inbound(DeadlineSource::kClient, 100),
       absl::StatusCode::kCancelled,
       {},
       100,
       absl::StatusCode::kDeadlineExceeded,
       DeadlineSource::kClient,
       false,
       true,
       DeadlineSource::kClient,
       "orders"},
      {"CANCELLED inside the slack: gRPC's deadline fired early",
       Inbound(DeadlineSource::kClient, 100),
       absl::StatusCode::kCancelled,
       {},
       91,
       absl::StatusCode::kDeadlineExceeded,
       DeadlineSource::kClient,
       false,
       true,
       DeadlineSource::kClient,
       "orders"},
      {"CANCELLED before it: the caller cancelled",
       Inbound(DeadlineSource::kClient, 100),
       absl::StatusCode::kCancelled,
       {},
       50,
       absl::StatusCode::kCancelled,
       DeadlineSource::kNone,
       false,
       false,
       DeadlineSource::kNone,
       ""},
  };
  for (const ServerCase& c : cases) {
    SCOPED_TRACE(c.name);
    const ServerVerdict v =
        ClassifyServerAnswer(c.call, c.handler, c.relayed, kStart + absl::Milliseconds(c.now_ms));
    EXPECT_EQ(v.code, c.code);
    EXPECT_EQ(v.fired, c.fired);
    EXPECT_EQ(v.replace, c.replace);
    EXPECT_EQ(v.count, c.count);
    if (c.count) {
      EXPECT_EQ(v.counted_source, c.counted);
      EXPECT_EQ(v.counted_hop, c.counted_hop);
    }
  }
}

TEST(ClassifyServerAnswerTest, RefusalAndCutCarryTheirOwnAttribution) {
  const ServerVerdict refused = ClassifyServerAnswer(Inbound(DeadlineSource::kClient, 20, true),
                                                     absl::StatusCode::kOk, {}, kStart);
  EXPECT_EQ(refused.attribution.source, DeadlineSource::kArrivedExpired);
  EXPECT_EQ(refused.attribution.budget, absl::Milliseconds(20));
  EXPECT_EQ(refused.attribution.elapsed, absl::ZeroDuration());
  const Attribution cut = ServerCutAttribution(Inbound(DeadlineSource::kRequest, 300),
                                               kStart + absl::Milliseconds(301));
  EXPECT_EQ(cut.source, DeadlineSource::kRequest);
  EXPECT_EQ(cut.hop, "orders");
  EXPECT_EQ(cut.budget, absl::Milliseconds(300));
  EXPECT_EQ(cut.elapsed, absl::Milliseconds(301));
}

// A call that waited on its way arrives with gRPC's deadline later than its
// caller's; this hop cuts it at the caller's, and says so.
TEST(ClassifyServerAnswerTest, CutAtTheCallersDeadlineIsTheClients) {
  const Attribution cut =
      ServerCutAttribution(Inbound(DeadlineSource::kClient, 150), kStart + absl::Milliseconds(151));
  EXPECT_EQ(cut.source, DeadlineSource::kClient);
  EXPECT_EQ(cut.hop, "orders");
  EXPECT_EQ(cut.budget, absl::Milliseconds(150));
}

ServerCall Shed(ArrivalOutcome outcome, int budget_ms) {
  ServerCall c = Inbound(DeadlineSource::kClient, budget_ms);
  c.budget.outcome = outcome;
  return c;
}

TEST(ClassifyServerAnswerTest, AdmissionShedsCarryTheirOwnSourceOrAPushbackCode) {
  struct Case {
    const char* name;
    ArrivalOutcome outcome;
    absl::StatusCode code;
    bool overload;
    DeadlineSource source;
  } cases[] = {
      {"cannot finish", ArrivalOutcome::kShedCannotFinish, absl::StatusCode::kDeadlineExceeded,
       false, DeadlineSource::kCannotFinish},
      {"ran out in the queue", ArrivalOutcome::kShedQueueExpired,
       absl::StatusCode::kDeadlineExceeded, false, DeadlineSource::kQueueWait},
      {"overload", ArrivalOutcome::kShedOverload, absl::StatusCode::kResourceExhausted, true,
       DeadlineSource::kNone},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    // Whatever the handler answered, 40 ms after arrival.
    const ServerVerdict v = ClassifyServerAnswer(Shed(c.outcome, 200), absl::StatusCode::kOk, {},
                                                 kStart + absl::Milliseconds(40));
    EXPECT_EQ(v.code, c.code);
    EXPECT_TRUE(v.replace);
    EXPECT_EQ(v.overload_shed, c.overload);
    EXPECT_FALSE(v.count);  // counted when admission decided
    if (!c.overload) {
      EXPECT_EQ(v.attribution.source, c.source);
      EXPECT_EQ(v.attribution.hop, "orders");
      EXPECT_EQ(v.attribution.budget, absl::Milliseconds(200));
      EXPECT_EQ(v.attribution.elapsed, absl::Milliseconds(40));  // the time it waited
    }
  }
}

TEST(ClassifyServerAnswerTest, MalformedRelayedFormsAreCounted) {
  const ServerVerdict v = ClassifyServerAnswer(
      Inbound(DeadlineSource::kClient, 100), absl::StatusCode::kDeadlineExceeded,
      {Malformed(), Malformed(), {}}, kStart + absl::Milliseconds(10));
  EXPECT_EQ(v.malformed_forms, 2);
  EXPECT_EQ(v.attribution.source, DeadlineSource::kDownstream);
}

TEST(ClassifyServerEndTest, Table) {
  // Ended without the handler's answer.
  EXPECT_EQ(
      ClassifyServerEnd(Inbound(DeadlineSource::kClient, 100), kStart + absl::Milliseconds(50))
          .code,
      absl::StatusCode::kCancelled);
  const ServerVerdict expired =
      ClassifyServerEnd(Inbound(DeadlineSource::kClient, 100), kStart + absl::Milliseconds(100));
  EXPECT_EQ(expired.code, absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(expired.fired, DeadlineSource::kClient);
  EXPECT_TRUE(expired.count);
  const ServerVerdict cut = ClassifyServerEnd(Inbound(DeadlineSource::kRequest, 100, false, true),
                                              kStart + absl::Milliseconds(100));
  EXPECT_EQ(cut.fired, DeadlineSource::kRequest);
  EXPECT_FALSE(cut.count) << "counted when the cap fired";
  const ServerVerdict refused =
      ClassifyServerEnd(Inbound(DeadlineSource::kClient, 1, true), kStart + absl::Milliseconds(5));
  EXPECT_EQ(refused.fired, DeadlineSource::kArrivedExpired);
  EXPECT_FALSE(refused.count);
}

}  // namespace
}  // namespace hopbudget
