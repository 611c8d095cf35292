// Copyright hopbudget authors.
//
// chainctl audit: checks the ledger's rows against the requests `load` or
// `scenarios` recorded: each order at most once, each acknowledged once.
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "commands.h"
#include "ledger_rows.h"
#include "summary.h"

ABSL_FLAG(std::string, requests, "",
          "what `chainctl load --requests-out` (or `scenarios --*-requests-out`) wrote "
          "(required)");

namespace hopbudget::chainctl {

int Audit(int argc, char** argv) {
  ParseCommand(argc, argv, "audit",
               "chainctl audit: check the ledger's rows against the requests `load` or "
               "`scenarios` recorded: each order at most once (by key and by content), each "
               "acknowledged once.\n\n"
               "  chainctl audit --db=LEDGER.db --requests=FILE",
               {"db", "requests"});
  const std::string db = absl::GetFlag(FLAGS_db);
  const std::string requests_path = absl::GetFlag(FLAGS_requests);
  cli::ExitIfBad("chainctl audit", cli::FirstError({cli::Required("db", db),
                                                    cli::Required("requests", requests_path)}));
  std::ifstream in(requests_path);
  if (!in) {
    std::cerr << "chainctl: cannot read " << requests_path << "\n";
    return 1;
  }
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<std::vector<RequestRecord>> requests = ParseRequestRecords(text.str());
  if (!requests.ok()) {
    std::cerr << "chainctl: " << requests_path << ": " << requests.status().message() << "\n";
    return 2;
  }
  absl::StatusOr<std::vector<LedgerRow>> rows = ReadLedgerRows(db);
  if (!rows.ok()) {
    std::cerr << "chainctl: " << rows.status().message() << "\n";
    return 1;
  }
  absl::StatusOr<AuditResult> a = AuditExactlyOnce(*requests, *rows);
  if (!a.ok()) {
    std::cerr << "chainctl: " << requests_path << ": " << a.status().message() << "\n";
    return 2;
  }
  std::cout << FormatAudit(*a) << "\n";
  return a->violations.empty() ? 0 : 1;
}

}  // namespace hopbudget::chainctl
