// Copyright hopbudget authors.
#include "hopbudget/advanced/trace.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "hopbudget/trace.pb.h"

namespace hopbudget {
namespace {

using ::testing::HasSubstr;

HopTrace Hop(std::string name, absl::Duration budget, absl::Duration spent, int attempts,
             absl::StatusCode code = absl::StatusCode::kOk,
             DeadlineSource source = DeadlineSource::kNone) {
  HopTrace h;
  h.hop = std::move(name);
  h.budget_at_arrival = budget;
  h.spent = spent;
  h.attempts = attempts;
  h.code = code;
  h.source = source;
  return h;
}

TEST(TraceTest, RoundTripKeepsEveryFieldAndTheOrder) {
  BudgetTrace t;
  t.hops.push_back(Hop("gateway", absl::Milliseconds(800), absl::Milliseconds(42), 1));
  t.hops.push_back(Hop("orders", absl::Milliseconds(795), absl::Microseconds(40123), 2,
                       absl::StatusCode::kDeadlineExceeded, DeadlineSource::kAttempt));
  t.hops.push_back(Hop("ledger", absl::InfiniteDuration(), absl::Milliseconds(3), 0));
  absl::StatusOr<BudgetTrace> back = DecodeTrace(EncodeTrace(t));
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->hops.size(), 3u);
  EXPECT_EQ(back->hops[0].hop, "gateway");
  EXPECT_EQ(back->hops[1].hop, "orders");
  EXPECT_EQ(back->hops[2].hop, "ledger");
  EXPECT_EQ(back->hops[1].budget_at_arrival, absl::Milliseconds(795));
  EXPECT_EQ(back->hops[1].spent, absl::Microseconds(40123));
  EXPECT_EQ(back->hops[1].attempts, 2);
  EXPECT_EQ(back->hops[1].code, absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(back->hops[1].source, DeadlineSource::kAttempt);
  EXPECT_EQ(back->hops[2].budget_at_arrival, absl::InfiniteDuration());
  EXPECT_FALSE(back->truncated);
}

TEST(TraceTest, EmptyTraceRoundTrips) {
  absl::StatusOr<BudgetTrace> back = DecodeTrace(EncodeTrace(BudgetTrace{}));
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->hops.empty());
}

TEST(TraceTest, NegativeSpentIsSentAsZero) {
  BudgetTrace t;
  t.hops.push_back(Hop("a", absl::Milliseconds(-5), absl::Milliseconds(-1), -3));
  absl::StatusOr<BudgetTrace> back = DecodeTrace(EncodeTrace(t));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->hops[0].budget_at_arrival, absl::ZeroDuration());
  EXPECT_EQ(back->hops[0].spent, absl::ZeroDuration());
  EXPECT_EQ(back->hops[0].attempts, 0);
}

TEST(TraceTest, EncodeKeepsAtMostMaxEntriesAndMarksTruncated) {
  BudgetTrace t;
  for (int i = 0; i < kMaxTraceEntries + 5; ++i) {
    t.hops.push_back(Hop("hop" + std::to_string(i), absl::Seconds(1), absl::Milliseconds(1), 1));
  }
  absl::StatusOr<BudgetTrace> back = DecodeTrace(EncodeTrace(t));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->hops.size(), static_cast<size_t>(kMaxTraceEntries));
  EXPECT_TRUE(back->truncated);
  EXPECT_EQ(back->hops.front().hop, "hop0");  // the caller's end is kept
}

// The limits agree: kMaxTraceEntries of the largest valid entries fit in
// kMaxTraceBytes, so a full trace is never cut by bytes.
TEST(TraceTest, FullTraceOfTheLargestEntriesFitsTheByteLimit) {
  BudgetTrace t;
  for (int i = 0; i < kMaxTraceEntries; ++i) {
    t.hops.push_back(Hop(std::string(64, 'a' + i), absl::Hours(1000), absl::Hours(1000), 1000000,
                         absl::StatusCode::kDeadlineExceeded,
                         DeadlineSource::kExhaustedBeforeCall));
  }
  const std::string bytes = EncodeTrace(t);
  EXPECT_LE(bytes.size(), kMaxTraceBytes);
  absl::StatusOr<BudgetTrace> back = DecodeTrace(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->hops.size(), static_cast<size_t>(kMaxTraceEntries));
  EXPECT_FALSE(back->truncated);
}

TEST(TraceTest, OversizedInputIsRefusedAsOversized) {
  const std::string big(kMaxTraceBytes + 1, '\0');
  absl::StatusOr<BudgetTrace> back = DecodeTrace(big);
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(DropReason(back.status()), TraceDrop::kOversized);
}

TEST(TraceTest, TooManyEntriesAreRefusedAsOversized) {
  wire::BudgetTrace raw;
  for (int i = 0; i < kMaxTraceEntries + 1; ++i) raw.add_entries()->set_hop("a");
  absl::StatusOr<BudgetTrace> back = DecodeTrace(raw.SerializeAsString());
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(DropReason(back.status()), TraceDrop::kOversized);
}

TEST(TraceTest, GarbageIsRefusedAsMalformed) {
  absl::StatusOr<BudgetTrace> back = DecodeTrace("\xff\xff\xff garbage");
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(DropReason(back.status()), TraceDrop::kMalformed);
}

TEST(TraceTest, InvalidEntriesAreRefusedAsMalformed) {
  struct Case {
    const char* what;
    void (*set)(wire::HopEntry*);
  };
  const Case cases[] = {
      {"empty hop", [](wire::HopEntry* e) { e->set_hop(""); }},
      {"hop with a space", [](wire::HopEntry* e) { e->set_hop("a b"); }},
      {"budget below -1", [](wire::HopEntry* e) { e->set_budget_at_arrival_us(-2); }},
      {"negative spent", [](wire::HopEntry* e) { e->set_spent_us(-1); }},
      {"absurd spent", [](wire::HopEntry* e) { e->set_spent_us(int64_t{1} << 62); }},
      {"negative attempts", [](wire::HopEntry* e) { e->set_attempts(-1); }},
      {"unknown code", [](wire::HopEntry* e) { e->set_code(17); }},
      {"unknown source", [](wire::HopEntry* e) { e->set_source("gremlins"); }},
      {"source none", [](wire::HopEntry* e) { e->set_source("none"); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    wire::BudgetTrace raw;
    wire::HopEntry* e = raw.add_entries();
    e->set_hop("orders");
    c.set(e);
    absl::StatusOr<BudgetTrace> back = DecodeTrace(raw.SerializeAsString());
    ASSERT_FALSE(back.ok());
    EXPECT_EQ(back.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(DropReason(back.status()), TraceDrop::kMalformed);
  }
}

TEST(TraceTest, AppendRespectsTheEntryLimit) {
  BudgetTrace into;
  into.hops.push_back(Hop("gateway", absl::Seconds(1), absl::Milliseconds(1), 1));
  BudgetTrace down;
  for (int i = 0; i < kMaxTraceEntries; ++i) down.hops.push_back(Hop("x", absl::Seconds(1), {}, 0));
  AppendTrace(into, down);
  EXPECT_EQ(into.hops.size(), static_cast<size_t>(kMaxTraceEntries));
  EXPECT_TRUE(into.truncated);
}

TEST(TraceTest, AppendCarriesTruncationFromDownstream) {
  BudgetTrace into;
  BudgetTrace down;
  down.truncated = true;
  AppendTrace(into, down);
  EXPECT_TRUE(into.truncated);
}

TEST(TraceTest, WaterfallShowsOneAlignedLinePerHop) {
  BudgetTrace t;
  t.hops.push_back(Hop("gateway", absl::Milliseconds(800), absl::Milliseconds(42), 1));
  t.hops.push_back(Hop("orders", absl::Milliseconds(795), absl::Milliseconds(160), 2,
                       absl::StatusCode::kDeadlineExceeded, DeadlineSource::kAttempt));
  t.hops.push_back(Hop("ledger", absl::InfiniteDuration(), absl::Milliseconds(3), 0));
  const std::string w = FormatWaterfall(t);
  EXPECT_THAT(w, HasSubstr("gateway  budget   800.0 ms  spent    42.0 ms  attempts 1  OK\n"));
  EXPECT_THAT(w, HasSubstr("orders   budget   795.0 ms  spent   160.0 ms  attempts 2  "
                           "DEADLINE_EXCEEDED (attempt)\n"));
  EXPECT_THAT(w, HasSubstr("ledger   budget       none"));
}

TEST(TraceTest, WaterfallOfNothingSaysSo) {
  EXPECT_EQ(FormatWaterfall(BudgetTrace{}), "(no trace)\n");
}

}  // namespace
}  // namespace hopbudget
