// Copyright hopbudget authors.
//
// The flags and helpers several chainctl commands share (commands.h).
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "commands.h"

ABSL_FLAG(std::string, gateway, "", "gateway HOST:PORT (required)");
ABSL_FLAG(absl::Duration, budget, absl::Milliseconds(800),
          "the client's deadline per call, from its start (probe: default 5s)");
ABSL_FLAG(std::string, key, "", "idempotency key (default: a new one)");
ABSL_FLAG(std::string, item, "sku-1:1", "items, sku[:qty],...");
ABSL_FLAG(std::string, json, "",
          "also write the result as JSON to this file; - (or --json alone) writes it to stdout "
          "instead of the table");
ABSL_FLAG(std::string, admin, "", "gRPC HOST:PORT,... of the services (Admin service)");
ABSL_FLAG(std::string, db, "",
          "the ledger's SQLite file (audit: required, read only; command: the chain's)");
// A chain from its description (up, command).
ABSL_FLAG(std::string, mode, "hopbudget", "the chain's mode: hopbudget or baseline");
ABSL_FLAG(bool, replica, false, "a read replica of the ledger, read by orders with the primary");
ABSL_FLAG(int64_t, seed, 42, "every hop's fault injector seed");
ABSL_FLAG(std::string, gateway_flags, "", "the gateway's extra flags, separated by spaces");
ABSL_FLAG(std::string, orders_flags, "", "orders' extra flags, separated by spaces");
ABSL_FLAG(std::string, ledger_flags, "", "the ledger's extra flags, separated by spaces");
ABSL_FLAG(std::string, replica_flags, "", "the replica's extra flags, separated by spaces");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(5),
          "how long to start calls (overload: each run of each level)");
ABSL_FLAG(double, client_throttle, 0,
          "0 (off), or the SRE book's adaptive throttling with this K (>= 1, e.g. 2): the "
          "client refuses calls itself, unsent, so that it sends about K times what the gateway "
          "accepts (overload: the throttled caller's, > 0)");
ABSL_FLAG(std::string, work, "", "the folder of the ledger's database and the hops' output");
ABSL_FLAG(std::string, h2load, "",
          "client/h2load/h2_load: the caller that does not back off (required)");
ABSL_FLAG(std::string, out, "", "the RESULT lines' file (written afresh; required)");
ABSL_FLAG(int, rounds, 3, "rounds of each load level (saved-work: past capacity)");
ABSL_FLAG(absl::Duration, gap, absl::Seconds(3), "the pause after each run");
ABSL_FLAG(std::string, bin, "",
          "the folder of the service binaries (gateway, orders, ledger, edge)");
ABSL_FLAG(bool, edge, false, "an edge in front of the gateway (server/edge), which callers call");
ABSL_FLAG(std::string, edge_flags, "", "the edge's extra flags, separated by spaces");

namespace hopbudget::chainctl {

cli::CommandLine ParseCommand(int argc, char** argv, const std::string& command,
                              const std::string& usage, std::vector<std::string> flags) {
  cli::CliOptions options;
  options.program = "chainctl " + command;
  options.usage = usage;
  options.flags = std::move(flags);
  options.value_optional = {"json"};  // --json alone: JSON on stdout
  options.first = 2;
  cli::CommandLine cl = cli::ParseOrExit(argc, argv, options);
  if (!cl.positional.empty()) {
    cli::ExitIfBad(options.program, absl::InvalidArgumentError(absl::StrCat(
                                        "unexpected argument \"", cl.positional[0], "\"")));
  }
  return cl;
}

int Fail(const std::string& command, const std::string& message) {
  cli::ExitIfBad("chainctl " + command, absl::InvalidArgumentError(message));
  return 2;
}

ChainSpec ChainFromFlags(std::string db) {
  auto words = [](const std::string& flags) -> std::vector<std::string> {
    return absl::StrSplit(flags, ' ', absl::SkipEmpty());
  };
  ChainSpec spec;
  spec.mode = absl::GetFlag(FLAGS_mode);
  spec.replica = absl::GetFlag(FLAGS_replica);
  spec.seed = absl::GetFlag(FLAGS_seed);
  spec.db = std::move(db);
  spec.extra[Hop::kGateway] = words(absl::GetFlag(FLAGS_gateway_flags));
  spec.extra[Hop::kOrders] = words(absl::GetFlag(FLAGS_orders_flags));
  spec.extra[Hop::kLedger] = words(absl::GetFlag(FLAGS_ledger_flags));
  if (spec.replica) spec.extra[Hop::kReplica] = words(absl::GetFlag(FLAGS_replica_flags));
  spec.edge = absl::GetFlag(FLAGS_edge);
  if (spec.edge) spec.extra[Hop::kEdge] = words(absl::GetFlag(FLAGS_edge_flags));
  return spec;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool WriteRequests(const std::string& path, const std::vector<RequestRecord>& requests) {
  std::ofstream f(path);
  for (const RequestRecord& r : requests) f << FormatRequestRecord(r) << "\n";
  if (!f) std::cerr << "chainctl: cannot write " << path << "\n";
  return static_cast<bool>(f);
}

}  // namespace hopbudget::chainctl
