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

TEST(FlagSetTest, ParsesBothForms) {
  FlagSet flags("t");
  int port = 0;
  std::string name;
  absl::Duration d = absl::ZeroDuration();
  bool verbose = false;
  flags.Int("port", &port, "", 0, 65535);
  flags.String("name", &name, "");
  flags.Duration("budget", &d, "");
  flags.Bool("verbose", &verbose, "");
  ASSERT_TRUE(flags.Parse({"--port=80", "--name", "x", "--budget=2s", "--verbose"}).ok());
  EXPECT_EQ(port, 80);
  EXPECT_EQ(name, "x");
  EXPECT_EQ(d, absl::Seconds(2));
  EXPECT_TRUE(verbose);
  EXPECT_TRUE(flags.WasSet("port"));
}

TEST(FlagSetTest, EveryBadInputNamesTheFlag) {
  auto parse = [](std::vector<std::string> args) {
    FlagSet flags("t");
    int port = 0;
    absl::Duration d;
    bool b = false;
    flags.Int("port", &port, "", 0, 65535);
    flags.Duration("budget", &d, "");
    flags.Bool("on", &b, "");
    return flags.Parse(args);
  };
  EXPECT_THAT(parse({"--nope=1"}).message(), HasSubstr("unknown flag --nope"));
  EXPECT_THAT(parse({"--port=70000"}).message(), HasSubstr("--port"));
  EXPECT_THAT(parse({"--port=12x"}).message(), HasSubstr("--port"));
  EXPECT_THAT(parse({"--port"}).message(), HasSubstr("needs a value"));
  EXPECT_THAT(parse({"--budget=800"}).message(), HasSubstr("no unit"));
  EXPECT_THAT(parse({"--on=maybe"}).message(), HasSubstr("--on"));
  EXPECT_THAT(parse({"--port=1", "--port=2"}).message(), HasSubstr("twice"));
  EXPECT_THAT(parse({"stray"}).message(), HasSubstr("unexpected argument"));
}

TEST(FlagSetTest, PositionalWhenAsked) {
  FlagSet flags("t");
  std::vector<std::string> rest;
  ASSERT_TRUE(flags.Parse({"a", "b"}, &rest).ok());
  EXPECT_THAT(rest, ::testing::ElementsAre("a", "b"));
}

TEST(FlagSetTest, UsageListsFlagsWithDefaults) {
  FlagSet flags("prog");
  int port = 7;
  flags.Int("port", &port, "the port");
  EXPECT_THAT(flags.Usage(), HasSubstr("--port=VALUE  the port (default 7)"));
}

TEST(ValidateTargetTest, AcceptsWhatGrpcDialsAndADemoHopMeans) {
  for (const char* good :
       {"127.0.0.1:50051", "localhost:1", "ledger.internal:65535", "[::1]:50051",
        "dns:///ledger:443", "dns:ledger:80", "ipv4:127.0.0.1:1,10.0.0.2:2",
        "ipv6:[::1]:7,[fe80::1]:8", "unix:/tmp/ledger.sock", "unix:///tmp/l.sock",
        "unix-abstract:ledger"}) {
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
