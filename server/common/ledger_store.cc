// Copyright hopbudget authors.
#include "ledger_store.h"

#include <sqlite3.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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

absl::string_view SchemaOutcomeName(SchemaOutcome outcome) {
  switch (outcome) {
    case SchemaOutcome::kCreated:
      return "created";
    case SchemaOutcome::kMigrated:
      return "migrated";
    case SchemaOutcome::kVerified:
      return "verified";
  }
  return "?";
}

namespace {

// One column of the orders table as PRAGMA table_info reports it.
struct Column {
  std::string name;
  std::string type;
  bool not_null;
  bool primary_key;
  bool operator==(const Column& o) const {
    return name == o.name && type == o.type && not_null == o.not_null &&
           primary_key == o.primary_key;
  }
};

const std::vector<Column>& ExpectedColumns() {
  static const auto* columns = new std::vector<Column>{
      {"order_id", "INTEGER", false, true},
      {"idem_key", "TEXT", true, false},
      {"items", "TEXT", true, false},
      {"committed_unix_us", "INTEGER", true, false},
  };
  return *columns;
}

constexpr char kCreateTable[] =
    "CREATE TABLE IF NOT EXISTS orders ("  // a ledger starting beside us may win
    " order_id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " idem_key TEXT UNIQUE NOT NULL,"
    " items TEXT NOT NULL,"
    " committed_unix_us INTEGER NOT NULL)";

std::string ColumnNames(const std::vector<Column>& columns) {
  std::string out;
  for (const Column& c : columns) {
    absl::StrAppend(&out, out.empty() ? "" : ", ", c.name, " ", c.type.empty() ? "?" : c.type,
                    c.primary_key ? " PRIMARY KEY" : "", c.not_null ? " NOT NULL" : "");
  }
  return out;
}

// The rows of a one-column query, as text (at most `limit`).
absl::StatusOr<std::vector<std::string>> TextRows(sqlite3* db, const std::string& sql,
                                                  size_t limit = 1000) {
  Stmt q;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &q.s, nullptr) != SQLITE_OK) {
    return SqliteError(db, sql);
  }
  std::vector<std::string> rows;
  int rc;
  while ((rc = sqlite3_step(q.s)) == SQLITE_ROW) {
    if (rows.size() < limit) {
      const unsigned char* text = sqlite3_column_text(q.s, 0);
      rows.emplace_back(text != nullptr ? reinterpret_cast<const char*>(text) : "");
    }
  }
  if (rc != SQLITE_DONE) return SqliteError(db, sql);
  return rows;
}

absl::Status Refuse(const std::string& path, absl::string_view why) {
  return absl::FailedPreconditionError(
      absl::StrCat("refusing database ", path, ": ", why,
                   "; nothing was written to it (restore it, or point --db at another file)"));
}

}  // namespace

absl::StatusOr<SchemaOutcome> LedgerStore::Verify(const std::string& path) {
  // 1. The file is SQLite and its pages are sound. A file that is not a
  //    database fails here too (SQLITE_NOTADB), before anything is written.
  absl::StatusOr<std::vector<std::string>> check = TextRows(db_, "PRAGMA quick_check", 3);
  if (!check.ok()) {
    // Busy, out of memory or an I/O error say nothing about the file.
    const int rc = sqlite3_errcode(db_) & 0xff;
    if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED || rc == SQLITE_NOMEM || rc == SQLITE_IOERR) {
      return check.status();
    }
    if (rc == SQLITE_CORRUPT) {
      return Refuse(path, absl::StrCat("corrupt: PRAGMA quick_check failed (",
                                       check.status().message(), ")"));
    }
    return Refuse(path,
                  absl::StrCat("not a sound SQLite database (", check.status().message(), ")"));
  }
  if (check->empty() || (*check)[0] != "ok") {
    return Refuse(path,
                  absl::StrCat("corrupt: PRAGMA quick_check says: ", absl::StrJoin(*check, "; ")));
  }
  // 2. The schema version, then the schema itself.
  absl::StatusOr<std::vector<std::string>> version = TextRows(db_, "PRAGMA user_version");
  if (!version.ok() || version->size() != 1) return SqliteError(db_, "PRAGMA user_version");
  int v = 0;
  if (!absl::SimpleAtoi((*version)[0], &v)) return SqliteError(db_, "PRAGMA user_version");
  if (v > kSchemaVersion) {
    return Refuse(path, absl::StrCat("schema version ", v, " is newer than this ledger's (",
                                     kSchemaVersion, "): a newer ledger wrote it"));
  }
  if (v != 0 && v != kSchemaVersion) {
    return Refuse(path, absl::StrCat("unknown schema version ", v));
  }
  absl::StatusOr<std::vector<std::string>> tables =
      TextRows(db_,
               "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
               "ORDER BY name");
  if (!tables.ok()) return tables.status();
  if (tables->empty()) {
    if (v != 0) return Refuse(path, absl::StrCat("schema version ", v, " but no tables"));
    return SchemaOutcome::kCreated;
  }
  if (*tables != std::vector<std::string>{"orders"}) {
    return Refuse(path, absl::StrCat("not a ledger database: it has tables (",
                                     absl::StrJoin(*tables, ", "), "), a ledger has (orders)"));
  }
  std::vector<Column> columns;
  {
    Stmt q;
    if (sqlite3_prepare_v2(db_, "PRAGMA table_info(orders)", -1, &q.s, nullptr) != SQLITE_OK) {
      return SqliteError(db_, "PRAGMA table_info");
    }
    int rc;
    while ((rc = sqlite3_step(q.s)) == SQLITE_ROW) {
      auto text = [&](int i) {
        const unsigned char* t = sqlite3_column_text(q.s, i);
        return std::string(t != nullptr ? reinterpret_cast<const char*>(t) : "");
      };
      columns.push_back(
          {text(1), text(2), sqlite3_column_int(q.s, 3) != 0, sqlite3_column_int(q.s, 5) != 0});
    }
    if (rc != SQLITE_DONE) return SqliteError(db_, "PRAGMA table_info");
  }
  if (columns != ExpectedColumns()) {
    return Refuse(path, absl::StrCat("not a ledger database: table orders has columns (",
                                     ColumnNames(columns), "), a ledger's has (",
                                     ColumnNames(ExpectedColumns()), ")"));
  }
  // Exactly-once rests on the unique index of idem_key.
  absl::StatusOr<std::vector<std::string>> unique =
      TextRows(db_,
               "SELECT ii.name FROM pragma_index_list('orders') AS il, "
               "pragma_index_info(il.name) AS ii WHERE il.\"unique\" = 1 AND "
               "(SELECT COUNT(*) FROM pragma_index_info(il.name)) = 1");
  if (!unique.ok()) return unique.status();
  if (std::find(unique->begin(), unique->end(), "idem_key") == unique->end()) {
    return Refuse(path, "not a ledger database: orders.idem_key is not UNIQUE");
  }
  return v == 0 ? SchemaOutcome::kMigrated : SchemaOutcome::kVerified;
}

absl::StatusOr<std::unique_ptr<LedgerStore>> LedgerStore::Open(const std::string& path,
                                                               StoreAccess access) {
  if (path.empty()) return absl::InvalidArgumentError("ledger database path is empty");
  const bool read_only = access == StoreAccess::kReadOnly;
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(
      path.c_str(), &db,
      (read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) |
          SQLITE_OPEN_FULLMUTEX,
      nullptr);
  if (rc != SQLITE_OK) {
    absl::Status s = absl::UnavailableError(
        absl::StrCat("sqlite: cannot open ", path, ": ",
                     db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
    sqlite3_close(db);
    return s;
  }
  std::unique_ptr<LedgerStore> store(new LedgerStore(db, access));
  absl::MutexLock lock(&store->mu_);
  // Another process (a test, sqlite3 in a shell) may hold a lock briefly.
  sqlite3_busy_timeout(db, 5000);
  // Nothing is written before the file passed verification.
  absl::StatusOr<SchemaOutcome> outcome = store->Verify(path);
  if (!outcome.ok()) {
    if (absl::IsFailedPrecondition(outcome.status())) return outcome.status();
    return absl::UnavailableError(absl::StrCat(outcome.status().message(), " (", path, ")"));
  }
  store->schema_outcome_ = *outcome;
  if (read_only) {
    // A replica reads what the primary made; it cannot create or migrate.
    if (*outcome != SchemaOutcome::kVerified) {
      return Refuse(
          path, absl::StrCat("a read replica needs a ledger at schema version ", kSchemaVersion,
                             ", and this one is ",
                             *outcome == SchemaOutcome::kCreated ? "empty"
                                                                 : "unversioned (not migrated yet)",
                             ": start the primary ledger on it first"));
    }
    return store;
  }
  const std::string stamp = absl::StrCat("PRAGMA user_version = ", kSchemaVersion);
  std::vector<std::string> steps = {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL"};
  if (*outcome != SchemaOutcome::kVerified) {
    // One transaction: a file is left either as it was or at the new version.
    steps.push_back("BEGIN IMMEDIATE");
    if (*outcome == SchemaOutcome::kCreated) steps.push_back(kCreateTable);
    steps.push_back(stamp);
    steps.push_back("COMMIT");
  }
  for (const std::string& sql : steps) {
    absl::Status s = store->Exec(sql.c_str());
    if (!s.ok()) {
      store->Exec("ROLLBACK").IgnoreError();
      return absl::UnavailableError(absl::StrCat(s.message(), " (", path, ")"));
    }
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
    absl::Status s =
        absl::UnavailableError(absl::StrCat("sqlite: ", sql, ": ", err != nullptr ? err : "error"));
    sqlite3_free(err);
    return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<CommitResult> LedgerStore::Commit(const std::string& key, const std::string& items,
                                                 absl::Time now) {
  if (key.empty()) return absl::InvalidArgumentError("idempotency key is empty");
  if (key.size() > 128) {
    return absl::InvalidArgumentError(
        absl::StrCat("idempotency key has ", key.size(), " bytes (at most 128)"));
  }
  if (access_ == StoreAccess::kReadOnly) {
    return absl::FailedPreconditionError(
        "this ledger store is read-only (a replica): commits go to the primary");
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
                           "SELECT order_id, committed_unix_us FROM orders WHERE idem_key = ?1", -1,
                           &q.s, nullptr) != SQLITE_OK) {
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

absl::StatusOr<CommitResult> LedgerStore::Get(const std::string& key) {
  if (key.empty() || key.size() > 128) {
    return absl::InvalidArgumentError(
        absl::StrCat("idempotency key has ", key.size(), " bytes (1..128)"));
  }
  absl::MutexLock lock(&mu_);
  Stmt q;
  if (sqlite3_prepare_v2(db_, "SELECT order_id, committed_unix_us FROM orders WHERE idem_key = ?1",
                         -1, &q.s, nullptr) != SQLITE_OK) {
    return SqliteError(db_, "prepare get");
  }
  sqlite3_bind_text(q.s, 1, key.data(), static_cast<int>(key.size()), SQLITE_TRANSIENT);
  const int rc = sqlite3_step(q.s);
  if (rc == SQLITE_DONE) return absl::NotFoundError(absl::StrCat("no order with key ", key));
  if (rc != SQLITE_ROW) return SqliteError(db_, "get");
  CommitResult result;
  result.order_id = sqlite3_column_int64(q.s, 0);
  result.committed = absl::FromUnixMicros(sqlite3_column_int64(q.s, 1));
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
