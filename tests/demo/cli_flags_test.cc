// Copyright hopbudget authors.
//
// client/cli/cli_flags.h: how every hopbudget binary reads its command line
// into absl flags. Flags of each kind are defined here, as a binary would;
// each case starts from their defaults (FlagSaver). The binaries themselves
// (--help exits 0, a bad value exits 2 naming the flag) are checked by the
// ctests cli.<binary>.* (cli_check.cmake).
#include "client/cli/cli_flags.h"

#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

ABSL_FLAG(int, port, 0, "a port");
ABSL_FLAG(absl::Duration, request_cap, absl::Seconds(2), "a duration");
ABSL_FLAG(std::string, mode, "hopbudget", "a string");
ABSL_FLAG(bool, verbose, false, "a bool");
ABSL_FLAG(double, rate, 0.5, "a number");
ABSL_FLAG(std::string, json, "", "a path, or - for stdout");

namespace hopbudget::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

CommandLine ParseArgs(std::vector<std::string> args, CliOptions options = CliOptions()) {
  std::vector<const char*> argv = {"prog"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  options.program = "prog";
  return Parse(static_cast<int>(argv.size()), argv.data(), options);
}

TEST(CliFlagsTest, BothFormsDashesAndPositional) {
  absl::FlagSaver restore;
  CommandLine cl = ParseArgs({"--port=80", "--request-cap", "800ms", "pos1", "--verbose",
                              "-mode=baseline", "--", "--rate=2"});
  ASSERT_EQ(cl.outcome, ParseOutcome::kRun) << cl.error;
  EXPECT_EQ(absl::GetFlag(FLAGS_port), 80);
  EXPECT_EQ(absl::GetFlag(FLAGS_request_cap), absl::Milliseconds(800));
  EXPECT_TRUE(absl::GetFlag(FLAGS_verbose));
  EXPECT_EQ(absl::GetFlag(FLAGS_mode), "baseline");
  EXPECT_EQ(absl::GetFlag(FLAGS_rate), 0.5);  // after --: positional
  EXPECT_THAT(cl.positional, ElementsAre("pos1", "--rate=2"));
  EXPECT_TRUE(cl.WasSet("request_cap"));
  EXPECT_FALSE(cl.WasSet("rate"));
}

TEST(CliFlagsTest, BoolsTakeNoValueOrAnExplicitOne) {
  absl::FlagSaver restore;
  ASSERT_EQ(ParseArgs({"--verbose=true", "--request_cap=1s"}).outcome, ParseOutcome::kRun);
  EXPECT_TRUE(absl::GetFlag(FLAGS_verbose));
  EXPECT_EQ(absl::GetFlag(FLAGS_request_cap), absl::Seconds(1));
  ASSERT_EQ(ParseArgs({"--noverbose"}).outcome, ParseOutcome::kRun);
  EXPECT_FALSE(absl::GetFlag(FLAGS_verbose));
  // A bool never swallows the next argument.
  CommandLine cl = ParseArgs({"--verbose", "false"});
  ASSERT_EQ(cl.outcome, ParseOutcome::kRun);
  EXPECT_TRUE(absl::GetFlag(FLAGS_verbose));
  EXPECT_THAT(cl.positional, ElementsAre("false"));
}

TEST(CliFlagsTest, EveryBadInputNamesTheFlagAndTheValue) {
  struct Case {
    std::vector<std::string> args;
    const char* message;
  };
  const Case cases[] = {
      {{"--port=80x"}, "--port=80x: not an integer"},
      {{"--port", "1.5"}, "--port=1.5: not an integer"},
      {{"--request-cap=800"}, "--request-cap=800: not a duration"},
      {{"--request-cap=soon"}, "--request-cap=soon: not a duration"},
      {{"--verbose=maybe"}, "--verbose=maybe: not a bool"},
      {{"--rate=half"}, "--rate=half: not a number"},
      {{"--nope=1"}, "unknown flag --nope"},
      {{"-x"}, "unknown flag -x"},
      {{"--nomode"}, "unknown flag --nomode"},  // --noX only for bools
      {{"--port=1", "--port=2"}, "--port given twice"},
      {{"--port"}, "--port needs a value"},
      {{"--flagfile=/etc/passwd"}, "unknown flag --flagfile"},  // absl's own are not ours
  };
  for (const Case& k : cases) {
    absl::FlagSaver restore;
    CommandLine cl = ParseArgs(k.args);
    EXPECT_EQ(cl.outcome, ParseOutcome::kBadCommandLine) << k.args[0];
    EXPECT_THAT(cl.error, HasSubstr(k.message)) << k.args[0];
  }
}

TEST(CliFlagsTest, ACommandTakesOnlyItsOwnFlags) {
  absl::FlagSaver restore;
  CliOptions stats;
  stats.flags = {"json", "port"};
  EXPECT_EQ(ParseArgs({"--port=1"}, stats).outcome, ParseOutcome::kRun);
  CommandLine cl = ParseArgs({"--mode=baseline"}, stats);
  EXPECT_EQ(cl.outcome, ParseOutcome::kBadCommandLine);
  EXPECT_THAT(cl.error, HasSubstr("unknown flag --mode"));
  EXPECT_THAT(HelpText(stats), HasSubstr("--json=STRING"));
  EXPECT_THAT(HelpText(stats), Not(HasSubstr("--mode")));
}

TEST(CliFlagsTest, AValueOptionalFlagAloneMeansItsImplicitValue) {
  CliOptions options;
  options.value_optional = {"json"};
  {
    absl::FlagSaver restore;
    ASSERT_EQ(ParseArgs({"--json"}, options).outcome, ParseOutcome::kRun);
    EXPECT_EQ(absl::GetFlag(FLAGS_json), "-");
  }
  {
    absl::FlagSaver restore;
    ASSERT_EQ(ParseArgs({"--json", "--verbose"}, options).outcome, ParseOutcome::kRun);
    EXPECT_EQ(absl::GetFlag(FLAGS_json), "-");
    EXPECT_TRUE(absl::GetFlag(FLAGS_verbose));
  }
  {
    absl::FlagSaver restore;
    ASSERT_EQ(ParseArgs({"--json", "out.json"}, options).outcome, ParseOutcome::kRun);
    EXPECT_EQ(absl::GetFlag(FLAGS_json), "out.json");
  }
  {
    absl::FlagSaver restore;
    ASSERT_EQ(ParseArgs({"--json", "-"}, options).outcome, ParseOutcome::kRun);
    EXPECT_EQ(absl::GetFlag(FLAGS_json), "-");
  }
}

TEST(CliFlagsTest, HelpWinsAndListsFlagsWithKindAndDefault) {
  absl::FlagSaver restore;
  for (const char* help : {"--help", "-h", "--helpfull"}) {
    EXPECT_EQ(ParseArgs({"--port=1", help, "--bogus"}).outcome, ParseOutcome::kHelp) << help;
  }
  CliOptions options;
  options.usage = "prog: does things";
  const std::string text = HelpText(options);
  EXPECT_THAT(text, HasSubstr("prog: does things\n"));
  EXPECT_THAT(text, HasSubstr("  --request-cap=DURATION\n      a duration (default: 2s)\n"));
  EXPECT_THAT(text, HasSubstr("  --verbose\n      a bool (default: false)\n"));
  EXPECT_THAT(text, HasSubstr("  --port=INT\n"));
  EXPECT_THAT(text, HasSubstr("  --rate=NUMBER\n"));
  EXPECT_THAT(text, Not(HasSubstr("flagfile")));  // absl's own flags are not listed
}

TEST(CliFlagsTest, ChecksNameTheFlagAndTheValue) {
  EXPECT_EQ(InRange("port", 70000, 0, 65535).message(), "--port=70000: must be in [0, 65535]");
  EXPECT_TRUE(InRange("port", 0, 0, 65535).ok());
  EXPECT_EQ(InRange("rate", 1.5, 0.0, 1.0).message(), "--rate=1.5: must be in [0, 1]");
  EXPECT_EQ(NonNegative("grace", absl::Seconds(-1)).message(), "--grace=-1s: must be >= 0");
  EXPECT_TRUE(NonNegative("grace", absl::ZeroDuration()).ok());
  EXPECT_EQ(Positive("cap", absl::ZeroDuration()).message(), "--cap=0: must be > 0");
  EXPECT_EQ(Positive("cap", absl::InfiniteDuration()).message(), "--cap=inf: must be finite");
  EXPECT_EQ(OneOf("mode", "fast", {"a", "b"}).message(), "--mode=fast: must be one of a, b");
  EXPECT_EQ(Required("gateway", "").message(), "--gateway is required");
  EXPECT_EQ(FirstError({absl::OkStatus(), Required("a", ""), Required("b", "")}).message(),
            "--a is required");
}

}  // namespace
}  // namespace hopbudget::cli
