// Copyright hopbudget authors.
#include "ledger_rows.h"

#include <sqlite3.h>

#include "absl/strings/str_cat.h"

namespace hopbudget::chainctl {

absl::StatusOr<std::vector<LedgerRow>> ReadLedgerRows(const std::string& path) {
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  struct Closer {
    sqlite3* db;
    sqlite3_stmt* stmt = nullptr;
    ~Closer() {
      sqlite3_finalize(stmt);
      sqlite3_close(db);
    }
  } closer{db};
  auto error = [&](absl::string_view what) {
    return absl::UnavailableError(
        absl::StrCat("ledger ", path, ": ", what, ": ",
                     db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
  };
  if (rc != SQLITE_OK) return error("cannot open");
  // The ledger may be committing right now: wait for its lock rather than fail.
  sqlite3_busy_timeout(db, 5000);
  if (sqlite3_prepare_v2(db, "SELECT order_id, idem_key, items FROM orders ORDER BY order_id", -1,
                         &closer.stmt, nullptr) != SQLITE_OK) {
    return error("cannot read the orders table");
  }
  std::vector<LedgerRow> rows;
  int step;
  while ((step = sqlite3_step(closer.stmt)) == SQLITE_ROW) {
    LedgerRow row;
    row.order_id = sqlite3_column_int64(closer.stmt, 0);
    const unsigned char* key = sqlite3_column_text(closer.stmt, 1);
    const unsigned char* items = sqlite3_column_text(closer.stmt, 2);
    row.key = key != nullptr ? reinterpret_cast<const char*>(key) : "";
    row.items = items != nullptr ? reinterpret_cast<const char*>(items) : "";
    rows.push_back(std::move(row));
  }
  if (step != SQLITE_DONE) return error("reading the orders table");
  return rows;
}

}  // namespace hopbudget::chainctl
