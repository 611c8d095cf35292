// Copyright hopbudget authors.
#include "ledger_store.h"

#include <stdlib.h>

#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hopbudget::demo {
namespace {

std::string TempDb() {
  std::string dir = "/tmp/hopbudget-ledger-test-XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) return "/tmp/hopbudget-ledger-test.db";
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

}  // namespace
}  // namespace hopbudget::demo
