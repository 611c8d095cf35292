// Copyright hopbudget authors.
//
// The admission gate's method table (interceptors/grpc/admission_gate.h,
// internal): which methods admission covers, one state per method name
// whatever string holds the name, one shared state past the table's
// capacity, and one state per name when many threads look up at once. No
// network; a FakeClock and a timer service without a thread.
#include "admission_gate.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hopbudget/clock.h"

namespace hopbudget {
namespace internal {
namespace {

class AdmissionGateTest : public ::testing::Test {
 protected:
  std::unique_ptr<AdmissionGate> Gate(std::vector<std::string> methods) {
    AdmissionOptions o;
    o.enabled = true;
    o.methods = std::move(methods);
    auto gate = AdmissionGate::Create(o, absl::Milliseconds(5), &clock_, &timers_);
    EXPECT_TRUE(gate.ok()) << gate.status();
    return *std::move(gate);
  }

  FakeClock clock_;
  TimerService timers_{clock_, [] {
                         TimerService::Options o;
                         o.start_thread = false;
                         return o;
                       }()};
};

TEST_F(AdmissionGateTest, EveryMethodButGrpcsOwnIsCoveredWhenNoneAreListed) {
  auto gate = Gate({});
  const AdmissionGate::Method& m = gate->For("/echo.Relay/Call");
  EXPECT_TRUE(m.covered);
  EXPECT_NE(m.predictor, nullptr);
  EXPECT_FALSE(gate->For("/grpc.health.v1.Health/Check").covered);
  EXPECT_FALSE(gate->For(nullptr).covered);
}

TEST_F(AdmissionGateTest, OnlyListedMethodsAreCovered) {
  auto gate = Gate({"/echo.Relay/Call", "/grpc.health.v1.Health/Check"});
  EXPECT_TRUE(gate->For("/echo.Relay/Call").covered);
  EXPECT_FALSE(gate->For("/echo.Relay/Watch").covered);
  EXPECT_EQ(gate->For("/echo.Relay/Watch").predictor, nullptr);
  // gRPC's own services are never held back, even when listed.
  EXPECT_FALSE(gate->For("/grpc.health.v1.Health/Check").covered);
}

// A generic service hands each call its own copy of the method name: the
// state is the name's, not the pointer's (one predictor learns the method).
TEST_F(AdmissionGateTest, CopiesOfOneNameFindOneState) {
  auto gate = Gate({});
  const std::string a = "/echo.Relay/Call";
  const std::string b = a;
  ASSERT_NE(a.c_str(), b.c_str());
  EXPECT_EQ(&gate->For(a.c_str()), &gate->For(b.c_str()));
  EXPECT_NE(&gate->For(a.c_str()), &gate->For("/echo.Relay/Watch"));
}

TEST_F(AdmissionGateTest, NamesPastTheCapacityShareOneCoveredState) {
  auto gate = Gate({});
  std::vector<const AdmissionGate::Method*> seen;
  for (int i = 0; i < AdmissionGate::kMaxMethods + 10; ++i) {
    const std::string name = absl::StrCat("/svc.S/M", i);
    const AdmissionGate::Method& m = gate->For(name.c_str());
    ASSERT_TRUE(m.covered) << name;
    ASSERT_NE(m.predictor, nullptr) << name;
    seen.push_back(&m);
  }
  // The first kMaxMethods - 1 have their own; the rest share one.
  for (int i = 1; i < AdmissionGate::kMaxMethods - 1; ++i) EXPECT_NE(seen[i], seen[i - 1]) << i;
  const AdmissionGate::Method* shared = seen[AdmissionGate::kMaxMethods - 1];
  EXPECT_NE(seen[AdmissionGate::kMaxMethods - 2], shared);
  for (size_t i = AdmissionGate::kMaxMethods - 1; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i], shared) << i;
  }
  // Still the same state for a name seen early.
  EXPECT_EQ(&gate->For("/svc.S/M0"), seen[0]);
}

// Threads that see new names at the same moment agree on one state per name
// (TSan checks the publication).
TEST_F(AdmissionGateTest, ConcurrentFirstSightsAgreeOnOneStatePerName) {
  auto gate = Gate({});
  constexpr int kThreads = 8, kNames = 32;
  std::vector<std::string> names;
  for (int i = 0; i < kNames; ++i) names.push_back(absl::StrCat("/svc.S/Concurrent", i));
  std::vector<std::vector<const AdmissionGate::Method*>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 100; ++round) {
        for (int i = 0; i < kNames; ++i) {
          // Each thread its own copy of the name, in its own order.
          const std::string name = names[(i + t) % kNames];
          const AdmissionGate::Method& m = gate->For(name.c_str());
          if (round == 0) got[t].push_back(&m);
          m.predictor->Predicted();
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kNames; ++i) {
      EXPECT_EQ(got[t][i], &gate->For(names[(i + t) % kNames].c_str())) << t << " " << i;
    }
  }
}

}  // namespace
}  // namespace internal
}  // namespace hopbudget
