// Copyright hopbudget authors.
#include "topology.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace hopbudget::chainctl {
namespace {

// A flag argument: its name as absl names it (dashes are underscores) and
// whether it has a value after '='.
struct Flag {
  std::string name;
  bool bare = false;
};

absl::StatusOr<Flag> ParseFlag(absl::string_view arg) {
  if (!absl::StartsWith(arg, "--") || arg.size() == 2 || arg[2] == '=' || arg[2] == '-') {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", arg,
                     "\" is not a flag: each is one argument, --name=value (or --name / "
                     "--noname for a bool)"));
  }
  absl::string_view body = arg.substr(2);
  const size_t eq = body.find('=');
  Flag flag;
  flag.bare = eq == absl::string_view::npos;
  flag.name = std::string(body.substr(0, eq));
  std::replace(flag.name.begin(), flag.name.end(), '-', '_');
  return flag;
}

// Whether `later` sets the flag `earlier` set: the same name, or a bool's
// --noname against --name.
bool SameFlag(const Flag& earlier, const Flag& later) {
  if (earlier.name == later.name) return true;
  if (later.bare && later.name == "no" + earlier.name) return true;
  return earlier.bare && earlier.name == "no" + later.name;
}

absl::Status CheckSpec(const ChainSpec& spec) {
  if (spec.mode != "hopbudget" && spec.mode != "baseline") {
    return absl::InvalidArgumentError(
        absl::StrCat("chain mode \"", spec.mode, "\": hopbudget or baseline"));
  }
  if (spec.db.empty()) {
    return absl::InvalidArgumentError("the chain has no ledger database (ChainSpec::db is empty)");
  }
  if (!spec.replica && spec.extra.count(Hop::kReplica) > 0) {
    return absl::InvalidArgumentError(
        "extra flags for ledger-replica, but the chain has no replica (ChainSpec::replica)");
  }
  if (!spec.edge && spec.extra.count(Hop::kEdge) > 0) {
    return absl::InvalidArgumentError(
        "extra flags for edge, but the chain has no edge (ChainSpec::edge)");
  }
  return absl::OkStatus();
}

// The address of `callee`, which `caller` calls: started before it.
absl::StatusOr<std::string> AddressOf(Hop caller, Hop callee,
                                      const std::map<Hop, std::string>& started) {
  auto it = started.find(callee);
  if (it == started.end() || it->second.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(HopName(caller), " calls ", HopName(callee),
                     ", which has no address yet: start the hops in StartOrder"));
  }
  return it->second;
}

}  // namespace

absl::string_view HopName(Hop hop) {
  switch (hop) {
    case Hop::kLedger:
      return "ledger";
    case Hop::kReplica:
      return "ledger-replica";
    case Hop::kOrders:
      return "orders";
    case Hop::kGateway:
      return "gateway";
    case Hop::kEdge:
      return "edge";
  }
  return "unknown-hop";
}

std::vector<Hop> StartOrder(const ChainSpec& spec) {
  std::vector<Hop> order = {Hop::kLedger};
  if (spec.replica) order.push_back(Hop::kReplica);
  order.insert(order.end(), {Hop::kOrders, Hop::kGateway});
  if (spec.edge) order.push_back(Hop::kEdge);
  return order;
}

absl::StatusOr<HopCommand> CommandFor(const ChainSpec& spec, Hop hop,
                                      const std::map<Hop, std::string>& started) {
  if (absl::Status s = CheckSpec(spec); !s.ok()) return s;
  if (hop == Hop::kReplica && !spec.replica) {
    return absl::NotFoundError("ledger-replica: the chain has no replica (ChainSpec::replica)");
  }
  if (hop == Hop::kEdge && !spec.edge) {
    return absl::NotFoundError("edge: the chain has no edge (ChainSpec::edge)");
  }
  const bool hopbudget = spec.mode == "hopbudget";
  HopCommand command{hop, "", {}};
  std::vector<std::string>& args = command.args;
  if (hop == Hop::kEdge) {
    args = {"--port=0", absl::StrCat("--name=", HopName(hop))};
  } else {
    args = {"--port=0", "--metrics-port=0", absl::StrCat("--seed=", spec.seed),
            absl::StrCat("--name=", HopName(hop)), "--mode=" + spec.mode};
  }
  switch (hop) {
    case Hop::kLedger:
    case Hop::kReplica:
      command.binary = "ledger";
      args.push_back("--db=" + spec.db);
      if (hop == Hop::kReplica) args.push_back("--replica");
      break;
    case Hop::kOrders: {
      command.binary = "orders";
      absl::StatusOr<std::string> ledger = AddressOf(hop, Hop::kLedger, started);
      if (!ledger.ok()) return ledger.status();
      args.push_back("--ledger=" + *ledger);
      if (spec.replica) {
        absl::StatusOr<std::string> replica = AddressOf(hop, Hop::kReplica, started);
        if (!replica.ok()) return replica.status();
        args.push_back(absl::StrCat("--ledger-replicas=", *replica, ",", *ledger));
      }
      if (hopbudget) {
        args.insert(args.end(), {"--attempt-cap=300ms", "--max-attempts=3"});
      } else {
        args.insert(args.end(), {"--baseline-timeout=1s", "--baseline-attempts=3"});
      }
      break;
    }
    case Hop::kGateway: {
      command.binary = "gateway";
      absl::StatusOr<std::string> orders = AddressOf(hop, Hop::kOrders, started);
      if (!orders.ok()) return orders.status();
      args.push_back("--orders=" + *orders);
      args.push_back(hopbudget ? "--request-cap=2s" : "--baseline-timeout=1s");
      break;
    }
    case Hop::kEdge: {
      command.binary = "edge";
      absl::StatusOr<std::string> gateway = AddressOf(hop, Hop::kGateway, started);
      if (!gateway.ok()) return gateway.status();
      args.push_back("--upstream=" + *gateway);
      break;
    }
  }
  auto extra = spec.extra.find(hop);
  if (extra == spec.extra.end()) return command;
  absl::StatusOr<std::vector<std::string>> merged = OverrideFlags(std::move(args), extra->second);
  if (!merged.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(HopName(hop), "'s extra flags: ", merged.status().message()));
  }
  command.args = *std::move(merged);
  return command;
}

absl::StatusOr<std::vector<std::string>> OverrideFlags(std::vector<std::string> args,
                                                       const std::vector<std::string>& flags) {
  for (const std::string& arg : flags) {
    absl::StatusOr<Flag> flag = ParseFlag(arg);
    if (!flag.ok()) return flag.status();
    auto same = std::find_if(args.begin(), args.end(), [&](const std::string& earlier) {
      absl::StatusOr<Flag> e = ParseFlag(earlier);
      return e.ok() && SameFlag(*e, *flag);
    });
    if (same == args.end()) {
      args.push_back(arg);
    } else {
      *same = arg;
    }
  }
  return args;
}

}  // namespace hopbudget::chainctl
