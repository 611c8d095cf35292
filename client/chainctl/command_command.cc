// Copyright hopbudget authors.
//
// chainctl command: one hop's command line from the chain's one description
// (topology.h), for a script that starts and restarts the hops itself: the
// binary's file name on the first line, then each
// argument on a line of its own (bash: mapfile -t). The callees the hop
// calls are given by address (--started).
#include <iostream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "commands.h"
#include "topology.h"

ABSL_FLAG(std::string, hop, "",
          "the hop: ledger, ledger-replica, orders, gateway or edge (required)");
ABSL_FLAG(std::string, started, "",
          "the callees already started, HOP=HOST:PORT,... (orders: ledger and, with --replica, "
          "ledger-replica; gateway: orders; edge: gateway)");

namespace hopbudget::chainctl {
namespace {

constexpr Hop kHops[] = {Hop::kLedger, Hop::kReplica, Hop::kOrders, Hop::kGateway, Hop::kEdge};

absl::StatusOr<Hop> HopNamed(absl::string_view name) {
  for (Hop hop : kHops) {
    if (HopName(hop) == name) return hop;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown hop \"", name, "\" (ledger, ledger-replica, orders, gateway, edge)"));
}

}  // namespace

int Command(int argc, char** argv) {
  ParseCommand(argc, argv, "command",
               "chainctl command: one hop's command line from the chain's one description: its "
               "binary's name on the first line, then each argument on a line of its own.\n\n"
               "  chainctl command --hop=orders --db=FILE [--mode=hopbudget|baseline] [--replica]\n"
               "      --started=ledger=127.0.0.1:5001[,ledger-replica=...] [--orders-flags=...]",
               {"hop", "db", "started", "mode", "replica", "edge", "seed", "gateway_flags",
                "orders_flags", "ledger_flags", "replica_flags", "edge_flags"});
  cli::ExitIfBad("chainctl command", cli::Required("hop", absl::GetFlag(FLAGS_hop)));
  absl::StatusOr<Hop> hop = HopNamed(absl::GetFlag(FLAGS_hop));
  if (!hop.ok()) return Fail("command", absl::StrCat("--hop: ", hop.status().message()));
  std::map<Hop, std::string> started;
  for (absl::string_view entry :
       absl::StrSplit(absl::GetFlag(FLAGS_started), ',', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(entry, absl::MaxSplits('=', 1));
    absl::StatusOr<Hop> callee = HopNamed(kv.first);
    if (!callee.ok() || kv.second.empty()) {
      return Fail("command", absl::StrCat("--started: \"", entry, "\" is not HOP=HOST:PORT",
                                          callee.ok() ? "" : ": ", callee.status().message()));
    }
    started[*callee] = kv.second;
  }
  absl::StatusOr<HopCommand> command =
      CommandFor(ChainFromFlags(absl::GetFlag(FLAGS_db)), *hop, started);
  if (!command.ok()) return Fail("command", std::string(command.status().message()));
  std::cout << command->binary << "\n";
  for (const std::string& arg : command->args) std::cout << arg << "\n";
  return 0;
}

}  // namespace hopbudget::chainctl
