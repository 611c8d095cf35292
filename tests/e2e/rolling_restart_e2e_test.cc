// Copyright hopbudget authors.
//
// Rolling restarts of a real chain with one instance per hop: each hop in
// turn is stopped with SIGTERM (its 250 ms lame duck, then shutdown) and
// started again on the same port while a client places orders at about
// 40 calls/s with an 800 ms budget. Callers wait for the restarted hop
// inside their budgets (ClientOptions::backend_wait), so no call fails, none
// is committed twice and every acknowledged one is in the ledger.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "chain_process.h"
#include "chain_support.h"
#include "ledger_rows.h"

namespace hopbudget::e2e {
namespace {

constexpr absl::Duration kBudget = absl::Milliseconds(800);

struct Outcome {
  grpc::StatusCode code;
  std::string message;
  absl::Duration latency;
};

// Places orders with unique keys from `threads` threads, each one every
// `period`, until stopped; records every outcome by key.
class Load {
 public:
  Load(const ChainProcess& gateway, int threads, absl::Duration period) {
    for (int t = 0; t < threads; ++t) {
      workers_.emplace_back([this, &gateway, t, period] {
        auto stub = GatewayStub(gateway);
        for (int i = 0; !stop_.load(); ++i) {
          const std::string key = absl::StrCat("rr-", t, "-", i);
          demo::OrderResult reply;
          const absl::Time start = absl::Now();
          const grpc::Status s = PlaceOneItem(*stub, key, kBudget, &reply);
          const absl::Duration took = absl::Now() - start;
          {
            absl::MutexLock lock(&mu_);
            outcomes_[key] = {s.error_code(), s.error_message(), took};
          }
          if (took < period) absl::SleepFor(period - took);
        }
      });
    }
  }
  std::map<std::string, Outcome> Stop() {
    stop_.store(true);
    for (std::thread& w : workers_) w.join();
    absl::MutexLock lock(&mu_);
    return outcomes_;
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> workers_;
  absl::Mutex mu_;
  std::map<std::string, Outcome> outcomes_ ABSL_GUARDED_BY(mu_);
};

// One hop's process, restartable on its port.
class Hop {
 public:
  Hop(std::string binary, std::vector<std::string> args)
      : binary_(std::move(binary)), args_(std::move(args)) {}
  absl::Status Start(int port) {
    std::vector<std::string> args = args_;
    args.push_back(absl::StrCat("--port=", port));
    auto p = ChainProcess::Start(binary_, args);
    if (!p.ok()) return p.status();
    process_ = *std::move(p);
    return absl::OkStatus();
  }
  // SIGTERM and wait for the exit, then start again on the same port.
  absl::Status Restart() {
    const int port = process_->port();
    process_.reset();
    return Start(port);
  }
  const ChainProcess& process() const { return *process_; }

 private:
  std::string binary_;
  std::vector<std::string> args_;
  std::unique_ptr<ChainProcess> process_;
};

TEST(RollingRestartE2eTest, EachHopRestartedUnderLoadLosesNothingAndFailsNoCall) {
  ChainProcesses dir;  // the temporary directory
  ASSERT_FALSE(dir.dir().empty()) << dir.error();
  const std::string db = dir.dir() + "/ledger.db";
  Hop ledger(HOPBUDGET_DEMO_LEDGER, {"--metrics-port=0", "--db=" + db, "--seed=7"});
  ASSERT_TRUE(ledger.Start(0).ok());
  Hop orders(HOPBUDGET_DEMO_ORDERS,
             {"--metrics-port=0", "--ledger=" + ledger.process().address(), "--seed=7"});
  ASSERT_TRUE(orders.Start(0).ok());
  Hop gateway(HOPBUDGET_DEMO_GATEWAY,
              {"--metrics-port=0", "--orders=" + orders.process().address(), "--seed=7"});
  ASSERT_TRUE(gateway.Start(0).ok());

  // 8 threads, one call each every 200 ms: about 40 calls/s.
  Load load(gateway.process(), 8, absl::Milliseconds(200));
  absl::SleepFor(absl::Milliseconds(500));
  for (Hop* hop : {&ledger, &orders, &gateway}) {
    ASSERT_TRUE(hop->Restart().ok());
    absl::SleepFor(absl::Milliseconds(700));  // calls on the new process
  }
  const std::map<std::string, Outcome> outcomes = load.Stop();
  ASSERT_GT(outcomes.size(), 100u);

  std::string failed;
  int late = 0;
  for (const auto& [key, o] : outcomes) {
    if (o.code != grpc::StatusCode::OK) absl::StrAppend(&failed, key, ": ", o.message, "; ");
    // A client answered after its deadline: gRPC's own deadline failed it.
    if (o.latency > kBudget + absl::Milliseconds(50)) ++late;
  }
  EXPECT_EQ(failed, "");
  EXPECT_EQ(late, 0);

  // Exactly once: every acknowledged order has one row, no key has two.
  ASSERT_TRUE(Eventually([&] { return StatsOf(ledger.process()).in_flight() == 0; }));
  absl::StatusOr<std::vector<chainctl::LedgerRow>> rows = chainctl::ReadLedgerRows(db);
  ASSERT_TRUE(rows.ok()) << rows.status();
  std::map<std::string, int> by_key;
  for (const chainctl::LedgerRow& r : *rows) ++by_key[r.key];
  for (const auto& [key, n] : by_key) EXPECT_EQ(n, 1) << key;
  for (const auto& [key, o] : outcomes) {
    if (o.code == grpc::StatusCode::OK) EXPECT_EQ(by_key.count(key), 1u) << key << " lost";
  }
}

}  // namespace
}  // namespace hopbudget::e2e
