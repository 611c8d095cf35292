// Copyright hopbudget authors.
#include "hopbudget/advanced/metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hopbudget/advanced/exposition.h"
#include "metrics_recorder.h"

namespace hopbudget {
namespace {

// Whether code outside the library can record into a registry: access is
// checked during substitution, so a private member makes this false.
template <typename M, typename = void>
struct CanRecord : std::false_type {};
template <typename M>
struct CanRecord<M, std::void_t<decltype(std::declval<M&>().CountTimerArmed())>> : std::true_type {
};

// A user reads a registry (Snapshot) and cannot write to it; the library
// records through internal::MetricsRecorder.
TEST(MetricsTest, ARegistryIsReadOnlyToItsUsers) {
  static_assert(!CanRecord<Metrics>::value, "Metrics' recording side must be private");
  static_assert(CanRecord<internal::MetricsRecorder>::value);
  Metrics metrics;
  internal::Record(metrics).CountTimerArmed();
  EXPECT_EQ(metrics.Snapshot().timers_armed, 1u);
}

TEST(MetricsTest, CountsByKey) {
  Metrics m;
  internal::Record(m).CountDeadlineExceeded(Side::kClient, DeadlineSource::kAttempt, "orders");
  internal::Record(m).CountDeadlineExceeded(Side::kClient, DeadlineSource::kAttempt, "orders");
  internal::Record(m).CountDeadlineExceeded(Side::kServer, DeadlineSource::kRequest, "ledger");
  internal::Record(m).CountBadBudgetHeader(HeaderParse::kNegative);
  internal::Record(m).CountLeak(LeakKind::kNoDeadline);
  internal::Record(m).CountCallEnd(Side::kServer, m.Method("/nope.Svc/M"), absl::StatusCode::kOk);
  MetricsSnapshot s = m.Snapshot();
  EXPECT_EQ(s.deadline_exceeded(Side::kClient, DeadlineSource::kAttempt), 2u);
  EXPECT_EQ(s.deadline_exceeded(Side::kServer, DeadlineSource::kRequest), 1u);
  EXPECT_EQ(s.deadline_exceeded(Side::kServer, DeadlineSource::kAttempt), 0u);
  EXPECT_EQ(s.bad_header(HeaderParse::kNegative), 1u);
  EXPECT_EQ(s.leaks(LeakKind::kNoDeadline), 1u);
  EXPECT_EQ(s.calls[static_cast<int>(Side::kServer)], 1u);
}

TEST(MetricsTest, ConcurrentIncrementsAreAllCounted) {
  Metrics m;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&m] {
      for (int i = 0; i < 10000; ++i)
        internal::Record(m).CountCallEnd(Side::kClient, MethodId{}, absl::StatusCode::kOk);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(m.Snapshot().calls[0], 40000u);
}

}  // namespace
}  // namespace hopbudget

namespace hopbudget {
namespace {

// A method of a proto compiled into this test (via the library): known to
// the generated descriptor pool.
constexpr char kKnown[] = "/hopbudget.wire.Nothing/Known";

TEST(MetricsLabelsTest, MethodsUnknownToTheDescriptorPoolFoldIntoOther) {
  Metrics m;
  EXPECT_EQ(m.Method("/no.such.Service/Method").index, 0);
  EXPECT_EQ(m.Method("garbage").index, 0);
  EXPECT_EQ(m.Method("").index, 0);
  EXPECT_EQ(m.Method("/").index, 0);
  internal::Record(m).CountCallEnd(Side::kServer, m.Method("/no.such.Service/Method"),
                                   absl::StatusCode::kUnavailable);
  MetricsSnapshot s = m.Snapshot();
  EXPECT_EQ(s.calls_with_code(Side::kServer, "other", absl::StatusCode::kUnavailable), 1u);
}

TEST(MetricsLabelsTest, CallsAreCountedBySideMethodAndCode) {
  Metrics m;
  const MethodId other = m.Method(kKnown);  // not in the pool either: "other"
  internal::Record(m).CountCallEnd(Side::kClient, other, absl::StatusCode::kOk);
  internal::Record(m).CountCallEnd(Side::kClient, other, absl::StatusCode::kOk);
  internal::Record(m).CountCallEnd(Side::kServer, other, absl::StatusCode::kDeadlineExceeded);
  MetricsSnapshot s = m.Snapshot();
  EXPECT_EQ(s.calls[static_cast<int>(Side::kClient)], 2u);
  EXPECT_EQ(s.calls_with_code(Side::kClient, "other", absl::StatusCode::kOk), 2u);
  EXPECT_EQ(s.calls_with_code(Side::kServer, "other", absl::StatusCode::kDeadlineExceeded), 1u);
  EXPECT_EQ(s.calls_with_code(Side::kServer, "/x.Y/Z", absl::StatusCode::kOk), 0u);
}

TEST(MetricsLabelsTest, DeadlineExceededIsCountedByHopWithBoundedHops) {
  Metrics m;
  internal::Record(m).CountDeadlineExceeded(Side::kClient, DeadlineSource::kDownstream, "ledger");
  internal::Record(m).CountDeadlineExceeded(Side::kClient, DeadlineSource::kDownstream, "ledger");
  internal::Record(m).CountDeadlineExceeded(Side::kClient, DeadlineSource::kDownstream, "");
  internal::Record(m).CountDeadlineExceeded(Side::kClient, DeadlineSource::kDownstream,
                                            "not a hop!");
  for (int i = 0; i < kMaxHopLabels + 10; ++i) {
    internal::Record(m).CountDeadlineExceeded(Side::kServer, DeadlineSource::kClient,
                                              "hop" + std::to_string(i));
  }
  MetricsSnapshot s = m.Snapshot();
  EXPECT_EQ(s.deadline_exceeded(Side::kClient, DeadlineSource::kDownstream, "ledger"), 2u);
  EXPECT_EQ(s.deadline_exceeded(Side::kClient, DeadlineSource::kDownstream, "unknown"), 1u);
  EXPECT_EQ(s.deadline_exceeded(Side::kClient, DeadlineSource::kDownstream, "other"), 1u);
  EXPECT_EQ(s.deadline_exceeded(Side::kClient, DeadlineSource::kDownstream), 4u);
  // "ledger" took one of the kMaxHopLabels - 1 own labels: the rest fold.
  EXPECT_EQ(s.deadline_exceeded(Side::kServer, DeadlineSource::kClient), kMaxHopLabels + 10u);
  EXPECT_EQ(s.deadline_exceeded(Side::kServer, DeadlineSource::kClient, "hop0"), 1u);
  EXPECT_EQ(s.deadline_exceeded(Side::kServer, DeadlineSource::kClient, "other"),
            static_cast<uint64_t>(kMaxHopLabels + 10 - (kMaxHopLabels - 2)));
}

TEST(MetricsHistogramTest, BudgetAtArrivalFallsIntoItsBucketAndSums) {
  Metrics m;
  const MethodId id = m.Method("/x.Y/Z");
  internal::Record(m).ObserveBudgetAtArrival(
      id, absl::Milliseconds(1));  // the first bucket, le=0.00109
  internal::Record(m).ObserveBudgetAtArrival(id, absl::Milliseconds(30));  // (0.0287, 0.03125]
  internal::Record(m).ObserveBudgetAtArrival(id, absl::Seconds(100));      // +Inf
  internal::Record(m).ObserveBudgetAtArrival(
      id, absl::Milliseconds(-5));  // counts as 0: the first bucket
  internal::Record(m).ObserveBudgetAtArrival(id, absl::InfiniteDuration());  // no deadline
  const MetricsSnapshot snapshot = m.Snapshot();
  const MethodSnapshot* ms = snapshot.method("other");
  ASSERT_NE(ms, nullptr);
  const HistogramSnapshot& h = ms->budget_at_arrival;
  ASSERT_EQ(h.bounds, m.budget_at_arrival_bounds());
  ASSERT_EQ(h.counts.size(), h.bounds.size() + 1);
  EXPECT_EQ(h.count, 4u);
  EXPECT_EQ(h.counts[0], 2u);
  const size_t i = std::lower_bound(h.bounds.begin(), h.bounds.end(), 0.030) - h.bounds.begin();
  EXPECT_EQ(h.bounds[i], 0.03125);
  EXPECT_EQ(h.counts[i], 1u);
  EXPECT_EQ(h.counts.back(), 1u);
  EXPECT_DOUBLE_EQ(h.sum, 100.031);
  EXPECT_EQ(ms->calls_without_deadline, 1u);
}

TEST(MetricsHistogramTest, RemainingIgnoresInfiniteAndClampsNegative) {
  Metrics m;
  internal::Record(m).ObserveBudgetRemaining(MethodId{}, absl::InfiniteDuration());
  internal::Record(m).ObserveBudgetRemaining(MethodId{}, absl::Milliseconds(-3));
  const MetricsSnapshot snapshot = m.Snapshot();
  const MethodSnapshot* ms = snapshot.method("other");
  ASSERT_NE(ms, nullptr);
  EXPECT_EQ(ms->budget_remaining.count, 1u);
  EXPECT_EQ(ms->budget_remaining.counts[0], 1u);
}

TEST(MetricsHistogramTest, AttemptsPerCallBucketsOneToTenThenInf) {
  Metrics m;
  internal::Record(m).CountAttemptsPerCall(MethodId{}, 1);
  internal::Record(m).CountAttemptsPerCall(MethodId{}, 3);
  internal::Record(m).CountAttemptsPerCall(MethodId{}, 25);
  MetricsSnapshot s = m.Snapshot();
  ASSERT_NE(s.method("other"), nullptr);
  const HistogramSnapshot& h = s.method("other")->attempts;
  EXPECT_EQ(h.counts[0], 1u);
  EXPECT_EQ(h.counts[2], 1u);
  EXPECT_EQ(h.counts[kMaxAttemptBuckets], 1u);
  EXPECT_DOUBLE_EQ(h.sum, 29);
  EXPECT_EQ(s.calls_with_attempts(1), 1u);
  EXPECT_EQ(s.calls_with_attempts(kMaxAttemptBuckets), 1u);  // 10 and more
}

// The default latency buckets: 2^(k/8) s from the first >= 1 ms to the first
// >= 60 s, so that a quantile read from them is within 4.5 %.
TEST(MetricsLatencyTest, DefaultBucketsGrowBy2ToTheEighthFrom1msTo60s) {
  Metrics m;
  const std::vector<double>& b = m.latency_bounds(LatencyKind::kServerCall);
  ASSERT_EQ(b.size(), 128u);
  EXPECT_GE(b.front(), 0.001);
  EXPECT_LT(b.front() / std::exp2(0.125), 0.001);
  EXPECT_GE(b.back(), 60.0);
  EXPECT_LT(b.back() / std::exp2(0.125), 60.0);
  for (size_t i = 1; i < b.size(); ++i) EXPECT_NEAR(b[i] / b[i - 1], std::exp2(0.125), 1e-12);
  // Powers of two are bounds, exactly (native histogram schema 3).
  EXPECT_NE(std::find(b.begin(), b.end(), 1.0), b.end());
  EXPECT_NE(std::find(b.begin(), b.end(), 0.5), b.end());
  EXPECT_NE(std::find(b.begin(), b.end(), 32.0), b.end());
}

// The computed bucket of each value agrees with the bounds: just below a
// bound is in its bucket, just above is in the next; a bound itself is in
// its own bucket (le means <=).
TEST(MetricsLatencyTest, ComputedBucketAgreesWithTheBoundsEverywhere) {
  // The default schema (3), the coarsest, and two finer ones, up to the
  // finest (8: 256 thresholds per power of two, the table's largest).
  const HistogramBuckets layouts[] = {
      HistogramBuckets{}, {0, 0.001, 60}, {5, 0.01, 10}, {8, 0.5, 1.5}};
  for (const HistogramBuckets& layout : layouts) {
    SCOPED_TRACE(layout.schema);
    MetricsOptions options;
    options.server_call_duration = layout;
    absl::StatusOr<std::unique_ptr<Metrics>> created = Metrics::Create(options);
    ASSERT_TRUE(created.ok()) << created.status();
    Metrics& m = **created;
    const std::vector<double> b = m.latency_bounds(LatencyKind::kServerCall);
    const MethodId other{};
    // 1e-4 of a bound: finer than the finest bucket (2^(1/256) - 1 = 0.27 %).
    for (double bound : b) {
      internal::Record(m).ObserveLatency(LatencyKind::kServerCall, other, absl::StatusCode::kOk,
                                         absl::Seconds(bound * (1 - 1e-4)));
      internal::Record(m).ObserveLatency(LatencyKind::kServerCall, other, absl::StatusCode::kOk,
                                         absl::Seconds(bound * (1 + 1e-4)));
    }
    const MetricsSnapshot s = m.Snapshot();
    const HistogramSnapshot* h =
        s.method("other")->latency_of(LatencyKind::kServerCall, absl::StatusCode::kOk);
    ASSERT_NE(h, nullptr);
    ASSERT_EQ(h->counts.size(), b.size() + 1);
    EXPECT_EQ(h->counts.front(), 1u);
    for (size_t i = 1; i < b.size(); ++i) EXPECT_EQ(h->counts[i], 2u) << "bucket le=" << b[i];
    EXPECT_EQ(h->counts.back(), 1u);  // just above the last bound
    EXPECT_EQ(h->count, 2 * b.size());
  }

  Metrics exact;
  const MethodId other{};
  const std::vector<double> b = exact.latency_bounds(LatencyKind::kServerCall);
  for (double bound : {0.5, 1.0, 2.0, 32.0}) {
    internal::Record(exact).ObserveLatency(LatencyKind::kServerCall, other, absl::StatusCode::kOk,
                                           absl::Seconds(bound));
  }
  const MetricsSnapshot e = exact.Snapshot();
  const HistogramSnapshot* eh =
      e.method("other")->latency_of(LatencyKind::kServerCall, absl::StatusCode::kOk);
  for (double bound : {0.5, 1.0, 2.0, 32.0}) {
    const size_t i = std::find(b.begin(), b.end(), bound) - b.begin();
    EXPECT_EQ(eh->counts[i], 1u) << bound;
  }
}

// Every schema, against a search of the bounds: values on both sides of
// each bound (to the nanosecond), and spread across each bucket, so that
// every cell of the mantissa table is read.
TEST(MetricsLatencyTest, ComputedBucketIsTheFirstBoundAtOrAboveForEverySchema) {
  for (int schema = 0; schema <= 8; ++schema) {
    SCOPED_TRACE(schema);
    MetricsOptions options;
    // Up to 512 buckets: a narrower range for the finest schemas.
    options.server_call_duration = {schema, schema < 8 ? 0.3 : 0.6, schema < 6 ? 20.0 : 1.9};
    absl::StatusOr<std::unique_ptr<Metrics>> created = Metrics::Create(options);
    ASSERT_TRUE(created.ok()) << created.status();
    Metrics& m = **created;
    const std::vector<double> b = m.latency_bounds(LatencyKind::kServerCall);
    std::vector<uint64_t> expected(b.size() + 1, 0);
    auto observe = [&](int64_t ns) {
      // The metric's own conversion: nanoseconds, then seconds as a double.
      const double seconds = static_cast<double>(ns) / 1e9;
      expected[std::lower_bound(b.begin(), b.end(), seconds) - b.begin()]++;
      internal::Record(m).ObserveLatency(LatencyKind::kServerCall, MethodId{},
                                         absl::StatusCode::kOk, absl::Nanoseconds(ns));
    };
    double previous = b.front() / 2;
    for (double bound : b) {
      const auto ns = static_cast<int64_t>(std::llround(bound * 1e9));
      for (int64_t d = -1; d <= 1; ++d) observe(ns + d);
      for (int i = 1; i < 16; ++i) {
        observe(std::llround((previous + (bound - previous) * i / 16) * 1e9));
      }
      previous = bound;
    }
    observe(std::llround(b.back() * 1.5e9));
    const MetricsSnapshot s = m.Snapshot();
    const HistogramSnapshot* h =
        s.method("other")->latency_of(LatencyKind::kServerCall, absl::StatusCode::kOk);
    ASSERT_NE(h, nullptr);
    EXPECT_EQ(h->counts, expected);
  }
}

TEST(MetricsLatencyTest, ZeroAndNegativeFallIntoTheFirstBucketInfiniteIntoTheLast) {
  Metrics m;
  const MethodId other{};
  internal::Record(m).ObserveLatency(LatencyKind::kClientAttempt, other, absl::StatusCode::kOk,
                                     absl::ZeroDuration());
  internal::Record(m).ObserveLatency(LatencyKind::kClientAttempt, other, absl::StatusCode::kOk,
                                     -absl::Seconds(1));
  internal::Record(m).ObserveLatency(LatencyKind::kClientAttempt, other, absl::StatusCode::kOk,
                                     absl::InfiniteDuration());
  internal::Record(m).ObserveLatency(LatencyKind::kClientAttempt, other, absl::StatusCode::kOk,
                                     absl::Minutes(5));
  const MetricsSnapshot s = m.Snapshot();
  const HistogramSnapshot* h =
      s.method("other")->latency_of(LatencyKind::kClientAttempt, absl::StatusCode::kOk);
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->counts.front(), 2u);
  EXPECT_EQ(h->counts.back(), 2u);
  EXPECT_EQ(h->count, 4u);
  EXPECT_DOUBLE_EQ(h->sum, 300.0);  // the infinite one adds nothing to the sum
}

// A plain channel's call is its one attempt: observed as both. An attempt of
// a retrying layer is an attempt only; the layer observes the logical call.
TEST(MetricsLatencyTest, PlainCallIsAttemptAndCallRetryAttemptIsAttemptOnly) {
  Metrics m;
  const MethodId other{};
  internal::Record(m).EndClientAttempt(other, absl::StatusCode::kOk, absl::Milliseconds(10),
                                       ClientCallKind::kPlainCall);
  internal::Record(m).EndClientAttempt(other, absl::StatusCode::kUnavailable,
                                       absl::Milliseconds(20), ClientCallKind::kRetryAttempt);
  internal::Record(m).EndClientAttempt(other, absl::StatusCode::kOk, absl::Milliseconds(30),
                                       ClientCallKind::kRetryAttempt);
  internal::Record(m).EndRetryingCall(other, absl::StatusCode::kOk, 2, absl::Milliseconds(55));
  internal::Record(m).EndServerCall(other, absl::StatusCode::kNotFound, absl::Milliseconds(7));
  const MetricsSnapshot s = m.Snapshot();
  const MethodSnapshot* o = s.method("other");
  ASSERT_NE(o, nullptr);
  const HistogramSnapshot* attempt_ok =
      o->latency_of(LatencyKind::kClientAttempt, absl::StatusCode::kOk);
  const HistogramSnapshot* attempt_unavailable =
      o->latency_of(LatencyKind::kClientAttempt, absl::StatusCode::kUnavailable);
  const HistogramSnapshot* call_ok = o->latency_of(LatencyKind::kClientCall, absl::StatusCode::kOk);
  const HistogramSnapshot* server =
      o->latency_of(LatencyKind::kServerCall, absl::StatusCode::kNotFound);
  ASSERT_TRUE(attempt_ok && attempt_unavailable && call_ok && server);
  EXPECT_EQ(attempt_ok->count, 2u);
  EXPECT_NEAR(attempt_ok->sum, 0.040, 1e-9);
  EXPECT_EQ(attempt_unavailable->count, 1u);
  EXPECT_EQ(call_ok->count, 2u);  // the plain call and the retrying one
  EXPECT_NEAR(call_ok->sum, 0.065, 1e-9);
  EXPECT_EQ(o->latency_of(LatencyKind::kClientCall, absl::StatusCode::kUnavailable), nullptr);
  EXPECT_EQ(server->count, 1u);
  EXPECT_EQ(s.calls[static_cast<int>(Side::kClient)], 3u);  // attempts
  EXPECT_EQ(s.calls[static_cast<int>(Side::kServer)], 1u);
  EXPECT_EQ(s.calls_with_attempts(2), 1u);
  EXPECT_EQ(o->succeeded_after_retry, 1u);
}

void ExpectSameHistogram(const HistogramSnapshot& got, const HistogramSnapshot& want) {
  EXPECT_EQ(got.bounds, want.bounds);
  EXPECT_EQ(got.counts, want.counts);
  EXPECT_EQ(got.count, want.count);
  EXPECT_DOUBLE_EQ(got.sum, want.sum);
}

void ExpectSameMethod(const MethodSnapshot& got, const MethodSnapshot& want) {
  EXPECT_EQ(got.calls, want.calls);
  EXPECT_EQ(got.calls_without_deadline, want.calls_without_deadline);
  ExpectSameHistogram(got.budget_at_arrival, want.budget_at_arrival);
  ExpectSameHistogram(got.request_budget, want.request_budget);
  ExpectSameHistogram(got.budget_remaining, want.budget_remaining);
  ASSERT_EQ(got.latency.size(), want.latency.size());
  for (size_t i = 0; i < got.latency.size(); ++i) {
    SCOPED_TRACE(absl::StrCat(got.latency[i].kind, " ", got.latency[i].code));
    EXPECT_EQ(got.latency[i].kind, want.latency[i].kind);
    EXPECT_EQ(got.latency[i].code, want.latency[i].code);
    ExpectSameHistogram(got.latency[i].seconds, want.latency[i].seconds);
  }
}

// The End*() calls and ObserveArrivalBudgets() store one observation where
// several series read it: what a snapshot shows must be what the separate
// counts and observations show, whether or not the histograms that share an
// observation have the same buckets.
TEST(MetricsSharedObservationTest, SnapshotIsThatOfSeparateCountsAndObservations) {
  MetricsOptions same;
  MetricsOptions different;
  different.client_call_duration = {/*schema=*/1, /*min_seconds=*/0.01, /*max_seconds=*/10};
  different.request_budget = {/*schema=*/2, /*min_seconds=*/0.005, /*max_seconds=*/20};
  const struct {
    absl::Duration at_arrival;
    absl::Duration request_budget;
  } arrivals[] = {
      {absl::Milliseconds(800), absl::Milliseconds(800)},    // no cap: one observation
      {absl::Milliseconds(800), absl::Milliseconds(300)},    // capped
      {absl::InfiniteDuration(), absl::Seconds(5)},          // no deadline, capped
      {absl::InfiniteDuration(), absl::InfiniteDuration()},  // no deadline at all
      {-absl::Milliseconds(2), -absl::Milliseconds(2)},      // arrived expired
  };
  for (const MetricsOptions& options : {same, different}) {
    SCOPED_TRACE(&options == &same ? "same buckets" : "different buckets");
    auto shared = *Metrics::Create(options);
    auto separate = *Metrics::Create(options);
    const MethodId m{};
    for (const auto& a : arrivals) {
      internal::Record(*shared).ObserveArrivalBudgets(m, a.at_arrival, a.request_budget);
      internal::Record(*separate).ObserveBudgetAtArrival(m, a.at_arrival);
      internal::Record(*separate).ObserveRequestBudget(m, a.request_budget);
    }
    const absl::StatusCode codes[] = {absl::StatusCode::kOk, absl::StatusCode::kDeadlineExceeded};
    for (absl::StatusCode code : codes) {
      for (absl::Duration d : {absl::Milliseconds(3), absl::Milliseconds(250), absl::Seconds(90)}) {
        internal::Record(*shared).EndServerCall(m, code, d);
        internal::Record(*separate).CountCallEnd(Side::kServer, m, code);
        internal::Record(*separate).ObserveLatency(LatencyKind::kServerCall, m, code, d);

        internal::Record(*shared).EndClientAttempt(m, code, d, ClientCallKind::kPlainCall);
        internal::Record(*separate).CountCallEnd(Side::kClient, m, code);
        internal::Record(*separate).ObserveLatency(LatencyKind::kClientAttempt, m, code, d);
        internal::Record(*separate).ObserveLatency(LatencyKind::kClientCall, m, code, d);

        internal::Record(*shared).EndClientAttempt(m, code, d / 2, ClientCallKind::kRetryAttempt);
        internal::Record(*separate).CountCallEnd(Side::kClient, m, code);
        internal::Record(*separate).ObserveLatency(LatencyKind::kClientAttempt, m, code, d / 2);
      }
    }
    // The primitives still work beside them, and add up with them.
    for (Metrics* both : {shared.get(), separate.get()}) {
      internal::Record(*both).CountCallEnd(Side::kServer, m, absl::StatusCode::kOk);
      internal::Record(*both).ObserveLatency(LatencyKind::kClientCall, m, absl::StatusCode::kOk,
                                             absl::Milliseconds(40));
      internal::Record(*both).ObserveBudgetAtArrival(m, absl::Milliseconds(70));
    }
    const MetricsSnapshot got = shared->Snapshot();
    const MetricsSnapshot want = separate->Snapshot();
    ASSERT_NE(got.method("other"), nullptr);
    ASSERT_NE(want.method("other"), nullptr);
    ExpectSameMethod(*got.method("other"), *want.method("other"));
    EXPECT_EQ(got.calls, want.calls);
    EXPECT_EQ(want.calls[static_cast<int>(Side::kClient)], 12u);  // the table is not empty
  }
}

// Only a success that needed a retry: not a first-attempt success, not a
// failure after retries.
TEST(MetricsTest, SuccessAfterRetryCountsOnlyOkCallsWithMoreThanOneAttempt) {
  Metrics m;
  internal::Record(m).EndRetryingCall(MethodId{}, absl::StatusCode::kOk, 1, absl::Milliseconds(1));
  internal::Record(m).EndRetryingCall(MethodId{}, absl::StatusCode::kUnavailable, 3,
                                      absl::Milliseconds(1));
  internal::Record(m).EndRetryingCall(MethodId{}, absl::StatusCode::kOk, 2, absl::Milliseconds(1));
  internal::Record(m).EndRetryingCall(MethodId{}, absl::StatusCode::kOk, 3, absl::Milliseconds(1));
  const MetricsSnapshot s = m.Snapshot();
  EXPECT_EQ(s.method("other")->succeeded_after_retry, 2u);
  EXPECT_THAT(FormatPrometheusText(s, "orders"),
              ::testing::HasSubstr("hopbudget_calls_succeeded_after_retry_total{method=\"other\","
                                   "role=\"application\"} 2\n"));
}

// The first observation of a (kind, method, code) allocates its buckets;
// threads racing on it must all be counted in the one that wins.
TEST(MetricsLatencyTest, ConcurrentFirstObservationsAreAllCounted) {
  Metrics m;
  const MethodId other{};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 5000; ++i) {
        internal::Record(m).ObserveLatency(LatencyKind::kServerCall, other,
                                           absl::StatusCode::kInternal,
                                           absl::Milliseconds(i % 100));
      }
    });
  }
  for (auto& t : threads) t.join();
  const MetricsSnapshot s = m.Snapshot();
  const HistogramSnapshot* h =
      s.method("other")->latency_of(LatencyKind::kServerCall, absl::StatusCode::kInternal);
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->count, 20000u);
  uint64_t in_buckets = 0;
  for (uint64_t n : h->counts) in_buckets += n;
  EXPECT_EQ(in_buckets, 20000u);
}

TEST(MetricsOptionsTest, BadBucketsAndPrefixesAreRefusedNamingTheField) {
  struct Case {
    const char* name;
    void (*spoil)(MetricsOptions&);
    const char* message;
  };
  const Case cases[] = {
      {"schema too big", [](MetricsOptions& o) { o.server_call_duration.schema = 9; },
       "MetricsOptions.server_call_duration.schema: 9 is outside 0..8"},
      {"negative schema", [](MetricsOptions& o) { o.budget_at_arrival.schema = -1; },
       "MetricsOptions.budget_at_arrival.schema: -1"},
      {"zero min", [](MetricsOptions& o) { o.request_budget.min_seconds = 0; },
       "MetricsOptions.request_budget.min_seconds: 0 is not a finite positive number"},
      {"max below min", [](MetricsOptions& o) { o.budget_remaining.max_seconds = 0.0005; },
       "MetricsOptions.budget_remaining.max_seconds: 0.0005 is not finite and above min_seconds"},
      {"infinite max", [](MetricsOptions& o) { o.client_call_duration.max_seconds = INFINITY; },
       "MetricsOptions.client_call_duration.max_seconds: inf"},
      {"too many buckets",
       [](MetricsOptions& o) {
         o.client_attempt_duration.schema = 8;
         o.client_attempt_duration.min_seconds = 1e-6;
       },
       "MetricsOptions.client_attempt_duration.schema: 8 from 1e-06 s to 60 s makes"},
      {"prefix without slash",
       [](MetricsOptions& o) { o.infrastructure_method_prefixes.push_back("demo.Admin/"); },
       "MetricsOptions.infrastructure_method_prefixes[3]: \"demo.Admin/\" does not start"},
  };
  for (const Case& c : cases) {
    MetricsOptions o;
    c.spoil(o);
    absl::StatusOr<std::unique_ptr<Metrics>> m = Metrics::Create(o);
    ASSERT_FALSE(m.ok()) << c.name;
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_NE(m.status().message().find(c.message), absl::string_view::npos)
        << c.name << ": " << m.status().message();
  }
  EXPECT_TRUE(Metrics::Create(MetricsOptions{}).ok());
}

// Each histogram has its own buckets: a coarser schema and a narrower range
// for one leave the others at the default.
TEST(MetricsOptionsTest, BucketsAreConfiguredPerHistogram) {
  MetricsOptions o;
  o.server_call_duration = {/*schema=*/0, /*min_seconds=*/0.01, /*max_seconds=*/10};
  o.budget_at_arrival = {/*schema=*/2, /*min_seconds=*/0.1, /*max_seconds=*/2};
  absl::StatusOr<std::unique_ptr<Metrics>> created = Metrics::Create(o);
  ASSERT_TRUE(created.ok()) << created.status();
  Metrics& m = **created;
  // 2^-7 = 0.0078 < 0.01 <= 2^-6 .. 2^4 = 16 >= 10: factor 2.
  EXPECT_EQ(m.latency_bounds(LatencyKind::kServerCall),
            (std::vector<double>{0.015625, 0.03125, 0.0625, 0.125, 0.25, 0.5, 1, 2, 4, 8, 16}));
  EXPECT_EQ(m.latency_bounds(LatencyKind::kClientCall).size(), 128u);
  const std::vector<double>& budget = m.budget_at_arrival_bounds();
  EXPECT_EQ(budget.size(), 18u);  // 2^(-13/4) = 0.105 .. 2^(4/4) = 2
  EXPECT_NEAR(budget.front(), 0.1051, 1e-4);
  EXPECT_EQ(budget.back(), 2.0);

  internal::Record(m).EndServerCall(MethodId{}, absl::StatusCode::kOk,
                                    absl::Milliseconds(300));  // (0.25, 0.5]
  internal::Record(m).ObserveBudgetAtArrival(MethodId{}, absl::Seconds(1));
  const MetricsSnapshot s = m.Snapshot();
  const HistogramSnapshot* h =
      s.method("other")->latency_of(LatencyKind::kServerCall, absl::StatusCode::kOk);
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->counts[5], 1u);
  EXPECT_EQ(s.method("other")->budget_at_arrival.bounds, budget);
}

TEST(MetricsShieldTest, EventsAndInFlightGauge) {
  Metrics m;
  internal::Record(m).CountShield(ShieldEvent::kStarted);
  internal::Record(m).AddShieldInFlight(1);
  internal::Record(m).CountShield(ShieldEvent::kRefused);
  MetricsSnapshot s = m.Snapshot();
  EXPECT_EQ(s.shield(ShieldEvent::kStarted), 1u);
  EXPECT_EQ(s.shield(ShieldEvent::kRefused), 1u);
  EXPECT_EQ(s.shield_in_flight, 1);
  internal::Record(m).AddShieldInFlight(-1);
  EXPECT_EQ(m.Snapshot().shield_in_flight, 0);
}

RecentCall Named(std::string method) {
  RecentCall c;
  c.method = std::move(method);
  return c;
}

TEST(MetricsRecentTest, KeepsTheNewestCallsNewestFirst) {
  FakeClock clock;
  Metrics m(&clock);
  for (int i = 0; i < kRecentCallCapacity + 5; ++i) {
    clock.Advance(kRecentCallInterval);
    internal::Record(m).RecordRecentCall(absl::StatusCode::kOk,
                                         internal::Record(m).SampleOnArrival(clock.Now()),
                                         [&] { return Named("m" + std::to_string(i)); });
  }
  std::vector<RecentCall> recent = m.RecentCalls();
  ASSERT_EQ(recent.size(), static_cast<size_t>(kRecentCallCapacity));
  EXPECT_EQ(recent.front().method, "m" + std::to_string(kRecentCallCapacity + 4));
  EXPECT_EQ(recent.back().method, "m5");
}

TEST(MetricsRecentTest, AtHighRatesKeepsASampleWithFailuresMoreOften) {
  FakeClock clock;
  Metrics m(&clock);
  int built = 0;
  // Each call arrives and finishes at the same instant.
  auto record = [&](absl::StatusCode code, std::string name) {
    internal::Record(m).RecordRecentCall(code, internal::Record(m).SampleOnArrival(clock.Now()),
                                         [&] {
                                           ++built;
                                           return Named(std::move(name));
                                         });
  };
  clock.Advance(absl::Seconds(1));
  record(absl::StatusCode::kOk, "first");             // kept: the first in a while
  record(absl::StatusCode::kOk, "same instant");      // dropped, never built
  record(absl::StatusCode::kDeadlineExceeded, "f1");  // kept: failures have their own pace
  clock.Advance(kRecentFailureInterval);
  record(absl::StatusCode::kOk, "too soon");     // dropped
  record(absl::StatusCode::kUnavailable, "f2");  // kept
  record(absl::StatusCode::kUnavailable, "f3");  // dropped
  clock.Advance(kRecentCallInterval);
  record(absl::StatusCode::kOk, "later");  // kept
  std::vector<std::string> names;
  for (const RecentCall& c : m.RecentCalls()) names.push_back(c.method);
  EXPECT_EQ(names, (std::vector<std::string>{"later", "f2", "f1", "first"}));
  EXPECT_EQ(built, 4);
}

TEST(MetricsRecentTest, EmptyRingGivesNothing) {
  Metrics m;
  EXPECT_TRUE(m.RecentCalls().empty());
}

TEST(MetricsLabelsTest, ConcurrentInterningGivesOneIndexPerValue) {
  Metrics m;
  std::vector<std::thread> threads;
  std::vector<int> seen(8);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&m, &seen, t] {
      for (int i = 0; i < 1000; ++i) {
        internal::Record(m).CountDeadlineExceeded(Side::kClient, DeadlineSource::kAttempt,
                                                  "orders");
      }
      seen[t] = 1;
    });
  }
  for (auto& t : threads) t.join();
  MetricsSnapshot s = m.Snapshot();
  EXPECT_EQ(s.deadline_exceeded(Side::kClient, DeadlineSource::kAttempt, "orders"), 8000u);
  EXPECT_EQ(s.deadline_exceeded_by_hop.size(), 1u);
}

}  // namespace
}  // namespace hopbudget

namespace hopbudget {
namespace {

TEST(FanOutMetricsTest, RacesHedgesAndSlotsAreCounted) {
  Metrics m;
  internal::Record(m).CountRace(RaceOutcome::kWon, 2);
  internal::Record(m).CountRace(RaceOutcome::kAllFailed, 0);
  internal::Record(m).CountHedgedCall(/*sent=*/2, /*winner=*/1, /*losers=*/1);
  internal::Record(m).CountHedgedCall(1, 0, 0);
  internal::Record(m).CountHedgedCall(1, -1, 0);
  internal::Record(m).CountHedgedCall(1, 0, 0);
  internal::Record(m).CountHedgeSkipped(HedgeOutcome::kNoBudget);
  internal::Record(m).CountHedgeSkipped(HedgeOutcome::kExtraLoad);
  internal::Record(m).CountHedgeSkipped(HedgeOutcome::kExtraLoad);
  internal::Record(m).ObserveSlotWait(absl::Milliseconds(3));
  internal::Record(m).ObserveSlotWait(absl::ZeroDuration());
  internal::Record(m).CountSlotRefusal(SlotRefusalReason::kNoTimeToWait);
  const MetricsSnapshot s = m.Snapshot();
  EXPECT_EQ(s.race(RaceOutcome::kWon), 1u);
  EXPECT_EQ(s.race(RaceOutcome::kAllFailed), 1u);
  EXPECT_EQ(s.race(RaceOutcome::kCancelled), 0u);
  EXPECT_EQ(s.race_losers_cancelled, 2u);
  EXPECT_EQ(s.hedged_calls, 4u);
  EXPECT_EQ(s.hedges_sent, 1u);
  EXPECT_EQ(s.hedges_won, 1u);
  EXPECT_EQ(s.hedge_losers_cancelled, 1u);
  EXPECT_DOUBLE_EQ(s.extra_load(), 0.25);
  EXPECT_EQ(s.hedge_skipped(HedgeOutcome::kNoBudget), 1u);
  EXPECT_EQ(s.hedge_skipped(HedgeOutcome::kExtraLoad), 2u);
  EXPECT_EQ(s.slot_wait.count, 2u);
  EXPECT_EQ(s.slot_wait.counts[0], 1u);  // the lowest bucket: the zero wait
  // 3 ms, in the first bucket whose bound is at or above it.
  const size_t three_ms = static_cast<size_t>(
      std::lower_bound(s.slot_wait.bounds.begin(), s.slot_wait.bounds.end(), 0.003) -
      s.slot_wait.bounds.begin());
  EXPECT_EQ(s.slot_wait.counts[three_ms], 1u);
  EXPECT_EQ(s.slot_refusals[static_cast<int>(SlotRefusalReason::kNoTimeToWait)], 1u);
  EXPECT_EQ(s.slot_refusals[static_cast<int>(SlotRefusalReason::kQueueFull)], 0u);
}

}  // namespace
}  // namespace hopbudget
