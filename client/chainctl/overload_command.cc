// Copyright hopbudget authors.
//
// chainctl overload: the overload benchmark's runs (scripts/bench.sh
// --only overload; bench_report --section=overload reads what it writes).
//
// One hopbudget chain behind its edge (server/edge), from the chain's one
// description, at multiples of its own capacity, from a caller that does not
// back off and from one that throttles itself (issue 32). With two CPUs or
// more the edge and the three services run on CPU 0 and the caller
// (client/h2load: gRPC's unary call over libnghttp2, one thread; chainctl
// load's gRPC client fills its core below 8x of the chain) on CPU 1, so that
// the caller's own cost never takes the chain's CPU. The capacity is found
// first (the highest rate with >= 90 % OK: a doubling ramp, then two
// bisection steps); every level then runs --rounds rounds, each round three
// arms in turn, their order rotating: the unthrottled caller through the
// edge, the throttled caller through the edge, and the unthrottled caller
// on the gateway directly (what the edge is worth: shown, never judged).
// Each round starts once the chain is quiet. Each arm is one RESULT line in
// --out, with the chain's counts, the edge's CPU, each hop's calls,
// refusals and CPU (Admin Stats, through h2_load), and each hop's admission
// sheds by reason and its limit (/metrics).
//
// The hops behind the edge keep a fixed admission limit of twice the
// edge's, as a backstop: with their adaptive limits a hop whose limit dipped
// below the edge's shed what the edge had admitted (docs/overload.md).
//
// Exit status 0 when every run ran (a round in which every call failed is a
// result); 1 when the chain did not start or h2_load failed; 2 for a bad
// command line.
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "capacity_ramp.h"
#include "client/inspect/scrape.h"
#include "commands.h"
#include "processes.h"
#include "summary.h"
#include "topology.h"

ABSL_FLAG(std::string, levels, "1,2,4,8,16", "the load levels, multiples of the capacity");
ABSL_FLAG(int, edge_limit, 128, "the edge's fixed limit of calls in progress");
ABSL_FLAG(int, gateway_streams, 1024,
          "the gateway's bound on calls in progress per client connection (HTTP/2 SETTINGS)");
// --bin, --work, --h2load, --budget, --duration, --client-throttle and the
// hops' extra flags (--gateway-flags, ...) are shared (commands.h).

namespace hopbudget::chainctl {
namespace {

// A hop's admission sheds so far, by reason, and its limit now ("" when its
// /metrics has none), in the order /metrics lists them.
struct Sheds {
  std::vector<std::pair<std::string, double>> by_reason;
  std::string limit;
};

Sheds ReadSheds(int metrics_port) {
  Sheds s;
  inspect::Target target;
  target.host = "127.0.0.1";
  target.port = metrics_port;
  absl::StatusOr<std::string> text = inspect::Scrape(target, absl::Seconds(5));
  if (!text.ok()) return s;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (f.size() < 2) continue;
    double value = 0;
    if (absl::StartsWith(f[0], "hopbudget_admission_shed_total{")) {
      const size_t at = f[0].find("reason=\"");
      if (at == absl::string_view::npos || !absl::SimpleAtod(f[1], &value)) continue;
      absl::string_view reason = f[0].substr(at + 8);
      reason = reason.substr(0, reason.find('"'));
      s.by_reason.emplace_back(std::string(reason), value);
    } else if (f[0] == "hopbudget_admission_limit") {
      s.limit = std::string(f[1]);
    }
  }
  return s;
}

// " HOP_shed=reason:n,... HOP_limit=N": the reasons whose count grew
// ("none"), and the limit now ("?" when unknown).
std::string ShedFields(const std::string& hop, const Sheds& before, const Sheds& after) {
  std::map<std::string, double> was(before.by_reason.begin(), before.by_reason.end());
  std::vector<std::string> grew;
  for (const auto& [reason, n] : after.by_reason) {
    const double d = n - was[reason];
    if (d > 0) grew.push_back(absl::StrCat(reason, ":", ShortestDecimal(d)));
  }
  return absl::StrCat(" ", hop, "_shed=", grew.empty() ? "none" : absl::StrJoin(grew, ","), " ",
                      hop, "_limit=", after.limit.empty() ? "?" : after.limit);
}

class Overload {
 public:
  Overload(std::vector<StartedHop> chain, std::string h2load, std::string work, int load_cpu)
      : chain_(std::move(chain)),
        h2load_(std::move(h2load)),
        work_(std::move(work)),
        load_cpu_(load_cpu) {
    for (const StartedHop& h : chain_) {
      hops_[h.hop] = h;
      pids_.push_back(h.pid);
    }
  }

  std::string Address(Hop hop) const { return absl::StrCat("127.0.0.1:", hops_.at(hop).port); }
  std::string Admin() const {
    return absl::StrCat(Address(Hop::kGateway), ",", Address(Hop::kOrders), ",",
                        Address(Hop::kLedger));
  }
  const std::vector<pid_t>& pids() const { return pids_; }
  pid_t pid(Hop hop) const { return hops_.at(hop).pid; }
  int metrics_port(Hop hop) const { return hops_.at(hop).metrics_port; }

  // One open-loop run at `rps` for `duration` on `entry` (the edge or the
  // gateway), throttled or not; its summary JSON in `file`. A connection
  // the chain dropped under load is a finding: the run is kept (its calls
  // from then on failed UNAVAILABLE), its cause printed.
  absl::StatusOr<LoadSummary> One(bool throttled, int64_t rps, absl::Duration duration,
                                  const std::string& file, Hop entry, bool* lost) {
    std::vector<std::string> args = {
        "--gateway=" + Address(entry),
        absl::StrCat("--rps=", rps),
        "--duration=" + absl::FormatDuration(duration),
        "--budget=" + absl::FormatDuration(absl::GetFlag(FLAGS_budget)),
        "--admin=" + Admin(),
        "--json=" + file,
        "--quiet"};
    if (throttled) {
      args.push_back("--client-throttle=" + ShortestDecimal(absl::GetFlag(FLAGS_client_throttle)));
    }
    std::remove(file.c_str());
    const std::string text = file + ".txt";
    absl::StatusOr<pid_t> pid = Spawn(h2load_, args, text, text, load_cpu_);
    if (!pid.ok()) return pid.status();
    int status = 0;
    while (waitpid(*pid, &status, 0) < 0 && errno == EINTR) {
    }
    const std::string output = ReadFile(text);
    *lost = absl::StrContains(output, "was lost");
    const std::string json = ReadFile(file);
    if (ExitCode(status) != 0) {
      if (!*lost || json.empty()) {
        return absl::InternalError(absl::StrCat("h2_load failed:\n", output));
      }
      const size_t at = output.find("the connection");
      std::cerr << "  h2_load, " << rps << "/s: " << output.substr(at, output.find('\n', at) - at)
                << "\n";
    }
    absl::StatusOr<LoadSummary> summary = ParseSummaryJson(json);
    if (!summary.ok()) {
      return absl::InternalError(absl::StrCat(file, ": ", summary.status().message()));
    }
    return summary;
  }

 private:
  std::vector<StartedHop> chain_;
  std::map<Hop, StartedHop> hops_;
  std::vector<pid_t> pids_;
  std::string h2load_, work_;
  int load_cpu_;
};

}  // namespace

int OverloadCmd(int argc, char** argv) {
  ParseCommand(argc, argv, "overload",
               "chainctl overload: the overload benchmark's runs on one hopbudget chain behind "
               "its edge (scripts/bench.sh --only overload): its capacity, then every level's "
               "rounds, one RESULT line per run in --out.\n\n"
               "  chainctl overload --bin=BUILD/server --h2load=BUILD/client/h2load/h2_load "
               "--work=DIR --out=FILE\n"
               "      [--levels=1,2,4,8,16] [--rounds=3] [--duration=6s] [--gap=3s] "
               "[--budget=500ms]\n"
               "      --client-throttle=K [--edge-limit=128] [--gateway-streams=1024]\n"
               "      [--gateway-flags='--latency=...'] [--orders-flags=...] [--ledger-flags=...]",
               {"bin", "h2load", "work", "out", "levels", "rounds", "duration", "gap", "budget",
                "client_throttle", "edge_limit", "gateway_streams", "gateway_flags", "orders_flags",
                "ledger_flags"});
  const std::string bin = absl::GetFlag(FLAGS_bin), h2load = absl::GetFlag(FLAGS_h2load),
                    work = absl::GetFlag(FLAGS_work), out = absl::GetFlag(FLAGS_out);
  const int rounds = absl::GetFlag(FLAGS_rounds), edge_limit = absl::GetFlag(FLAGS_edge_limit);
  const absl::Duration duration = absl::GetFlag(FLAGS_duration), gap = absl::GetFlag(FLAGS_gap);
  cli::ExitIfBad("chainctl overload",
                 cli::FirstError({cli::Required("bin", bin), cli::Required("h2load", h2load),
                                  cli::Required("work", work), cli::Required("out", out)}));
  std::vector<int64_t> levels;
  for (absl::string_view l : absl::StrSplit(absl::GetFlag(FLAGS_levels), ',', absl::SkipEmpty())) {
    int64_t level = 0;
    if (!absl::SimpleAtoi(l, &level) || level < 1) {
      return Fail("overload", absl::StrCat("--levels=", absl::GetFlag(FLAGS_levels), ": \"", l,
                                           "\" is not a whole multiple of at least 1"));
    }
    levels.push_back(level);
  }
  if (levels.empty()) return Fail("overload", "--levels: no level");
  if (rounds < 1) return Fail("overload", absl::StrCat("--rounds=", rounds, ": must be >= 1"));
  if (!(absl::GetFlag(FLAGS_client_throttle) > 0)) {
    return Fail("overload", absl::StrCat("--client-throttle=",
                                         ShortestDecimal(absl::GetFlag(FLAGS_client_throttle)),
                                         ": the throttled caller needs a K > 0"));
  }
  if (edge_limit < 1) {
    return Fail("overload", absl::StrCat("--edge-limit=", edge_limit, ": must be >= 1"));
  }
  if (duration <= absl::ZeroDuration()) {
    return Fail("overload",
                absl::StrCat("--duration=", absl::FormatDuration(duration), ": must be > 0"));
  }
  if (access(h2load.c_str(), X_OK) != 0) {
    return Fail("overload", absl::StrCat("--h2load=", h2load, ": not an executable"));
  }
  if (mkdir(work.c_str(), 0755) != 0 && errno != EEXIST) {
    return Fail("overload", absl::StrCat("--work=", work, ": ", std::strerror(errno)));
  }
  std::ofstream results(out, std::ios::trunc);
  if (!results) return Fail("overload", absl::StrCat("--out=", out, ": cannot write it"));

  // The chain on CPU 0 and the caller on CPU 1, when there are two.
  int chain_cpu = -1, load_cpu = -1;
  std::string placement = "unpinned (fewer than 2 CPUs)";
  if (sysconf(_SC_NPROCESSORS_ONLN) >= 2) {
    chain_cpu = 0;
    load_cpu = 1;
    placement = "the edge and the three services on CPU 0, the load generator on CPU 1";
  }
  // One hopbudget chain behind its edge: the description's budgets, the
  // caller's latencies (--*-flags), a 600 ms shield bound at the ledger, the
  // gateway's stream bound, and the backstop limits.
  const std::string backstop =
      absl::StrCat("--noadmission-adaptive --admission-limit=", 2 * edge_limit);
  ChainSpec spec = ChainFromFlags(work + "/hopbudget.db");
  spec.mode = "hopbudget";
  spec.edge = true;
  auto add = [&](Hop hop, const std::string& flags) {
    for (absl::string_view f : absl::StrSplit(flags, ' ', absl::SkipEmpty())) {
      spec.extra[hop].emplace_back(f);
    }
  };
  add(Hop::kOrders, backstop);
  add(Hop::kLedger, "--shield-bound=600ms " + backstop);
  add(Hop::kGateway, absl::StrCat("--max-concurrent-streams=", absl::GetFlag(FLAGS_gateway_streams),
                                  " ", backstop));
  add(Hop::kEdge, absl::StrCat("--limit=fixed --max-in-flight=", edge_limit));
  absl::StatusOr<std::vector<StartedHop>> chain = StartChain(spec, bin, work, chain_cpu);
  if (!chain.ok()) {
    std::cerr << "chainctl overload: the chain did not start: " << chain.status().message() << "\n";
    return 1;
  }
  Overload o(*chain, h2load, work, load_cpu);
  auto fail = [&](const absl::Status& s) {
    std::cerr << "chainctl overload: " << s.message() << "\n";
    StopChain(*chain);
    return 1;
  };

  // The capacity: 3 s steps from 400/s, up to 51 200 (CapacityRamp).
  std::cout << "capacity ramp (the hopbudget chain behind its edge, " << placement
            << "):" << std::endl;
  absl::StatusOr<int64_t> ramp =
      CapacityRamp(400, 51200, [&](int64_t rps) -> absl::StatusOr<double> {
        bool lost = false;
        absl::StatusOr<LoadSummary> s =
            o.One(false, rps, absl::Seconds(3), absl::StrCat(work, "/ramp-overload-", rps, ".json"),
                  Hop::kEdge, &lost);
        if (!s.ok()) return s.status();
        std::cout << "  offered " << rps << "/s -> OK share " << ShortestDecimal(OkShare(*s))
                  << std::endl;
        absl::SleepFor(gap);
        return OkShare(*s);
      });
  if (!ramp.ok()) return fail(ramp.status());
  const int64_t capacity = *ramp;
  std::cout << "capacity: " << capacity << "/s" << std::endl;
  // The ramp's last, overloaded step ends first.
  WaitQuiet(o.pids(), absl::Seconds(60));

  auto emit = [&](const std::string& line) {
    results << line << "\n" << std::flush;
    std::cout << line << std::endl;
  };
  emit(absl::StrCat("RESULT bench=overload kind=setup capacity=", capacity,
                    " duration_s=", ShortestDecimal(absl::ToDoubleSeconds(duration)),
                    " budget_ms=", absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_budget)),
                    " rounds=", rounds, " placement=", absl::StrReplaceAll(placement, {{" ", "_"}}),
                    " edge_limit=", edge_limit));
  // Each hop's admission sheds, read before and after every run (the ramp
  // left out): which hop refused, and why, in a round that falls short.
  const Hop kJudged[] = {Hop::kGateway, Hop::kOrders, Hop::kLedger};
  std::map<Hop, Sheds> sheds;
  for (Hop hop : kJudged) sheds[hop] = ReadSheds(o.metrics_port(hop));
  struct Arm {
    bool throttled;
    Hop entry;
  };
  const Arm kUnthrottledEdge{false, Hop::kEdge}, kThrottledEdge{true, Hop::kEdge},
      kDirect{false, Hop::kGateway};
  int order = 0;
  for (int64_t factor : levels) {
    const int64_t rate = capacity * factor;
    for (int round = 1; round <= rounds; ++round) {
      std::vector<Arm> arms = {kUnthrottledEdge, kThrottledEdge, kDirect};
      if (order % 3 == 1) arms = {kThrottledEdge, kDirect, kUnthrottledEdge};
      if (order % 3 == 2) arms = {kDirect, kUnthrottledEdge, kThrottledEdge};
      ++order;
      for (const Arm& arm : arms) {
        const std::string client = arm.throttled ? "throttled" : "unthrottled";
        const std::string entry = arm.entry == Hop::kEdge ? "edge" : "gateway";
        const std::string file =
            absl::StrCat(work, "/load-", factor, "-", client, "-", entry, "-", round, ".json");
        // A round starts only once the chain is quiet, or the last round's
        // backlog (a gateway that fell behind its socket reads it for
        // seconds after its caller left) takes this round's CPU.
        const absl::Duration idle = WaitQuiet(o.pids(), absl::Seconds(60));
        const absl::Duration edge_before = CpuTime({o.pid(Hop::kEdge)});
        bool lost = false;
        absl::StatusOr<LoadSummary> s =
            o.One(arm.throttled, rate, duration, file, arm.entry, &lost);
        if (!s.ok()) return fail(s.status());
        std::string shed_text;
        for (Hop hop : kJudged) {
          Sheds now = ReadSheds(o.metrics_port(hop));
          shed_text += ShedFields(std::string(HopName(hop)), sheds[hop], now);
          sheds[hop] = std::move(now);
        }
        absl::StrAppend(&shed_text, " edge_cpu_ms=",
                        absl::ToInt64Milliseconds(CpuTime({o.pid(Hop::kEdge)}) - edge_before));
        std::vector<std::string> per_hop;
        for (const ServiceDelta& d : s->per_hop) {
          per_hop.push_back(absl::StrCat(d.hop, "_calls=", d.calls, " ", d.hop,
                                         "_refused=", d.refused, " ", d.hop,
                                         "_cpu_ms=", ShortestDecimal(d.cpu_ms)));
        }
        emit(absl::StrCat("RESULT bench=overload kind=round client=", client,
                          " gateway=", arm.entry == Hop::kEdge ? "edge" : "direct",
                          " factor=", factor, " round=", round, " rate=", rate,
                          " idle_wait_s=", absl::StrFormat("%.1f", absl::ToDoubleSeconds(idle)),
                          " connection_lost=", lost ? 1 : 0, " sent=", s->sent, " ok=", s->ok,
                          " client_throttled=", s->client_throttled,
                          " ok_p99_ms=", ShortestDecimal(s->ok_p99_ms),
                          " total_s=", ShortestDecimal(absl::ToDoubleSeconds(s->total)),
                          " client_cpu_s=", ShortestDecimal(absl::ToDoubleSeconds(s->client_cpu)),
                          " expired_unsent=", s->expired_unsent,
                          " send_lag_p99_ms=", ShortestDecimal(s->send_lag_p99_ms),
                          " work_after_deadline_ms=", ShortestDecimal(s->work_after_deadline_ms),
                          " calls_started_after_deadline=", s->calls_started_after_deadline, " ",
                          absl::StrJoin(per_hop, " "), shed_text));
        absl::SleepFor(gap);
      }
    }
  }
  const std::string failed = StopChain(*chain);
  if (!failed.empty()) {
    std::cerr << "chainctl overload: the chain did not stop cleanly:\n" << failed;
    return 1;
  }
  return 0;
}

}  // namespace hopbudget::chainctl
