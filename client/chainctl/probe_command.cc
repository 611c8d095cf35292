// Copyright hopbudget authors.
//
// chainctl probe: checks that the client deadline header reaches every hop
// (an order sent with a deadline already past must be counted late at each).
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "chain.h"
#include "commands.h"
#include "summary.h"

namespace hopbudget::chainctl {

int Probe(int argc, char** argv) {
  cli::CommandLine cl = ParseCommand(
      argc, argv, "probe",
      "chainctl probe: check that the client deadline header reaches every hop (one order "
      "sent with a deadline already past must be counted late at each of them).\n\n"
      "  chainctl probe --gateway=HOST:PORT --admin=GATEWAY,ORDERS,LEDGER [--budget=5s]",
      {"gateway", "admin", "budget"});
  const std::string gateway = absl::GetFlag(FLAGS_gateway);
  const std::string admin = absl::GetFlag(FLAGS_admin);
  // The probe order's real (gRPC) deadline: long, it must reach every hop.
  const absl::Duration budget =
      cl.WasSet("budget") ? absl::GetFlag(FLAGS_budget) : absl::Seconds(5);
  cli::ExitIfBad("chainctl probe",
                 cli::FirstError({cli::Required("gateway", gateway), cli::Required("admin", admin),
                                  cli::Positive("budget", budget)}));
  absl::StatusOr<std::vector<std::string>> targets = ParseTargetList(admin);
  if (!targets.ok()) {
    return Fail("probe", absl::StrCat("--admin=", admin, ": ", targets.status().message()));
  }
  absl::StatusOr<ProbeResult> r = ProbeClientDeadline(gateway, *targets, budget);
  if (!r.ok()) {
    std::cerr << "chainctl: " << r.status().message() << "\n";
    return 1;
  }
  std::cout << r->report;
  return r->ok ? 0 : 1;
}

}  // namespace hopbudget::chainctl
