// Copyright hopbudget authors.
//
// ledger_store.h: the ledger's SQLite table, with exactly-once commits per
// idempotency key.
//
//   auto store = hopbudget::demo::LedgerStore::Open("/tmp/ledger.db");
//   if (!store.ok()) return store.status();
//   absl::StatusOr<hopbudget::demo::CommitResult> r =
//       (*store)->Commit("order-42", "sku-1 x2", absl::Now());
//   // r->replayed: the key was committed before; r->order_id is the original
//
// Schema (version kSchemaVersion, kept in PRAGMA user_version):
// orders(order_id INTEGER PRIMARY KEY, idem_key TEXT UNIQUE NOT NULL,
// items TEXT NOT NULL, committed_unix_us INTEGER NOT NULL). The database is
// in WAL mode (readers, e.g. a test reading the file, never block the writer).
//
// Open() verifies a file before it writes a byte to it: `PRAGMA quick_check`
// must answer ok, and the schema must be this one: at kSchemaVersion, or a
// ledger file from before versions existed (user_version 0 and exactly this
// table), which is migrated by stamping the version. A corrupt file, a file
// that is not SQLite, another program's database (other tables or columns)
// or a newer schema version is refused with a message that names the
// problem, and is left as it was.
// Exactly once: the lookup and the insert run in one BEGIN IMMEDIATE
// transaction, so two commits of the same key, concurrent or not, in this
// process or another, write one row; the second answers the first's result.
//
// Thread safety: all methods may be called concurrently (one connection,
// serialized by a mutex; a transaction is a few statements).
#ifndef HOPBUDGET_DEMO_LEDGER_STORE_H_
#define HOPBUDGET_DEMO_LEDGER_STORE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

struct sqlite3;

namespace hopbudget::demo {

// The schema version this ledger writes and understands.
inline constexpr int kSchemaVersion = 1;

// What Open() found.
enum class SchemaOutcome {
  kCreated,   // a new or empty file: the table was created
  kMigrated,  // an unversioned ledger file (user_version 0): verified and stamped
  kVerified,  // already at kSchemaVersion, verified
};
absl::string_view SchemaOutcomeName(SchemaOutcome outcome);

struct CommitResult {
  int64_t order_id = 0;
  bool replayed = false;  // the key was there already: this is the original result
  absl::Time committed;   // when the original commit happened
};

// How Open() opens the file.
enum class StoreAccess {
  kReadWrite,  // the primary: creates, migrates, commits
  // A read replica: SQLITE_OPEN_READONLY, verification only (it never
  // creates, migrates or sets WAL mode: the primary did), Commit refused.
  // WAL lets it read beside the primary's writer.
  kReadOnly,
};

class LedgerStore {
 public:
  // Opens (creating if needed) the database at `path`, verifies it (see
  // above), then sets WAL mode and creates or migrates the schema.
  // InvalidArgument for an empty path; FailedPrecondition for a file that
  // failed verification (corrupt, not SQLite, foreign or newer schema:
  // nothing was written to it); Unavailable when SQLite fails otherwise (the
  // message has SQLite's reason).
  // kReadOnly: the file must exist and already be a ledger at
  // kSchemaVersion (FailedPrecondition otherwise: "start the primary
  // first"); nothing is ever written through this store.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<LedgerStore>> Open(
      const std::string& path, StoreAccess access = StoreAccess::kReadWrite);
  ~LedgerStore();

  SchemaOutcome schema_outcome() const { return schema_outcome_; }

  StoreAccess access() const { return access_; }

  // Commits `key` once. InvalidArgument for an empty key or one over 128
  // bytes; FailedPrecondition on a read-only store; Unavailable when SQLite
  // fails (nothing is written then).
  absl::StatusOr<CommitResult> Commit(const std::string& key, const std::string& items,
                                      absl::Time now);

  // The committed row of `key` (replayed is false): NotFound when there is
  // none, InvalidArgument for a bad key, Unavailable when SQLite fails.
  absl::StatusOr<CommitResult> Get(const std::string& key);

  // Rows in total, and rows with `key` (0 or 1).
  absl::StatusOr<int64_t> CountRows();
  absl::StatusOr<int64_t> CountKey(const std::string& key);

 private:
  LedgerStore(sqlite3* db, StoreAccess access) : access_(access), db_(db) {}
  absl::Status Exec(const char* sql) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Read-only checks; what Open() must do to the schema, or why not.
  absl::StatusOr<SchemaOutcome> Verify(const std::string& path) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  SchemaOutcome schema_outcome_ = SchemaOutcome::kVerified;
  const StoreAccess access_;

  absl::Mutex mu_;
  sqlite3* db_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hopbudget::demo

#endif  // HOPBUDGET_DEMO_LEDGER_STORE_H_
