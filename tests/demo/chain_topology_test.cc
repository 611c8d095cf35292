// Copyright hopbudget authors.
//
// client/chainctl/topology.h: each hop's command line for a ChainSpec, the
// order to start them in, extras that replace the chain's flags, and the
// errors of a spec or a start order that cannot work.
#include <map>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "topology.h"

namespace hopbudget::chainctl {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

const std::map<Hop, std::string> kStarted = {{Hop::kLedger, "127.0.0.1:1"},
                                             {Hop::kReplica, "127.0.0.1:2"},
                                             {Hop::kOrders, "127.0.0.1:3"},
                                             {Hop::kGateway, "127.0.0.1:4"}};

ChainSpec Spec(const std::string& mode = "hopbudget", bool replica = false) {
  ChainSpec spec;
  spec.mode = mode;
  spec.replica = replica;
  spec.db = "/tmp/x/ledger.db";
  return spec;
}

struct CommandCase {
  std::string scenario;
  ChainSpec spec;
  Hop hop;
  std::string binary;
  std::vector<std::string> args;
};

// The scenario names the case in test names and failures.
void PrintTo(const CommandCase& c, std::ostream* os) { *os << c.scenario; }

class CommandForTest : public ::testing::TestWithParam<CommandCase> {};

TEST_P(CommandForTest, GivesTheHopsCommandLine) {
  const CommandCase& c = GetParam();
  absl::StatusOr<HopCommand> command = CommandFor(c.spec, c.hop, kStarted);
  ASSERT_TRUE(command.ok()) << command.status();
  EXPECT_EQ(command->hop, c.hop);
  EXPECT_EQ(command->binary, c.binary);
  EXPECT_THAT(command->args, ElementsAreArray(c.args));
}

ChainSpec WithExtra(ChainSpec spec, Hop hop, std::vector<std::string> extra) {
  spec.extra[hop] = std::move(extra);
  return spec;
}

ChainSpec WithEdge(ChainSpec spec) {
  spec.edge = true;
  return spec;
}

ChainSpec WithSeed(ChainSpec spec, int64_t seed) {
  spec.seed = seed;
  return spec;
}

INSTANTIATE_TEST_SUITE_P(
    Topology, CommandForTest,
    ::testing::Values(
        CommandCase{"HopbudgetLedgerHasTheDatabase",
                    Spec(),
                    Hop::kLedger,
                    "ledger",
                    {"--port=0", "--metrics-port=0", "--seed=42", "--name=ledger",
                     "--mode=hopbudget", "--db=/tmp/x/ledger.db"}},
        CommandCase{"ReplicaIsTheLedgerBinaryReadOnlyOnTheSameDatabase",
                    Spec("hopbudget", true),
                    Hop::kReplica,
                    "ledger",
                    {"--port=0", "--metrics-port=0", "--seed=42", "--name=ledger-replica",
                     "--mode=hopbudget", "--db=/tmp/x/ledger.db", "--replica"}},
        CommandCase{
            "HopbudgetOrdersCallsTheLedgerWithTheDemosAttemptCaps",
            Spec(),
            Hop::kOrders,
            "orders",
            {"--port=0", "--metrics-port=0", "--seed=42", "--name=orders", "--mode=hopbudget",
             "--ledger=127.0.0.1:1", "--attempt-cap=300ms", "--max-attempts=3"}},
        CommandCase{
            "OrdersReadsTheReplicaThenThePrimary",
            Spec("hopbudget", true),
            Hop::kOrders,
            "orders",
            {"--port=0", "--metrics-port=0", "--seed=42", "--name=orders", "--mode=hopbudget",
             "--ledger=127.0.0.1:1", "--ledger-replicas=127.0.0.1:2,127.0.0.1:1",
             "--attempt-cap=300ms", "--max-attempts=3"}},
        CommandCase{"HopbudgetGatewayCapsRequestsAtTwoSeconds",
                    Spec(),
                    Hop::kGateway,
                    "gateway",
                    {"--port=0", "--metrics-port=0", "--seed=42", "--name=gateway",
                     "--mode=hopbudget", "--orders=127.0.0.1:3", "--request-cap=2s"}},
        CommandCase{
            "BaselineOrdersRetriesThreeTimesWithOneSecondEach",
            Spec("baseline"),
            Hop::kOrders,
            "orders",
            {"--port=0", "--metrics-port=0", "--seed=42", "--name=orders", "--mode=baseline",
             "--ledger=127.0.0.1:1", "--baseline-timeout=1s", "--baseline-attempts=3"}},
        CommandCase{"BaselineGatewayGivesOrdersOneSecond",
                    Spec("baseline"),
                    Hop::kGateway,
                    "gateway",
                    {"--port=0", "--metrics-port=0", "--seed=42", "--name=gateway",
                     "--mode=baseline", "--orders=127.0.0.1:3", "--baseline-timeout=1s"}},
        CommandCase{"TheSeedIsEveryHops",
                    WithSeed(Spec(), 7),
                    Hop::kLedger,
                    "ledger",
                    {"--port=0", "--metrics-port=0", "--seed=7", "--name=ledger",
                     "--mode=hopbudget", "--db=/tmp/x/ledger.db"}},
        CommandCase{
            "AnExtraFlagComesAfterTheChainsOwn",
            WithExtra(Spec(), Hop::kLedger, {"--shield-bound=600ms", "--latency=exp:20ms"}),
            Hop::kLedger,
            "ledger",
            {"--port=0", "--metrics-port=0", "--seed=42", "--name=ledger", "--mode=hopbudget",
             "--db=/tmp/x/ledger.db", "--shield-bound=600ms", "--latency=exp:20ms"}},
        // The services refuse a flag given twice: an override takes the
        // place of the chain's flag.
        CommandCase{"AnExtraFlagReplacesTheChainsFlagInItsPlace",
                    WithExtra(Spec(), Hop::kOrders,
                              {"--mode=baseline", "--baseline_timeout=300ms", "--attempt-cap=1s",
                               "--port=5001"}),
                    Hop::kOrders,
                    "orders",
                    {"--port=5001", "--metrics-port=0", "--seed=42", "--name=orders",
                     "--mode=baseline", "--ledger=127.0.0.1:1", "--attempt-cap=1s",
                     "--max-attempts=3", "--baseline_timeout=300ms"}},
        CommandCase{"TheLastOfTwoExtrasWins",
                    WithExtra(Spec(), Hop::kLedger, {"--shield-bound=5s", "--shield-bound=400ms"}),
                    Hop::kLedger,
                    "ledger",
                    {"--port=0", "--metrics-port=0", "--seed=42", "--name=ledger",
                     "--mode=hopbudget", "--db=/tmp/x/ledger.db", "--shield-bound=400ms"}},
        CommandCase{"TheEdgeForwardsToTheGatewayAndTakesNoSeedModeOrMetricsPort",
                    WithEdge(Spec()),
                    Hop::kEdge,
                    "edge",
                    {"--port=0", "--name=edge", "--upstream=127.0.0.1:4"}},
        CommandCase{"TheEdgeOfABaselineChainIsTheSame",
                    WithExtra(WithEdge(Spec("baseline")), Hop::kEdge,
                              {"--limit=fixed", "--max-in-flight=128"}),
                    Hop::kEdge,
                    "edge",
                    {"--port=0", "--name=edge", "--upstream=127.0.0.1:4", "--limit=fixed",
                     "--max-in-flight=128"}},
        CommandCase{"ANegatedBoolReplacesTheBool",
                    WithExtra(Spec("hopbudget", true), Hop::kReplica, {"--noreplica", "--seed=8"}),
                    Hop::kReplica,
                    "ledger",
                    {"--port=0", "--metrics-port=0", "--seed=8", "--name=ledger-replica",
                     "--mode=hopbudget", "--db=/tmp/x/ledger.db", "--noreplica"}}),
    [](const ::testing::TestParamInfo<CommandCase>& info) { return info.param.scenario; });

struct ErrorCase {
  std::string scenario;
  ChainSpec spec;
  Hop hop;
  std::map<Hop, std::string> started;
  absl::StatusCode code;
  std::string message;
};

void PrintTo(const ErrorCase& c, std::ostream* os) { *os << c.scenario; }

class CommandForErrorTest : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(CommandForErrorTest, SaysWhatIsWrong) {
  const ErrorCase& c = GetParam();
  absl::StatusOr<HopCommand> command = CommandFor(c.spec, c.hop, c.started);
  ASSERT_FALSE(command.ok());
  EXPECT_EQ(command.status().code(), c.code) << command.status();
  EXPECT_THAT(command.status().message(), HasSubstr(c.message));
}

ChainSpec WithoutDb() {
  ChainSpec spec = Spec();
  spec.db.clear();
  return spec;
}

INSTANTIATE_TEST_SUITE_P(
    Topology, CommandForErrorTest,
    ::testing::Values(
        ErrorCase{"UnknownMode", Spec("fast"), Hop::kLedger, kStarted,
                  absl::StatusCode::kInvalidArgument, "chain mode \"fast\": hopbudget or baseline"},
        ErrorCase{"EmptyDatabase", WithoutDb(), Hop::kGateway, kStarted,
                  absl::StatusCode::kInvalidArgument, "no ledger database"},
        ErrorCase{"OrdersBeforeTheLedger",
                  Spec(),
                  Hop::kOrders,
                  {},
                  absl::StatusCode::kFailedPrecondition,
                  "orders calls ledger, which has no address yet"},
        ErrorCase{"OrdersBeforeTheReplica",
                  Spec("hopbudget", true),
                  Hop::kOrders,
                  {{Hop::kLedger, "127.0.0.1:1"}},
                  absl::StatusCode::kFailedPrecondition,
                  "orders calls ledger-replica, which has no address yet"},
        ErrorCase{"GatewayBeforeOrders",
                  Spec(),
                  Hop::kGateway,
                  {{Hop::kLedger, "127.0.0.1:1"}, {Hop::kOrders, ""}},
                  absl::StatusCode::kFailedPrecondition,
                  "gateway calls orders, which has no address yet"},
        ErrorCase{"TheReplicaOfAChainWithoutOne", Spec(), Hop::kReplica, kStarted,
                  absl::StatusCode::kNotFound, "the chain has no replica"},
        ErrorCase{"ExtrasForAReplicaTheChainDoesNotHave",
                  WithExtra(Spec(), Hop::kReplica, {"--seed=8"}), Hop::kLedger, kStarted,
                  absl::StatusCode::kInvalidArgument, "the chain has no replica"},
        ErrorCase{"TheEdgeOfAChainWithoutOne", Spec(), Hop::kEdge, kStarted,
                  absl::StatusCode::kNotFound, "the chain has no edge"},
        ErrorCase{"ExtrasForAnEdgeTheChainDoesNotHave",
                  WithExtra(Spec(), Hop::kEdge, {"--limit=fixed"}), Hop::kGateway, kStarted,
                  absl::StatusCode::kInvalidArgument, "the chain has no edge"},
        ErrorCase{"TheEdgeBeforeTheGateway",
                  WithEdge(Spec()),
                  Hop::kEdge,
                  {{Hop::kLedger, "127.0.0.1:1"}, {Hop::kOrders, "127.0.0.1:3"}},
                  absl::StatusCode::kFailedPrecondition,
                  "edge calls gateway, which has no address yet"},
        ErrorCase{"AnExtraThatIsNotOneFlag",
                  WithExtra(Spec(), Hop::kGateway, {"--latency", "fixed:1ms"}), Hop::kGateway,
                  kStarted, absl::StatusCode::kInvalidArgument,
                  "gateway's extra flags: \"fixed:1ms\" is not a flag"},
        ErrorCase{"AnExtraWithoutAName", WithExtra(Spec(), Hop::kLedger, {"--=1"}), Hop::kLedger,
                  kStarted, absl::StatusCode::kInvalidArgument, "\"--=1\" is not a flag"}),
    [](const ::testing::TestParamInfo<ErrorCase>& info) { return info.param.scenario; });

TEST(StartOrderTest, CalleesComeFirst) {
  EXPECT_THAT(StartOrder(Spec()), ElementsAre(Hop::kLedger, Hop::kOrders, Hop::kGateway));
  EXPECT_THAT(StartOrder(Spec("baseline", true)),
              ElementsAre(Hop::kLedger, Hop::kReplica, Hop::kOrders, Hop::kGateway));
  EXPECT_THAT(StartOrder(WithEdge(Spec())),
              ElementsAre(Hop::kLedger, Hop::kOrders, Hop::kGateway, Hop::kEdge));
}

TEST(StartOrderTest, EachHopStartsWithTheAddressesOfThoseBeforeIt) {
  for (bool replica : {false, true}) {
    ChainSpec spec = Spec("hopbudget", replica);
    spec.edge = replica;
    std::map<Hop, std::string> started;
    int port = 1;
    for (Hop hop : StartOrder(spec)) {
      absl::StatusOr<HopCommand> command = CommandFor(spec, hop, started);
      ASSERT_TRUE(command.ok()) << hop << ": " << command.status();
      started[hop] = absl::StrCat("127.0.0.1:", port++);
    }
  }
}

TEST(HopTest, PrintsItsName) {
  EXPECT_EQ(HopName(Hop::kReplica), "ledger-replica");
  EXPECT_EQ(HopName(Hop::kEdge), "edge");
  std::ostringstream os;
  os << Hop::kGateway;
  EXPECT_EQ(os.str(), "gateway");
}

TEST(OverrideFlagsTest, KeepsArgsWithoutOverrides) {
  absl::StatusOr<std::vector<std::string>> args = OverrideFlags({"--a=1", "--b"}, {});
  ASSERT_TRUE(args.ok());
  EXPECT_THAT(*args, ElementsAre("--a=1", "--b"));
}

TEST(OverrideFlagsTest, ABoolReplacesItsNegation) {
  absl::StatusOr<std::vector<std::string>> args = OverrideFlags({"--noadmission"}, {"--admission"});
  ASSERT_TRUE(args.ok());
  EXPECT_THAT(*args, ElementsAre("--admission"));
}

TEST(OverrideFlagsTest, RefusesAPositionalArgument) {
  EXPECT_EQ(OverrideFlags({}, {"-x"}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(OverrideFlags({}, {"--"}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hopbudget::chainctl
