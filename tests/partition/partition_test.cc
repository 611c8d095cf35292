// Copyright hopbudget authors.
//
// The demo chain across a network partition. Each service runs in a network
// namespace of its own, joined through a router namespace by veth pairs:
//
//   gateway + client (10.77.1.2) --- router --- orders (10.77.2.2)
//                                      |
//                                    ledger (10.77.3.2)
//
// Under 20 calls/s (800 ms budget each), the router breaks the link between
// orders and ledger for 10 s, then forwards again. Three ways a link breaks:
//   - blackhole: every packet dropped silently (policy rules of type
//     blackhole: no ICMP, no reset), as a dead link or a crashed peer host;
//   - drop: 30 % of the packets dropped at random each way (nftables
//     `numgen random mod 100 < 30 drop` in the router's forward chain), a
//     lossy link: connections stay up, TCP retransmits;
//   - reset: every TCP segment answered with a reset (nftables `reject with
//     tcp reset`), as a peer whose port is closed or a firewall that rejects.
// Why nftables for loss rather than `tc qdisc netem loss`: netem is a kernel
// module (sch_netem) that the CI kernel does not have ("Specified qdisc kind
// is unknown"), while nf_tables with numgen and reject is built in; nft comes
// from Debian 12's nftables package (scripts/lib/common.sh installs it).
// Checked for each, while the link is broken:
//   - no call is answered later than its budget + 50 ms;
//   - calls in handlers and threads at every hop stay within
//     2 x (rate x budget) + a constant;
// and after it heals, within 5 s: the first call through the chain succeeds,
// and from then on every call does (steady: 2 s of calls without a failure).
// Blackhole only: once keepalive dropped the dead connection (second half of
// the partition), orders answers at once instead of waiting on it.
// The long outages (30 s and 60 s blackholes) are not in ctest (CI time):
// tests/partition/long_outage.sh runs them and prints RESULT lines.
// Needs root, `ip` (iproute2) and, for drop and reset, `nft` (nftables);
// skipped with the reason otherwise.
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
constexpr int kRps = 20;
// The bound on calls in handlers and threads at each hop during a fault:
// 2 x (rate x budget) + a constant (threads a quiet server keeps anyway
// vary with gRPC's pollers; the constant is in the count over the baseline).
constexpr int kBoundConstant = 8;
constexpr int kBound = 2 * kRps * 800 / 1000 + kBoundConstant;  // 40

enum class Fault { kBlackhole, kDrop, kReset };

const char* FaultName(Fault f) {
  switch (f) {
    case Fault::kBlackhole:
      return "blackhole";
    case Fault::kDrop:
      return "drop";
    case Fault::kReset:
      return "reset";
  }
  return "?";
}

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
          absl::StrCat("ip link add ", in_r, " netns ", r, " type veth peer name ", out, " netns ",
                       ns),
          absl::StrCat("ip netns exec ", r, " ip addr add 10.77.", leg.subnet, ".1/24 dev ", in_r),
          absl::StrCat("ip netns exec ", r, " ip link set ", in_r, " up"),
          absl::StrCat("ip netns exec ", ns, " ip addr add 10.77.", leg.subnet, ".2/24 dev ", out),
          absl::StrCat("ip netns exec ", ns, " ip link set ", out, " up"),
          absl::StrCat("ip netns exec ", ns, " ip link set lo up"),
          absl::StrCat("ip netns exec ", ns, " ip route add default via 10.77.", leg.subnet, ".1"),
      };
      for (const std::string& c : commands) {
        if (!Run(c)) return "failed: " + c;
      }
    }
    return "";
  }

  // Breaks (or heals) the link between orders and ledger, both ways.
  bool Break(Fault fault, bool on) {
    const std::string in_r = absl::StrCat("ip netns exec ", Ns("r"), " ");
    if (fault == Fault::kBlackhole) {
      const char* verb = on ? "add" : "del";
      return Run(absl::StrCat(in_r, "ip rule ", verb, " from 10.77.2.2 to 10.77.3.2 blackhole")) &&
             Run(absl::StrCat(in_r, "ip rule ", verb, " from 10.77.3.2 to 10.77.2.2 blackhole"));
    }
    if (!on) return Run(in_r + "nft delete table inet hbpfault");
    const std::string verdict = fault == Fault::kDrop ? "numgen random mod 100 < 30 drop"
                                                      : "meta l4proto tcp reject with tcp reset";
    return Run(in_r + "nft add table inet hbpfault") &&
           Run(in_r +
               "nft add chain inet hbpfault cut "
               "'{ type filter hook forward priority 0; policy accept; }'") &&
           Run(absl::StrCat(in_r, "nft add rule inet hbpfault cut 'ip saddr 10.77.2.2 ip daddr ",
                            "10.77.3.2 ", verdict, "'")) &&
           Run(absl::StrCat(in_r, "nft add rule inet hbpfault cut 'ip saddr 10.77.3.2 ip daddr ",
                            "10.77.2.2 ", verdict, "'"));
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
  std::string source;  // of a DEADLINE_EXCEEDED; "-" for none
};

struct LoadRecords {
  absl::Time t0 = absl::InfinitePast();
  std::vector<CallRecord> calls;
  std::map<std::string, std::vector<std::pair<double, int64_t>>> in_flight;  // by hop
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
      if (words >> c.start_ms >> c.elapsed_ms >> c.code >> c.source) r.calls.push_back(c);
    } else if (kind == "inflight") {
      std::string hop;
      double t = 0;
      int64_t n = 0;
      if (words >> hop >> t >> n) r.in_flight[hop].emplace_back(t, n);
    }
  }
  return r;
}

int OkCalls(const std::string& path) {
  int ok = 0;
  for (const CallRecord& c : ReadRecords(path).calls) ok += c.code == 0;
  return ok;
}

// After the heal: when the first call through the chain succeeded, and from
// when every call did (the start of a run of successes that covers at least
// `steady_for`, counted over calls that must have ended by `now`).
struct Recovery {
  absl::Duration first_ok = absl::InfiniteDuration();
  absl::Duration steady = absl::InfiniteDuration();
};

Recovery RecoveryOf(const LoadRecords& r, absl::Time healed, absl::Time now,
                    absl::Duration steady_for) {
  Recovery out;
  const double healed_ms = absl::ToDoubleMilliseconds(healed - r.t0);
  // Calls started after this have not all ended yet: they are not judged.
  const double judged_until_ms =
      absl::ToDoubleMilliseconds(now - r.t0 - kBudget - absl::Milliseconds(200));
  std::vector<CallRecord> after;
  for (const CallRecord& c : r.calls) {
    if (c.start_ms >= healed_ms && c.start_ms <= judged_until_ms) after.push_back(c);
  }
  std::sort(after.begin(), after.end(),
            [](const CallRecord& a, const CallRecord& b) { return a.start_ms < b.start_ms; });
  double run_start = -1;
  for (const CallRecord& c : after) {
    if (c.code == 0 && out.first_ok == absl::InfiniteDuration()) {
      out.first_ok = absl::Milliseconds(c.start_ms - healed_ms);
    }
    if (c.code != 0) {
      run_start = -1;
    } else if (run_start < 0) {
      run_start = c.start_ms;
    }
  }
  if (run_start >= 0 && !after.empty() &&
      after.back().start_ms - run_start >= absl::ToDoubleMilliseconds(steady_for)) {
    out.steady = absl::Milliseconds(run_start - healed_ms);
  }
  return out;
}

struct HopPeak {
  int threads_before = 0;
  int threads_peak = 0;
  int64_t in_flight_peak = 0;
};

struct PartitionResult {
  size_t calls = 0;
  // Answered later than the budget + 500 ms: not ended by its deadline.
  // The deadline is the load client's own gRPC timer, so what is later
  // than the budget is that process's scheduling: up to 100 ms under ASan
  // beside a compile. A call the deadline does not end lasts the outage.
  int late = 0;
  double slowest_ms = 0;
  std::string codes;  // of calls started during the fault
  std::map<std::string, HopPeak> hops;
  double late_half_median_ms = 0;  // calls started in the fault's second half
  size_t late_half_calls = 0;
  // Of those, the failed ones; those attributed no-backend (not sent on a
  // dead connection: held until the budget ran out); and the other
  // DEADLINE_EXCEEDED, "start_ms/elapsed_ms/source" (waited on one).
  size_t late_half_failed = 0;
  size_t late_half_no_backend = 0;
  std::string late_half_other_timeouts;
  Recovery recovery;
  // Calls started in the 8 s after the heal, "start_ms/elapsed_ms/code"
  // (start from the heal): what a slow recovery looked like, in its failure.
  std::string after_heal;
};

const char* const kHops[] = {"gateway", "orders", "ledger"};

// Starts the chain across the namespaces, breaks orders <-> ledger with
// `fault` for `outage` under load, heals it, and measures. Sets `skip` when
// this machine cannot run it.
PartitionResult RunPartition(Fault fault, absl::Duration outage, std::string* skip) {
  PartitionResult out;
  if (IpBinary().empty()) {
    *skip = "no ip (iproute2)";
    return out;
  }
  if (fault != Fault::kBlackhole && !Run("nft --version")) {
    *skip = "no nft (Debian package nftables), needed for the drop and reset faults";
    return out;
  }
  Network net;
  if (std::string why = net.Build(); !why.empty()) {
    *skip = "cannot make network namespaces: " + why;
    return out;
  }
  const std::string dir = TempDir();
  auto ledger = StartIn(net.Ns("l"), HOPBUDGET_DEMO_LEDGER,
                        {"--host=10.77.3.2", "--port=0", "--db=" + dir + "/ledger.db"});
  if (ledger == nullptr) return out;
  auto orders = StartIn(
      net.Ns("o"), HOPBUDGET_DEMO_ORDERS,
      {"--host=10.77.2.2", "--port=0", absl::StrCat("--ledger=10.77.3.2:", ledger->port())});
  if (orders == nullptr) return out;
  auto gateway = StartIn(
      net.Ns("g"), HOPBUDGET_DEMO_GATEWAY,
      {"--host=127.0.0.1", "--port=0", absl::StrCat("--orders=10.77.2.2:", orders->port())});
  if (gateway == nullptr) return out;
  std::map<std::string, ChildProcess*> procs = {
      {"gateway", gateway.get()}, {"orders", orders.get()}, {"ledger", ledger.get()}};
  const std::string records = dir + "/load.txt";
  auto load = StartIn(
      net.Ns("g"), HOPBUDGET_PARTITION_LOAD,
      {absl::StrCat("--gateway=127.0.0.1:", gateway->port()),
       absl::StrCat("--admin=gateway=127.0.0.1:", gateway->port(),
                    ",orders=10.77.2.2:", orders->port(), ",ledger=10.77.3.2:", ledger->port()),
       absl::StrCat("--rps=", kRps), absl::StrCat("--budget=", absl::FormatDuration(kBudget)),
       "--out=" + records},
      /*wait_ready=*/false);
  if (load == nullptr) return out;
  // Warm: the chain answers.
  const absl::Time warm_deadline = absl::Now() + absl::Seconds(60);
  while (OkCalls(records) < 40) {
    if (absl::Now() > warm_deadline) {
      ADD_FAILURE() << "the chain never answered 40 calls";
      return out;
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  for (const char* hop : kHops) {
    out.hops[hop].threads_before = procs[hop]->Threads();
    out.hops[hop].threads_peak = out.hops[hop].threads_before;
  }
  auto sample_threads = [&] {
    for (const char* hop : kHops) {
      out.hops[hop].threads_peak = std::max(out.hops[hop].threads_peak, procs[hop]->Threads());
    }
  };
  if (!net.Break(fault, true)) {
    ADD_FAILURE() << "could not break the link (" << FaultName(fault) << ")";
    return out;
  }
  const absl::Time cut = absl::Now();
  while (absl::Now() - cut < outage) {  // the fault lasts this long
    sample_threads();
    absl::SleepFor(absl::Milliseconds(100));
  }
  if (!net.Break(fault, false)) {
    ADD_FAILURE() << "could not heal the link (" << FaultName(fault) << ")";
    return out;
  }
  const absl::Time healed = absl::Now();
  // Recovery: wait until the calls after the heal have been steadily OK for
  // 2 s (or 30 s passed).
  LoadRecords r;
  while (absl::Now() - healed < absl::Seconds(30)) {
    sample_threads();
    r = ReadRecords(records);
    out.recovery = RecoveryOf(r, healed, absl::Now(), absl::Seconds(2));
    if (out.recovery.steady != absl::InfiniteDuration()) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  load->Signal(SIGTERM);
  if (!load->WaitExit(absl::Seconds(30)).ok()) ADD_FAILURE() << "the load did not exit";
  r = ReadRecords(records);
  const double cut_ms = absl::ToDoubleMilliseconds(cut - r.t0);
  const double healed_ms = absl::ToDoubleMilliseconds(healed - r.t0);

  std::map<int, int> during;  // codes of calls started during the fault
  std::vector<double> late_half;
  const double half_ms = cut_ms + absl::ToDoubleMilliseconds(outage) / 2;
  for (const CallRecord& c : r.calls) {
    out.slowest_ms = std::max(out.slowest_ms, c.elapsed_ms);
    if (c.elapsed_ms > absl::ToDoubleMilliseconds(kBudget) + 500) ++out.late;
    if (c.start_ms >= cut_ms && c.start_ms < healed_ms) ++during[c.code];
    // Calls started in the second half of the fault: by then keepalive has
    // dropped a dead connection, and orders holds them until a ledger is
    // ready or their budget runs out (no-backend), sending none on it.
    if (c.start_ms >= half_ms && c.start_ms < healed_ms) {
      late_half.push_back(c.elapsed_ms);
      if (c.code != 0) ++out.late_half_failed;
      if (c.source == "no-backend") {
        ++out.late_half_no_backend;
      } else if (c.code == 4) {
        absl::StrAppend(&out.late_half_other_timeouts, static_cast<int>(c.start_ms - cut_ms), "/",
                        static_cast<int>(c.elapsed_ms), "/", c.source, " ");
      }
    }
  }
  out.calls = r.calls.size();
  for (const CallRecord& c : r.calls) {
    if (c.start_ms >= healed_ms && c.start_ms < healed_ms + 8000) {
      absl::StrAppend(&out.after_heal, static_cast<int>(c.start_ms - healed_ms), "/",
                      static_cast<int>(c.elapsed_ms), "/", c.code,
                      c.code == 4 ? "/" + c.source : std::string(), " ");
    }
  }
  std::sort(late_half.begin(), late_half.end());
  out.late_half_calls = late_half.size();
  out.late_half_median_ms = late_half.empty() ? 0 : late_half[late_half.size() / 2];
  for (const auto& [hop, samples] : r.in_flight) {
    for (const auto& [t, n] : samples) {
      if (t >= cut_ms) out.hops[hop].in_flight_peak = std::max(out.hops[hop].in_flight_peak, n);
    }
  }
  for (const auto& [code, n] : during) absl::StrAppend(&out.codes, code, ":", n, " ");
  // One line per run, in bench/'s RESULT style (tests/partition/long_outage.sh
  // collects them).
  std::string hops;
  for (const char* hop : kHops) {
    const HopPeak& h = out.hops[hop];
    absl::StrAppend(&hops, " ", hop, "_in_flight_max=", h.in_flight_peak, " ", hop,
                    "_threads=", h.threads_before, "->", h.threads_peak);
  }
  auto ms = [](absl::Duration d) {
    return d == absl::InfiniteDuration() ? -1.0 : absl::ToDoubleMilliseconds(d);
  };
  std::printf(
      "RESULT bench=partition fault=%s outage_s=%.0f calls=%zu late=%d slowest_ms=%.1f"
      "%s second_half_median_ms=%.1f second_half_no_backend=%zu/%zu first_ok_ms=%.0f "
      "steady_ms=%.0f codes=%s\n",
      FaultName(fault), absl::ToDoubleSeconds(outage), out.calls, out.late, out.slowest_ms,
      hops.c_str(), out.late_half_median_ms, out.late_half_no_backend, out.late_half_failed,
      ms(out.recovery.first_ok), ms(out.recovery.steady), out.codes.c_str());
  std::fflush(stdout);
  return out;
}

void CheckPartition(Fault fault, const PartitionResult& r) {
  EXPECT_EQ(r.late, 0) << "slowest " << r.slowest_ms << " ms";
  for (const char* hop : kHops) {
    const HopPeak& h = r.hops.at(hop);
    // 20 calls/s, each gone at its 800 ms budget: ~16 in flight at a hop.
    EXPECT_LE(h.in_flight_peak, kBound) << hop;
    EXPECT_LE(h.threads_peak - h.threads_before, kBound) << hop;
  }
  EXPECT_LE(r.recovery.first_ok, absl::Seconds(5))
      << "first OK after the heal; calls after it (start/elapsed ms/code[/source]): "
      << r.after_heal;
  EXPECT_LE(r.recovery.steady, absl::Seconds(5)) << "steady OK after the heal";
  if (fault == Fault::kBlackhole) {
    // Without hopbudget's channel defaults the dead connection stays up and
    // each attempt is sent on it and waits out orders' 300 ms attempt cap
    // (attributed `attempt`), and recovery took 3.3 s instead of 0.2 s. With
    // them keepalive drops it and the calls fail as no-backend: held in
    // orders, none sent (ClientOptions::backend_wait). Measured: 76-99 of
    // 100; the others were sent while orders' channel reported READY for a
    // moment during the outage, and waited out the cap.
    ASSERT_GT(r.late_half_failed, 0u);
    EXPECT_GE(2 * r.late_half_no_backend, r.late_half_failed)
        << "calls still wait on the dead connection (start after the cut/elapsed ms/source): "
        << r.late_half_other_timeouts;
  }
}

class PartitionTest : public ::testing::TestWithParam<Fault> {};

TEST_P(PartitionTest, OrdersLedgerLinkBrokenForTenSecondsUnderLoad) {
  std::string skip;
  const PartitionResult r = RunPartition(GetParam(), absl::Seconds(10), &skip);
  if (!skip.empty()) GTEST_SKIP() << "partition test skipped: " << skip;
  if (HasFailure()) return;
  CheckPartition(GetParam(), r);
}

INSTANTIATE_TEST_SUITE_P(Faults, PartitionTest,
                         ::testing::Values(Fault::kBlackhole, Fault::kDrop, Fault::kReset),
                         [](const ::testing::TestParamInfo<Fault>& info) {
                           return std::string(FaultName(info.param));
                         });

// 30 s and 60 s blackholes: run by tests/partition/long_outage.sh, not by
// ctest (two minutes and more). Same checks as above.
TEST(PartitionBench, DISABLED_LongBlackholes) {
  for (int seconds : {30, 60}) {
    std::string skip;
    const PartitionResult r = RunPartition(Fault::kBlackhole, absl::Seconds(seconds), &skip);
    if (!skip.empty()) GTEST_SKIP() << "partition bench skipped: " << skip;
    if (HasFailure()) return;
    SCOPED_TRACE(absl::StrCat(seconds, " s blackhole"));
    CheckPartition(Fault::kBlackhole, r);
  }
}

}  // namespace
}  // namespace hopbudget::demo
