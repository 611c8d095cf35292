// Copyright hopbudget authors.
#include "faults.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hopbudget::demo {
namespace {

using ::testing::HasSubstr;

TEST(LatencySpecTest, ParsesAndFormatsEveryKind) {
  for (const char* text : {"none", "fixed:100ms", "uniform:50ms-200ms", "exp:100ms"}) {
    absl::StatusOr<LatencySpec> spec = ParseLatencySpec(text);
    ASSERT_TRUE(spec.ok()) << text << ": " << spec.status();
    EXPECT_EQ(FormatLatencySpec(*spec), text);
  }
  EXPECT_EQ(ParseLatencySpec("")->kind, LatencyKind::kNone);
}

TEST(LatencySpecTest, RejectsBadSpecs) {
  EXPECT_THAT(ParseLatencySpec("fixed").status().message(), HasSubstr("no kind"));
  EXPECT_THAT(ParseLatencySpec("gauss:1ms").status().message(), HasSubstr("unknown kind"));
  EXPECT_THAT(ParseLatencySpec("uniform:200ms-50ms").status().message(), HasSubstr("LOW > HIGH"));
  EXPECT_FALSE(ParseLatencySpec("uniform:50ms").ok());
  EXPECT_FALSE(ParseLatencySpec("fixed:-1s").ok());
  EXPECT_FALSE(ParseLatencySpec("fixed:100").ok());
  EXPECT_FALSE(ParseLatencySpec("exp:0").ok());
}

TEST(LatencySpecTest, ParsesSpikesAsPercentOrProbability) {
  absl::StatusOr<LatencySpec> spike = ParseLatencySpec("spike:5%:1s");
  ASSERT_TRUE(spike.ok()) << spike.status();
  EXPECT_EQ(spike->kind, LatencyKind::kSpike);
  EXPECT_DOUBLE_EQ(spike->fraction, 0.05);
  EXPECT_EQ(spike->a, absl::Seconds(1));
  EXPECT_EQ(FormatLatencySpec(*spike), "spike:5%:1s");
  EXPECT_DOUBLE_EQ(ParseLatencySpec("spike:0.25:300ms")->fraction, 0.25);
  EXPECT_DOUBLE_EQ(ParseLatencySpec("spike:100%:1ms")->fraction, 1.0);
  EXPECT_DOUBLE_EQ(ParseLatencySpec("spike:0%:1ms")->fraction, 0.0);
  // What it formats, it parses back to the same spec.
  LatencySpec again = *ParseLatencySpec(FormatLatencySpec(*ParseLatencySpec("spike:2.5%:40ms")));
  EXPECT_DOUBLE_EQ(again.fraction, 0.025);
  EXPECT_EQ(again.a, absl::Milliseconds(40));
}

TEST(LatencySpecTest, RejectsBadSpikes) {
  EXPECT_THAT(ParseLatencySpec("spike:5%").status().message(),
              HasSubstr("spike needs FRACTION:LATENCY"));
  EXPECT_THAT(ParseLatencySpec("spike:101%:1s").status().message(), HasSubstr("[0%, 100%]"));
  EXPECT_THAT(ParseLatencySpec("spike:-1%:1s").status().message(), HasSubstr("[0%, 100%]"));
  EXPECT_THAT(ParseLatencySpec("spike:x%:1s").status().message(), HasSubstr("[0%, 100%]"));
  EXPECT_FALSE(ParseLatencySpec("spike:1.5:1s").ok());
  EXPECT_FALSE(ParseLatencySpec("spike:nan%:1s").ok());
  EXPECT_THAT(ParseLatencySpec("spike:5%:0").status().message(), HasSubstr("must be > 0"));
  EXPECT_FALSE(ParseLatencySpec("spike:5%:1").ok());
  EXPECT_FALSE(ParseLatencySpec("spike:5%:-1s").ok());
  EXPECT_THAT(ParseLatencySpec("spike:5%:1s:2").status().message(), HasSubstr("spike:5%:1s"));
  FaultConfig c;
  c.latency.kind = LatencyKind::kSpike;
  c.latency.a = absl::Seconds(1);
  c.latency.fraction = 1.5;
  EXPECT_THAT(ValidateFaultConfig(c).message(), HasSubstr("spike"));
}

TEST(FaultInjectorTest, SpikeDelaysItsFractionOfCalls) {
  FaultConfig c;
  c.latency = *ParseLatencySpec("spike:5%:1s");
  FaultInjector f(7, c);
  int slow = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    FaultDecision d = f.Decide();
    EXPECT_EQ(d.action, FaultAction::kProceed);
    if (d.latency == absl::Seconds(1)) {
      ++slow;
    } else {
      EXPECT_EQ(d.latency, absl::ZeroDuration());
    }
  }
  // 5 % of 20 000 is 1 000, sd ~31: 4 sd either side.
  EXPECT_GT(slow, 875);
  EXPECT_LT(slow, 1125);
}

TEST(FaultConfigTest, Validates) {
  FaultConfig c;
  EXPECT_TRUE(ValidateFaultConfig(c).ok());
  c.error_rate = 0.7;
  c.hang_rate = 0.5;
  EXPECT_THAT(ValidateFaultConfig(c).message(), HasSubstr("> 1"));
  c = FaultConfig();
  c.error_rate = 2;
  EXPECT_FALSE(ValidateFaultConfig(c).ok());
  c = FaultConfig();
  c.hang_next = -1;
  EXPECT_FALSE(ValidateFaultConfig(c).ok());
  c = FaultConfig();
  c.slow_commit = -absl::Seconds(1);
  EXPECT_FALSE(ValidateFaultConfig(c).ok());
}

TEST(FaultInjectorTest, NoFaultsByDefault) {
  FaultInjector f(1);
  for (int i = 0; i < 100; ++i) {
    FaultDecision d = f.Decide();
    EXPECT_EQ(d.action, FaultAction::kProceed);
    EXPECT_EQ(d.latency, absl::ZeroDuration());
  }
}

TEST(FaultInjectorTest, SameSeedSameDecisions) {
  FaultConfig c;
  c.error_rate = 0.3;
  c.hang_rate = 0.1;
  c.latency = *ParseLatencySpec("exp:20ms");
  FaultInjector a(42, c), b(42, c), other(43, c);
  bool differs = false;
  for (int i = 0; i < 200; ++i) {
    FaultDecision x = a.Decide(), y = b.Decide(), z = other.Decide();
    EXPECT_EQ(x.action, y.action);
    EXPECT_EQ(x.latency, y.latency);
    differs |= x.action != z.action || x.latency != z.latency;
  }
  EXPECT_TRUE(differs);
}

TEST(FaultInjectorTest, RatesAreRoughlyRight) {
  FaultConfig c;
  c.error_rate = 0.3;
  c.hang_rate = 0.1;
  FaultInjector f(7, c);
  int errors = 0, hangs = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    FaultAction a = f.Decide().action;
    errors += a == FaultAction::kError;
    hangs += a == FaultAction::kHang;
  }
  EXPECT_NEAR(errors / static_cast<double>(n), 0.3, 0.03);
  EXPECT_NEAR(hangs / static_cast<double>(n), 0.1, 0.03);
}

TEST(FaultInjectorTest, HangNextCountsDown) {
  FaultConfig c;
  c.hang_next = 2;
  FaultInjector f(1, c);
  EXPECT_EQ(f.Decide().action, FaultAction::kHang);
  EXPECT_EQ(f.Decide().action, FaultAction::kHang);
  EXPECT_EQ(f.Decide().action, FaultAction::kProceed);
  EXPECT_EQ(f.config().hang_next, 0);
}

TEST(FaultInjectorTest, LatencyDistributions) {
  FaultConfig c;
  c.latency = *ParseLatencySpec("fixed:100ms");
  FaultInjector f(1, c);
  EXPECT_EQ(f.Decide().latency, absl::Milliseconds(100));
  c.latency = *ParseLatencySpec("uniform:50ms-200ms");
  ASSERT_TRUE(f.Set(c).ok());
  absl::Duration sum;
  for (int i = 0; i < 2000; ++i) {
    absl::Duration d = f.Decide().latency;
    EXPECT_GE(d, absl::Milliseconds(50));
    EXPECT_LE(d, absl::Milliseconds(200));
    sum += d;
  }
  EXPECT_NEAR(absl::ToDoubleMilliseconds(sum / 2000), 125, 10);
  c.latency = *ParseLatencySpec("exp:20ms");
  ASSERT_TRUE(f.Set(c).ok());
  sum = absl::ZeroDuration();
  for (int i = 0; i < 20000; ++i) {
    absl::Duration d = f.Decide().latency;
    EXPECT_GE(d, absl::ZeroDuration());
    sum += d;
  }
  EXPECT_NEAR(absl::ToDoubleMilliseconds(sum / 20000), 20, 2);
}

TEST(FaultInjectorTest, SetRejectsInvalidAndKeepsTheOld) {
  FaultConfig c;
  c.error_rate = 0.5;
  FaultInjector f(1, c);
  FaultConfig bad;
  bad.error_rate = 3;
  EXPECT_FALSE(f.Set(bad).ok());
  EXPECT_EQ(f.config().error_rate, 0.5);
}

TEST(FaultSupportTest, AHopRefusesWhatItCannotInject) {
  FaultConfig slow;
  slow.slow_commit = absl::Seconds(1);
  FaultConfig other;
  other.error_rate = 0.5;
  other.hang_next = 2;
  FaultConfig silent;
  silent.silence = true;
  struct Case {
    FaultConfig config;
    FaultSupport support;
    bool ok;
  };
  const Case cases[] = {
      {slow, FaultSupport(), false},         {slow, LedgerFaultSupport(), true},
      {other, FaultSupport(), true},         {other, LedgerFaultSupport(), true},
      {silent, FaultSupport(), false},       {silent, LedgerFaultSupport(), true},
      {FaultConfig(), FaultSupport(), true},  // --clear: no slow commit asked
  };
  for (const Case& k : cases) {
    absl::Status s = CheckFaultsSupported(k.config, k.support, "gateway");
    EXPECT_EQ(s.ok(), k.ok) << s;
  }
  absl::Status s = CheckFaultsSupported(slow, FaultSupport(), "gateway");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), ::testing::HasSubstr("gateway cannot inject slow-commit (1s)"));
  s = CheckFaultsSupported(silent, FaultSupport(), "orders");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), ::testing::HasSubstr("orders cannot inject silence"));
}

}  // namespace
}  // namespace hopbudget::demo
