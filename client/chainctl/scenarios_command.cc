// Copyright hopbudget authors.
//
// chainctl scenarios: replays the seeds' incidents on a baseline and a
// hopbudget chain, side by side (the replay itself is scenarios.cc).
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "chain.h"
#include "commands.h"
#include "summary.h"

ABSL_FLAG(std::string, hopbudget, "",
          "the hopbudget chain: GATEWAY,ORDERS,LEDGER gRPC HOST:PORTs (required)");
ABSL_FLAG(std::string, baseline, "",
          "the baseline chain: GATEWAY,ORDERS,LEDGER gRPC HOST:PORTs (required)");
ABSL_FLAG(int, orders, 3, "orders per scenario and mode, 1..100");
ABSL_FLAG(std::string, only, "", "scenarios to run, e.g. a,c (default all: a,b,c,d)");
ABSL_FLAG(std::string, hopbudget_requests_out, "",
          "write the hopbudget chain's orders and outcomes here, for `chainctl audit`");
ABSL_FLAG(std::string, baseline_requests_out, "",
          "write the baseline chain's orders and outcomes here, for `chainctl audit`");

namespace hopbudget::chainctl {
namespace {

absl::StatusOr<ChainTargets> ParseChain(const std::string& text) {
  absl::StatusOr<std::vector<std::string>> t = ParseTargetList(text);
  if (!t.ok()) return t.status();
  if (t->size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("want 3 targets GATEWAY,ORDERS,LEDGER (gRPC ports), got ", t->size()));
  }
  return ChainTargets{(*t)[0], (*t)[1], (*t)[2]};
}

}  // namespace

int Scenarios(int argc, char** argv) {
  ParseCommand(argc, argv, "scenarios",
               "chainctl scenarios: replay the seeds' incidents on a baseline and a hopbudget "
               "chain, side by side.\n\n"
               "  chainctl scenarios --hopbudget=G,O,L --baseline=G,O,L [--orders=N] [--only=a,b]",
               {"hopbudget", "baseline", "orders", "only", "hopbudget_requests_out",
                "baseline_requests_out"});
  const std::string hop = absl::GetFlag(FLAGS_hopbudget);
  const std::string base = absl::GetFlag(FLAGS_baseline);
  const std::string only = absl::GetFlag(FLAGS_only);
  const std::string hop_requests_path = absl::GetFlag(FLAGS_hopbudget_requests_out);
  const std::string base_requests_path = absl::GetFlag(FLAGS_baseline_requests_out);
  ScenarioOptions o;
  o.orders_per_scenario = absl::GetFlag(FLAGS_orders);
  cli::ExitIfBad("chainctl scenarios", cli::InRange("orders", o.orders_per_scenario, 1, 100));
  absl::StatusOr<ChainTargets> h = ParseChain(hop);
  if (!h.ok())
    return Fail("scenarios", absl::StrCat("--hopbudget=", hop, ": ", h.status().message()));
  absl::StatusOr<ChainTargets> b = ParseChain(base);
  if (!b.ok())
    return Fail("scenarios", absl::StrCat("--baseline=", base, ": ", b.status().message()));
  o.hopbudget = *h;
  o.baseline = *b;
  if (!only.empty()) {
    o.only = absl::StrSplit(only, ',');
    for (const std::string& x : o.only) {
      if (x != "a" && x != "b" && x != "c" && x != "d") {
        return Fail("scenarios", absl::StrCat("--only=", only, ": letters a..d"));
      }
    }
  }
  std::vector<RequestRecord> hop_requests, base_requests;
  if (!hop_requests_path.empty()) o.hopbudget_requests = &hop_requests;
  if (!base_requests_path.empty()) o.baseline_requests = &base_requests;
  const int rc = RunScenarios(o, std::cout);
  for (const auto& [path, requests] : {std::make_pair(hop_requests_path, &hop_requests),
                                       std::make_pair(base_requests_path, &base_requests)}) {
    if (path.empty()) continue;
    if (!WriteRequests(path, *requests)) return 1;
  }
  return rc;
}

}  // namespace hopbudget::chainctl
