// Copyright hopbudget authors.
#include "ledger_store.h"

#include <sqlite3.h>
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hopbudget::demo {
namespace {

// Every directory TempDb() made; removed when the test process exits.
std::vector<std::string>& MadeDirs() {
  static auto* dirs = new std::vector<std::string>;
  return *dirs;
}

std::string TempDb() {
  std::string dir = "/tmp/hopbudget-ledger-test-XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) return "/tmp/hopbudget-ledger-test.db";
  if (MadeDirs().empty()) {
    std::atexit([] {
      for (const std::string& d : MadeDirs()) {
        std::error_code ignored;
        std::filesystem::remove_all(d, ignored);
      }
    });
  }
  MadeDirs().push_back(dir);
  return dir + "/ledger.db";
}

TEST(LedgerStoreTest, CommitsOnceAndReplaysTheOriginal) {
  auto store = LedgerStore::Open(TempDb());
  ASSERT_TRUE(store.ok()) << store.status();
  const absl::Time t1 = absl::FromUnixMicros(1000), t2 = absl::FromUnixMicros(2000);
  absl::StatusOr<CommitResult> a = (*store)->Commit("k", "sku x1", t1);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_FALSE(a->replayed);
  absl::StatusOr<CommitResult> b = (*store)->Commit("k", "sku x1", t2);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(b->replayed);
  EXPECT_EQ(b->order_id, a->order_id);
  EXPECT_EQ(b->committed, t1);
  EXPECT_EQ(*(*store)->CountRows(), 1);
  EXPECT_EQ(*(*store)->CountKey("k"), 1);
  EXPECT_EQ(*(*store)->CountKey("other"), 0);
}

TEST(LedgerStoreTest, ConcurrentCommitsOfOneKeyWriteOneRow) {
  const std::string path = TempDb();
  auto store = LedgerStore::Open(path);
  ASSERT_TRUE(store.ok());
  auto second = LedgerStore::Open(path);  // another connection, as another process would
  ASSERT_TRUE(second.ok());
  std::vector<std::thread> threads;
  std::vector<int64_t> ids(8);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      LedgerStore& s = i % 2 == 0 ? **store : **second;
      absl::StatusOr<CommitResult> r = s.Commit("same", "x", absl::Now());
      ASSERT_TRUE(r.ok()) << r.status();
      ids[i] = r->order_id;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(*(*store)->CountRows(), 1);
  for (int64_t id : ids) EXPECT_EQ(id, ids[0]);
}

TEST(LedgerStoreTest, RejectsBadInput) {
  EXPECT_EQ(LedgerStore::Open("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LedgerStore::Open("/nonexistent-dir/x/ledger.db").status().code(),
            absl::StatusCode::kUnavailable);
  auto store = LedgerStore::Open(TempDb());
  ASSERT_TRUE(store.ok());
  EXPECT_EQ((*store)->Commit("", "x", absl::Now()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*store)->Commit(std::string(129, 'k'), "x", absl::Now()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*(*store)->CountRows(), 0);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Runs SQL on `path` with a plain connection (another program's database).
void ExecSql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  EXPECT_EQ(rc, SQLITE_OK) << (err != nullptr ? err : "") << " in " << sql;
  sqlite3_free(err);
  sqlite3_close(db);
}

int64_t UserVersion(const std::string& path) {
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  sqlite3_stmt* q = nullptr;
  sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &q, nullptr);
  int64_t v = sqlite3_step(q) == SQLITE_ROW ? sqlite3_column_int64(q, 0) : -1;
  sqlite3_finalize(q);
  sqlite3_close(db);
  return v;
}

TEST(LedgerStoreSchemaTest, ANewFileIsCreatedAtTheCurrentVersionThenVerified) {
  const std::string path = TempDb();
  {
    auto store = LedgerStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    EXPECT_EQ((*store)->schema_outcome(), SchemaOutcome::kCreated);
    ASSERT_TRUE((*store)->Commit("k", "x", absl::Now()).ok());
  }
  EXPECT_EQ(UserVersion(path), kSchemaVersion);
  auto again = LedgerStore::Open(path);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)->schema_outcome(), SchemaOutcome::kVerified);
  EXPECT_EQ(*(*again)->CountRows(), 1);
}

TEST(LedgerStoreSchemaTest, AnUnversionedLedgerFileIsMigratedKeepingItsRows) {
  const std::string path = TempDb();
  // What the ledger wrote before schema versions existed.
  ExecSql(path,
          "CREATE TABLE orders (order_id INTEGER PRIMARY KEY AUTOINCREMENT,"
          " idem_key TEXT UNIQUE NOT NULL, items TEXT NOT NULL,"
          " committed_unix_us INTEGER NOT NULL);"
          "INSERT INTO orders (idem_key, items, committed_unix_us) VALUES ('old', 'a x1', 5);");
  ASSERT_EQ(UserVersion(path), 0);
  auto store = LedgerStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->schema_outcome(), SchemaOutcome::kMigrated);
  EXPECT_EQ(UserVersion(path), kSchemaVersion);
  absl::StatusOr<CommitResult> replay = (*store)->Commit("old", "a x1", absl::Now());
  ASSERT_TRUE(replay.ok()) << replay.status();
  EXPECT_TRUE(replay->replayed);
  EXPECT_EQ(replay->committed, absl::FromUnixMicros(5));
  EXPECT_TRUE((*store)->Commit("new", "b x2", absl::Now()).ok());
  EXPECT_EQ(*(*store)->CountRows(), 2);
}

// A database the ledger must not serve, and what the refusal must name.
struct Foreign {
  const char* name;
  const char* sql;
  const char* why;
};

TEST(LedgerStoreSchemaTest, ForeignOrNewerSchemasAreRefusedUntouched) {
  const Foreign cases[] = {
      {"orders with other columns",
       "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT, total REAL);"
       "INSERT INTO orders (customer, total) VALUES ('c', 1.5);",
       "table orders has columns (id INTEGER PRIMARY KEY, customer TEXT, total REAL)"},
      {"other tables", "CREATE TABLE users (id INTEGER);", "it has tables (users)"},
      {"orders beside other tables",
       "CREATE TABLE orders (order_id INTEGER PRIMARY KEY AUTOINCREMENT,"
       " idem_key TEXT UNIQUE NOT NULL, items TEXT NOT NULL, committed_unix_us INTEGER NOT NULL);"
       "CREATE TABLE audit (x TEXT);",
       "it has tables (audit, orders)"},
      {"idem_key not unique",
       "CREATE TABLE orders (order_id INTEGER PRIMARY KEY AUTOINCREMENT,"
       " idem_key TEXT NOT NULL, items TEXT NOT NULL, committed_unix_us INTEGER NOT NULL);",
       "idem_key is not UNIQUE"},
      {"a newer version",
       "CREATE TABLE orders (order_id INTEGER PRIMARY KEY AUTOINCREMENT,"
       " idem_key TEXT UNIQUE NOT NULL, items TEXT NOT NULL, committed_unix_us INTEGER NOT NULL);"
       "PRAGMA user_version = 7;",
       "schema version 7 is newer than this ledger's (1)"},
      {"a version without its table", "PRAGMA user_version = 1;", "but no tables"},
      {"an unknown version", "CREATE TABLE orders (x);PRAGMA user_version = -3;",
       "unknown schema version -3"},
  };
  for (const Foreign& k : cases) {
    SCOPED_TRACE(k.name);
    const std::string path = TempDb();
    ExecSql(path, k.sql);
    const std::string before = ReadFile(path);
    absl::StatusOr<std::unique_ptr<LedgerStore>> store = LedgerStore::Open(path);
    ASSERT_FALSE(store.ok());
    EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(store.status().message()), ::testing::HasSubstr(k.why));
    EXPECT_THAT(std::string(store.status().message()), ::testing::HasSubstr(path));
    EXPECT_EQ(ReadFile(path), before) << "the refused file was written to";
  }
}

TEST(LedgerStoreSchemaTest, ACorruptFileIsRefusedUntouched) {
  const std::string path = TempDb();
  {
    auto store = LedgerStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    for (int i = 0; i < 5000; ++i) {
      ASSERT_TRUE((*store)->Commit("key-" + std::to_string(i), "sku-1 x2", absl::Now()).ok());
    }
  }  // the last connection checkpoints the WAL into the file
  std::string bytes = ReadFile(path);
  const size_t page = 4096;
  ASSERT_GT(bytes.size(), 50 * page);
  std::mt19937 rng(20261130);
  std::uniform_int_distribution<size_t> pick(1, bytes.size() / page - 1);  // not page 1
  std::uniform_int_distribution<int> byte(0, 255);
  for (int n = 0; n < 3; ++n) {
    const size_t p = pick(rng);
    for (size_t i = 0; i < page; ++i) bytes[p * page + i] = static_cast<char>(byte(rng));
  }
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << bytes;
  }
  absl::StatusOr<std::unique_ptr<LedgerStore>> store = LedgerStore::Open(path);
  ASSERT_FALSE(store.ok()) << "a corrupt database was opened for writing";
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(store.status().message()),
              ::testing::HasSubstr("corrupt: PRAGMA quick_check"));
  EXPECT_EQ(ReadFile(path), bytes) << "the refused file was written to";

  // The header overwritten: not a database at all.
  for (size_t i = 0; i < 100; ++i) bytes[i] = static_cast<char>(byte(rng));
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << bytes;
  }
  store = LedgerStore::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(store.status().message()),
              ::testing::HasSubstr("not a sound SQLite database"));
  EXPECT_EQ(ReadFile(path), bytes);
}

TEST(LedgerStoreReplicaTest, AReplicaReadsWhatThePrimaryCommitsWhileItRuns) {
  const std::string path = TempDb();
  auto primary = LedgerStore::Open(path);
  ASSERT_TRUE(primary.ok()) << primary.status();
  auto first = (*primary)->Commit("k1", "sku-1 x1", absl::FromUnixMicros(1000));
  ASSERT_TRUE(first.ok()) << first.status();
  auto replica = LedgerStore::Open(path, StoreAccess::kReadOnly);
  ASSERT_TRUE(replica.ok()) << replica.status();
  EXPECT_EQ((*replica)->access(), StoreAccess::kReadOnly);
  absl::StatusOr<CommitResult> got = (*replica)->Get("k1");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->order_id, first->order_id);
  EXPECT_EQ(got->committed, absl::FromUnixMicros(1000));
  EXPECT_FALSE(got->replayed);
  // A row the primary commits after the replica opened is seen too (WAL).
  ASSERT_TRUE((*primary)->Commit("k2", "sku-2 x2", absl::FromUnixMicros(2000)).ok());
  EXPECT_EQ((*replica)->Get("k2")->committed, absl::FromUnixMicros(2000));
  EXPECT_EQ((*replica)->Get("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*replica)->Get("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*primary)->Get("k1")->order_id, first->order_id);
}

TEST(LedgerStoreReplicaTest, AReplicaRefusesCommitsAndWritesNothing) {
  const std::string path = TempDb();
  {
    auto primary = LedgerStore::Open(path);
    ASSERT_TRUE(primary.ok()) << primary.status();
    ASSERT_TRUE((*primary)->Commit("k1", "sku-1 x1", absl::FromUnixMicros(1000)).ok());
  }  // closed: the WAL is checkpointed into the file
  const std::string before = ReadFile(path);
  auto replica = LedgerStore::Open(path, StoreAccess::kReadOnly);
  ASSERT_TRUE(replica.ok()) << replica.status();
  absl::StatusOr<CommitResult> refused =
      (*replica)->Commit("k2", "sku-2 x2", absl::FromUnixMicros(2000));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), ::testing::HasSubstr("read-only"));
  EXPECT_TRUE((*replica)->Get("k1").ok());
  EXPECT_EQ(*(*replica)->CountRows(), 1);
  replica->reset();
  EXPECT_EQ(ReadFile(path), before) << "the replica wrote to the database";
}

TEST(LedgerStoreReplicaTest, AReplicaNeedsALedgerThePrimaryMade) {
  const std::string path = TempDb();
  // Missing file: nothing is created.
  auto missing = LedgerStore::Open(path, StoreAccess::kReadOnly);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kUnavailable) << missing.status();
  EXPECT_FALSE(std::filesystem::exists(path));
  // An empty SQLite file: not created, refused.
  ExecSql(path, "PRAGMA user_version = 0");
  const std::string before = ReadFile(path);
  auto empty = LedgerStore::Open(path, StoreAccess::kReadOnly);
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kFailedPrecondition) << empty.status();
  EXPECT_THAT(empty.status().message(), ::testing::HasSubstr("start the primary ledger"));
  EXPECT_EQ(ReadFile(path), before);
}

}  // namespace
}  // namespace hopbudget::demo
