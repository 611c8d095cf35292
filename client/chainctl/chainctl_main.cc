// Copyright hopbudget authors.
//
// chainctl: drives the demo chain (server/).
//
//   chainctl order   --gateway H:P --budget 800ms [--key K] [--item sku:qty,...]
//   chainctl watch   --gateway H:P --key K [--budget 800ms]   (WatchOrder, message by message)
//   chainctl load    --gateway H:P --rps N --duration D --budget B [--concurrency C]
//                    [--json FILE] [--admin H:P,H:P,H:P] [--requests-out FILE]
//                    [--method place-order|get-order [--read-keys N]]
//   chainctl audit   --db LEDGER.db --requests FILE      (exactly once, by key and content)
//   chainctl probe   --gateway H:P --admin G,O,L         (the client deadline reaches every hop)
//   chainctl metrics --targets H:P,H:P,H:P [--watch] [--json]     (HTTP ports)
//   chainctl faults  --admin H:P [--latency SPEC] [--error-rate P] [--hang P]
//                    [--hang-next N] [--slow-commit D] [--silence[=false]] [--clear]
//   chainctl stats   --admin H:P,H:P,H:P
//   chainctl scenarios --hopbudget G,O,L --baseline G,O,L [--orders N] [--only a,b]
//                    [--hopbudget-requests-out FILE] [--baseline-requests-out FILE]
//   chainctl up      --bin BUILD/server --work DIR [--mode M] [--replica] [--ports-out FILE]
//                    [--gateway-flags F] [--orders-flags F] [--ledger-flags F]
//   chainctl command --hop H --db FILE [--mode M] [--replica] --started HOP=H:P,... [--orders-flags
//   F]
//   chainctl demo    --bin BUILD/server --h2load H2_LOAD --lint HOPBUDGET_LINT [--once]
//   chainctl overload --bin BUILD/server --h2load H2_LOAD --work DIR --out FILE [--levels 1,2,...]
//   chainctl saved-work --bin BUILD/server --work DIR --out FILE --client-throttle K
//
// Exit codes: 0 ok, 1 the call / a check failed, 2 bad arguments.
//
// This file is the dispatcher and the usage text; each command is in its own
// file (order_command.cc, ...), with its flags (commands.h).
#include <iostream>
#include <string>

#include "commands.h"

namespace hopbudget::chainctl {
namespace {

constexpr char kUsage[] =
    "usage: chainctl <command> [flags]   (chainctl <command> --help for its flags)\n"
    "  order      place one order; prints the result, the attribution of a failure and\n"
    "             the per-hop budget waterfall\n"
    "  watch      watch one order's status (WatchOrder) through the chain: each message as\n"
    "             it arrives, then how the stream ended and the budget that ended it\n"
    "  load       open-loop load with a summary table (and --json)\n"
    "  metrics    the inspection table of the services' /metrics\n"
    "  faults     change a service's faults at run time (Admin service)\n"
    "  stats      the services' deadline accounting (Admin GetStats; and --json)\n"
    "  audit      check the ledger's rows against the requests `load` or `scenarios` recorded:\n"
    "             each order at most once (by key and by content), each acknowledged once\n"
    "  probe      check that the client deadline header reaches every hop (one order sent\n"
    "             with a deadline already past must be counted late at each of them)\n"
    "  scenarios  replay the seeds' incidents on a baseline and a hopbudget chain\n"
    "  up         start a chain from its one description (topology.h), print each hop's\n"
    "             ports and pid, keep it up until SIGTERM or SIGINT, then stop it\n"
    "  command    one hop's command line from the same description, for a script that\n"
    "             starts and restarts the hops itself\n"
    "  demo       start a hopbudget and a baseline chain and run the demo's scenarios on\n"
    "             both, side by side (scripts/demo.sh)\n"
    "  overload   the overload benchmark's runs: one chain behind its edge at multiples\n"
    "             of its capacity (scripts/bench.sh --only overload)\n"
    "  saved-work the chain benchmark's runs: a hopbudget and a baseline chain at\n"
    "             multiples of the baseline's capacity (scripts/bench.sh --only chain)\n";

int Main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << kUsage;
    return 2;
  }
  const std::string cmd = argv[1];
  if (cmd == "order") return Order(argc, argv);
  if (cmd == "watch") return Watch(argc, argv);
  if (cmd == "load") return Load(argc, argv);
  if (cmd == "metrics") return Metrics(argc, argv);
  if (cmd == "faults") return FaultsCmd(argc, argv);
  if (cmd == "stats") return StatsCmd(argc, argv);
  if (cmd == "scenarios") return Scenarios(argc, argv);
  if (cmd == "audit") return Audit(argc, argv);
  if (cmd == "probe") return Probe(argc, argv);
  if (cmd == "up") return Up(argc, argv);
  if (cmd == "command") return Command(argc, argv);
  if (cmd == "demo") return DemoCmd(argc, argv);
  if (cmd == "overload") return OverloadCmd(argc, argv);
  if (cmd == "saved-work") return SavedWorkCmd(argc, argv);
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    std::cout << kUsage;
    return 0;
  }
  std::cerr << "chainctl: unknown command \"" << cmd << "\"\n" << kUsage;
  return 2;
}

}  // namespace
}  // namespace hopbudget::chainctl

int main(int argc, char** argv) { return hopbudget::chainctl::Main(argc, argv); }
