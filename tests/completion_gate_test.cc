// Copyright hopbudget authors.
//
// CompletionGate: a completion that comes while user code runs waits for it
// to return, on the thread of the last one to return; with nothing running
// it is delivered at once; only the first completion counts.
#include "completion_gate.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "sync.h"

namespace hopbudget::internal {
namespace {

TEST(CompletionGateTest, ACompletionWithNothingRunningIsDeliveredAtOnce) {
  std::vector<int> got;
  CompletionGate<int> gate([&](int v) { got.push_back(v); });
  gate.Complete(7);
  EXPECT_EQ(got, std::vector<int>{7});
}

TEST(CompletionGateTest, ACompletionFromInsideRunWaitsForItToReturn) {
  std::vector<std::string> order;
  CompletionGate<int> gate([&](int) { order.push_back("on_done"); });
  gate.Run([&] {
    gate.Complete(1);
    order.push_back("after Complete, still in Run");
  });
  EXPECT_EQ(order, (std::vector<std::string>{"after Complete, still in Run", "on_done"}));
}

TEST(CompletionGateTest, NestedRunsDeliverWhenTheOutermostReturns) {
  std::vector<std::string> order;
  CompletionGate<int> gate([&](int) { order.push_back("on_done"); });
  gate.Run([&] {
    gate.Run([&] { gate.Complete(1); });
    order.push_back("inner returned");
  });
  EXPECT_EQ(order, (std::vector<std::string>{"inner returned", "on_done"}));
}

TEST(CompletionGateTest, OnlyTheFirstCompletionCounts) {
  std::vector<int> got;
  CompletionGate<int> gate([&](int v) { got.push_back(v); });
  gate.Run([&] {
    gate.Complete(1);
    gate.Complete(2);
  });
  gate.Complete(3);
  EXPECT_EQ(got, std::vector<int>{1});
}

// The orders crash's shape: the completion comes on another thread while the
// user function still runs; it is delivered on the user function's thread,
// once it has returned.
TEST(CompletionGateTest, ACompletionFromAnotherThreadIsDeliveredByTheLastRunToReturn) {
  Notification completed;
  std::thread::id delivered_on;
  bool returned = false;
  CompletionGate<int> gate([&](int) { delivered_on = std::this_thread::get_id(); });
  gate.Run([&] {
    std::thread other([&] {
      gate.Complete(1);
      completed.Notify();
    });
    ASSERT_TRUE(completed.WaitForNotificationWithTimeout(absl::Seconds(10)));
    other.join();
    EXPECT_EQ(delivered_on, std::thread::id());  // not yet
    returned = true;
  });
  EXPECT_TRUE(returned);
  EXPECT_EQ(delivered_on, std::this_thread::get_id());
}

}  // namespace
}  // namespace hopbudget::internal
