// Copyright hopbudget authors.
//
// ledger_rows.h: the demo ledger's committed rows, read straight from its
// SQLite file (read-only), for AuditExactlyOnce (summary.h). The ledger keeps
// the file in WAL mode, so reading while it runs never blocks its commits.
//
//   absl::StatusOr<std::vector<LedgerRow>> rows = ReadLedgerRows("/tmp/ledger.db");
//
// Thread safety: independent calls; each opens its own connection.
#ifndef HOPBUDGET_CHAINCTL_LEDGER_ROWS_H_
#define HOPBUDGET_CHAINCTL_LEDGER_ROWS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "summary.h"

namespace hopbudget::chainctl {

// Every row of the table `orders` (order_id, idem_key, items), by order_id.
// Unavailable with SQLite's reason when the file cannot be opened or read
// (missing, not a ledger database).
absl::StatusOr<std::vector<LedgerRow>> ReadLedgerRows(const std::string& path);

}  // namespace hopbudget::chainctl

#endif  // HOPBUDGET_CHAINCTL_LEDGER_ROWS_H_
