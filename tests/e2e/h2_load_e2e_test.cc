// Copyright hopbudget authors.
//
// client/h2load, the overload benchmark's load generator, against a real
// demo chain: it must report what a gRPC client would see, or the
// benchmark's verdicts measure the generator.
#include <gmock/gmock.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "chain_process.h"
#include "topology.h"

namespace hopbudget::e2e {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;

struct Chain {
  ChainProcesses processes;
  ChainProcess* ledger = nullptr;
  ChainProcess* orders = nullptr;
  ChainProcess* gateway = nullptr;

  Chain(const std::vector<std::string>& gateway_flags, const std::string& ledger_latency) {
    using chainctl::Hop;
    chainctl::ChainSpec spec;
    spec.db = processes.dir() + "/l.db";
    spec.seed = 1;  // the services' default, which this test always ran with
    spec.extra[Hop::kLedger] = {"--shield-bound=5s", "--latency=" + ledger_latency};
    spec.extra[Hop::kGateway] = gateway_flags;
    std::map<Hop, ChainProcess*> hops = processes.StartChain(spec);
    if (hops.empty()) return;
    ledger = hops[Hop::kLedger];
    orders = hops[Hop::kOrders];
    gateway = hops[Hop::kGateway];
  }
  std::string admin() const {
    return absl::StrCat(gateway->address(), ",", orders->address(), ",", ledger->address());
  }
};

// Runs `command`; returns its exit status and what it wrote (stderr too
// unless `stdout_only`).
std::pair<int, std::string> RunCommand(const std::string& command, bool stdout_only = false) {
  std::string out;
  FILE* f = popen((command + (stdout_only ? " 2>/dev/null" : " 2>&1")).c_str(), "r");
  if (f == nullptr) return {-1, ""};
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  const int status = pclose(f);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

google::protobuf::Struct ParseJson(const std::string& json) {
  google::protobuf::Struct s;
  const auto status = google::protobuf::util::JsonStringToMessage(json, &s);
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << json;
  return s;
}

double Number(const google::protobuf::Struct& s, const std::string& key) {
  auto it = s.fields().find(key);
  EXPECT_NE(it, s.fields().end()) << key;
  return it == s.fields().end() ? -1 : it->second.number_value();
}

// The per_hop entry of `hop`.
google::protobuf::Struct Hop(const google::protobuf::Struct& s, const std::string& hop) {
  for (const auto& v : s.fields().at("per_hop").list_value().values()) {
    if (v.struct_value().fields().at("hop").string_value() == hop) return v.struct_value();
  }
  ADD_FAILURE() << "no per_hop entry for " << hop;
  return {};
}

TEST(H2LoadE2eTest, EveryCallOfAModestLoadIsAnsweredOkAndCountedAtEachHop) {
  Chain chain({}, "none");
  ASSERT_NE(chain.gateway, nullptr) << chain.processes.error();
  auto [status, out] = RunCommand(
      absl::StrCat(HOPBUDGET_H2_LOAD, " --gateway=", chain.gateway->address(),
                   " --rps=100 --duration=1s --budget=5s --quiet --json=- --admin=", chain.admin()),
      /*stdout_only=*/true);
  ASSERT_EQ(status, 0) << out;
  const google::protobuf::Struct s = ParseJson(out);
  EXPECT_EQ(Number(s, "sent"), 100);
  EXPECT_EQ(Number(s, "ok"), 100) << out;
  EXPECT_EQ(Number(s, "expired_unsent"), 0);
  EXPECT_EQ(Number(s, "calls_started_after_deadline"), 0);
  // Each call reached every hop once: the services counted what was sent.
  for (const char* hop : {"gateway", "orders", "ledger"}) {
    EXPECT_EQ(Number(Hop(s, hop), "calls"), 100) << hop;
  }
  EXPECT_GE(Number(s.fields().at("send_lag_ms").struct_value(), "max"), 0);
}

// One stream at a time (the gateway's SETTINGS), on a chain that takes
// 200 ms a call: the generator holds the other calls in its own queue, first
// in first out, as gRPC's client transport does. A generator that opened
// more streams would have them refused by gRPC's server (REFUSED_STREAM:
// UNAVAILABLE) or served side by side (more OK answers than one stream
// allows). The calls that wait reach the chain with what is left of their
// budget, and no hop starts one after its deadline: the calls carry
// hopbudget's stamp (--budget-headers), without which a gateway that reads
// its socket late (a loaded test machine) cannot know the real deadline
// (docs/grpc-1.51.md).
TEST(H2LoadE2eTest, CallsAboveTheGatewaysStreamBoundWaitInTheGenerator) {
  Chain chain({"--max-concurrent-streams=1"}, "fixed:200ms");
  ASSERT_NE(chain.gateway, nullptr) << chain.processes.error();
  auto [status, out] = RunCommand(
      absl::StrCat(
          HOPBUDGET_H2_LOAD, " --gateway=", chain.gateway->address(),
          " --rps=40 --duration=1s --budget=300ms --quiet --json=- --budget-headers --admin=",
          chain.admin()),
      /*stdout_only=*/true);
  ASSERT_EQ(status, 0) << out;
  const google::protobuf::Struct s = ParseJson(out);
  EXPECT_EQ(Number(s, "sent"), 40);
  const double ok = Number(s, "ok");
  EXPECT_GE(ok, 1) << out;
  // One stream, at least 200 ms a call, 1.3 s at most: 7 calls at most.
  EXPECT_LE(ok, 7) << out;
  const auto& codes = s.fields().at("errors_by_code").struct_value().fields();
  EXPECT_EQ(codes.count("UNAVAILABLE"), 0u) << out;
  EXPECT_EQ(
      ok + (codes.count("DEADLINE_EXCEEDED") ? codes.at("DEADLINE_EXCEEDED").number_value() : 0),
      40)
      << out;
  EXPECT_EQ(Number(s, "calls_started_after_deadline"), 0) << out;
}

// The table, for people: how late calls were made, and (when there were
// any) how many expired unsent.
TEST(H2LoadE2eTest, TheTableSaysHowFarBehindScheduleCallsWereMade) {
  Chain chain({}, "none");
  ASSERT_NE(chain.gateway, nullptr) << chain.processes.error();
  auto [status, out] =
      RunCommand(absl::StrCat(HOPBUDGET_H2_LOAD, " --gateway=", chain.gateway->address(),
                              " --rps=20 --duration=500ms --budget=2s --quiet"),
                 /*stdout_only=*/true);
  ASSERT_EQ(status, 0) << out;
  EXPECT_THAT(out, ::testing::ContainsRegex("\n  ok +10\n"));
  EXPECT_THAT(out, HasSubstr("made behind schedule p99 / max"));
}

// The sum of every sample of `name` (a counter, or a histogram's _count)
// in a Prometheus text exposition; 0 when there is none.
double SumOf(const std::string& exposition, const std::string& name) {
  double sum = 0;
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (!absl::StartsWith(line, name) || line.size() == name.size()) continue;
    const char next = line[name.size()];
    if (next != '{' && next != ' ') continue;
    double v = 0;
    if (absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &v)) sum += v;
  }
  return sum;
}

// A plain gRPC caller sends grpc-timeout alone; with --budget-headers the
// gateway gets hopbudget's stamp too, and measures each call's wait on its
// way (hopbudget_server_transit_delay_seconds, docs/transit.md).
TEST(H2LoadE2eTest, BudgetHeadersReachTheGatewayOnlyWhenAsked) {
  Chain chain({}, "none");
  ASSERT_NE(chain.gateway, nullptr) << chain.processes.error();
  const std::string metric = "hopbudget_server_transit_delay_seconds_count";
  for (const bool headers : {false, true}) {
    absl::StatusOr<std::string> before = HttpGet(chain.gateway->metrics_port(), "/metrics");
    ASSERT_TRUE(before.ok()) << before.status();
    auto [status, out] =
        RunCommand(absl::StrCat(HOPBUDGET_H2_LOAD, " --gateway=", chain.gateway->address(),
                                " --rps=20 --duration=1s --budget=2s --quiet --json=-",
                                headers ? " --budget-headers" : ""),
                   /*stdout_only=*/true);
    ASSERT_EQ(status, 0) << out;
    EXPECT_EQ(Number(ParseJson(out), "ok"), 20) << out;
    absl::StatusOr<std::string> after = HttpGet(chain.gateway->metrics_port(), "/metrics");
    ASSERT_TRUE(after.ok()) << after.status();
    EXPECT_EQ(SumOf(*after, metric) - SumOf(*before, metric), headers ? 20 : 0)
        << "--budget-headers " << headers;
  }
}

// A gateway that goes away mid-run (here a deploy's SIGTERM: gRPC sends
// GOAWAY) ends the run with exit status 1 and says so, and why, rather than
// averaging a dead chain into a round.
TEST(H2LoadE2eTest, AConnectionLostMidRunExitsOneNamingIt) {
  auto chain = std::make_unique<Chain>(std::vector<std::string>{}, "none");
  ASSERT_NE(chain->gateway, nullptr) << chain->processes.error();
  FILE* f = popen(absl::StrCat(HOPBUDGET_H2_LOAD, " --gateway=", chain->gateway->address(),
                               " --rps=50 --duration=60s --budget=2s --quiet --json=- 2>&1")
                      .c_str(),
                  "r");
  ASSERT_NE(f, nullptr);
  // The load is under way once calls have reached the gateway.
  bool started = false;
  for (int i = 0; i < 200 && !started; ++i) {
    absl::StatusOr<std::string> metrics = HttpGet(chain->gateway->metrics_port(), "/metrics");
    started = metrics.ok() && SumOf(*metrics, "hopbudget_budget_at_arrival_seconds_count") > 0;
    if (!started) absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_TRUE(started);
  chain.reset();  // stops the three services, the gateway first
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  const int status = pclose(f);
  EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 1) << out;
  EXPECT_THAT(out, HasSubstr("was lost")) << out;
  // And why: the gateway's GOAWAY, or the socket it closed.
  EXPECT_THAT(out, AnyOf(HasSubstr("was lost: GOAWAY"),
                         HasSubstr("was lost: the server closed the connection")))
      << out;
}

TEST(H2LoadE2eTest, BadCommandLinesExit2NamingTheFlag) {
  struct Case {
    const char* args;
    const char* message;
  };
  const Case cases[] = {
      {"--rps=10", "--gateway is required"},
      {"--gateway=localhost --rps=10", "--gateway=localhost: one host:port"},
      {"--gateway=127.0.0.1:1,127.0.0.1:2 --rps=10", "one host:port"},
      {"--gateway=127.0.0.1:1", "--rps=0: more than 0"},
      {"--gateway=127.0.0.1:1 --rps=-5", "--rps=-5: more than 0"},
      {"--gateway=127.0.0.1:1 --rps=10 --budget=0s", "--budget=0: more than 0"},
      {"--gateway=127.0.0.1:1 --rps=10 --duration=inf", "--duration=inf: more than 0, finite"},
      {"--gateway=127.0.0.1:1 --rps=10 --client-throttle=0.5", "--client-throttle=0.5"},
      {"--gateway=127.0.0.1:1 --rps=10 --admin=x", "--admin=x"},
      {"--gateway=127.0.0.1:1 --rps=10 --json=/nonexistent-dir/s.json",
       "--json=/nonexistent-dir/s.json: cannot write"},
      {"--gateway=127.0.0.1:1 --rps=10 --bogus", "unknown flag --bogus"},
  };
  for (const Case& c : cases) {
    auto [status, out] = RunCommand(absl::StrCat(HOPBUDGET_H2_LOAD, " ", c.args));
    EXPECT_EQ(status, 2) << c.args << ": " << out;
    EXPECT_THAT(out, HasSubstr(c.message)) << c.args;
  }
}

TEST(H2LoadE2eTest, AGatewayThatIsNotThereIsAnErrorNotAnEmptyRound) {
  auto [status, out] = RunCommand(
      absl::StrCat(HOPBUDGET_H2_LOAD, " --gateway=127.0.0.1:1 --rps=10 --duration=100ms"));
  EXPECT_EQ(status, 1) << out;
  EXPECT_THAT(out, HasSubstr("cannot connect to 127.0.0.1:1"));
}

}  // namespace
}  // namespace hopbudget::e2e
