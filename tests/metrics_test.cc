// Copyright hopbudget authors.
#include "hopbudget/metrics.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace hopbudget {
namespace {

TEST(MetricsTest, CountsByKey) {
  Metrics m;
  m.CountDeadlineExceeded(Side::kClient, DeadlineSource::kAttempt);
  m.CountDeadlineExceeded(Side::kClient, DeadlineSource::kAttempt);
  m.CountDeadlineExceeded(Side::kServer, DeadlineSource::kRequest);
  m.CountBadBudgetHeader(HeaderParse::kNegative);
  m.CountLeak(LeakKind::kNoDeadline);
  m.CountCall(Side::kServer);
  MetricsSnapshot s = m.Snapshot();
  EXPECT_EQ(s.deadline_exceeded(Side::kClient, DeadlineSource::kAttempt), 2u);
  EXPECT_EQ(s.deadline_exceeded(Side::kServer, DeadlineSource::kRequest), 1u);
  EXPECT_EQ(s.deadline_exceeded(Side::kServer, DeadlineSource::kAttempt), 0u);
  EXPECT_EQ(s.bad_header(HeaderParse::kNegative), 1u);
  EXPECT_EQ(s.leaks(LeakKind::kNoDeadline), 1u);
  EXPECT_EQ(s.calls[static_cast<int>(Side::kServer)], 1u);
}

TEST(MetricsTest, ConcurrentIncrementsAreAllCounted) {
  Metrics m;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&m] {
      for (int i = 0; i < 10000; ++i) m.CountCall(Side::kClient);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(m.Snapshot().calls[0], 40000u);
}

}  // namespace
}  // namespace hopbudget
