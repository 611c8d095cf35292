// Copyright hopbudget authors.
//
// The decisions behind /deadlinez.json (deadlinez_view.h), table-style on a
// FakeClock: the filters and their errors, the order of recent calls, the
// rate windows, and the document's new fields. The page that renders them is
// checked in headless Chromium in deadlinez_page_test.cc.
#include "deadlinez_view.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "hopbudget/advanced/clock.h"
#include "metrics_recorder.h"

namespace hopbudget::internal {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Params = std::vector<std::pair<std::string, std::string>>;

TEST(DeadlinezFilterTest, AcceptedParameters) {
  struct Case {
    Params params;
    bool failed_only;
    std::string method;
    std::string source;
  };
  const Case cases[] = {
      {{}, false, "", ""},
      {{{"failed", "1"}}, true, "", ""},
      {{{"failed", "true"}}, true, "", ""},
      {{{"failed", "0"}}, false, "", ""},
      {{{"failed", "false"}}, false, "", ""},
      {{{"method", "/hopbudget.demo.Ledger/Commit"}}, false, "/hopbudget.demo.Ledger/Commit", ""},
      {{{"method", "other"}}, false, "other", ""},
      {{{"source", "attempt"}}, false, "", "attempt"},
      {{{"source", "slot-wait"}}, false, "", "slot-wait"},
      {{{"failed", "1"}, {"method", "/a.B/C"}, {"source", "request"}}, true, "/a.B/C", "request"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<DeadlinezFilter> f = ParseDeadlinezFilter(c.params);
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ(f->failed_only, c.failed_only);
    EXPECT_EQ(f->method, c.method);
    EXPECT_EQ(f->source, c.source);
  }
}

TEST(DeadlinezFilterTest, BadParametersAreNamed) {
  struct Case {
    Params params;
    std::string message;
  };
  const Case cases[] = {
      {{{"failed", "yes"}}, "failed='yes' is not one of 1, 0, true, false"},
      {{{"failed", ""}}, "failed='' is not one of"},
      {{{"method", "Commit"}}, "method='Commit' is not a full method name"},
      {{{"method", "/nopath"}}, "method='/nopath' is not a full method name"},
      {{{"method", ""}}, "method='' is not a full method name"},
      {{{"source", "bogus"}}, "source='bogus' is not a deadline source (client, request, attempt"},
      {{{"source", "none"}}, "source='none' is not a deadline source"},
      {{{"falied", "1"}}, "unknown parameter 'falied' (filters: failed, method, source)"},
      {{{"failed", "1"}, {"failed", "0"}}, "parameter 'failed' given more than once"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<DeadlinezFilter> f = ParseDeadlinezFilter(c.params);
    ASSERT_FALSE(f.ok()) << c.message;
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(f.status().message()), HasSubstr(c.message));
  }
}

RecentCall Call(std::string method, absl::Time start, absl::StatusCode code = absl::StatusCode::kOk,
                DeadlineSource source = DeadlineSource::kNone) {
  RecentCall c;
  c.method = std::move(method);
  c.start = start;
  c.code = code;
  c.source = source;
  return c;
}

std::vector<std::string> Methods(const std::vector<RecentCall>& calls) {
  std::vector<std::string> out;
  for (const RecentCall& c : calls) out.push_back(c.method);
  return out;
}

TEST(DeadlinezOrderTest, NewestFirstByStartNotByCompletion) {
  const absl::Time t0 = absl::FromUnixSeconds(1700000000);
  // As Metrics::RecentCalls() returns them: newest *finished* first. The
  // long call "slow" started first and finished last.
  const std::vector<RecentCall> finished_order = {
      Call("slow", t0), Call("c", t0 + absl::Milliseconds(30)),
      Call("b", t0 + absl::Milliseconds(20)), Call("tie-2", t0 + absl::Milliseconds(10)),
      Call("tie-1", t0 + absl::Milliseconds(10))};
  EXPECT_THAT(Methods(OrderAndFilter(finished_order, {})),
              ElementsAre("c", "b", "tie-2", "tie-1", "slow"));
}

TEST(DeadlinezOrderTest, FiltersKeepTheOrder) {
  const absl::Time t0 = absl::FromUnixSeconds(1700000000);
  const absl::Duration ms = absl::Milliseconds(1);
  const std::vector<RecentCall> calls = {
      Call("/a.S/M", t0 + 1 * ms),
      Call("/a.S/M", t0 + 5 * ms, absl::StatusCode::kDeadlineExceeded, DeadlineSource::kAttempt),
      Call("/a.S/N", t0 + 3 * ms, absl::StatusCode::kDeadlineExceeded, DeadlineSource::kRequest),
      Call("/a.S/N", t0 + 4 * ms, absl::StatusCode::kUnavailable),
      Call("/a.S/M", t0 + 2 * ms, absl::StatusCode::kDeadlineExceeded, DeadlineSource::kRequest),
  };
  auto starts = [&](const DeadlinezFilter& f) {
    std::vector<int64_t> out;
    for (const RecentCall& c : OrderAndFilter(calls, f)) {
      out.push_back(absl::ToInt64Milliseconds(c.start - t0));
    }
    return out;
  };
  EXPECT_THAT(starts({}), ElementsAre(5, 4, 3, 2, 1));
  EXPECT_THAT(starts({true, "", ""}), ElementsAre(5, 4, 3, 2));
  EXPECT_THAT(starts({false, "/a.S/M", ""}), ElementsAre(5, 2, 1));
  EXPECT_THAT(starts({false, "", "request"}), ElementsAre(3, 2));
  EXPECT_THAT(starts({true, "/a.S/N", "request"}), ElementsAre(3));
  EXPECT_THAT(starts({false, "/a.S/X", ""}), ElementsAre());
}

// The index of a summary counter.
size_t Key(const std::string& name) {
  const std::vector<std::string>& names = SummaryCounterNames();
  const auto it = std::find(names.begin(), names.end(), name);
  EXPECT_NE(it, names.end()) << name;
  return static_cast<size_t>(it - names.begin());
}

std::vector<uint64_t> With(std::initializer_list<std::pair<const char*, uint64_t>> values) {
  std::vector<uint64_t> v(SummaryCounterNames().size(), 0);
  for (const auto& [name, value] : values) v[Key(name)] = value;
  return v;
}

TEST(SummaryCountersTest, ReadFromTheSnapshot) {
  FakeClock clock;
  Metrics metrics(&clock);
  const MethodId m = metrics.Method("other");
  internal::Record(metrics).EndServerCall(m, absl::StatusCode::kOk, absl::Milliseconds(1));
  internal::Record(metrics).EndServerCall(m, absl::StatusCode::kDeadlineExceeded,
                                          absl::Milliseconds(1));
  internal::Record(metrics).EndClientAttempt(m, absl::StatusCode::kUnavailable,
                                             absl::Milliseconds(1), ClientCallKind::kPlainCall);
  internal::Record(metrics).CountDeadlineExceeded(Side::kServer, DeadlineSource::kAttempt,
                                                  "ledger");
  internal::Record(metrics).CountDeadlineExceeded(Side::kClient, DeadlineSource::kSlotWait,
                                                  "orders");
  internal::Record(metrics).CountShield(ShieldEvent::kCompleted);
  internal::Record(metrics).CountRetryDecision(RetryOutcome::kRetry);
  internal::Record(metrics).CountRetryDecision(RetryOutcome::kThrottled);
  internal::Record(metrics).CountRetryDecision(RetryOutcome::kThrottled);
  internal::Record(metrics).CountShadow(ShadowAction::kCut);
  const std::vector<uint64_t> v = SummaryCounters(metrics.Snapshot());
  ASSERT_EQ(v.size(), SummaryCounterNames().size());
  EXPECT_EQ(v[Key("calls.server")], 2u);
  EXPECT_EQ(v[Key("failed.server")], 1u);
  EXPECT_EQ(v[Key("calls.client")], 1u);
  EXPECT_EQ(v[Key("failed.client")], 1u);
  EXPECT_EQ(v[Key("timeouts.server.attempt")], 1u);
  EXPECT_EQ(v[Key("timeouts.client.slot-wait")], 1u);
  EXPECT_EQ(v[Key("timeouts.server.request")], 0u);
  EXPECT_EQ(v[Key("shield.completed")], 1u);
  EXPECT_EQ(v[Key("retries.started")], 1u);
  EXPECT_EQ(v[Key("retries.skipped.throttled")], 2u);
  EXPECT_EQ(v[Key("retries.skipped.no_room")], 0u);
  EXPECT_EQ(v[Key("shadow.cut")], 1u);
  EXPECT_EQ(v[Key("shadow.refuse")], 0u);
}

TEST(RateRingTest, KeepsOneSampleAStepAndIsBounded) {
  FakeClock clock;
  RateRing ring;  // 10 s step, 10 min back
  EXPECT_EQ(ring.capacity(), 62u);
  EXPECT_EQ(ring.Record(clock.Now(), With({})), RateRing::RecordOutcome::kKept);
  clock.Advance(absl::Seconds(9));
  EXPECT_EQ(ring.Record(clock.Now(), With({})), RateRing::RecordOutcome::kTooSoon);
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(ring.Record(clock.Now(), With({})), RateRing::RecordOutcome::kKept);
  // A page refreshing every 2 s for an hour: one sample in five is kept,
  // and the ring stays at its bound.
  int kept = 0;
  for (int i = 0; i < 1800; ++i) {
    clock.Advance(absl::Seconds(2));
    if (ring.Record(clock.Now(), With({})) == RateRing::RecordOutcome::kKept) ++kept;
  }
  EXPECT_EQ(kept, 360);
  EXPECT_EQ(ring.size(), 62u);
}

TEST(RateRingTest, WindowsOnAFakeClock) {
  FakeClock clock(absl::FromUnixSeconds(1700000000));
  const absl::Time t0 = clock.Now();
  RateRing ring;
  const std::vector<absl::Duration> windows = {absl::Minutes(1), absl::Minutes(10)};
  // No sample before now: no rate.
  ring.Record(t0, With({}));
  std::vector<WindowCounts> w = ring.Windows(t0, With({}), windows);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].span, absl::ZeroDuration());
  EXPECT_FALSE(w[0].complete);

  // 5 timeouts in the first 30 s: both windows reach back to t0 only, short.
  clock.Advance(absl::Seconds(30));
  uint64_t timeouts = 5;
  w = ring.Windows(clock.Now(), With({{"timeouts.server.attempt", timeouts}}), windows);
  EXPECT_EQ(w[0].span, absl::Seconds(30));
  EXPECT_FALSE(w[0].complete);
  EXPECT_EQ(w[0].deltas[Key("timeouts.server.attempt")], 5u);
  EXPECT_EQ(w[1].deltas[Key("timeouts.server.attempt")], 5u);

  // A sample every 10 s for 12 minutes, 1 more timeout per sample.
  for (int i = 0; i < 72; ++i) {
    clock.Advance(absl::Seconds(10));
    ++timeouts;
    ring.Record(clock.Now(), With({{"timeouts.server.attempt", timeouts}}));
  }
  // Then 20 timeouts in the last 4 s: the 1 min window has them plus the 6
  // samples' worth, the 10 min window 60 samples' worth more.
  clock.Advance(absl::Seconds(4));
  timeouts += 20;
  w = ring.Windows(clock.Now(), With({{"timeouts.server.attempt", timeouts}}), windows);
  EXPECT_EQ(w[0].window, absl::Minutes(1));
  EXPECT_EQ(w[0].span, absl::Seconds(64));
  EXPECT_TRUE(w[0].complete);
  EXPECT_EQ(w[0].deltas[Key("timeouts.server.attempt")], 6u + 20u);
  EXPECT_EQ(w[1].window, absl::Minutes(10));
  EXPECT_EQ(w[1].span, absl::Seconds(604));
  EXPECT_TRUE(w[1].complete);
  EXPECT_EQ(w[1].deltas[Key("timeouts.server.attempt")], 60u + 20u);
  EXPECT_EQ(w[1].deltas[Key("timeouts.server.request")], 0u);
}

TEST(RateRingTest, ACounterThatWentBackCountsNoChange) {
  RateRing ring;
  const absl::Time t0 = absl::FromUnixSeconds(1700000000);
  ring.Record(t0, With({{"calls.server", 100}}));
  const std::vector<WindowCounts> w =
      ring.Windows(t0 + absl::Minutes(2), With({{"calls.server", 7}}), {absl::Minutes(1)});
  EXPECT_EQ(w[0].deltas[Key("calls.server")], 0u);
}

TEST(DeadlinezDocumentTest, AddsFilterWindowsPolicyAndPeers) {
  const absl::Time t0 = absl::FromUnixSeconds(1700000000);
  DeadlinezInputs in;
  in.hop = "orders";
  in.now = t0 + absl::Seconds(2);
  in.recent = {Call("/a.S/M", t0 + absl::Seconds(1), absl::StatusCode::kDeadlineExceeded,
                    DeadlineSource::kAttempt),
               Call("/a.S/N", t0)};
  in.filter.failed_only = true;
  in.windows = {{absl::Minutes(1), absl::Seconds(64), true, With({{"calls.server", 3}})}};
  BudgetPolicy policy;
  policy.request_cap = absl::Milliseconds(500);
  policy.attempt_cap = absl::Milliseconds(100);
  in.policy = policy;
  in.retry_policy = RetryPolicy{};
  in.peers = {{"gateway", "http://127.0.0.1:9101/deadlinez"}};
  const std::string doc = FormatDeadlinezDocument(in);
  EXPECT_THAT(doc, HasSubstr("\"hop\":\"orders\""));
  EXPECT_THAT(doc, HasSubstr("\"filter\":{\"failed\":true,\"method\":\"\",\"source\":\"\"}"));
  EXPECT_THAT(doc, HasSubstr("\"recent_total\":2"));
  EXPECT_THAT(doc, HasSubstr("\"methods_seen\":[\"/a.S/M\",\"/a.S/N\"]"));
  EXPECT_THAT(doc, HasSubstr("\"sources_seen\":[\"attempt\"]"));
  EXPECT_THAT(doc, HasSubstr("{\"name\":\"1m\",\"window_s\":60.000,\"span_s\":64.000,"
                             "\"complete\":true,\"counts\":{\"calls.server\":3,"));
  EXPECT_THAT(doc, HasSubstr("\"policy\":{\"request_cap_ms\":500.000,\"attempt_cap_ms\":100.000,"
                             "\"hop_reserve_ms\":5.000,\"min_attempt_budget_ms\":1.000,"
                             "\"max_inbound_budget_ms\":null}"));
  EXPECT_THAT(doc, HasSubstr("\"retry_policy\":{\"max_attempts\":3,\"retryable_codes\":"
                             "[\"UNAVAILABLE\"],\"initial_backoff_ms\":10.000,"
                             "\"max_backoff_ms\":1000.000,\"backoff_multiplier\":2,\"fit\":{"));
  EXPECT_THAT(doc, HasSubstr("\"peers\":[{\"name\":\"gateway\","
                             "\"url\":\"http://127.0.0.1:9101/deadlinez\"}]"));
  // Only the failed call is listed.
  EXPECT_THAT(doc, HasSubstr("\"recent\":[{\"method\":\"/a.S/M\""));
  EXPECT_THAT(doc, ::testing::Not(HasSubstr("\"method\":\"/a.S/N\",\"start")));
  EXPECT_EQ(doc.back(), '}');

  // A retry policy that cannot fit says why; no policy is null.
  in.policy->attempt_cap = absl::Milliseconds(499);
  EXPECT_THAT(FormatDeadlinezDocument(in), HasSubstr("\"unfit\":\"retry policy: attempt_cap"));
  in.policy.reset();
  in.retry_policy.reset();
  EXPECT_THAT(FormatDeadlinezDocument(in), HasSubstr("\"policy\":null,\"retry_policy\":null"));
}

}  // namespace
}  // namespace hopbudget::internal
