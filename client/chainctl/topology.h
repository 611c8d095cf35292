// Copyright hopbudget authors.
//
// topology.h: the demo chain's topology and flags, declared once.
//
// The chain is ledger <- orders <- gateway, with an optional read replica
// of the ledger (the `ledger` binary with --replica on the same database)
// that orders reads from in turn with the primary, and an optional edge in
// front of the gateway (server/edge: callers call it, it forwards to the
// gateway what its admission lets in). This header says, for a
// ChainSpec, which hops there are, in which order to start them (the callee
// first, so that each caller gets its callee's address) and each hop's
// command line:
//   every hop   --port=0 --metrics-port=0 --seed=<seed> --name=<hop name>
//               --mode=<mode>
//   ledger      --db=<db>                 replica  --db=<db> --replica
//   orders      --ledger=<ledger>, and --ledger-replicas=<replica>,<ledger>
//               when the chain has a replica
//   gateway     --orders=<orders>
//   edge        only --port=0 --name=edge --upstream=<gateway> (it has no
//               metrics port, seed or mode)
//   hopbudget   gateway --request-cap=2s; orders --attempt-cap=300ms
//               --max-attempts=3 (the demo's budgets: 2 s per request,
//               3 ledger attempts of at most 300 ms)
//   baseline    gateway --baseline-timeout=1s; orders --baseline-timeout=1s
//               --baseline-attempts=3 (a constant 1 s per hop, a naive
//               retry loop of 3 inside the gateway's 1 s: the incident)
// then the consumer's extra flags for that hop (ChainSpec::extra). The
// ledger's shield bound, service configs, latencies and bounds are the
// consumer's: the demo, the benchmark and each test choose their own.
//
// Contract: the services refuse a flag given twice (client/cli/cli_flags.h),
// so an extra flag does not come after the one it overrides, it replaces
// it: the last value of each flag wins, in the place of the first
// (OverrideFlags). The addresses are whatever the callee's clients accept
// ("127.0.0.1:5001", or a target of several: "ipv4:127.0.0.1:1,127.0.0.1:2").
// Pure: no process is started, no file is touched.
//
// Edge cases: an unknown mode, an empty db, extras for a replica or an edge
// the chain does not have, and an extra flag that is not one argument (--name=value,
// or --name / --noname for a bool) are InvalidArgument; asking for the
// replica or the edge of a chain without one is NotFound; a caller whose callee has no
// address in `started` yet is FailedPrecondition.
//
// Thread safety: value types and free functions; no shared state.
//
// Example:
//   ChainSpec spec;
//   spec.db = dir + "/ledger.db";
//   spec.extra[Hop::kLedger] = {"--shield-bound=600ms"};
//   std::map<Hop, std::string> started;
//   for (Hop hop : StartOrder(spec)) {
//     absl::StatusOr<HopCommand> command = CommandFor(spec, hop, started);
//     if (!command.ok()) return command.status();
//     started[hop] = Spawn(bin + "/" + command->binary, command->args);  // "127.0.0.1:<port>"
//   }
#ifndef HOPBUDGET_CHAINCTL_TOPOLOGY_H_
#define HOPBUDGET_CHAINCTL_TOPOLOGY_H_

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hopbudget::chainctl {

// A hop of the chain, callee first.
enum class Hop { kLedger, kReplica, kOrders, kGateway, kEdge };

// Its name: "ledger", "ledger-replica", "orders", "gateway", "edge" (also its
// --name: in metrics, attribution and the ready line). AbslStringify and
// operator<< print it (Debian's Abseil 20220623 has no AbslStringify yet:
// absl::StrCat(hop) is a number there; write HopName(hop)).
absl::string_view HopName(Hop hop);
template <typename Sink>
void AbslStringify(Sink& sink, Hop hop) {
  sink.Append(HopName(hop));
}
inline std::ostream& operator<<(std::ostream& os, Hop hop) { return os << HopName(hop); }

// One chain.
struct ChainSpec {
  // "hopbudget" or "baseline".
  std::string mode = "hopbudget";
  // A read replica of the ledger, which orders reads from with the primary.
  bool replica = false;
  // An edge in front of the gateway, which callers call instead.
  bool edge = false;
  // The ledger's SQLite file (the replica opens the same one). Required.
  std::string db;
  // Every hop's fault injector seed (a hop's extra --seed= overrides it).
  int64_t seed = 42;
  // Each hop's extra flags, after (and overriding) the chain's own.
  std::map<Hop, std::vector<std::string>> extra;
};

// How to start one hop: the binary's file name ("ledger", "orders",
// "gateway", "edge"; the caller knows the folder) and its arguments.
struct HopCommand {
  Hop hop;
  std::string binary;
  std::vector<std::string> args;
};

// The chain's hops in the order to start them: ledger, replica (if any),
// orders, gateway, edge (if any). Stop them in the reverse order.
[[nodiscard]] std::vector<Hop> StartOrder(const ChainSpec& spec);

// `hop`'s command, given the addresses of the hops already started (the
// callees it needs: see StartOrder). The errors are the edge cases above.
[[nodiscard]] absl::StatusOr<HopCommand> CommandFor(const ChainSpec& spec, Hop hop,
                                                    const std::map<Hop, std::string>& started);

// `args` with each of `flags` in turn: a flag already there is replaced
// in its place (--x=2 replaces --x=1, --nox replaces --x, dashes and
// underscores alike), a new one is appended. InvalidArgument for a flag
// that is not "--name[=value]".
[[nodiscard]] absl::StatusOr<std::vector<std::string>> OverrideFlags(
    std::vector<std::string> args, const std::vector<std::string>& flags);

}  // namespace hopbudget::chainctl

#endif  // HOPBUDGET_CHAINCTL_TOPOLOGY_H_
