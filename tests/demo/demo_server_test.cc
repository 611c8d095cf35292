// Copyright hopbudget authors.
//
// The pure parts of the demo server runner: flags -> mode, faults and
// policy; faults <-> proto; the extra Prometheus families. (The server
// itself is exercised end to end in tests/e2e/.)
#include "server/common/demo_server.h"

#include <limits>

#include "absl/flags/reflection.h"
#include "client/cli/cli_flags.h"
#include "server/common/service_flag_defs.h"

HOPBUDGET_DEMO_DEFINE_COMMON_FLAGS("orders", absl::Seconds(5), absl::ZeroDuration());

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hopbudget::demo {
namespace {

using ::testing::HasSubstr;

// The real path of a service's main: its absl flags parsed by
// cli::Parse, read, then checked. Each call starts from the defaults.
absl::Status Finish(std::vector<std::string> args, CommonFlags* c, FaultConfig* f) {
  absl::FlagSaver restore_defaults;
  std::vector<const char*> argv = {"orders"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  cli::CommandLine cl = cli::Parse(static_cast<int>(argv.size()), argv.data(), cli::CliOptions());
  if (cl.outcome != cli::ParseOutcome::kRun) return absl::InvalidArgumentError(cl.error);
  *c = CommonFlagsFromCommandLine();
  return FinishCommonFlags(c, f);
}

TEST(CommonFlagsTest, DefaultsAreValid) {
  CommonFlags c;
  FaultConfig f;
  ASSERT_TRUE(Finish({}, &c, &f).ok());
  EXPECT_EQ(c.mode, Mode::kHopbudget);
  EXPECT_EQ(f.latency.kind, LatencyKind::kNone);
}

TEST(CommonFlagsTest, ParsesModeFaultsAndPolicy) {
  CommonFlags c;
  FaultConfig f;
  ASSERT_TRUE(
      Finish({"--mode=baseline", "--latency=exp:20ms", "--error-rate=0.1", "--hang-rate=0.05",
              "--hang-next=2", "--slow-commit=1s", "--baseline-timeout=700ms"},
             &c, &f)
          .ok());
  EXPECT_EQ(c.mode, Mode::kBaseline);
  EXPECT_EQ(f.latency.kind, LatencyKind::kExponential);
  EXPECT_EQ(f.error_rate, 0.1);
  EXPECT_EQ(f.hang_next, 2);
  EXPECT_EQ(f.slow_commit, absl::Seconds(1));
  EXPECT_EQ(c.baseline_timeout, absl::Milliseconds(700));
  CommonFlags h;
  ASSERT_TRUE(Finish({"--request-cap=2s", "--attempt-cap=300ms"}, &h, &f).ok());
  BudgetPolicy p = PolicyOf(h);
  EXPECT_EQ(p.request_cap, absl::Seconds(2));
  EXPECT_EQ(p.attempt_cap, absl::Milliseconds(300));
  EXPECT_EQ(PolicyOf(CommonFlags()).attempt_cap, absl::InfiniteDuration());
  CommonFlags q;
  ASSERT_TRUE(Finish({"--admission-queue-per-limit=inf"}, &q, &f).ok());
  EXPECT_EQ(AdmissionPolicyOf(q).queue_per_limit, std::numeric_limits<double>::infinity());
  EXPECT_EQ(AdmissionPolicyOf(CommonFlags()).queue_per_limit, 1);
}

TEST(CommonFlagsTest, BadInputIsAClearError) {
  struct Case {
    std::vector<std::string> args;
    const char* message;
  };
  const Case cases[] = {
      {{"--mode=fast"}, "--mode"},
      {{"--latency=fixed"}, "--latency"},
      {{"--error-rate=0.7", "--hang-rate=0.5"}, "> 1"},
      {{"--name=bad name"}, "--name"},
      {{"--request-cap=0"}, "--request-cap"},
      {{"--baseline-timeout=0"}, "--baseline-timeout"},
      {{"--request-cap=1s", "--attempt-cap=2s"}, "nest strictly"},
      {{"--port=-1"}, "--port=-1: must be in [0, 65535]"},
      {{"--port=80x"}, "--port=80x"},
      {{"--metrics-port", "70000"}, "--metrics-port=70000"},
      {{"--hang-next=-2"}, "--hang-next=-2"},
      {{"--max-threads=3"}, "--max-threads=3"},
      {{"--admission-queue-per-limit=0"}, "--admission-queue-per-limit=0: must be in [0.01, inf]"},
      {{"--admission-queue-per-limit=nan"}, "--admission-queue-per-limit=nan"},
      {{"--request-cap=-1s"}, "--request-cap=-1s: must be > 0"},
      {{"--hop-reserve=inf"}, "--hop-reserve=inf: must be finite"},
      {{"--shutdown-grace=3"}, "--shutdown-grace=3"},
      {{"--verbose=maybe"}, "--verbose=maybe"},
      {{"--error-rate=1.5"}, "--error-rate=1.5: must be in [0, 1]"},
      {{"--nope"}, "unknown flag --nope"},
      {{"--port=1", "--port=2"}, "--port given twice"},
      {{"--mode"}, "--mode needs a value"},
  };
  for (const Case& k : cases) {
    CommonFlags c;
    FaultConfig f;
    absl::Status s = Finish(k.args, &c, &f);
    EXPECT_FALSE(s.ok()) << k.args[0];
    EXPECT_THAT(s.message(), HasSubstr(k.message)) << k.args[0];
  }
  // A baseline never validates a policy it does not use.
  CommonFlags c;
  FaultConfig f;
  EXPECT_TRUE(Finish({"--mode=baseline", "--request-cap=1s", "--attempt-cap=2s"}, &c, &f).ok());
}

TEST(FaultsProtoTest, RoundTripsAndValidates) {
  FaultConfig c;
  c.latency = *ParseLatencySpec("uniform:5ms-10ms");
  c.error_rate = 0.25;
  c.hang_rate = 0.5;
  c.hang_next = 3;
  c.slow_commit = absl::Milliseconds(1500);
  c.silence = true;
  absl::StatusOr<FaultConfig> back = FaultsFromProto(FaultsToProto(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(FormatLatencySpec(back->latency), "uniform:5ms-10ms");
  EXPECT_EQ(back->error_rate, 0.25);
  EXPECT_EQ(back->hang_rate, 0.5);
  EXPECT_EQ(back->hang_next, 3);
  EXPECT_EQ(back->slow_commit, absl::Milliseconds(1500));
  EXPECT_TRUE(back->silence);

  Faults empty;  // what `chainctl faults --clear` sends
  EXPECT_TRUE(FaultsFromProto(empty).ok());
  Faults bad;
  bad.set_latency("nope:1ms");
  EXPECT_FALSE(FaultsFromProto(bad).ok());
  bad = Faults();
  bad.set_slow_commit_ms(-1);
  EXPECT_FALSE(FaultsFromProto(bad).ok());
  bad = Faults();
  bad.set_error_rate(1.5);
  EXPECT_FALSE(FaultsFromProto(bad).ok());
}

TEST(AdmittedMethodsTest, EveryUnaryMethodOfTheChainAndNoStreamNorAdmin) {
  const std::vector<std::string> methods = AdmittedMethods();
  EXPECT_THAT(methods,
              ::testing::IsSupersetOf(
                  {"/hopbudget.demo.Gateway/PlaceOrder", "/hopbudget.demo.Orders/CreateOrder",
                   "/hopbudget.demo.Ledger/Commit", "/hopbudget.demo.Ledger/GetOrder"}));
  for (const std::string& m : methods) {
    EXPECT_THAT(m, ::testing::Not(HasSubstr("WatchOrder")));
    EXPECT_THAT(m, ::testing::Not(HasSubstr("/hopbudget.demo.Admin/")));
  }
}

TEST(ExtraMetricsTest, TextFormatFamilies) {
  CommonFlags c;
  c.name = "ledger";
  DemoProcess p(c, FaultConfig());
  const std::string text = p.stats().ExtraMetrics();
  EXPECT_THAT(
      text,
      HasSubstr("# TYPE demo_calls_started_after_deadline_total counter\n"
                "demo_calls_started_after_deadline_total{hop=\"ledger\",mode=\"hopbudget\"} 0\n"));
  EXPECT_THAT(
      text,
      HasSubstr(
          "# TYPE demo_work_after_deadline_seconds_total counter\n"
          "demo_work_after_deadline_seconds_total{hop=\"ledger\",mode=\"hopbudget\"} 0.000000\n"));
  EXPECT_EQ(text.back(), '\n');
  EXPECT_EQ(p.stats().Proto().hop(), "ledger");
  EXPECT_EQ(p.stats().Proto().mode(), "hopbudget");
}

}  // namespace
}  // namespace hopbudget::demo
