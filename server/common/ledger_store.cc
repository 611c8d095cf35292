// Copyright hopbudget authors.
#include "ledger_store.h"

#include <sqlite3.h>

#include "absl/strings/str_cat.h"

namespace hopbudget::demo {
namespace {

// Finalizes a statement however the function returns.
struct Stmt {
  sqlite3_stmt* s = nullptr;
  ~Stmt() { sqlite3_finalize(s); }
};

absl::Status SqliteError(sqlite3* db, absl::string_view what) {
  return absl::UnavailableError(absl::StrCat("sqlite: ", what, ": ", sqlite3_errmsg(db)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<LedgerStore>> LedgerStore::Open(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("ledger database path is empty");
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &db,
                                 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                                 nullptr);
  if (rc != SQLITE_OK) {
    absl::Status s = absl::UnavailableError(
        absl::StrCat("sqlite: cannot open ", path, ": ",
                     db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
    sqlite3_close(db);
    return s;
  }
  std::unique_ptr<LedgerStore> store(new LedgerStore(db));
  absl::MutexLock lock(&store->mu_);
  // Another process (a test, sqlite3 in a shell) may hold a lock briefly.
  sqlite3_busy_timeout(db, 5000);
  for (const char* sql :
       {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL",
        "CREATE TABLE IF NOT EXISTS orders ("
        " order_id INTEGER PRIMARY KEY AUTOINCREMENT,"
        " idem_key TEXT UNIQUE NOT NULL,"
        " items TEXT NOT NULL,"
        " committed_unix_us INTEGER NOT NULL)"}) {
    absl::Status s = store->Exec(sql);
    if (!s.ok()) return absl::UnavailableError(absl::StrCat(s.message(), " (", path, ")"));
  }
  return store;
}

LedgerStore::~LedgerStore() {
  absl::MutexLock lock(&mu_);
  sqlite3_close(db_);
}

absl::Status LedgerStore::Exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    absl::Status s = absl::UnavailableError(
        absl::StrCat("sqlite: ", sql, ": ", err != nullptr ? err : "error"));
    sqlite3_free(err);
    return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<CommitResult> LedgerStore::Commit(const std::string& key,
                                                 const std::string& items, absl::Time now) {
  if (key.empty()) return absl::InvalidArgumentError("idempotency key is empty");
  if (key.size() > 128) {
    return absl::InvalidArgumentError(
        absl::StrCat("idempotency key has ", key.size(), " bytes (at most 128)"));
  }
  absl::MutexLock lock(&mu_);
  absl::Status s = Exec("BEGIN IMMEDIATE");
  if (!s.ok()) return s;
  auto rollback = [this](absl::Status why) {
    Exec("ROLLBACK").IgnoreError();  // the first error is the one to report
    return why;
  };

  CommitResult result;
  {
    Stmt q;
    if (sqlite3_prepare_v2(db_,
                           "SELECT order_id, committed_unix_us FROM orders WHERE idem_key = ?1",
                           -1, &q.s, nullptr) != SQLITE_OK) {
      return rollback(SqliteError(db_, "prepare select"));
    }
    sqlite3_bind_text(q.s, 1, key.data(), static_cast<int>(key.size()), SQLITE_TRANSIENT);
    const int rc = sqlite3_step(q.s);
    if (rc == SQLITE_ROW) {
      result.order_id = sqlite3_column_int64(q.s, 0);
      result.committed = absl::FromUnixMicros(sqlite3_column_int64(q.s, 1));
      result.replayed = true;
    } else if (rc != SQLITE_DONE) {
      return rollback(SqliteError(db_, "select"));
    }
  }
  if (!result.replayed) {
    Stmt ins;
    if (sqlite3_prepare_v2(db_,
                           "INSERT INTO orders (idem_key, items, committed_unix_us) "
                           "VALUES (?1, ?2, ?3)",
                           -1, &ins.s, nullptr) != SQLITE_OK) {
      return rollback(SqliteError(db_, "prepare insert"));
    }
    sqlite3_bind_text(ins.s, 1, key.data(), static_cast<int>(key.size()), SQLITE_TRANSIENT);
    sqlite3_bind_text(ins.s, 2, items.data(), static_cast<int>(items.size()), SQLITE_TRANSIENT);
    sqlite3_bind_int64(ins.s, 3, absl::ToUnixMicros(now));
    if (sqlite3_step(ins.s) != SQLITE_DONE) return rollback(SqliteError(db_, "insert"));
    result.order_id = sqlite3_last_insert_rowid(db_);
    result.committed = now;
  }
  s = Exec("COMMIT");
  if (!s.ok()) return rollback(s);
  return result;
}

absl::StatusOr<int64_t> LedgerStore::CountRows() {
  absl::MutexLock lock(&mu_);
  Stmt q;
  if (sqlite3_prepare_v2(db_, "SELECT COUNT(*) FROM orders", -1, &q.s, nullptr) != SQLITE_OK ||
      sqlite3_step(q.s) != SQLITE_ROW) {
    return SqliteError(db_, "count");
  }
  return sqlite3_column_int64(q.s, 0);
}

absl::StatusOr<int64_t> LedgerStore::CountKey(const std::string& key) {
  absl::MutexLock lock(&mu_);
  Stmt q;
  if (sqlite3_prepare_v2(db_, "SELECT COUNT(*) FROM orders WHERE idem_key = ?1", -1, &q.s,
                         nullptr) != SQLITE_OK) {
    return SqliteError(db_, "prepare count");
  }
  sqlite3_bind_text(q.s, 1, key.data(), static_cast<int>(key.size()), SQLITE_TRANSIENT);
  if (sqlite3_step(q.s) != SQLITE_ROW) return SqliteError(db_, "count");
  return sqlite3_column_int64(q.s, 0);
}

}  // namespace hopbudget::demo
