// Copyright hopbudget authors.
//
// The admission decisions, table-style, and the Admission state on a
// FakeClock: limit, queue order, expiry while queued, prediction. No sleeps.
#include "hopbudget/advanced/admission.h"

#include <limits>
#include <sstream>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hopbudget {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr absl::Duration kMs = absl::Milliseconds(1);
const absl::optional<absl::Duration> kUnknown = absl::nullopt;

struct ArrivalCase {
  const char* name;
  AdmissionState state;
  absl::Duration remaining;
  absl::optional<absl::Duration> predicted;
  ArrivalDecision want;
};

TEST(DecideArrivalTest, Table) {
  const ArrivalCase cases[] = {
      {"room and nobody waiting", {3, 4, 0, 10}, 100 * kMs, kUnknown, ArrivalDecision::kAdmit},
      {"at the limit: wait", {4, 4, 0, 10}, 100 * kMs, kUnknown, ArrivalDecision::kQueue},
      {"room but others wait: no jumping",
       {3, 4, 2, 10},
       100 * kMs,
       kUnknown,
       ArrivalDecision::kQueue},
      {"queue full", {4, 4, 10, 10}, 100 * kMs, kUnknown, ArrivalDecision::kShedQueueFull},
      {"no queue", {4, 4, 0, 0}, 100 * kMs, kUnknown, ArrivalDecision::kShedOverLimit},
      {"cannot finish", {0, 4, 0, 10}, 40 * kMs, 50 * kMs, ArrivalDecision::kShedCannotFinish},
      {"exactly the prediction fits", {0, 4, 0, 10}, 50 * kMs, 50 * kMs, ArrivalDecision::kAdmit},
      {"cannot finish beats queue full",
       {4, 4, 10, 10},
       1 * kMs,
       2 * kMs,
       ArrivalDecision::kShedCannotFinish},
      {"infinite budget always fits",
       {0, 4, 0, 10},
       absl::InfiniteDuration(),
       absl::Seconds(100),
       ArrivalDecision::kAdmit},
  };
  for (const ArrivalCase& c : cases) {
    EXPECT_EQ(DecideArrival(c.state, c.remaining, c.predicted), c.want) << c.name;
  }
}

TEST(QueueBoundTest, Table) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const struct {
    const char* name;
    int max_queue;
    double per_limit;
    int limit;
    int want;
  } cases[] = {
      {"the limit bounds a deep queue", 1024, 1, 40, 40},
      {"max_queue bounds a high limit", 16, 1, 40, 16},
      {"a multiple of the limit", 1024, 2, 40, 80},
      {"a fraction rounds up", 1024, 0.5, 3, 2},
      {"no queue stays no queue", 0, 1, 40, 0},
      {"a limit of 0 still lets one wait", 1024, 1, 0, 1},
      {"infinite per_limit: max_queue alone", 1024, kInf, 40, 1024},
      {"a huge per_limit does not overflow", 1024, 1e300, 40, 1024},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(QueueBound(c.max_queue, c.per_limit, c.limit), c.want) << c.name;
  }
}

TEST(PickQueueOrderTest, NewestFirstOnlyAfterSustainedQueue) {
  const absl::Time t0 = absl::UnixEpoch() + absl::Hours(1);
  const absl::Duration lifo_after = 100 * kMs;
  EXPECT_EQ(PickQueueOrder(absl::InfiniteFuture(), t0, lifo_after),
            QueueOrder::kEarliestDeadlineFirst);
  EXPECT_EQ(PickQueueOrder(t0, t0 + 99 * kMs, lifo_after), QueueOrder::kEarliestDeadlineFirst);
  EXPECT_EQ(PickQueueOrder(t0, t0 + 100 * kMs, lifo_after), QueueOrder::kNewestFirst);
  EXPECT_EQ(PickQueueOrder(t0, t0, absl::ZeroDuration()), QueueOrder::kNewestFirst);
}

// No slow start: these tests start from a hop past it (the slow start has
// its own tests below).
AdmissionPolicy Adaptive() {
  AdmissionPolicy p;
  p.limit = LimitKind::kAdaptive;
  p.max_in_flight = 20;
  p.min_limit = 2;
  p.max_limit = 100;
  p.slow_start_windows = 0;
  return p;
}

TEST(NextAdaptiveLimitTest, Table) {
  const AdmissionPolicy p = Adaptive();
  struct Case {
    const char* name;
    AdaptiveLimitState state;
    LimitWindow window;
    double want_limit_min, want_limit_max;
  } cases[] = {
      // Steady latency and a full limit: grows by sqrt(limit), smoothed 20 %.
      {"steady, busy: grows", {20, 0.010}, {10 * kMs, 20}, 20.5, 21.0},
      // Latency doubled (beyond the 1.5x tolerance): gradient 0.79.
      {"latency up 2x: shrinks", {20, 0.010}, {20 * kMs, 20}, 19.0, 19.3},
      // Far slower: the gradient is floored at 0.5.
      {"latency up 10x: floor", {20, 0.010}, {100 * kMs, 20}, 18.0, 18.0},
      // Never used half the limit: no growth past the start (20) ...
      {"idle: no growth", {20, 0.010}, {10 * kMs, 5}, 20.0, 20.0},
      {"idle above the start: no growth", {50, 0.010}, {10 * kMs, 5}, 50.0, 50.0},
      // ... and no shrinking, however slow: the slowness came from below.
      {"idle and slow: no shrinking", {20, 0.010}, {100 * kMs, 5}, 20.0, 20.0},
      // A limit an earlier slowdown lowered goes back to the start.
      {"idle below the start: back to it", {10, 0.010}, {10 * kMs, 4}, 20.0, 20.0},
      {"idle below the start, still slow: stays", {10, 0.010}, {100 * kMs, 4}, 10.0, 10.0},
      // Clamped to the policy's range.
      {"at max", {100, 0.010}, {10 * kMs, 100}, 100.0, 100.0},
      {"at min", {2, 0.010}, {1000 * kMs, 2}, 2.0, 2.0},
      {"nothing measured: unchanged", {20, 0.010}, {absl::ZeroDuration(), 20}, 20.0, 20.0},
  };
  for (const Case& c : cases) {
    const AdaptiveLimitState next = NextAdaptiveLimit(p, c.state, c.window);
    EXPECT_GE(next.limit, c.want_limit_min) << c.name;
    EXPECT_LE(next.limit, c.want_limit_max) << c.name;
  }
  // A sustained overload does not become the new normal: after 40 windows
  // at three times the unloaded handler time the limit is down by more than
  // 90 %, where a 5 % average would have followed (to 27 ms) and grown it
  // back.
  AdaptiveLimitState s{50, 0.010};
  for (int i = 0; i < 40; ++i) s = NextAdaptiveLimit(p, s, {30 * kMs, 50});
  EXPECT_LT(s.limit, 5.0);
  EXPECT_LT(s.long_seconds, 0.020);
  // Back to the unloaded time: the limit grows again.
  const AdaptiveLimitState after = NextAdaptiveLimit(p, s, {10 * kMs, 50});
  EXPECT_GT(after.limit, s.limit);
  // The first window sets the long-run average; a much faster one resets it.
  EXPECT_DOUBLE_EQ(NextAdaptiveLimit(p, {20, 0}, {10 * kMs, 20}).long_seconds, 0.010);
  EXPECT_DOUBLE_EQ(NextAdaptiveLimit(p, {20, 0.100}, {10 * kMs, 20}).long_seconds, 0.010);
}

// A callee restarted under light load (demo chain, 40 calls/s): each
// restart is one window in which the calls held for the callee fill two
// thirds of the limit and take 20x longer; between restarts the hop is
// lightly used at its normal time. The limit dips at a restart and is back
// after one quiet window: it used to lose a tenth at each restart for good,
// until the calls held by the next restart were more than it let in and
// were shed.
TEST(NextAdaptiveLimitTest, RestartsOfACalleeUnderLightLoadDoNotRatchetTheLimitDown) {
  AdmissionPolicy p = Adaptive();
  p.max_in_flight = 33;
  AdaptiveLimitState s{33, 0.010};
  for (int restart = 0; restart < 6; ++restart) {
    s = NextAdaptiveLimit(p, s, {200 * kMs, 23});
    EXPECT_GE(s.limit, 29.0) << "restart " << restart;
    s = NextAdaptiveLimit(p, s, {10 * kMs, 2});  // one quiet window
    EXPECT_DOUBLE_EQ(s.limit, 33.0) << "restart " << restart;
  }
}

// A cold hop whose limit starts below what its load needs (the demo
// gateway: 32, where its capacity needs about 120 calls in progress):
// while its handler time holds, each busy window doubles the limit, where
// growing by sqrt(limit) smoothed took 4 s from 32 to 128 and shed calls
// all that time.
TEST(NextAdaptiveLimitTest, ASlowStartDoublesTheLimitWhileHandlerTimeHolds) {
  AdmissionPolicy p = Adaptive();
  p.max_in_flight = 10;
  p.slow_start_windows = 20;
  AdaptiveLimitState s{10, 0, 0};
  s = NextAdaptiveLimit(p, s, {10 * kMs, 10});
  EXPECT_DOUBLE_EQ(s.limit, 20.0);
  s = NextAdaptiveLimit(p, s, {12 * kMs, 20});
  EXPECT_DOUBLE_EQ(s.limit, 40.0);
  s = NextAdaptiveLimit(p, s, {12 * kMs, 40});
  EXPECT_DOUBLE_EQ(s.limit, 80.0);
  s = NextAdaptiveLimit(p, s, {12 * kMs, 80});
  EXPECT_DOUBLE_EQ(s.limit, 100.0);  // max_limit
  EXPECT_EQ(s.windows, 4);
  // Without it: a fifth of sqrt(limit) a window.
  AdmissionPolicy plain = p;
  plain.slow_start_windows = 0;
  AdaptiveLimitState g{10, 0, 0};
  for (int i = 0; i < 4; ++i)
    g = NextAdaptiveLimit(plain, g, {10 * kMs, static_cast<int>(g.limit)});
  EXPECT_LT(g.limit, 14.0);
}

// The slow start ends at the first window whose handler time rose beyond
// the tolerance: that window shrinks the limit as Gradient2 does, and no
// later window doubles it. An idle window neither doubles nor ends it; the
// slow start ends after slow_start_windows windows in any case.
TEST(NextAdaptiveLimitTest, TheSlowStartEndsWhenHandlerTimeRises) {
  AdmissionPolicy p = Adaptive();
  p.slow_start_windows = 20;
  AdaptiveLimitState s{20, 0, 0};
  s = NextAdaptiveLimit(p, s, {10 * kMs, 20});
  EXPECT_DOUBLE_EQ(s.limit, 40.0);
  s = NextAdaptiveLimit(p, s, {10 * kMs, 5});  // idle: unchanged, still starting
  EXPECT_DOUBLE_EQ(s.limit, 40.0);
  EXPECT_EQ(s.windows, 2);
  s = NextAdaptiveLimit(p, s, {40 * kMs, 40});  // 4x slower: over
  EXPECT_LT(s.limit, 40.0);
  EXPECT_EQ(s.windows, 20);
  const double after = s.limit;
  s = NextAdaptiveLimit(p, s, {10 * kMs, static_cast<int>(after)});
  EXPECT_LT(s.limit, 2 * after - 1);  // sqrt growth now, not doubling
  // Windows count to the end of the slow start, and no further.
  AdaptiveLimitState q{20, 0, 0};
  for (int i = 0; i < 25; ++i) q = NextAdaptiveLimit(p, q, {10 * kMs, 5});
  EXPECT_EQ(q.windows, 20);
}

TEST(ValidateAdmissionPolicyTest, NamesTheBadField) {
  struct Case {
    const char* field;
    void (*mutate)(AdmissionPolicy&);
  } cases[] = {
      {"max_in_flight (0)", [](AdmissionPolicy& p) { p.max_in_flight = 0; }},
      {"max_in_flight (-3)", [](AdmissionPolicy& p) { p.max_in_flight = -3; }},
      {"max_queue (-1)", [](AdmissionPolicy& p) { p.max_queue = -1; }},
      {"queue_per_limit (0)", [](AdmissionPolicy& p) { p.queue_per_limit = 0; }},
      {"queue_per_limit (-1)", [](AdmissionPolicy& p) { p.queue_per_limit = -1; }},
      {"queue_per_limit (nan)", [](AdmissionPolicy& p) { p.queue_per_limit = std::nan(""); }},
      {"quantile (0)", [](AdmissionPolicy& p) { p.quantile = 0; }},
      {"quantile (1)", [](AdmissionPolicy& p) { p.quantile = 1; }},
      {"quantile (1.5)", [](AdmissionPolicy& p) { p.quantile = 1.5; }},
      {"quantile (nan)", [](AdmissionPolicy& p) { p.quantile = std::nan(""); }},
      {"lifo_after (-1ms)", [](AdmissionPolicy& p) { p.lifo_after = -kMs; }},
      {"pushback (-1ms)", [](AdmissionPolicy& p) { p.pushback = -kMs; }},
      {"max_wait (0)", [](AdmissionPolicy& p) { p.max_wait = absl::ZeroDuration(); }},
      {"overload_wait (0)", [](AdmissionPolicy& p) { p.overload_wait = absl::ZeroDuration(); }},
      {"predict_window (0)", [](AdmissionPolicy& p) { p.predict_window = 0; }},
      {"predict_min_samples (0)", [](AdmissionPolicy& p) { p.predict_min_samples = 0; }},
      {"predict_min_samples (200)", [](AdmissionPolicy& p) { p.predict_min_samples = 200; }},
      {"predict_stale_after (0)",
       [](AdmissionPolicy& p) { p.predict_stale_after = absl::ZeroDuration(); }},
      {"predict_stale_after (inf)",
       [](AdmissionPolicy& p) { p.predict_stale_after = absl::InfiniteDuration(); }},
      {"min_limit (0)",
       [](AdmissionPolicy& p) {
         p = Adaptive();
         p.min_limit = 0;
       }},
      {"max_limit (1)",
       [](AdmissionPolicy& p) {
         p = Adaptive();
         p.max_limit = 1;
       }},
      {"max_in_flight (200)",
       [](AdmissionPolicy& p) {
         p = Adaptive();
         p.max_in_flight = 200;
       }},
      {"latency_tolerance (1)",
       [](AdmissionPolicy& p) {
         p = Adaptive();
         p.latency_tolerance = 1;
       }},
      {"window_samples (0)",
       [](AdmissionPolicy& p) {
         p = Adaptive();
         p.window_samples = 0;
       }},
      {"window_handler_times (-1)",
       [](AdmissionPolicy& p) {
         p = Adaptive();
         p.window_handler_times = -1;
       }},
      {"slow_start_windows (-1)",
       [](AdmissionPolicy& p) {
         p = Adaptive();
         p.slow_start_windows = -1;
       }},
  };
  EXPECT_TRUE(ValidateAdmissionPolicy(AdmissionPolicy{}).ok());
  EXPECT_TRUE(ValidateAdmissionPolicy(Adaptive()).ok());
  for (const Case& c : cases) {
    AdmissionPolicy p;
    c.mutate(p);
    const absl::Status s = ValidateAdmissionPolicy(p);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.field));
  }
  // Create refuses the same, and a negative min_attempt_budget.
  AdmissionPolicy bad;
  bad.quantile = 2;
  EXPECT_FALSE(Admission::Create(bad, kMs).ok());
  EXPECT_FALSE(Admission::Create(AdmissionPolicy{}, -kMs).ok());
}

const absl::Time kT0 = absl::UnixEpoch() + absl::Hours(1);

TEST(LatencyPredictorTest, UnknownUntilEnoughSamplesThenTheQuantile) {
  AdmissionPolicy p;
  p.predict_window = 100;
  p.predict_min_samples = 10;
  p.quantile = 0.9;
  LatencyPredictor predictor(p);
  for (int i = 1; i <= 9; ++i) predictor.Record(i * kMs, kT0);
  EXPECT_EQ(predictor.Predicted(kT0), kUnknown);
  predictor.Record(10 * kMs, kT0);  // 1..10 ms: p90 is 9 ms
  EXPECT_EQ(predictor.Predicted(kT0), 9 * kMs);
  // The ring forgets: 100 samples of 50 ms replace the old ones.
  for (int i = 0; i < 112; ++i) predictor.Record(50 * kMs, kT0);
  EXPECT_EQ(predictor.Predicted(kT0), 50 * kMs);
}

TEST(LatencyPredictorTest, OffPredictsNothing) {
  AdmissionPolicy p;
  p.predict = false;
  LatencyPredictor predictor(p);
  for (int i = 0; i < 100; ++i) predictor.Record(kMs, kT0);
  EXPECT_EQ(predictor.Predicted(kT0), kUnknown);
}

// Issue 32: a hop that refuses every call as cannot-finish records no
// handler time; a prediction made during an overload must not outlive it.
TEST(LatencyPredictorTest, APredictionGoesStaleWithoutSamplesAndTheRingStartsAfresh) {
  AdmissionPolicy p;
  p.predict_window = 100;
  p.predict_min_samples = 10;
  p.predict_stale_after = absl::Seconds(1);
  LatencyPredictor predictor(p);
  for (int i = 0; i < 10; ++i) predictor.Record(450 * kMs, kT0);      // an overload
  EXPECT_EQ(predictor.Predicted(kT0 + absl::Seconds(1)), 450 * kMs);  // at the bound: current
  EXPECT_EQ(predictor.Predicted(kT0 + absl::Seconds(1) + kMs), kUnknown);
  // The next sample starts the ring again: the overload's samples are gone,
  // and min_samples new ones make the next prediction.
  const absl::Time later = kT0 + absl::Seconds(5);
  for (int i = 0; i < 9; ++i) predictor.Record(20 * kMs, later);
  EXPECT_EQ(predictor.Predicted(later), kUnknown);
  predictor.Record(20 * kMs, later);
  EXPECT_EQ(predictor.Predicted(later), 20 * kMs);
  // Samples that keep coming keep it current.
  for (int i = 1; i <= 5; ++i) predictor.Record(20 * kMs, later + i * 900 * kMs);
  EXPECT_EQ(predictor.Predicted(later + 5 * 900 * kMs + 900 * kMs), 20 * kMs);
}

class AdmissionTest : public ::testing::Test {
 protected:
  std::unique_ptr<Admission> Make(AdmissionPolicy p) {
    auto a = Admission::Create(p, kMinAttempt, &clock_);
    EXPECT_TRUE(a.ok()) << a.status();
    return *std::move(a);
  }
  static AdmissionPolicy Fixed(int limit, int queue) {
    AdmissionPolicy p;
    p.max_in_flight = limit;
    p.max_queue = queue;
    p.queue_per_limit = std::numeric_limits<double>::infinity();  // the queue asked for
    p.lifo_after = absl::Seconds(1);
    return p;
  }
  absl::Time In(absl::Duration d) const { return clock_.Now() + d; }
  // `rounds` busy rounds: 20 calls arrive, then all 20 end, each with
  // `finished_in` (nullopt: failed, no latency sample).
  // Rounds of 20 calls that run together and end after `finished_in` (a
  // failure: after 1 ms); the clock moves on with them.
  void BusyRounds(Admission& a, int rounds, absl::optional<absl::Duration> finished_in) {
    std::vector<Admission::Waiter> w(20);
    Admission::Ready ready;
    for (int round = 0; round < rounds; ++round) {
      for (auto& waiter : w) a.Arrive(&waiter, In(absl::Seconds(1)), nullptr, &others_);
      clock_.Advance(finished_in.value_or(absl::Milliseconds(1)));
      for (int i = 0; i < 20; ++i) a.Release(finished_in, &ready);
    }
  }

  static constexpr absl::Duration kMinAttempt = absl::Milliseconds(5);
  FakeClock clock_;
  Admission::Ready others_;
};

std::vector<int> Ids(const std::vector<Admission::Waiter*>& ws) {
  std::vector<int> ids;
  for (const auto* w : ws) ids.push_back(static_cast<int>(reinterpret_cast<intptr_t>(w->user)));
  return ids;
}

TEST_F(AdmissionTest, AdmitsUpToTheLimitThenQueuesThenShedsWhenFull) {
  auto a = Make(Fixed(2, 1));
  Admission::Waiter w[4];
  EXPECT_EQ(a->Arrive(&w[0], In(absl::Seconds(1)), nullptr, &others_), ArrivalDecision::kAdmit);
  EXPECT_EQ(a->Arrive(&w[1], In(absl::Seconds(1)), nullptr, &others_), ArrivalDecision::kAdmit);
  EXPECT_EQ(a->Arrive(&w[2], In(absl::Seconds(1)), nullptr, &others_), ArrivalDecision::kQueue);
  EXPECT_EQ(a->Arrive(&w[3], In(absl::Seconds(1)), nullptr, &others_),
            ArrivalDecision::kShedQueueFull);
  const AdmissionStats s = a->Stats();
  EXPECT_EQ(s.in_flight, 2);
  EXPECT_EQ(s.queued, 1);
  EXPECT_EQ(s.admitted, 2u);
  EXPECT_EQ(s.shed[static_cast<int>(ArrivalDecision::kShedQueueFull)], 1u);
}

TEST_F(AdmissionTest, NoMoreWaitThanTheLimitLetsInByDefault) {
  AdmissionPolicy p;  // queue_per_limit 1
  p.max_in_flight = 2;
  p.max_queue = 100;
  auto a = Make(p);
  Admission::Waiter w[5];
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(a->Arrive(&w[i], In(absl::Seconds(1)), nullptr, &others_), ArrivalDecision::kAdmit);
  }
  for (int i = 2; i < 4; ++i) {
    EXPECT_EQ(a->Arrive(&w[i], In(absl::Seconds(1)), nullptr, &others_), ArrivalDecision::kQueue);
  }
  EXPECT_EQ(a->Arrive(&w[4], In(absl::Seconds(1)), nullptr, &others_),
            ArrivalDecision::kShedQueueFull);
  EXPECT_EQ(a->Stats().queued, 2);
}

TEST_F(AdmissionTest, ReleaseHandsThePlaceToTheEarliestDeadline) {
  auto a = Make(Fixed(1, 10));
  Admission::Waiter running, late, early, middle;
  late.user = reinterpret_cast<void*>(1);
  early.user = reinterpret_cast<void*>(2);
  middle.user = reinterpret_cast<void*>(3);
  ASSERT_EQ(a->Arrive(&running, In(absl::Seconds(9)), nullptr, &others_), ArrivalDecision::kAdmit);
  ASSERT_EQ(a->Arrive(&late, In(absl::Seconds(3)), nullptr, &others_), ArrivalDecision::kQueue);
  ASSERT_EQ(a->Arrive(&early, In(absl::Seconds(1)), nullptr, &others_), ArrivalDecision::kQueue);
  ASSERT_EQ(a->Arrive(&middle, In(absl::Seconds(2)), nullptr, &others_), ArrivalDecision::kQueue);
  Admission::Ready ready;
  std::vector<int> order;
  for (int i = 0; i < 3; ++i) {
    a->Release(10 * kMs, &ready);
    ASSERT_EQ(ready.admitted.size(), 1u);
    order.push_back(Ids(ready.admitted)[0]);
  }
  EXPECT_THAT(order, ElementsAre(2, 3, 1));
  EXPECT_EQ(a->Stats().admitted_after_wait, 3u);
}

TEST_F(AdmissionTest, SustainedQueueServesNewestFirst) {
  AdmissionPolicy p = Fixed(1, 10);
  p.lifo_after = 100 * kMs;
  auto a = Make(p);
  Admission::Waiter running, w1, w2, w3;
  w1.user = reinterpret_cast<void*>(1);
  w2.user = reinterpret_cast<void*>(2);
  w3.user = reinterpret_cast<void*>(3);
  ASSERT_EQ(a->Arrive(&running, In(absl::Seconds(9)), nullptr, &others_), ArrivalDecision::kAdmit);
  ASSERT_EQ(a->Arrive(&w1, In(absl::Seconds(1)), nullptr, &others_), ArrivalDecision::kQueue);
  clock_.Advance(10 * kMs);
  ASSERT_EQ(a->Arrive(&w2, In(absl::Seconds(1)), nullptr, &others_), ArrivalDecision::kQueue);
  clock_.Advance(10 * kMs);
  ASSERT_EQ(a->Arrive(&w3, In(absl::Seconds(1)), nullptr, &others_), ArrivalDecision::kQueue);
  EXPECT_EQ(a->Stats().order, QueueOrder::kEarliestDeadlineFirst);
  clock_.Advance(100 * kMs);  // non-empty for 120 ms
  EXPECT_EQ(a->Stats().order, QueueOrder::kNewestFirst);
  Admission::Ready ready;
  a->Release(10 * kMs, &ready);
  EXPECT_THAT(Ids(ready.admitted), ElementsAre(3));
}

TEST_F(AdmissionTest, SustainedOverloadTurnsWaitersAwayAfterOverloadWait) {
  AdmissionPolicy p = Fixed(1, 100);
  p.lifo_after = 100 * kMs;
  p.overload_wait = 10 * kMs;
  auto a = Make(p);
  Admission::Waiter running, early, late;
  early.user = reinterpret_cast<void*>(1);
  late.user = reinterpret_cast<void*>(2);
  ASSERT_EQ(a->Arrive(&running, In(absl::Seconds(9)), nullptr, &others_), ArrivalDecision::kAdmit);
  // Queued before the overload began: it leaves when the overload begins,
  // not at its deadline (495 ms).
  ASSERT_EQ(a->Arrive(&early, In(500 * kMs), nullptr, &others_), ArrivalDecision::kQueue);
  EXPECT_EQ(early.expiry, In(100 * kMs));
  // The overload begins when the queue has not been empty for 100 ms: the
  // early waiter, 100 ms old by then, leaves at that moment.
  EXPECT_EQ(a->NextExpiry(), In(100 * kMs));
  clock_.Advance(99 * kMs);
  Admission::Ready ready;
  a->Expire(&ready);
  EXPECT_TRUE(ready.shed.empty());
  clock_.Advance(kMs);
  a->Expire(&ready);
  ASSERT_EQ(ready.shed.size(), 1u);
  EXPECT_EQ(ready.shed[0].first, &early);
  EXPECT_EQ(ready.shed[0].second, ArrivalDecision::kShedOverloadWait);
  // The queue is empty again: the next waiter starts a new 100 ms.
  ASSERT_EQ(a->Arrive(&late, In(500 * kMs), nullptr, &others_), ArrivalDecision::kQueue);
  EXPECT_EQ(a->NextExpiry(), In(100 * kMs));
  Admission::Waiter during;
  clock_.Advance(100 * kMs);
  // Arriving in the overload: at most overload_wait, whatever its deadline.
  ASSERT_EQ(a->Arrive(&during, In(500 * kMs), nullptr, &others_), ArrivalDecision::kQueue);
  EXPECT_EQ(during.expiry, In(10 * kMs));
  a->Expire(&ready);
  ASSERT_EQ(ready.shed.size(), 1u);  // `late`, 100 ms old
  EXPECT_EQ(ready.shed[0].first, &late);
  clock_.Advance(10 * kMs);
  a->Expire(&ready);
  ASSERT_EQ(ready.shed.size(), 1u);
  EXPECT_EQ(ready.shed[0].first, &during);
  EXPECT_EQ(ready.shed[0].second, ArrivalDecision::kShedOverloadWait);
  EXPECT_EQ(a->Stats().queued, 0);
}

TEST_F(AdmissionTest, OverloadWaitCanBeTurnedOff) {
  AdmissionPolicy p = Fixed(1, 100);
  p.lifo_after = 100 * kMs;
  p.overload_wait = absl::InfiniteDuration();
  auto a = Make(p);
  Admission::Waiter running, w;
  ASSERT_EQ(a->Arrive(&running, In(absl::Seconds(9)), nullptr, &others_), ArrivalDecision::kAdmit);
  ASSERT_EQ(a->Arrive(&w, In(500 * kMs), nullptr, &others_), ArrivalDecision::kQueue);
  EXPECT_EQ(a->NextExpiry(), w.deadline - kMinAttempt);
  clock_.Advance(400 * kMs);
  Admission::Ready ready;
  a->Expire(&ready);
  EXPECT_TRUE(ready.shed.empty());
}

TEST_F(AdmissionTest, WaiterExpiresWhenLessThanTheMinimumIsLeft) {
  auto a = Make(Fixed(1, 10));
  Admission::Waiter running, soon, later;
  soon.user = reinterpret_cast<void*>(1);
  ASSERT_EQ(a->Arrive(&running, In(absl::Seconds(9)), nullptr, &others_), ArrivalDecision::kAdmit);
  ASSERT_EQ(a->Arrive(&soon, In(50 * kMs), nullptr, &others_), ArrivalDecision::kQueue);
  ASSERT_EQ(a->Arrive(&later, In(absl::Seconds(1)), nullptr, &others_), ArrivalDecision::kQueue);
  EXPECT_EQ(a->NextExpiry(), In(45 * kMs));
  Admission::Ready ready;
  clock_.Advance(44 * kMs);
  a->Expire(&ready);
  EXPECT_TRUE(ready.shed.empty());
  clock_.Advance(2 * kMs);  // 4 ms left, below the 5 ms minimum
  a->Expire(&ready);
  ASSERT_EQ(ready.shed.size(), 1u);
  EXPECT_EQ(ready.shed[0].first, &soon);
  EXPECT_EQ(ready.shed[0].second, ArrivalDecision::kShedQueueExpired);
  EXPECT_EQ(a->Stats().queued, 1);
  EXPECT_EQ(a->NextExpiry(), later.deadline - kMinAttempt);
}

TEST_F(AdmissionTest, InfiniteDeadlineIsServedLastAndWaitsAtMostMaxWait) {
  auto a = Make(Fixed(1, 10));
  Admission::Waiter running, forever, bounded;
  forever.user = reinterpret_cast<void*>(1);
  bounded.user = reinterpret_cast<void*>(2);
  ASSERT_EQ(a->Arrive(&running, In(absl::Seconds(9)), nullptr, &others_), ArrivalDecision::kAdmit);
  ASSERT_EQ(a->Arrive(&forever, absl::InfiniteFuture(), nullptr, &others_),
            ArrivalDecision::kQueue);
  EXPECT_EQ(a->NextExpiry(), In(absl::Seconds(1)));  // max_wait
  ASSERT_EQ(a->Arrive(&bounded, In(absl::Hours(1)), nullptr, &others_), ArrivalDecision::kQueue);
  Admission::Ready ready;
  a->Release(kMs, &ready);
  EXPECT_THAT(Ids(ready.admitted), ElementsAre(2));
  a->Release(kMs, &ready);
  EXPECT_THAT(Ids(ready.admitted), ElementsAre(1));
}

TEST_F(AdmissionTest, WaiterWithBudgetLeftTimesOutAfterMaxWait) {
  AdmissionPolicy p = Fixed(1, 10);
  p.max_wait = 200 * kMs;
  auto a = Make(p);
  Admission::Waiter running, w;
  ASSERT_EQ(a->Arrive(&running, In(absl::Seconds(9)), nullptr, &others_), ArrivalDecision::kAdmit);
  ASSERT_EQ(a->Arrive(&w, In(absl::Seconds(5)), nullptr, &others_), ArrivalDecision::kQueue);
  EXPECT_EQ(a->NextExpiry(), In(200 * kMs));
  clock_.Advance(200 * kMs);
  Admission::Ready ready;
  a->Expire(&ready);
  ASSERT_EQ(ready.shed.size(), 1u);
  EXPECT_EQ(ready.shed[0].second, ArrivalDecision::kShedQueueTimeout);
  EXPECT_EQ(a->NextExpiry(), absl::InfiniteFuture());
}

TEST_F(AdmissionTest, WaiterThatCanNoLongerFinishIsShedWhenItsTurnComes) {
  auto a = Make(Fixed(1, 10));
  AdmissionPolicy learn_fast;
  learn_fast.predict_window = 1;
  learn_fast.predict_min_samples = 1;
  LatencyPredictor slow(learn_fast), quick(learn_fast);
  quick.Record(10 * kMs, clock_.Now());
  Admission::Waiter running, slow_method, fine;
  slow_method.user = reinterpret_cast<void*>(1);
  fine.user = reinterpret_cast<void*>(2);
  ASSERT_EQ(a->Arrive(&running, In(absl::Seconds(9)), nullptr, &others_), ArrivalDecision::kAdmit);
  // Nothing is known of the slow method when it arrives with 200 ms ...
  ASSERT_EQ(a->Arrive(&slow_method, In(200 * kMs), &slow, &others_), ArrivalDecision::kQueue);
  ASSERT_EQ(a->Arrive(&fine, In(absl::Seconds(1)), &quick, &others_), ArrivalDecision::kQueue);
  // ... it has learnt 150 ms when its turn comes with 100 ms left.
  slow.Record(150 * kMs, clock_.Now());
  clock_.Advance(100 * kMs);
  Admission::Ready ready;
  a->Release(kMs, &ready);
  ASSERT_EQ(ready.shed.size(), 1u);
  EXPECT_EQ(ready.shed[0].first, &slow_method);
  EXPECT_EQ(ready.shed[0].second, ArrivalDecision::kShedCannotFinish);
  EXPECT_THAT(Ids(ready.admitted), ElementsAre(2));  // the place went on to the next
  EXPECT_EQ(a->Stats().in_flight, 1);
}

TEST_F(AdmissionTest, CallThatCannotFinishIsShedOnArrivalWhateverTheRoom) {
  auto a = Make(Fixed(4, 10));
  AdmissionPolicy learn_fast;
  learn_fast.predict_window = 1;
  learn_fast.predict_min_samples = 1;
  LatencyPredictor predictor(learn_fast);
  predictor.Record(50 * kMs, clock_.Now());
  Admission::Waiter w;
  EXPECT_EQ(a->Arrive(&w, In(40 * kMs), &predictor, &others_), ArrivalDecision::kShedCannotFinish);
  EXPECT_EQ(a->Arrive(&w, In(60 * kMs), &predictor, &others_), ArrivalDecision::kAdmit);
  EXPECT_EQ(a->Stats().shed[static_cast<int>(ArrivalDecision::kShedCannotFinish)], 1u);
}

// Issue 32: after an overload taught the prediction 450 ms, every call with
// 300 ms is refused as cannot-finish, so no handler time is recorded; once
// predict_stale_after has passed without a sample, calls are admitted again
// (and teach it afresh) instead of being refused for good.
TEST_F(AdmissionTest, ARefusalThatStopsAllSamplesEndsWhenThePredictionGoesStale) {
  auto a = Make(Fixed(4, 10));
  AdmissionPolicy p;
  p.predict_window = 8;
  p.predict_min_samples = 1;
  p.predict_stale_after = absl::Seconds(1);
  LatencyPredictor predictor(p);
  predictor.Record(450 * kMs, clock_.Now());
  Admission::Waiter w;
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(a->Arrive(&w, In(300 * kMs), &predictor, &others_),
              ArrivalDecision::kShedCannotFinish);
    clock_.Advance(200 * kMs);
  }
  clock_.Advance(1 * kMs);  // 1.001 s without a sample
  EXPECT_EQ(a->Arrive(&w, In(300 * kMs), &predictor, &others_), ArrivalDecision::kAdmit);
}

TEST_F(AdmissionTest, LeaveRemovesAWaiterOnceOnly) {
  auto a = Make(Fixed(1, 10));
  Admission::Waiter running, gone, next;
  next.user = reinterpret_cast<void*>(2);
  ASSERT_EQ(a->Arrive(&running, In(absl::Seconds(9)), nullptr, &others_), ArrivalDecision::kAdmit);
  ASSERT_EQ(a->Arrive(&gone, In(absl::Seconds(1)), nullptr, &others_), ArrivalDecision::kQueue);
  ASSERT_EQ(a->Arrive(&next, In(absl::Seconds(2)), nullptr, &others_), ArrivalDecision::kQueue);
  EXPECT_TRUE(a->Leave(&gone));
  EXPECT_FALSE(a->Leave(&gone));
  Admission::Ready ready;
  a->Release(kMs, &ready);
  EXPECT_THAT(Ids(ready.admitted), ElementsAre(2));
  EXPECT_FALSE(a->Leave(&next));  // already admitted
}

TEST(AdaptiveWindowClosesTest, Table) {
  AdmissionPolicy p = Adaptive();
  p.window_samples = 50;
  p.window_handler_times = 2;
  AdmissionPolicy samples_only = p;
  samples_only.window_handler_times = 0;
  struct Case {
    const char* name;
    const AdmissionPolicy* policy;
    int samples;
    absl::Duration lasted;
    double long_seconds;
    bool closes;
  } cases[] = {
      {"too few completions", &p, 49, absl::Seconds(10), 0.02, false},
      {"the first window: no handler time yet", &p, 50, absl::ZeroDuration(), 0, true},
      {"shorter than two handler times", &p, 50, absl::Milliseconds(39), 0.02, false},
      {"two handler times", &p, 50, absl::Milliseconds(40), 0.02, true},
      {"still open at the next multiple", &p, 100, absl::Milliseconds(30), 0.02, false},
      {"longer, with more completions", &p, 150, absl::Milliseconds(60), 0.02, true},
      {"samples only (0): closes at once", &samples_only, 50, absl::ZeroDuration(), 0.02, true},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(AdaptiveWindowCloses(*c.policy, c.samples, c.lasted, c.long_seconds), c.closes)
        << c.name;
  }
}

// Completions that come faster than the hop's handler time do not close a
// window each: after the first, the limit moves at most once per two
// handler times, however many calls end in between.
TEST_F(AdmissionTest, AdaptiveLimitMovesAtMostOncePerTwoHandlerTimes) {
  AdmissionPolicy p = Adaptive();
  p.window_samples = 10;
  auto a = Make(p);
  BusyRounds(*a, 1, 10 * kMs);  // the first window closes: the hop takes 10 ms
  const int first = a->limit();
  // 100 more completions within 10 ms: one window's worth of time at most.
  std::vector<Admission::Waiter> w(20);
  Admission::Ready ready;
  for (int round = 0; round < 5; ++round) {
    for (auto& waiter : w) a->Arrive(&waiter, In(absl::Seconds(1)), nullptr, &others_);
    clock_.Advance(2 * kMs);
    for (int i = 0; i < 20; ++i) a->Release(50 * kMs, &ready);  // much slower now
  }
  EXPECT_EQ(a->limit(), first);  // 10 ms passed: no window closed yet
  clock_.Advance(10 * kMs);
  for (auto& waiter : w) a->Arrive(&waiter, In(absl::Seconds(1)), nullptr, &others_);
  for (int i = 0; i < 20; ++i) a->Release(50 * kMs, &ready);
  EXPECT_LT(a->limit(), first);  // 20 ms: it closed, once, and the limit shrank
}

TEST_F(AdmissionTest, NoQueueShedsOverTheLimitAtOnce) {
  auto a = Make(Fixed(1, 0));
  Admission::Waiter w1, w2;
  EXPECT_EQ(a->Arrive(&w1, In(absl::Seconds(1)), nullptr, &others_), ArrivalDecision::kAdmit);
  EXPECT_EQ(a->Arrive(&w2, In(absl::Seconds(1)), nullptr, &others_),
            ArrivalDecision::kShedOverLimit);
}

TEST_F(AdmissionTest, AdaptiveLimitShrinksWhenHandlersSlowDown) {
  AdmissionPolicy p = Adaptive();
  p.window_samples = 10;
  auto a = Make(p);
  BusyRounds(*a, 3, 10 * kMs);  // busy windows at 10 ms: the limit grows
  const int grown = a->limit();
  EXPECT_GT(grown, 20);
  BusyRounds(*a, 3, 50 * kMs);  // handlers take 5x longer: the limit shrinks
  EXPECT_LT(a->limit(), grown - 3);
  EXPECT_GE(a->limit(), p.min_limit);
}

// A failed or cancelled call is no latency sample: a burst of them (fast,
// under overload) neither closes a window nor reads as a faster hop, so the
// limit learned from finished work stays where that work put it.
TEST_F(AdmissionTest, FailuresAreNoLatencySamplesForTheAdaptiveLimit) {
  AdmissionPolicy p = Adaptive();
  p.window_samples = 10;
  auto a = Make(p);
  BusyRounds(*a, 3, 30 * kMs);  // finished work at 30 ms: the limit grows
  const int grown = a->limit();
  EXPECT_GT(grown, 20);
  // Many failures: in progress goes down, the limit does not move.
  BusyRounds(*a, 5, absl::nullopt);
  EXPECT_EQ(a->in_flight(), 0);
  EXPECT_EQ(a->limit(), grown);
  // Finished work at its old 30 ms again: no shrinking, as if the failures
  // had taught that the hop takes 1 ms.
  BusyRounds(*a, 3, 30 * kMs);
  EXPECT_GE(a->limit(), grown);
}

// Many threads arriving and releasing: every admitted call is released once,
// nobody is stranded in the queue while places are free, and the counts add
// up. (Races show up under the sanitizers.)
TEST_F(AdmissionTest, ConcurrentArrivalsAndReleasesStrandNobody) {
  auto a = Make(Fixed(4, 100000));
  constexpr int kThreads = 4, kPerThread = 2000;
  // Waiters outlive every thread: one thread's release admits another's.
  std::vector<Admission::Waiter> ws(kThreads * kPerThread);
  std::atomic<int> started{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Admission::Ready others, ready;
      // Each thread runs up to two admitted calls at a time, so that the
      // limit is reached and the queue is used all the time.
      std::vector<Admission::Waiter*> running;
      auto admit = [&](const std::vector<Admission::Waiter*>& ws_admitted) {
        started.fetch_add(static_cast<int>(ws_admitted.size()));
        running.insert(running.end(), ws_admitted.begin(), ws_admitted.end());
      };
      auto release_one = [&] {
        running.erase(running.begin());
        a->Release(kMs, &ready);
        admit(ready.admitted);
      };
      for (int i = 0; i < kPerThread; ++i) {
        Admission::Waiter* w = &ws[t * kPerThread + i];
        const ArrivalDecision d = a->Arrive(w, absl::InfiniteFuture(), nullptr, &others);
        admit(others.admitted);
        if (d == ArrivalDecision::kAdmit) admit({w});
        while (running.size() > 2) release_one();
      }
      while (!running.empty()) release_one();
    });
  }
  for (auto& t : threads) t.join();
  const AdmissionStats s = a->Stats();
  EXPECT_EQ(s.queued, 0);
  EXPECT_EQ(s.in_flight, 0);
  EXPECT_EQ(started.load(), kThreads * kPerThread);
}

TEST(ArrivalDecisionTest, NamesAreTheMetricLabels) {
  EXPECT_EQ(ArrivalDecisionName(ArrivalDecision::kShedCannotFinish), "cannot_finish");
  EXPECT_EQ(ArrivalDecisionName(ArrivalDecision::kShedQueueExpired), "queue_expired");
  std::ostringstream os;
  os << ArrivalDecision::kShedQueueFull;
  EXPECT_EQ(os.str(), "queue_full");
  EXPECT_EQ(QueueOrderName(QueueOrder::kNewestFirst), "newest_first");
}

}  // namespace
}  // namespace hopbudget
