// Copyright hopbudget authors.
//
// test_hop.h: the tests' one way to make a hopbudget::Hop that the test
// expects to be made. Hop::Create's refusal is a non-fatal test failure that
// prints Create's status, and the answer is nullptr; the caller asserts on
// it:
//
//   std::unique_ptr<Hop> hop = testing::MakeTestHop("orders", &metrics, config);
//   ASSERT_NE(hop, nullptr);
//
// A test of Hop::Create's refusals (hop_test.cc) calls Hop::Create itself.
//
// Ownership: `metrics` and `clock` are not owned (nullptr: the Hop's
// defaults, Metrics::Default() and Clock::Real()) and must outlive the Hop,
// as HopOptions says (hop.h); the caller owns the Hop.
#ifndef HOPBUDGET_TESTS_TEST_HOP_H_
#define HOPBUDGET_TESTS_TEST_HOP_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "hopbudget/advanced/clock.h"
#include "hopbudget/advanced/metrics.h"
#include "hopbudget/hop.h"

namespace hopbudget {
namespace testing {

// Hop::Create(options); nullptr and a test failure when it refuses. For a
// Hop with more than the overload below sets (defaults, check_names).
inline std::unique_ptr<Hop> MakeTestHop(HopOptions options) {
  absl::StatusOr<std::unique_ptr<Hop>> hop = Hop::Create(std::move(options));
  EXPECT_TRUE(hop.ok()) << hop.status();
  return hop.ok() ? *std::move(hop) : nullptr;
}

// A Hop named `name` on `service_config` ("" for none), with `metrics` and
// `clock`; every other option is HopOptions' default (names checked against
// what the test links).
inline std::unique_ptr<Hop> MakeTestHop(std::string name, Metrics* metrics,
                                        std::string service_config = "", Clock* clock = nullptr) {
  HopOptions options;
  options.name = std::move(name);
  options.metrics = metrics;
  options.clock = clock;
  options.service_config = std::move(service_config);
  return MakeTestHop(std::move(options));
}

}  // namespace testing
}  // namespace hopbudget

#endif  // HOPBUDGET_TESTS_TEST_HOP_H_
