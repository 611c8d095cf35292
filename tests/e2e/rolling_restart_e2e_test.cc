// Copyright hopbudget authors.
//
// Rolling restarts of a real chain under load: each hop (or each replica of
// a hop) in turn is stopped with SIGTERM (its 250 ms lame duck, then
// shutdown) and started again on the same port while a client places orders
// at about 40 calls/s with an 800 ms budget. Callers wait for a restarted
// hop inside their budgets (ClientOptions::backend_wait), gRPC core re-sends
// a call that raced a GOAWAY (transparent retries), so no call fails, none
// is committed twice and every acknowledged one is in the ledger.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "chain_process.h"
#include "chain_support.h"
#include "ledger_rows.h"
#include "topology.h"

namespace hopbudget::e2e {
namespace {

using chainctl::Hop;

constexpr absl::Duration kBudget = absl::Milliseconds(800);
// After a restarted hop is ready, its callers connect again at their next
// reconnect attempt: at most 200 ms x 1.6 (+20 % jitter) after the last one
// in the first second (channel_defaults.h). Then a call needs its time
// through the chain.
constexpr absl::Duration kReconnectGap = absl::Milliseconds(384);
constexpr absl::Duration kCallTime = absl::Milliseconds(100);

struct Outcome {
  grpc::StatusCode code;
  std::string message;
  absl::Time start;
  absl::Duration latency;
};

// One restart: SIGTERM to the new process's ready line.
struct Restart {
  std::string name;
  absl::Time sigterm, ready;
};

// A call whose budget ended before the restarted hop could serve it: a
// restart longer than the budget's slack (seen under ASan on a loaded
// machine: 470 ms), which no caller can bridge. Only a DEADLINE_EXCEEDED.
bool BudgetCouldNotCoverTheRestart(const Outcome& o, const std::vector<Restart>& restarts) {
  if (o.code != grpc::StatusCode::DEADLINE_EXCEEDED) return false;
  const absl::Time end = o.start + kBudget;
  for (const Restart& r : restarts) {
    if (r.sigterm <= end && o.start <= r.ready && end < r.ready + kReconnectGap + kCallTime) {
      return true;
    }
  }
  return false;
}

// Places orders with unique keys from `threads` threads, each one every
// `period`, until stopped; records every outcome by key.
class Load {
 public:
  Load(const ChainProcess& gateway, int threads, absl::Duration period) {
    for (int t = 0; t < threads; ++t) {
      workers_.emplace_back([this, &gateway, t, period] {
        // A client of a deployed service watches its health, as the hops
        // do (DownstreamChannelArguments): one that does not sends until
        // the gateway's GOAWAY reaches it, and gRPC 1.51 answers a call
        // that arrives after Shutdown() began CANCELLED (grpc/grpc#41785).
        auto stub = GatewayStub(gateway, /*watch_health=*/true);
        for (int i = 0; !stop_.load(); ++i) {
          const std::string key = absl::StrCat("rr-", t, "-", i);
          demo::OrderResult reply;
          const absl::Time start = absl::Now();
          // hopbudget holds the call while the gateway is not ready;
          // wait_for_ready keeps gRPC's pick from failing it fast when the
          // gateway turns NOT_SERVING just after hopbudget let it go.
          const grpc::Status s = PlaceOneItem(*stub, key, kBudget, &reply, /*wait_for_ready=*/true);
          const absl::Duration took = absl::Now() - start;
          {
            absl::MutexLock lock(&mu_);
            outcomes_[key] = {s.error_code(), s.error_message(), start, took};
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

// One process of a hop, restartable on its port.
class Instance {
 public:
  Instance(std::string name, std::string binary, std::vector<std::string> args)
      : name_(std::move(name)), binary_(std::move(binary)), args_(std::move(args)) {}
  absl::Status Start(int port) {
    absl::StatusOr<std::vector<std::string>> args =
        chainctl::OverrideFlags(args_, {absl::StrCat("--port=", port)});
    if (!args.ok()) return args.status();
    auto p = ChainProcess::Start(binary_, *args);
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
  const std::string& name() const { return name_; }
  const ChainProcess& process() const { return *process_; }

 private:
  std::string name_, binary_;
  std::vector<std::string> args_;
  std::unique_ptr<ChainProcess> process_;
};

// "ipv4:127.0.0.1:A,127.0.0.1:B": every replica, one target.
std::string TargetOf(const std::vector<Instance*>& replicas) {
  std::vector<std::string> addresses;
  for (const Instance* r : replicas) addresses.push_back(r->process().address());
  return absl::StrCat("ipv4:", absl::StrJoin(addresses, ","));
}

// Starts `ledgers` ledgers on one database, `orders` orders behind them and
// a gateway, puts 8 threads of load on the gateway (one call each every
// 200 ms: about 40 calls/s), restarts every instance in `restart_order` one
// after the other with 700 ms on each new process, then checks what the
// client saw against the ledger. No call may fail but one whose budget ended
// before the restarted hop could serve it (BudgetCouldNotCoverTheRestart).
void RestartUnderLoad(int ledgers, int orders, const std::vector<std::string>& restart_order) {
  ChainProcesses dir;  // the temporary directory
  ASSERT_FALSE(dir.dir().empty()) << dir.error();
  const std::string db = dir.dir() + "/ledger.db";
  std::map<std::string, std::unique_ptr<Instance>> all;
  std::vector<Instance*> ledger, order;
  // Each instance is its hop's command from the chain's description, on a
  // port of its own (0 at first, then the same one at each restart).
  chainctl::ChainSpec spec;
  spec.db = db;
  spec.seed = 7;
  auto instance = [&](const std::string& name, Hop hop, const std::map<Hop, std::string>& callee) {
    absl::StatusOr<chainctl::HopCommand> command = chainctl::CommandFor(spec, hop, callee);
    EXPECT_TRUE(command.ok()) << command.status();
    if (!command.ok()) return std::unique_ptr<Instance>();
    return std::make_unique<Instance>(name, DemoBinary(command->binary), command->args);
  };
  for (int i = 0; i < ledgers; ++i) {
    auto l = instance(absl::StrCat("ledger", i), Hop::kLedger, {});
    ASSERT_TRUE(l != nullptr && l->Start(0).ok());
    ledger.push_back(l.get());
    all[l->name()] = std::move(l);
  }
  for (int i = 0; i < orders; ++i) {
    auto o = instance(absl::StrCat("orders", i), Hop::kOrders, {{Hop::kLedger, TargetOf(ledger)}});
    ASSERT_TRUE(o != nullptr && o->Start(0).ok());
    order.push_back(o.get());
    all[o->name()] = std::move(o);
  }
  auto gateway = instance("gateway", Hop::kGateway, {{Hop::kOrders, TargetOf(order)}});
  ASSERT_TRUE(gateway != nullptr && gateway->Start(0).ok());
  Instance* edge = gateway.get();
  all["gateway"] = std::move(gateway);

  Load load(edge->process(), 8, absl::Milliseconds(200));
  absl::SleepFor(absl::Milliseconds(500));
  const absl::Time t0 = absl::Now();
  std::vector<Restart> restarts;
  std::string timeline;  // for the failure messages
  for (const std::string& name : restart_order) {
    ASSERT_EQ(all.count(name), 1u) << name;
    Restart r{name, absl::Now(), absl::InfiniteFuture()};
    ASSERT_TRUE(all[name]->Restart().ok()) << name;
    r.ready = absl::Now();
    restarts.push_back(r);
    absl::StrAppend(&timeline, name, " SIGTERM at ", absl::FormatDuration(r.sigterm - t0),
                    ", ready at ", absl::FormatDuration(r.ready - t0), "; ");
    absl::SleepFor(absl::Milliseconds(700));  // calls on the new process
  }
  const std::map<std::string, Outcome> outcomes = load.Stop();
  ASSERT_GT(outcomes.size(), 100u);

  std::string failed, late;
  for (const auto& [key, o] : outcomes) {
    const std::string what = absl::StrCat(key, " sent at ", absl::FormatDuration(o.start - t0),
                                          ", answered after ", absl::FormatDuration(o.latency));
    if (o.code != grpc::StatusCode::OK) {
      const std::string line = absl::StrCat(what, ": code ", o.code, " ", o.message, "; ");
      if (BudgetCouldNotCoverTheRestart(o, restarts)) {
        std::cerr << "restart longer than the budget's slack: " << line << "\n";
      } else {
        absl::StrAppend(&failed, line);
      }
    }
    // Answered after its deadline: gRPC's own deadline ended it, not a hop.
    if (o.latency > kBudget + absl::Milliseconds(50)) absl::StrAppend(&late, what, "; ");
  }
  EXPECT_EQ(failed, "") << "restarts: " << timeline;
  EXPECT_EQ(late, "") << "restarts: " << timeline;

  // Exactly once: every acknowledged order has one row, no key has two.
  for (const Instance* l : ledger) {
    ASSERT_TRUE(Eventually([&] { return StatsOf(l->process()).in_flight() == 0; }));
  }
  absl::StatusOr<std::vector<chainctl::LedgerRow>> rows = chainctl::ReadLedgerRows(db);
  ASSERT_TRUE(rows.ok()) << rows.status();
  std::map<std::string, int> by_key;
  for (const chainctl::LedgerRow& r : *rows) ++by_key[r.key];
  for (const auto& [key, n] : by_key) EXPECT_EQ(n, 1) << key;
  for (const auto& [key, o] : outcomes) {
    if (o.code == grpc::StatusCode::OK) {
      EXPECT_EQ(by_key.count(key), 1u) << key << " lost";
    }
  }
}

TEST(RollingRestartE2eTest, EachHopOfOneInstanceRestartedUnderLoadFailsNoCall) {
  RestartUnderLoad(1, 1, {"ledger0", "orders0", "gateway"});
}

TEST(RollingRestartE2eTest, EachReplicaRestartedUnderLoadFailsNoCall) {
  RestartUnderLoad(2, 2, {"ledger0", "ledger1", "orders0", "orders1"});
}

}  // namespace
}  // namespace hopbudget::e2e
