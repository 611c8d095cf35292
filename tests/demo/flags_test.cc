// Copyright hopbudget authors.
#include "flags.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hopbudget::demo {
namespace {

using ::testing::HasSubstr;

TEST(ParseDurationTest, AcceptsUnits) {
  EXPECT_EQ(*ParseDuration("800ms"), absl::Milliseconds(800));
  EXPECT_EQ(*ParseDuration("1.5s"), absl::Milliseconds(1500));
  EXPECT_EQ(*ParseDuration("250us"), absl::Microseconds(250));
  EXPECT_EQ(*ParseDuration("1m30s"), absl::Seconds(90));
  EXPECT_EQ(*ParseDuration("0"), absl::ZeroDuration());
}

TEST(ParseDurationTest, RejectsBadInput) {
  EXPECT_THAT(ParseDuration("800").status().message(), HasSubstr("no unit"));
  EXPECT_THAT(ParseDuration("-1s").status().message(), HasSubstr("negative"));
  EXPECT_THAT(ParseDuration("inf").status().message(), HasSubstr("infinite"));
  EXPECT_FALSE(ParseDuration("").ok());
  EXPECT_FALSE(ParseDuration("abc").ok());
  EXPECT_FALSE(ParseDuration("5 s").ok());
}

TEST(ParseProbabilityTest, Range) {
  EXPECT_EQ(*ParseProbability("0.25"), 0.25);
  EXPECT_FALSE(ParseProbability("1.5").ok());
  EXPECT_FALSE(ParseProbability("-0.1").ok());
  EXPECT_FALSE(ParseProbability("nan").ok());
  EXPECT_FALSE(ParseProbability("x").ok());
}

TEST(ValidateTargetTest, AcceptsWhatGrpcDialsAndADemoHopMeans) {
  for (const char* good : {"127.0.0.1:50051", "localhost:1", "ledger.internal:65535", "[::1]:50051",
                           "dns:///ledger:443", "dns:ledger:80", "ipv4:127.0.0.1:1,10.0.0.2:2",
                           "ipv6:[::1]:7,[fe80::1]:8", "unix:/tmp/ledger.sock",
                           "unix:///tmp/l.sock", "unix-abstract:ledger"}) {
    EXPECT_TRUE(ValidateTarget(good).ok()) << good << ": " << ValidateTarget(good);
  }
}

TEST(ValidateTargetTest, RefusesTyposNamingTheProblem) {
  struct Case {
    const char* target;
    const char* why;
  };
  const Case cases[] = {
      {"not a target", "space"},
      {"", "empty"},
      {"127.0.0.1", "no :PORT"},
      {"127.0.0.1:0", "1..65535"},
      {"127.0.0.1:65536", "1..65535"},
      {"127.0.0.1:5005x", "1..65535"},
      {"127.0.0.1:+80", "1..65535"},
      {":50051", "no host"},
      {"led_ger:1", "not a host name"},
      {"-ledger:1", "not a host name"},
      {"a..b:1", "not a host name"},
      {"[::1:50051", "unclosed"},
      {"[::1]50051", "no :PORT"},
      {"[nope]:1", "not an IPv6 address"},
      {"ipv4:ledger:1", "not an IPv4 address"},
      {"ipv6:::1:7", "[ADDR]:PORT"},
      {"unix:", "no path"},
      {"ledger:1\n", "control"},
  };
  for (const Case& k : cases) {
    absl::Status s = ValidateTarget(k.target);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << k.target;
    EXPECT_THAT(s.message(), HasSubstr(k.why)) << k.target;
    EXPECT_THAT(s.message(), HasSubstr("want HOST:PORT")) << k.target;
  }
}

}  // namespace
}  // namespace hopbudget::demo
