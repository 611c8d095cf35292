// Copyright hopbudget authors.
//
// Client-side adaptive throttling: the pure decision, the classification of
// answers, and the windowed counts on a FakeClock.

#include "hopbudget/advanced/client_throttle.h"

#include <sstream>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hopbudget {
namespace {

using ::testing::HasSubstr;

TEST(ClientRejectProbabilityTest, Table) {
  struct Case {
    const char* name;
    double requests, accepts, k, want;
  } cases[] = {
      {"nothing seen", 0, 0, 2, 0},
      {"everything accepted", 100, 100, 2, 0},
      {"half accepted, k 2: at the edge", 100, 50, 2, 0},
      {"a quarter accepted, k 2", 100, 25, 2, 50.0 / 101},
      {"nothing accepted", 100, 0, 2, 100.0 / 101},
      {"a quarter accepted, k 1", 100, 25, 1, 75.0 / 101},
      {"negative counts are zero", -5, -5, 2, 0},
  };
  for (const Case& c : cases) {
    EXPECT_DOUBLE_EQ(ClientRejectProbability(c.requests, c.accepts, c.k), c.want) << c.name;
  }
}

TEST(DecideClientThrottleTest, RejectsBelowTheProbabilityOnly) {
  // p = 50 / 101 ~ 0.495
  EXPECT_EQ(DecideClientThrottle(100, 25, 2, 0.0), ThrottleDecision::kRejectLocally);
  EXPECT_EQ(DecideClientThrottle(100, 25, 2, 0.49), ThrottleDecision::kRejectLocally);
  EXPECT_EQ(DecideClientThrottle(100, 25, 2, 0.5), ThrottleDecision::kSend);
  // Never rejects while the backend accepts enough, whatever the draw.
  EXPECT_EQ(DecideClientThrottle(100, 60, 2, 0.0), ThrottleDecision::kSend);
}

TEST(BackendAnswerOfTest, OverloadCodesAreRefusals) {
  for (absl::StatusCode code :
       {absl::StatusCode::kResourceExhausted, absl::StatusCode::kUnavailable,
        absl::StatusCode::kDeadlineExceeded}) {
    EXPECT_EQ(BackendAnswerOf(code), BackendAnswer::kRejected) << code;
  }
  for (absl::StatusCode code :
       {absl::StatusCode::kOk, absl::StatusCode::kNotFound, absl::StatusCode::kInvalidArgument,
        absl::StatusCode::kInternal, absl::StatusCode::kCancelled}) {
    EXPECT_EQ(BackendAnswerOf(code), BackendAnswer::kAccepted) << code;
  }
}

TEST(ClientThrottleTest, BadPolicyIsRefusedNamingTheField) {
  FakeClock clock;
  struct Case {
    const char* field;
    ClientThrottlePolicy policy;
  } cases[] = {
      {"k", {0.5, absl::Minutes(2), 20}},
      {"k", {std::numeric_limits<double>::quiet_NaN(), absl::Minutes(2), 20}},
      {"k", {std::numeric_limits<double>::infinity(), absl::Minutes(2), 20}},
      {"window", {2, absl::ZeroDuration(), 20}},
      {"window", {2, absl::InfiniteDuration(), 20}},
      {"buckets", {2, absl::Minutes(2), 0}},
      {"buckets", {2, absl::Minutes(2), 1001}},
      {"window / buckets", {2, absl::Nanoseconds(500), 1}},
  };
  for (const Case& c : cases) {
    auto t = ClientThrottle::Create(c.policy, &clock);
    ASSERT_FALSE(t.ok()) << c.field;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(t.status().message(), HasSubstr(c.field));
  }
  EXPECT_FALSE(ClientThrottle::Create({}, nullptr).ok());
  EXPECT_TRUE(ClientThrottle::Create({}, &clock).ok());
}

TEST(ClientThrottleTest, HealthyBackendIsNeverThrottled) {
  FakeClock clock;
  auto t = *ClientThrottle::Create({}, &clock);
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(t->Decide(0.0), ThrottleDecision::kSend) << i;  // the draw most likely to reject
    t->Record(BackendAnswer::kAccepted);
    clock.Advance(absl::Milliseconds(10));
  }
  EXPECT_EQ(t->RejectProbability(), 0.0);
}

TEST(ClientThrottleTest, BackendAtFourTimesItsCapacitySeesAboutTwice) {
  // The backend accepts one request in four it receives. Draws spread
  // evenly over [0, 1) stand for the caller's generator.
  FakeClock clock;
  auto t = *ClientThrottle::Create({}, &clock);
  int sent = 0, accepted_total = 0;
  const int kRequests = 20000;
  for (int i = 0; i < kRequests; ++i) {
    const double draw = static_cast<double>((i * 7919) % 1000) / 1000.0;
    if (t->Decide(draw) == ThrottleDecision::kSend) {
      ++sent;
      // Accept while this backend has capacity: a quarter of the requests
      // the application makes.
      const bool accept = accepted_total * 4 < i + 1;
      if (accept) ++accepted_total;
      t->Record(accept ? BackendAnswer::kAccepted : BackendAnswer::kRejected);
    }
    clock.Advance(absl::Milliseconds(1));
  }
  // k = 2: sent ~ 2 x accepted, so the backend answers about one refusal per
  // request it serves instead of three.
  const double ratio = static_cast<double>(sent) / accepted_total;
  EXPECT_GT(ratio, 1.8);
  EXPECT_LT(ratio, 2.3);
  EXPECT_NEAR(accepted_total, kRequests / 4, kRequests / 40);
}

TEST(ClientThrottleTest, CallsInFlightAtTheStartAreNotRefused) {
  // 50 calls go out before the first answer comes back: none is refused,
  // whatever the draw, since nothing has been refused by the backend yet.
  FakeClock clock;
  auto t = *ClientThrottle::Create({}, &clock);
  for (int i = 0; i < 50; ++i) ASSERT_EQ(t->Decide(0.0), ThrottleDecision::kSend) << i;
  EXPECT_EQ(t->InWindow().requests, 0);
  for (int i = 0; i < 50; ++i) t->Record(BackendAnswer::kAccepted);
  EXPECT_EQ(t->InWindow().requests, 50);
  EXPECT_EQ(t->InWindow().accepts, 50);
}

TEST(ClientThrottleTest, CountsLeaveTheWindowAndTheThrottleLetsGo) {
  FakeClock clock;
  ClientThrottlePolicy policy;
  policy.window = absl::Seconds(10);
  policy.buckets = 10;
  auto t = *ClientThrottle::Create(policy, &clock);
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(t->Decide(0.99), ThrottleDecision::kSend);
    t->Record(BackendAnswer::kRejected);
  }
  EXPECT_EQ(t->InWindow().requests, 100);
  EXPECT_EQ(t->InWindow().accepts, 0);
  EXPECT_GT(t->RejectProbability(), 0.9);
  // Still inside the window 9 s later (the same bucket is 9 buckets back).
  clock.Advance(absl::Seconds(9));
  EXPECT_EQ(t->InWindow().requests, 100);
  // One bucket width later the old bucket has left whole: nothing counts.
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(t->InWindow().requests, 0);
  EXPECT_EQ(t->RejectProbability(), 0.0);
  EXPECT_EQ(t->Decide(0.0), ThrottleDecision::kSend);
  t->Record(BackendAnswer::kAccepted);
  // A bucket reused for a later epoch starts from zero.
  EXPECT_EQ(t->InWindow().requests, 1);
}

TEST(ClientThrottleTest, ConcurrentCountsAreNotLost) {
  FakeClock clock;
  auto t = *ClientThrottle::Create({}, &clock);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      for (int j = 0; j < 10000; ++j) {
        (void)t->Decide(0.99);
        t->Record(BackendAnswer::kAccepted);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(t->InWindow().requests, 40000);
  EXPECT_EQ(t->InWindow().accepts, 40000);
}

TEST(ClientThrottleTest, NamesPrint) {
  std::ostringstream os;
  os << ThrottleDecision::kRejectLocally << " " << BackendAnswer::kRejected;
  EXPECT_EQ(os.str(), "reject_locally rejected");
  EXPECT_EQ(ThrottleDecisionName(ThrottleDecision::kSend), "send");
  EXPECT_EQ(BackendAnswerName(BackendAnswer::kAccepted), "accepted");
}

}  // namespace
}  // namespace hopbudget
