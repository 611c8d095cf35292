// Copyright hopbudget authors.
#include "striped_cells.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <set>
#include <thread>
#include <vector>

namespace hopbudget {
namespace internal {
namespace {

TEST(StripedCellsTest, SumsAreExactWhateverThreadAdded) {
  StripedCells cells(11);  // more than one line per stripe
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&cells, t] {
      for (int i = 0; i < 10000; ++i) {
        cells.Add(0, 1);
        cells.Add(10, static_cast<uint64_t>(t));
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(cells.Sum(0), 80000u);
  EXPECT_EQ(cells.Sum(10), 10000u * (0 + 1 + 2 + 3 + 4 + 5 + 6 + 7));
  for (int c = 1; c < 10; ++c) EXPECT_EQ(cells.Sum(c), 0u) << c;
}

TEST(StripedCellsTest, AddsToEveryStripeAreSummed) {
  StripedCells cells(2);
  for (int s = 0; s < StripeCount(); ++s) cells.AddAt(s, 1, 3);
  EXPECT_EQ(cells.Sum(1), 3u * StripeCount());
  EXPECT_EQ(cells.Sum(0), 0u);
}

TEST(StripedCellsTest, NewCellsAreZero) {
  StripedCells cells(1);
  EXPECT_EQ(cells.Sum(0), 0u);
}

TEST(StripedCellsTest, ASetCellReadsWhatWasLastSetFromAnyThread) {
  StripedCells cells(2);
  cells.Set(1, 5);
  std::thread([&cells] { cells.Set(1, 9); }).join();
  EXPECT_EQ(cells.Sum(1), 9u);
  EXPECT_EQ(cells.Sum(0), 0u);
}

// Two threads pinned to two CPUs add to different stripes: they never
// write the same cache line.
TEST(StripedCellsTest, ThreadsOnDifferentCpusUseDifferentStripes) {
  ASSERT_GE(StripeCount(), 1);
  ASSERT_LE(StripeCount(), 16);
  EXPECT_EQ(StripeCount() & (StripeCount() - 1), 0);  // a power of two
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c) {
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  }
  if (cpus.size() < 2) GTEST_SKIP() << "one CPU: nothing to stripe";
  auto stripe_on = [](int cpu) {
    int stripe = -1;
    std::thread([cpu, &stripe] {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      if (pthread_setaffinity_np(pthread_self(), sizeof(one), &one) == 0) stripe = CurrentStripe();
    }).join();
    return stripe;
  };
  const int a = stripe_on(cpus[0]);
  const int b = stripe_on(cpus[1]);
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  EXPECT_NE(a, b) << "CPUs " << cpus[0] << " and " << cpus[1];
}

}  // namespace
}  // namespace internal
}  // namespace hopbudget
