// Copyright hopbudget authors.
//
// RunInspect and the command line, against cpp-httplib servers that serve a
// fixed exposition (the live test against a real hopbudget server is
// inspect_live_test.cc).
#include "inspect.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <sstream>

#include "absl/flags/reflection.h"
#include "absl/strings/str_split.h"
#include "client/cli/cli_flags.h"
#include "fixed_http_server.h"
#include "hopbudget/advanced/clock.h"
#include "inspect_flags.h"
#include "run.h"
#include "sample_exposition.h"

namespace hopbudget::inspect {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// The binary's command line: its absl flags parsed by cli::Parse, then
// checked. Each call starts from the defaults.
absl::StatusOr<InspectOptions> ParseArgs(std::vector<std::string> args, bool* help = nullptr) {
  absl::FlagSaver restore_defaults;
  std::vector<const char*> argv = {"hopbudget-inspect"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  const cli::CommandLine cl =
      cli::Parse(static_cast<int>(argv.size()), argv.data(), InspectCliOptions());
  if (help != nullptr) *help = cl.outcome == cli::ParseOutcome::kHelp;
  if (cl.outcome == cli::ParseOutcome::kHelp) return InspectOptions();
  if (cl.outcome == cli::ParseOutcome::kBadCommandLine) {
    return absl::InvalidArgumentError(cl.error);
  }
  return OptionsFromCommandLine(cl);
}

TEST(ParseArgsTest, Defaults) {
  absl::StatusOr<InspectOptions> p = ParseArgs({"127.0.0.1:9100", "http://h:1/m"});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_FALSE(p->json);
  EXPECT_FALSE(p->watch);
  EXPECT_EQ(p->interval, absl::Seconds(2));
  EXPECT_EQ(p->timeout, absl::Seconds(2));
  EXPECT_EQ(p->targets, (std::vector<std::string>{"127.0.0.1:9100", "http://h:1/m"}));
}

TEST(ParseArgsTest, AllFlags) {
  absl::StatusOr<InspectOptions> p =
      ParseArgs({"--json", "h:1", "--watch", "--interval", "500ms", "--timeout=3s", "--", "h:2"});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->json);
  EXPECT_TRUE(p->watch);
  EXPECT_EQ(p->interval, absl::Milliseconds(500));
  EXPECT_EQ(p->timeout, absl::Seconds(3));
  EXPECT_EQ(p->targets, (std::vector<std::string>{"h:1", "h:2"}));
}

TEST(ParseArgsTest, Help) {
  bool help = false;
  ASSERT_TRUE(ParseArgs({"--help"}, &help).ok());
  EXPECT_TRUE(help);
  ASSERT_TRUE(ParseArgs({"h:1", "-h"}, &help).ok());
  EXPECT_TRUE(help);
  EXPECT_THAT(cli::HelpText(InspectCliOptions()),
              AllOf(HasSubstr("usage: hopbudget-inspect"), HasSubstr("--interval=DURATION"),
                    HasSubstr("--json\n"), HasSubstr("--timeout=DURATION")));
}

class BadArgsTest
    : public ::testing::TestWithParam<std::pair<std::vector<std::string>, std::string>> {};

TEST_P(BadArgsTest, NamesTheProblem) {
  absl::StatusOr<InspectOptions> p = ParseArgs(GetParam().first);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(p.status().message()), HasSubstr(GetParam().second));
}

INSTANTIATE_TEST_SUITE_P(
    Inspect, BadArgsTest,
    ::testing::Values(
        std::make_pair(std::vector<std::string>{}, "no TARGET given"),
        std::make_pair(std::vector<std::string>{"--json"}, "no TARGET given"),
        std::make_pair(std::vector<std::string>{"--jsn", "h:1"}, "unknown flag --jsn"),
        std::make_pair(std::vector<std::string>{"-j", "h:1"}, "unknown flag -j"),
        std::make_pair(std::vector<std::string>{"--json", "--json", "h:1"}, "--json given twice"),
        std::make_pair(std::vector<std::string>{"h:1", "--timeout"}, "--timeout needs a value"),
        std::make_pair(std::vector<std::string>{"h:1", "--timeout", "2"},
                       "--timeout=2: not a duration"),
        std::make_pair(std::vector<std::string>{"h:1", "--timeout=soon"},
                       "--timeout=soon: not a duration"),
        std::make_pair(std::vector<std::string>{"h:1", "--timeout=0s"}, "--timeout=0: must be > 0"),
        std::make_pair(std::vector<std::string>{"h:1", "--timeout=-1s"},
                       "--timeout=-1s: must be > 0"),
        std::make_pair(std::vector<std::string>{"h:1", "--timeout=inf"},
                       "--timeout=inf: must be finite"),
        std::make_pair(std::vector<std::string>{"h:1", "--json=maybe"}, "--json=maybe: not a bool"),
        std::make_pair(std::vector<std::string>{"h:1", "--timeout=1s", "--timeout=2s"},
                       "--timeout given twice"),
        std::make_pair(std::vector<std::string>{"h:1", "--interval", "1s"},
                       "--interval applies only with --watch"),
        std::make_pair(std::vector<std::string>{"h:1", "--watch", "--interval=0ms"},
                       "--interval=0: must be > 0"),
        std::make_pair(std::vector<std::string>{"localhost"},
                       "bad target \"localhost\": missing port"),
        std::make_pair(std::vector<std::string>{"h:1", "https://h:2"}, "scheme \"https\"")));

TEST(RunInspectTest, BadOptionsExitTwoWithoutScraping) {
  std::ostringstream out, err;
  InspectOptions options;
  EXPECT_EQ(RunInspect(options, out, err), 2);
  EXPECT_EQ(out.str(), "");
  EXPECT_THAT(err.str(), StartsWith("hopbudget-inspect: no TARGET given"));
  EXPECT_THAT(err.str(), HasSubstr("usage: hopbudget-inspect"));

  options.targets = {"h:1"};
  options.timeout = absl::ZeroDuration();
  err.str("");
  EXPECT_EQ(RunInspect(options, out, err), 2);
  EXPECT_THAT(err.str(), HasSubstr("--timeout must be a positive finite duration"));

  options.timeout = absl::Seconds(1);
  options.watch = true;
  options.interval = absl::InfiniteDuration();
  err.str("");
  EXPECT_EQ(RunInspect(options, out, err), 2);
  EXPECT_THAT(err.str(), HasSubstr("--interval must be a positive finite duration"));
}

TEST(RunInspectTest, TableOfAServedExposition) {
  testing::FixedHttpServer server;
  server.Serve("/metrics", testing::kOrdersExposition);
  InspectOptions options;
  options.targets = {server.address()};
  options.timeout = absl::Seconds(10);
  std::ostringstream out, err;
  EXPECT_EQ(RunInspect(options, out, err), 0) << err.str();
  EXPECT_EQ(err.str(), "");
  const std::vector<std::string> lines = absl::StrSplit(out.str(), '\n');
  ASSERT_EQ(lines.size(), 3u) << out.str();
  EXPECT_THAT(lines[0], StartsWith("HOP     TARGET"));
  EXPECT_THAT(lines[1], StartsWith("orders  " + server.address()));
  EXPECT_THAT(lines[1], HasSubstr("request=1 downstream=1"));
  EXPECT_THAT(lines[1], HasSubstr("client=1 attempt=2"));
  EXPECT_THAT(lines[1], HasSubstr("125ms"));
}

TEST(RunInspectTest, AFailedTargetExitsOneAndTheOthersStillPrint) {
  testing::FixedHttpServer good;
  good.Serve("/metrics", testing::kOrdersExposition);
  testing::FixedHttpServer garbage;
  garbage.Serve("/metrics", "<html>oops</html>\n", 200, "text/html");
  int refused_port;
  {
    testing::FixedHttpServer gone;
    refused_port = gone.port();
  }
  const std::string refused = "127.0.0.1:" + std::to_string(refused_port);
  InspectOptions options;
  options.targets = {refused, good.address(), garbage.address()};
  options.timeout = absl::Seconds(10);

  std::ostringstream out, err;
  EXPECT_EQ(RunInspect(options, out, err), 1);
  const std::vector<std::string> lines = absl::StrSplit(out.str(), '\n');
  ASSERT_EQ(lines.size(), 5u) << out.str();
  EXPECT_THAT(lines[1],
              StartsWith("-       " + refused + "  error: http://" + refused + "/metrics: "));
  EXPECT_THAT(lines[2], StartsWith("orders  " + good.address()));
  EXPECT_THAT(lines[3],
              HasSubstr("error: http://" + garbage.address() +
                        "/metrics: not Prometheus text format: line 1: expected a metric name"));
  EXPECT_THAT(err.str(), HasSubstr("hopbudget-inspect: " + refused + ": http://" + refused));
  EXPECT_THAT(err.str(), HasSubstr("hopbudget-inspect: " + garbage.address() + ": "));
  EXPECT_THAT(err.str(), Not(HasSubstr(good.address() + ":")));

  options.json = true;
  out.str("");
  EXPECT_EQ(RunInspect(options, out, err), 1);
  EXPECT_THAT(out.str(),
              StartsWith("{\"targets\":[{\"target\":\"" + refused + "\",\"ok\":false,\"error\":"));
  EXPECT_THAT(out.str(),
              HasSubstr("{\"target\":\"" + good.address() + "\",\"ok\":true,\"hop\":\"orders\""));
}

TEST(RunInspectTest, WatchRedrawsUntilTheWaitSaysStop) {
  testing::FixedHttpServer server;
  server.Serve("/metrics", testing::kOrdersExposition);
  InspectOptions options;
  options.targets = {server.address()};
  options.timeout = absl::Seconds(10);
  options.watch = true;
  options.interval = absl::Milliseconds(1500);
  options.terminal = true;

  std::vector<absl::Duration> waits;
  auto three_refreshes = [&waits](absl::Duration interval) {
    waits.push_back(interval);
    return waits.size() < 3;
  };
  std::ostringstream out, err;
  EXPECT_EQ(RunInspectWith(options, out, err, three_refreshes), 0) << err.str();
  EXPECT_EQ(waits, std::vector<absl::Duration>(3, absl::Milliseconds(1500)));
  const std::vector<std::string> screens = absl::StrSplit(out.str(), "\x1b[H\x1b[2J");
  ASSERT_EQ(screens.size(), 4u);  // "" before the first clear
  for (int i = 1; i <= 3; ++i) {
    EXPECT_THAT(screens[i], StartsWith("hopbudget-inspect  every 1.5s  "));
    EXPECT_THAT(screens[i], HasSubstr("\nHOP     TARGET"));
    EXPECT_THAT(screens[i], HasSubstr("\norders  "));
  }

  // JSON: one document per refresh, one per line, no screen control.
  options.json = true;
  waits.clear();
  out.str("");
  EXPECT_EQ(RunInspectWith(options, out, err, three_refreshes), 0);
  const std::vector<std::string> lines = absl::StrSplit(out.str(), '\n');
  ASSERT_EQ(lines.size(), 4u);
  for (int i = 0; i < 3; ++i) EXPECT_THAT(lines[i], StartsWith("{\"targets\":[{"));
  EXPECT_THAT(out.str(), Not(HasSubstr("\x1b")));
}

TEST(RunInspectTest, WatchIntoAPipeWritesNoEscapeCodes) {
  testing::FixedHttpServer server;
  server.Serve("/metrics", testing::kOrdersExposition);
  InspectOptions options;
  options.targets = {server.address()};
  options.timeout = absl::Seconds(10);
  options.watch = true;
  options.terminal = false;  // what main says when stdout is not a terminal
  int refreshes = 0;
  std::ostringstream out, err;
  EXPECT_EQ(RunInspectWith(options, out, err, [&](absl::Duration) { return ++refreshes < 2; }), 0);
  EXPECT_THAT(out.str(), Not(HasSubstr("\x1b")));
  const std::vector<std::string> blocks = absl::StrSplit(out.str(), "--- ");
  ASSERT_EQ(blocks.size(), 3u) << out.str();  // "" before the first
  for (int i = 1; i <= 2; ++i) EXPECT_THAT(blocks[i], HasSubstr("\nHOP     TARGET"));
}

// The exposition of a hop whose counters grow by `step` each scrape.
std::string Grown(int scrape) {
  std::string text = testing::kOrdersExposition;
  const std::string from =
      "hopbudget_calls_total{side=\"server\",method=\"/demo.Orders/Create\",code=\"OK\"} 7";
  const size_t at = text.find(from);
  if (at == std::string::npos) {
    ADD_FAILURE() << "sample exposition changed";
    return text;
  }
  text.replace(at, from.size(),
               absl::StrCat("hopbudget_calls_total{side=\"server\",method=\"/demo.Orders/Create\","
                            "code=\"OK\"} ",
                            7 + 20 * scrape));
  return text;
}

TEST(RunInspectTest, WatchShowsRatesBetweenTwoScrapes) {
  testing::FixedHttpServer server;
  std::atomic<int> scrapes{0};
  server.server().Get("/metrics", [&scrapes](const httplib::Request&, httplib::Response& res) {
    res.set_content(Grown(scrapes++), "text/plain; version=0.0.4");
  });
  FakeClock clock;
  InspectOptions options;
  options.targets = {server.address()};
  options.timeout = absl::Seconds(10);
  options.watch = true;
  options.interval = absl::Seconds(2);
  int refreshes = 0;
  // Each wait is 2 s on the fake clock: 20 more OK calls each time, 10/s.
  auto wait = [&](absl::Duration interval) {
    clock.Advance(interval);
    return ++refreshes < 3;
  };
  std::ostringstream out, err;
  ASSERT_EQ(RunInspectWith(options, out, err, wait, &clock), 0) << err.str();
  const std::vector<std::string> blocks = absl::StrSplit(out.str(), "--- ");
  ASSERT_EQ(blocks.size(), 4u) << out.str();
  EXPECT_THAT(blocks[1], Not(HasSubstr("per second")));  // one scrape: no rate yet
  for (int i = 2; i <= 3; ++i) {
    EXPECT_THAT(blocks[i], HasSubstr("per second over the last 2s:\nHOP     TARGET"));
    EXPECT_THAT(blocks[i], HasSubstr("CALLS/S  OK/S  TIMEOUTS/S(SERVER)  RETRIES/S"));
    EXPECT_THAT(blocks[i],
                HasSubstr(absl::StrCat("orders  ", server.address(), "  10.0     10.0  0.0")));
  }

  options.json = true;
  refreshes = 0;
  out.str("");
  ASSERT_EQ(RunInspectWith(options, out, err, wait, &clock), 0);
  const std::vector<std::string> lines = absl::StrSplit(out.str(), '\n');
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_THAT(lines[0], Not(HasSubstr("\"rates\"")));
  EXPECT_THAT(lines[1], HasSubstr("\"rates\":{\"over_seconds\":2,\"calls_per_second\":10,"
                                  "\"ok_per_second\":10,\"timeouts_per_second\":0,"
                                  "\"retries_per_second\":0}"));
}

TEST(RunInspectTest, WithoutWatchTheWaitIsNeverCalled) {
  testing::FixedHttpServer server;
  server.Serve("/metrics", testing::kOrdersExposition);
  InspectOptions options;
  options.targets = {server.address()};
  options.timeout = absl::Seconds(10);
  std::ostringstream out, err;
  EXPECT_EQ(RunInspectWith(options, out, err,
                           [](absl::Duration) -> bool {
                             ADD_FAILURE() << "waited without --watch";
                             return false;
                           }),
            0);
  EXPECT_THAT(out.str(), Not(HasSubstr("\x1b")));
}

}  // namespace
}  // namespace hopbudget::inspect
