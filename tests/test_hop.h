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
#include "absl/strings/str_cat.h"
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

// The relay's methods as a service config names them.
inline constexpr char kRelayCallName[] = R"({"service": "hopbudget.echo.Relay", "method": "Call"})";
inline constexpr char kRelayWriteName[] =
    R"({"service": "hopbudget.echo.Relay", "method": "Write"})";

// A methodConfig for `name` whose perAttemptRecvTimeout (the attempt cap)
// is `cap` ("0.1s"); gRPC's config carries it only inside a retryPolicy.
inline std::string AttemptCappedMethod(const std::string& name, const std::string& cap) {
  return absl::StrCat(R"({"name": [)", name, R"(], "timeout": "5s",
       "retryPolicy": {"maxAttempts": 2, "initialBackoff": "0.01s", "maxBackoff": "0.02s",
                       "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"],
                       "perAttemptRecvTimeout": ")",
                      cap, R"("}})");
}

// A service config: Relay/Call's attempts capped at `call_cap`, Write's at
// 250 ms, any other method's (the default entry) at 150 ms; `extra`: more
// top-level keys, starting with a comma.
inline std::string AttemptCapsConfig(const std::string& call_cap, const std::string& extra = "") {
  return absl::StrCat(R"({"methodConfig": [)", AttemptCappedMethod(kRelayCallName, call_cap), ", ",
                      AttemptCappedMethod(kRelayWriteName, "0.25s"), ", ",
                      AttemptCappedMethod("{}", "0.15s"), "]", extra, "}");
}

}  // namespace testing
}  // namespace hopbudget

#endif  // HOPBUDGET_TESTS_TEST_HOP_H_
