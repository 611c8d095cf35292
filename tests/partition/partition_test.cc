// Copyright hopbudget authors.
//
// The demo chain across a network partition. Each service runs in a network
// namespace of its own, joined through a router namespace by veth pairs:
//
//   gateway + client (10.77.1.2) --- router --- orders (10.77.2.2)
//                                      |
//                                    ledger (10.77.3.2)
//
// Under 20 calls/s (800 ms budget each), the router drops every packet
// between orders and ledger for 10 s (policy rules of type blackhole: no
// ICMP, no reset, as a dead link), then forwards them again. Checked:
//   - no call is answered later than its budget + 50 ms;
//   - calls in handlers and threads at orders stay bounded meanwhile;
//   - once keepalive dropped the dead connection (second half of the
//     partition), orders answers at once instead of waiting on it;
//   - after the link heals, a call succeeds again within 5 s.
// Needs root and `ip` (iproute2); skipped with the reason otherwise.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "child_process.h"
#include "gtest/gtest.h"

namespace hopbudget::demo {
namespace {

constexpr absl::Duration kBudget = absl::Milliseconds(800);
constexpr absl::Duration kPartition = absl::Seconds(10);

// Runs a command, quietly; true when it exits 0.
bool Run(const std::string& command) {
  return std::system((command + " >/dev/null 2>&1").c_str()) == 0;
}

// Four namespaces and three veth pairs, removed when destroyed.
class Network {
 public:
  Network() : prefix_(absl::StrCat("hbp", getpid())) {}
  ~Network() {
    for (const char* n : {"r", "g", "o", "l"}) Run(absl::StrCat("ip netns del ", Ns(n)));
  }

  std::string Ns(absl::string_view name) const { return absl::StrCat(prefix_, name); }

  // Empty when the network is up, else what failed.
  std::string Build() {
    if (geteuid() != 0) return "not root";
    const std::string r = Ns("r");
    struct Leg {
      const char* name;
      int subnet;
    };
    if (!Run("ip netns add " + r)) return "ip netns add failed (no ip, or namespaces not allowed)";
    const std::vector<std::string> setup = {
        absl::StrCat("ip netns exec ", r, " ip link set lo up"),
        absl::StrCat("ip netns exec ", r, " sh -c 'echo 1 > /proc/sys/net/ipv4/ip_forward'"),
    };
    for (const std::string& c : setup) {
      if (!Run(c)) return "failed: " + c;
    }
    for (const Leg& leg : {Leg{"g", 1}, Leg{"o", 2}, Leg{"l", 3}}) {
      const std::string ns = Ns(leg.name);
      const std::string in_r = absl::StrCat(prefix_, "r", leg.name);  // <= 15 characters
      const std::string out = absl::StrCat(prefix_, leg.name, "r");
      const std::vector<std::string> commands = {
          "ip netns add " + ns,
          absl::StrCat("ip link add ", in_r, " netns ", r, " type veth peer name ", out,
                       " netns ", ns),
          absl::StrCat("ip netns exec ", r, " ip addr add 10.77.", leg.subnet, ".1/24 dev ", in_r),
          absl::StrCat("ip netns exec ", r, " ip link set ", in_r, " up"),
          absl::StrCat("ip netns exec ", ns, " ip addr add 10.77.", leg.subnet, ".2/24 dev ", out),
          absl::StrCat("ip netns exec ", ns, " ip link set ", out, " up"),
          absl::StrCat("ip netns exec ", ns, " ip link set lo up"),
          absl::StrCat("ip netns exec ", ns, " ip route add default via 10.77.", leg.subnet,
                       ".1"),
      };
      for (const std::string& c : commands) {
        if (!Run(c)) return "failed: " + c;
      }
    }
    return "";
  }

  // Drops (or forwards again) every packet between orders and ledger.
  bool Blackhole(bool on) {
    const char* verb = on ? "add" : "del";
    return Run(absl::StrCat("ip netns exec ", Ns("r"), " ip rule ", verb,
                            " from 10.77.2.2 to 10.77.3.2 blackhole")) &&
           Run(absl::StrCat("ip netns exec ", Ns("r"), " ip rule ", verb,
                            " from 10.77.3.2 to 10.77.2.2 blackhole"));
  }

 private:
  const std::string prefix_;
};

std::string IpBinary() {
  for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (access(p, X_OK) == 0) return p;
  }
  return "";
}

// A demo binary inside namespace `ns`.
std::unique_ptr<ChildProcess> StartIn(const std::string& ns, const std::string& binary,
                                      std::vector<std::string> args, bool wait_ready = true) {
  args.insert(args.begin(), {"netns", "exec", ns, binary});
  auto p = ChildProcess::Spawn(IpBinary(), args);
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return nullptr;
  if (wait_ready) {
    absl::Status ready = (*p)->WaitReady(absl::Seconds(60));
    EXPECT_TRUE(ready.ok()) << binary << ": " << ready;
    if (!ready.ok()) return nullptr;
  }
  return *std::move(p);
}

struct CallRecord {
  double start_ms, elapsed_ms;
  int code;
};

struct LoadRecords {
  absl::Time t0 = absl::InfinitePast();
  std::vector<CallRecord> calls;
  std::vector<std::pair<double, int64_t>> orders_in_flight;
};

LoadRecords ReadRecords(const std::string& path) {
  LoadRecords r;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string kind;
    words >> kind;
    if (kind == "start") {
      long long us = 0;
      words >> us;
      r.t0 = absl::FromUnixMicros(us);
    } else if (kind == "call") {
      CallRecord c{};
      if (words >> c.start_ms >> c.elapsed_ms >> c.code) r.calls.push_back(c);
    } else if (kind == "orders") {
      double t = 0;
      int64_t n = 0;
      if (words >> t >> n) r.orders_in_flight.emplace_back(t, n);
    }
  }
  return r;
}

int OkCalls(const std::string& path) {
  int ok = 0;
  for (const CallRecord& c : ReadRecords(path).calls) ok += c.code == 0;
  return ok;
}

TEST(PartitionTest, OrdersLedgerBlackholedForTenSecondsUnderLoad) {
  if (IpBinary().empty()) GTEST_SKIP() << "partition test skipped: no ip (iproute2)";
  Network net;
  if (std::string why = net.Build(); !why.empty()) {
    GTEST_SKIP() << "partition test skipped: cannot make network namespaces: " << why;
  }
  const std::string dir = TempDir();
  auto ledger = StartIn(net.Ns("l"), HOPBUDGET_DEMO_LEDGER,
                        {"--host=10.77.3.2", "--port=0", "--db=" + dir + "/ledger.db"});
  ASSERT_NE(ledger, nullptr);
  auto orders = StartIn(net.Ns("o"), HOPBUDGET_DEMO_ORDERS,
                        {"--host=10.77.2.2", "--port=0",
                         absl::StrCat("--ledger=10.77.3.2:", ledger->port())});
  ASSERT_NE(orders, nullptr);
  auto gateway = StartIn(net.Ns("g"), HOPBUDGET_DEMO_GATEWAY,
                         {"--host=127.0.0.1", "--port=0",
                          absl::StrCat("--orders=10.77.2.2:", orders->port())});
  ASSERT_NE(gateway, nullptr);
  const std::string records = dir + "/load.txt";
  auto load = StartIn(net.Ns("g"), HOPBUDGET_PARTITION_LOAD,
                      {absl::StrCat("--gateway=127.0.0.1:", gateway->port()),
                       absl::StrCat("--orders=10.77.2.2:", orders->port()), "--rps=20",
                       absl::StrCat("--budget=", absl::FormatDuration(kBudget)),
                       "--out=" + records},
                      /*wait_ready=*/false);
  ASSERT_NE(load, nullptr);
  // Warm: the chain answers.
  const absl::Time warm_deadline = absl::Now() + absl::Seconds(60);
  while (OkCalls(records) < 40) {
    ASSERT_LT(absl::Now(), warm_deadline) << "the chain never answered 40 calls";
    absl::SleepFor(absl::Milliseconds(50));
  }
  const int threads_before = orders->Threads();
  ASSERT_TRUE(net.Blackhole(true));
  const absl::Time cut = absl::Now();
  int threads_peak = threads_before;
  while (absl::Now() - cut < kPartition) {  // the partition lasts this long
    threads_peak = std::max(threads_peak, orders->Threads());
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_TRUE(net.Blackhole(false));
  const absl::Time healed = absl::Now();
  // Recovery: wait until a call started after the heal succeeded (or 20 s).
  LoadRecords r;
  absl::Duration recovery = absl::InfiniteDuration();
  while (absl::Now() - healed < absl::Seconds(20)) {
    r = ReadRecords(records);
    const double healed_ms = absl::ToDoubleMilliseconds(healed - r.t0);
    for (const CallRecord& c : r.calls) {
      if (c.code == 0 && c.start_ms >= healed_ms) {
        recovery = std::min(recovery, absl::Milliseconds(c.start_ms - healed_ms));
      }
    }
    if (recovery != absl::InfiniteDuration()) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  // A few calls after recovery, for the record: until 10 calls started after
  // the heal have succeeded (bounded), rather than for a fixed time.
  auto ok_after_heal = [&] {
    const LoadRecords now = ReadRecords(records);
    const double healed_ms = absl::ToDoubleMilliseconds(healed - now.t0);
    int n = 0;
    for (const CallRecord& c : now.calls) n += c.code == 0 && c.start_ms >= healed_ms;
    return n;
  };
  const absl::Time record_until = absl::Now() + absl::Seconds(10);
  while (ok_after_heal() < 10 && absl::Now() < record_until) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  load->Signal(SIGTERM);
  ASSERT_TRUE(load->WaitExit(absl::Seconds(30)).ok());
  r = ReadRecords(records);
  const double cut_ms = absl::ToDoubleMilliseconds(cut - r.t0);
  const double healed_ms = absl::ToDoubleMilliseconds(healed - r.t0);

  int late = 0;
  double slowest = 0;
  std::map<int, int> during;  // codes of calls started during the partition
  for (const CallRecord& c : r.calls) {
    slowest = std::max(slowest, c.elapsed_ms);
    if (c.elapsed_ms > absl::ToDoubleMilliseconds(kBudget) + 50) ++late;
    if (c.start_ms >= cut_ms && c.start_ms < healed_ms) ++during[c.code];
  }
  // Calls started in the second half of the partition: by then keepalive
  // has dropped the dead connection and orders fails them fast.
  std::vector<double> late_half;
  for (const CallRecord& c : r.calls) {
    if (c.start_ms >= cut_ms + absl::ToDoubleMilliseconds(kPartition) / 2 &&
        c.start_ms < healed_ms) {
      late_half.push_back(c.elapsed_ms);
    }
  }
  std::sort(late_half.begin(), late_half.end());
  const double late_half_median = late_half.empty() ? 0 : late_half[late_half.size() / 2];
  int64_t in_flight_peak = 0;
  for (const auto& [t, n] : r.orders_in_flight) {
    if (t >= cut_ms && t < healed_ms) in_flight_peak = std::max(in_flight_peak, n);
  }
  std::string codes;
  for (const auto& [code, n] : during) absl::StrAppend(&codes, " ", code, ":", n);
  std::cerr << "partition: " << r.calls.size() << " calls, slowest answer " << slowest
            << " ms, later than budget + 50 ms: " << late << "; during the partition codes"
            << codes << ", orders in flight at most " << in_flight_peak << ", orders threads "
            << threads_before << " -> at most " << threads_peak
            << "; median answer in the partition's second half " << late_half_median
            << " ms; recovery after the heal " << recovery << "\n";
  EXPECT_EQ(late, 0) << "slowest " << slowest << " ms";
  // 20 calls/s, each gone at its 800 ms budget: ~16 in flight at most.
  EXPECT_LE(in_flight_peak, 40);
  EXPECT_LE(threads_peak - threads_before, 40);
  EXPECT_LE(recovery, absl::Seconds(5));
  // Measured: 1.3 ms; without hopbudget's channel defaults the dead
  // connection stays up and each call waits out orders' 300 ms attempt cap
  // (302 ms), and recovery took 3.3 s instead of 0.2 s.
  ASSERT_FALSE(late_half.empty());
  EXPECT_LT(late_half_median, 100) << "calls still wait on the dead connection";
}

}  // namespace
}  // namespace hopbudget::demo
