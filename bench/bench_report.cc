// Copyright hopbudget authors.
//
// bench_report: turns the RESULT lines of the benchmark binaries
// (bench_util.h) into the markdown tables of the report. Reads every line of
// standard input, ignores all but "RESULT bench=<section> ...", and prints
// the section's tables on standard output.
//
//   grep -h ^RESULT results/*.txt | bench_report --section=overhead
//
// Sections: overhead (aggregates rounds: medians, and the ratios c/a and c/b
// per round with their spread), scale, precision, cancel, chain (saved work
// on the demo chain, baseline against hopbudget; also prints the chart's
// data as "CHART chain ..." lines on standard error), hedge, admission,
// slots, overload (the hopbudget chain at multiples of its own capacity),
// refusal (what a refused call costs the server against a served one; no
// target, so no verdict).
//
// Every target docs/benchmarks.md quotes is judged here, by code, never by hand:
// each verdict is "met", "**missed**" or "not measured" (no samples, or
// samples that cannot support the claim), printed in the section's table
// and as a line "VERDICT <target> | <result> | <verdict>" on standard error,
// which scripts/bench.sh collects into the report's summary. Calls that were
// lost or answered wrongly count as infinitely late in the percentile a
// target is judged on; they are never dropped.
//
// --write-report writes the whole report instead (report_writer.h), so that
// scripts/bench.sh only builds, runs and invokes:
//
//   bench_report --write-report --raw=OUT/raw --out=OUT/report.md --settings=OUT/raw/settings.txt
//
// It reads the RESULT lines of every RAW/*.txt, runs every section above in
// this process, and writes report.md (the machine facts, the failed runs, the
// summary of every VERDICT line, each section's prose and tables, the
// micro-benchmarks from RAW/micro.json, the refusal section's instruction
// counts from RAW/refusal-instructions.txt; the chain section's introduction
// when RAW holds its setup line) and, as the script did before,
// RAW/<section>.md, RAW/verdicts.log (the HEADLINE lines the script prints)
// and RAW/chain.dat (the chart's data, for gnuplot). SETTINGS is what the
// script knows and the prose quotes, one key=value per line, every key
// required but `failure` (one line per failed run, in order):
//
//   quick                  1 for --quick, else 0
//   sections               --only's list as given (the full list: a full run)
//   started_at git_rev nproc cpu_model mem_total kernel grpc_version
//   load_before load_after elapsed        the machine and the run
//   deadlock overhead_placement rounds duration warmup        section 1
//   scale_levels micro_min_time           sections 5 and 6
//   hedge_rounds hedge_calls hedge_warmup hedge_service hedge_service_sigma
//   slots_rounds
//   overload_gateway_streams overload_edge_limit overload_levels overload_rounds
//   overload_duration
//   chain_client_throttle chain_budget    sections 4 and 10
//   chain_duration chain_rounds chain_ramp_step chain_latency_gateway
//   chain_latency_orders chain_latency_ledger                   section 4
//   refusal_duration refusal_warmup reload_rounds reload_duration
//   failure                "LABEL: exit status N (...)", repeatable
//
// The chart's marker (<!-- chart -->) is left for the script, which swaps it
// for the image once gnuplot has drawn it.
#include <stdio.h>  // open_memstream

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench_util.h"
#include "report_writer.h"

ABSL_FLAG(std::string, section, "overhead",
          "the report section: overhead, scale, precision, cancel, chain, hedge, admission, "
          "slots, overload, refusal or reload");
ABSL_FLAG(bool, write_report, false,
          "write the whole report from --raw (see --settings) to --out, instead of one "
          "section from standard input");
ABSL_FLAG(std::string, raw, "",
          "with --write-report: the run's raw directory (RESULT lines in *.txt)");
ABSL_FLAG(std::string, out, "", "with --write-report: the report to write (report.md)");
ABSL_FLAG(std::string, settings, "",
          "with --write-report: the run's settings, key=value lines (bench_report.cc's header)");

namespace hopbudget {
namespace bench {
namespace {

using Record = std::map<std::string, std::string>;

// Where a section writes: its tables (standard output) and its VERDICT,
// HEADLINE and CHART lines (standard error). --write-report runs every
// section in this process, each into buffers of its own.
struct SectionStreams {
  FILE* tables = stdout;
  FILE* log = stderr;
};
SectionStreams& Streams() {
  static SectionStreams streams;
  return streams;
}
FILE* Out() { return Streams().tables; }
FILE* Log() { return Streams().log; }

std::vector<Record> ReadResults(std::istream& in, const std::string& section) {
  std::vector<Record> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("RESULT ", 0) != 0) continue;
    Record r;
    for (absl::string_view kv : absl::StrSplit(line.substr(7), ' ', absl::SkipEmpty())) {
      std::pair<std::string, std::string> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
      r[p.first] = p.second;
    }
    // The hedge section gathers the three kinds of line hedge_bench prints.
    const bool ours = section == "hedge" ? (r["bench"] == "hedge" || r["bench"] == "hedge_target" ||
                                            r["bench"] == "race_cancel")
                                         : r["bench"] == section;
    if (ours) out.push_back(r);
  }
  return out;
}

double Num(const Record& r, const std::string& key) {
  auto it = r.find(key);
  double v = 0;
  if (it == r.end()) return 0;
  if (it->second == "inf") return std::numeric_limits<double>::infinity();
  if (!absl::SimpleAtod(it->second, &v)) return 0;
  return v;
}
std::string Str(const Record& r, const std::string& key) {
  auto it = r.find(key);
  return it == r.end() ? "" : it->second;
}

bool Has(const Record& r, const std::string& key) { return r.count(key) > 0; }

constexpr char kMet[] = "met";
constexpr char kMissed[] = "**missed**";
constexpr char kNotMeasured[] = "not measured";

void EmitVerdict(const std::string& target, const std::string& result, const std::string& verdict) {
  std::fprintf(Log(), "VERDICT %s | %s | %s\n", target.c_str(), result.c_str(), verdict.c_str());
}

std::string Ms(double v) {
  if (std::isinf(v)) return "inf (lost calls)";
  return Fixed(v, 3) + " ms";
}

// The verdict on "p99 <= target_ms" for one benchmark row that reports
// `calls` samples, `failed_key` calls without a sample, and p99_all_ms: the
// p99 with those failed calls counted as infinitely late.
std::string JudgeP99(const Record* r, double target_ms, const std::string& failed_key,
                     const std::string& failed_what, std::string* result) {
  *result = "-";
  if (r == nullptr) return kNotMeasured;
  const double calls = Num(*r, "calls");
  const double failed = Num(*r, failed_key);
  if (calls + failed <= 0 || !Has(*r, "p99_all_ms")) return kNotMeasured;
  const double p99 = Num(*r, "p99_all_ms");
  *result = "p99 " + Ms(p99);
  std::string verdict = p99 <= target_ms ? kMet : kMissed;
  if (failed > 0) {
    verdict += " (" + Fixed(failed, 0) + " of " + Fixed(calls + failed, 0) + " calls " +
               failed_what + ", counted as late)";
  }
  return verdict;
}

// The overhead modes (bench_modes.h), in the order the report lists them.
const std::vector<std::string>& ModeList() {
  static const std::vector<std::string> modes = {
      "plain", "noop", "budget-only", "retry-loop", "retrying-channel", "hop-table"};
  return modes;
}

std::string ModeLabel(const std::string& mode) {
  if (mode == "plain") return "(a) plain";
  if (mode == "noop") return "(b) no-op interceptor pair";
  if (mode == "budget-only") return "(c) budget interceptors";
  if (mode == "retry-loop") return "(d) budget interceptors + RetryLoop";
  if (mode == "retrying-channel") return "(e) budget interceptors + retrying channel";
  if (mode == "hop-table") return "(f) budget interceptors from a 50-method Hop";
  return mode;
}

double MedianOf(std::vector<double> v) { return Median(v); }
std::string Spread(std::vector<double> v, int digits) {
  if (v.empty()) return "-";
  const double m = Median(v);  // sorts
  return Fixed(m, digits) + " (" + Fixed(v.front(), digits) + ".." + Fixed(v.back(), digits) + ")";
}

constexpr int kJudgedInflight = 32;
// The modes the overhead targets hold for; the retrying channel is the
// drop-in whose cost is reported, not a target.
const std::vector<std::string>& JudgedModes() {
  static const std::vector<std::string> modes = {"budget-only", "retry-loop"};
  return modes;
}

// One mode's ratios, round by round, against the plain and no-op runs of
// the same round.
struct Ratios {
  std::vector<double> qps_plain, qps_noop, p99_plain, client_cpu_noop, server_cpu_noop;
  double errors = 0;  // in the runs compared
};

Ratios RatiosOf(std::map<std::string, std::map<int, Record>>& modes, const std::string& mode) {
  Ratios r;
  auto ratio = [](double x, double y, std::vector<double>* out) {
    if (y > 0) out->push_back(x / y);
  };
  for (auto& [round, m] : modes[mode]) {
    r.errors += Num(m, "errors");
    if (modes["plain"].count(round)) {
      const Record& a = modes["plain"][round];
      r.errors += Num(a, "errors");
      ratio(Num(m, "qps"), Num(a, "qps"), &r.qps_plain);
      ratio(Num(m, "p99_us"), Num(a, "p99_us"), &r.p99_plain);
    }
    if (modes["noop"].count(round)) {
      const Record& b = modes["noop"][round];
      r.errors += Num(b, "errors");
      ratio(Num(m, "qps"), Num(b, "qps"), &r.qps_noop);
      ratio(Num(m, "client_cpu_us"), Num(b, "client_cpu_us"), &r.client_cpu_noop);
      ratio(Num(m, "server_cpu_us"), Num(b, "server_cpu_us"), &r.server_cpu_noop);
    }
  }
  return r;
}

// The targets of one mode on the medians of its per-round ratios: QPS >=
// 0.95x plain and >= 0.98x no-op, p99 <= 1.10x plain, client and server CPU
// per call each <= 1.05x no-op. Not measured without every pair of runs, or
// when calls failed in them (a failing mode's QPS says nothing).
std::string OverheadVerdict(const Ratios& r, std::string* result) {
  *result = "-";
  if (r.errors > 0) return std::string(kNotMeasured) + " (" + Fixed(r.errors, 0) + " calls failed)";
  if (r.qps_plain.empty() || r.qps_noop.empty() || r.p99_plain.empty() ||
      r.client_cpu_noop.empty() || r.server_cpu_noop.empty()) {
    return kNotMeasured;
  }
  const double qa = MedianOf(r.qps_plain), qb = MedianOf(r.qps_noop), pa = MedianOf(r.p99_plain),
               cc = MedianOf(r.client_cpu_noop), sc = MedianOf(r.server_cpu_noop);
  *result = "QPS " + Fixed(qa, 3) + "x plain, " + Fixed(qb, 3) + "x no-op; p99 " + Fixed(pa, 3) +
            "x plain; CPU " + Fixed(cc, 3) + "x (client), " + Fixed(sc, 3) + "x (server) no-op";
  std::vector<std::string> missed;
  if (qa < 0.95) missed.push_back("QPS vs plain");
  if (qb < 0.98) missed.push_back("QPS vs no-op");
  if (pa > 1.10) missed.push_back("p99");
  if (cc > 1.05) missed.push_back("client CPU");
  if (sc > 1.05) missed.push_back("server CPU");
  if (missed.empty()) return "met";
  std::string text = "**missed**:";
  for (const std::string& m : missed) text += " " + m + ",";
  text.pop_back();
  return text;
}

std::string OverheadTarget(const std::string& api, const std::string& mode) {
  return "overhead " + api + " API, " + std::to_string(kJudgedInflight) + " in flight, " + mode +
         ": QPS >= 0.95x plain and >= 0.98x no-op, p99 <= 1.10x plain, CPU/call <= 1.05x no-op";
}

// Issue 30: the interceptors made from a Hop with a 50-method table beside
// one policy (budget-only), in the same rounds. The target is "within the
// round-to-round noise of the single policy": the median of hop-table's
// per-round ratios to budget-only must lie within budget-only's own spread
// over the rounds ((max - min) / median of each figure), QPS not below
// 1 - that spread, client and server CPU per call not above 1 + it. Fewer
// than 3 rounds give no spread to judge by: not measured.
std::string TableTarget(const std::string& api) {
  return "policy table, " + api + " API, " + std::to_string(kJudgedInflight) +
         " in flight: a 50-method Hop's QPS and CPU/call within the single policy's round-to-round "
         "spread";
}

void JudgeTable(const std::string& api, std::map<std::string, std::map<int, Record>>& modes) {
  std::vector<double> qps, client, server, base_qps, base_client, base_server;
  double errors = 0;
  for (auto& [round, t] : modes["hop-table"]) {
    if (!modes["budget-only"].count(round)) continue;
    const Record& c = modes["budget-only"][round];
    errors += Num(t, "errors") + Num(c, "errors");
    if (Num(c, "qps") > 0) qps.push_back(Num(t, "qps") / Num(c, "qps"));
    if (Num(c, "client_cpu_us") > 0) {
      client.push_back(Num(t, "client_cpu_us") / Num(c, "client_cpu_us"));
    }
    if (Num(c, "server_cpu_us") > 0) {
      server.push_back(Num(t, "server_cpu_us") / Num(c, "server_cpu_us"));
    }
    base_qps.push_back(Num(c, "qps"));
    base_client.push_back(Num(c, "client_cpu_us"));
    base_server.push_back(Num(c, "server_cpu_us"));
  }
  if (errors > 0) {
    EmitVerdict(TableTarget(api), "-",
                std::string(kNotMeasured) + " (" + Fixed(errors, 0) + " calls failed)");
    return;
  }
  if (qps.size() < 3 || client.size() < 3 || server.size() < 3) {
    EmitVerdict(TableTarget(api), "-",
                std::string(kNotMeasured) + " (fewer than 3 rounds of both modes)");
    return;
  }
  auto spread = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const double m = Median(v);
    return m > 0 ? (v.back() - v.front()) / m : 0.0;
  };
  const double nq = spread(base_qps), nc = spread(base_client), ns = spread(base_server);
  const double q = MedianOf(qps), c = MedianOf(client), s = MedianOf(server);
  const std::string result = "QPS " + Fixed(q, 3) + "x, CPU " + Fixed(c, 3) + "x (client), " +
                             Fixed(s, 3) + "x (server) the single policy's; its spread QPS " +
                             Fixed(100 * nq, 1) + " %, CPU " + Fixed(100 * nc, 1) + " % / " +
                             Fixed(100 * ns, 1) + " %";
  std::vector<std::string> missed;
  if (q < 1 - nq) missed.push_back("QPS");
  if (c > 1 + nc) missed.push_back("client CPU");
  if (s > 1 + ns) missed.push_back("server CPU");
  std::string verdict = "met";
  if (!missed.empty()) {
    verdict = "**missed**:";
    for (const std::string& m : missed) verdict += " " + m + ",";
    verdict.pop_back();
  }
  EmitVerdict(TableTarget(api), result, verdict);
}

void Overhead(const std::vector<Record>& rs) {
  // (api, inflight) -> mode -> round -> record
  std::map<std::pair<std::string, int>, std::map<std::string, std::map<int, Record>>> g;
  for (const Record& r : rs) {
    g[{Str(r, "api"), static_cast<int>(Num(r, "inflight"))}][Str(r, "mode")]
     [static_cast<int>(Num(r, "round"))] = r;
  }
  std::fprintf(Out(), "Medians over rounds; QPS spread is min..max.\n\n");
  std::fprintf(Out(),
               "| API | in flight | mode | rounds | QPS | QPS min..max | p50 (us) | p99 (us) | "
               "CPU us/call client | CPU us/call server | errors |\n"
               "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (auto& [key, modes] : g) {
    for (const std::string& mode : ModeList()) {
      auto it = modes.find(mode);
      if (it == modes.end()) continue;
      std::vector<double> qps, p50, p99, client, server;
      double errors = 0;
      for (auto& [round, r] : it->second) {
        qps.push_back(Num(r, "qps"));
        client.push_back(Num(r, "client_cpu_us"));
        server.push_back(Num(r, "server_cpu_us"));
        p50.push_back(Num(r, "p50_us"));
        p99.push_back(Num(r, "p99_us"));
        errors += Num(r, "errors");
      }
      std::vector<double> q = qps;
      std::sort(q.begin(), q.end());
      std::fprintf(
          Out(), "| %s | %d | %s | %zu | %.0f | %.0f..%.0f | %.1f | %.1f | %.2f | %.2f | %.0f |\n",
          key.first.c_str(), key.second, ModeLabel(mode).c_str(), qps.size(), MedianOf(qps),
          q.front(), q.back(), MedianOf(p50), MedianOf(p99), MedianOf(client), MedianOf(server),
          errors);
    }
  }
  std::fprintf(Out(),
               "\nRatios per round (same round, adjacent runs), median (min..max). CPU is per "
               "call, the figure least disturbed by other load on the machine.\n\n");
  std::fprintf(Out(),
               "| API | in flight | mode | QPS / plain | QPS / no-op | p99 / plain | "
               "client CPU / no-op | server CPU / no-op | target |\n"
               "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  std::set<std::pair<std::string, std::string>> judged;  // (api, mode)
  for (auto& [key, modes] : g) {
    for (const std::string& mode : ModeList()) {
      if (mode == "plain" || mode == "noop" || !modes.count(mode)) continue;
      const Ratios r = RatiosOf(modes, mode);
      std::string verdict = "-";
      const bool is_judged =
          std::find(JudgedModes().begin(), JudgedModes().end(), mode) != JudgedModes().end();
      if (key.second == kJudgedInflight && is_judged) {
        judged.insert({key.first, mode});
        std::string result = "-";
        verdict = OverheadVerdict(r, &result);
        EmitVerdict(OverheadTarget(key.first, mode), result, verdict);
      }
      std::fprintf(Out(), "| %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", key.first.c_str(),
                   key.second, ModeLabel(mode).c_str(), Spread(r.qps_plain, 3).c_str(),
                   Spread(r.qps_noop, 3).c_str(), Spread(r.p99_plain, 3).c_str(),
                   Spread(r.client_cpu_noop, 3).c_str(), Spread(r.server_cpu_noop, 3).c_str(),
                   verdict.c_str());
      std::fprintf(Log(),
                   "HEADLINE overhead api=%s inflight=%d mode=%s qps_over_plain=%.3f "
                   "p99_over_plain=%.3f\n",
                   key.first.c_str(), key.second, mode.c_str(),
                   r.qps_plain.empty() ? 0 : MedianOf(r.qps_plain),
                   r.p99_plain.empty() ? 0 : MedianOf(r.p99_plain));
    }
  }
  std::set<std::string> tables;  // the APIs whose table runs were judged
  for (auto& [key, modes] : g) {
    if (key.second != kJudgedInflight || !modes.count("hop-table")) continue;
    tables.insert(key.first);
    JudgeTable(key.first, modes);
  }
  // docs/benchmarks.md quotes both APIs at 32 in flight: a missing one is said so.
  for (const std::string api : {"callback", "sync"}) {
    if (!tables.count(api)) EmitVerdict(TableTarget(api), "-", kNotMeasured);
    for (const std::string& mode : JudgedModes()) {
      if (judged.count({api, mode})) continue;
      EmitVerdict(OverheadTarget(api, mode), "-", kNotMeasured);
    }
  }
}

constexpr int kJudgedConcurrency = 10000;
// gRPC's own thread pools grow with load, by a different amount from process
// to process (+3 to +11 threads seen with 10 000 parked calls, in every
// mode): hopbudget's growth is compared with plain gRPC's in the same run,
// with this much slack. A thread per call, per timer or per 1000 calls
// would add 10 to 10 000.
constexpr int kThreadSlack = 16;

std::string ScaleTarget(int n) {
  return "scale, " + std::to_string(n) +
         " parked calls: no thread growth (threads added "
         "while parked <= plain gRPC's + " +
         std::to_string(kThreadSlack) + ")";
}

// Threads added while `n` calls are parked, or -1 when the run does not
// support a verdict (not every call parked).
int ThreadGrowth(const Record& r, int n) {
  if (Num(r, "min_parked") < n) return -1;
  return static_cast<int>(Num(r, "threads_parked") - Num(r, "threads_before"));
}

std::string ScaleVerdict(const std::map<std::string, Record>& modes, int n, std::string* result) {
  *result = "-";
  auto hb = modes.find("hopbudget");
  auto plain = modes.find("plain");
  if (hb == modes.end() || plain == modes.end()) return kNotMeasured;
  const int g_hb = ThreadGrowth(hb->second, n);
  const int g_plain = ThreadGrowth(plain->second, n);
  if (g_hb < 0 || g_plain < 0) {
    return std::string(kNotMeasured) + " (not every call parked: hopbudget " +
           Str(hb->second, "min_parked") + ", plain " + Str(plain->second, "min_parked") + " of " +
           std::to_string(n) + ")";
  }
  *result = "threads +" + std::to_string(g_hb) + " (" + Str(hb->second, "threads_before") + " -> " +
            Str(hb->second, "threads_parked") + "), plain gRPC +" + std::to_string(g_plain) + " (" +
            Str(plain->second, "threads_before") + " -> " + Str(plain->second, "threads_parked") +
            ")";
  return g_hb <= g_plain + kThreadSlack ? kMet : kMissed;
}

void Scale(const std::vector<Record>& rs) {
  std::map<int, std::map<std::string, Record>> g;  // concurrency -> mode -> record
  for (const Record& r : rs) g[static_cast<int>(Num(r, "concurrency"))][Str(r, "mode")] = r;
  std::fprintf(Out(),
               "Per parked call, medians over rounds. \"C++ new\" = bytes live from operator new "
               "(interceptor objects, hopbudget's per-call state, the gRPC C++ layer, messages); "
               "\"heap\" = all malloc'd bytes (gRPC core's call arenas too); RSS = resident "
               "pages (coarse). CPU = process CPU (user+sys) per call from issue to end.\n\n");
  std::fprintf(Out(),
               "| concurrency | mode | parked (min) | C++ new B/call | heap B/call | RSS B/call | "
               "CPU us/call | threads before/parked/after |\n"
               "| --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (auto& [n, modes] : g) {
    for (const std::string mode : {"plain", "noop", "hopbudget"}) {
      auto it = modes.find(mode);
      if (it == modes.end()) continue;
      const Record& r = it->second;
      std::fprintf(Out(), "| %d | %s | %s | %.0f | %.0f | %.0f | %.1f | %s/%s/%s |\n", n,
                   mode.c_str(), Str(r, "min_parked").c_str(), Num(r, "new_bytes_per_call"),
                   Num(r, "heap_bytes_per_call"), Num(r, "rss_bytes_per_call"),
                   Num(r, "cpu_us_per_call"), Str(r, "threads_before").c_str(),
                   Str(r, "threads_parked").c_str(), Str(r, "threads_after").c_str());
    }
  }
  std::fprintf(Out(),
               "\nAttributable to hopbudget: hopbudget - plain (hopbudget - no-op pair).\n\n");
  std::fprintf(Out(),
               "| concurrency | C++ new B/call | heap B/call | CPU us/call |\n"
               "| --- | --- | --- | --- |\n");
  for (auto& [n, modes] : g) {
    if (!modes.count("hopbudget") || !modes.count("plain")) continue;
    const Record& c = modes["hopbudget"];
    const Record& a = modes["plain"];
    auto diff = [&](const std::string& key, int digits) {
      std::string out = Fixed(Num(c, key) - Num(a, key), digits);
      if (modes.count("noop")) {
        out += " (" + Fixed(Num(c, key) - Num(modes["noop"], key), digits) + ")";
      }
      return out;
    };
    std::fprintf(Out(), "| %d | %s | %s | %s |\n", n, diff("new_bytes_per_call", 0).c_str(),
                 diff("heap_bytes_per_call", 0).c_str(), diff("cpu_us_per_call", 1).c_str());
  }
  std::fprintf(Out(),
               "\nThreads while all calls are parked, against before (a run where not every "
               "call parked cannot be judged).\n\n");
  std::fprintf(Out(),
               "| concurrency | threads | target: growth <= plain gRPC's + %d |\n"
               "| --- | --- | --- |\n",
               kThreadSlack);
  bool judged = false;
  for (auto& [n, modes] : g) {
    std::string result;
    const std::string verdict = ScaleVerdict(modes, n, &result);
    std::fprintf(Out(), "| %d | %s | %s |\n", n, result.c_str(), verdict.c_str());
    if (n == kJudgedConcurrency) {
      EmitVerdict(ScaleTarget(n), result, verdict);
      judged = true;
    }
  }
  if (!judged) EmitVerdict(ScaleTarget(kJudgedConcurrency), "-", kNotMeasured);
}

// The sources precision_bench measures, each judged on its own.
const std::vector<std::string>& PrecisionSources() {
  static const std::vector<std::string> sources = {"client-plain", "client", "attempt", "request"};
  return sources;
}

void Precision(const std::vector<Record>& rs) {
  std::fprintf(Out(),
               "Calls not attributed (not DEADLINE_EXCEEDED of the expected source) count as "
               "infinitely late in the p99 the target is judged on (\"p99, all calls\").\n\n");
  std::fprintf(Out(),
               "| source | budget (ms) | calls | p50 (ms) | p99 (ms) | max (ms) | not attributed | "
               "p99, all calls (ms) | target p99 <= 1 ms |\n"
               "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  std::map<std::string, const Record*> by_source;
  for (const Record& r : rs) by_source[Str(r, "source")] = &r;
  for (const Record& r : rs) {
    std::string result;
    const std::string verdict = JudgeP99(&r, 1.0, "wrong", "not attributed", &result);
    const bool sampled = Num(r, "calls") > 0;
    std::fprintf(Out(), "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
                 Str(r, "source").c_str(), Str(r, "budget_ms").c_str(), Str(r, "calls").c_str(),
                 sampled ? Fixed(Num(r, "p50_ms"), 3).c_str() : "-",
                 sampled ? Fixed(Num(r, "p99_ms"), 3).c_str() : "-",
                 sampled ? Fixed(Num(r, "max_ms"), 3).c_str() : "-", Str(r, "wrong").c_str(),
                 Has(r, "p99_all_ms") ? Str(r, "p99_all_ms").c_str() : "-", verdict.c_str());
  }
  for (const std::string& source : PrecisionSources()) {
    auto it = by_source.find(source);
    std::string result;
    const std::string verdict = JudgeP99(it == by_source.end() ? nullptr : it->second, 1.0, "wrong",
                                         "not attributed", &result);
    EmitVerdict("enforcement precision, " + source + ": p99 lateness <= 1 ms", result, verdict);
  }
}

void Cancel(const std::vector<Record>& rs) {
  std::fprintf(Out(),
               "Lost calls (the cancel never reached the third hop) count as infinitely late "
               "in the p99 the target is judged on (\"p99, all calls\").\n\n");
  std::fprintf(Out(),
               "| hops | calls | p50 (ms) | p90 (ms) | p99 (ms) | max (ms) | lost | "
               "p99, all calls (ms) | target p99 <= 2 ms |\n"
               "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  const Record* judged = nullptr;
  for (const Record& r : rs) {
    std::string result;
    const std::string verdict = JudgeP99(&r, 2.0, "lost", "lost", &result);
    const bool sampled = Num(r, "calls") > 0;
    std::fprintf(Out(), "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", Str(r, "hops").c_str(),
                 Str(r, "calls").c_str(), sampled ? Fixed(Num(r, "p50_ms"), 3).c_str() : "-",
                 sampled ? Fixed(Num(r, "p90_ms"), 3).c_str() : "-",
                 sampled ? Fixed(Num(r, "p99_ms"), 3).c_str() : "-",
                 sampled ? Fixed(Num(r, "max_ms"), 3).c_str() : "-", Str(r, "lost").c_str(),
                 Has(r, "p99_all_ms") ? Str(r, "p99_all_ms").c_str() : "-", verdict.c_str());
    judged = &r;
  }
  std::string result;
  const std::string verdict = JudgeP99(judged, 2.0, "lost", "lost", &result);
  EmitVerdict("a client cancel reaching the third hop: p99 <= 2 ms", result, verdict);
}

constexpr char kHedgeP99Target[] =
    "hedged p99 <= 2x a healthy replica's p99 (one of two replicas slow 5 % of calls)";
constexpr char kHedgeLoadTarget[] = "hedging extra load <= 5 %";
constexpr char kRaceTarget[] =
    "race of 3, one target hangs: loser cancelled at the callee, p99 <= 2 ms after the winner";

// hedge_bench: the latency rows (healthy, slow replica unhedged, hedged),
// then the verdicts on the targets of the hedging issue.
// The p99 target is judged on replicas that do work (service_ms > 0) when
// the run has them; replicas that answer at once are a reference line (see
// hedge_bench.cc for why).
void Hedge(const std::vector<Record>& rs) {
  std::fprintf(
      Out(),
      "| service (ms) | run | round | calls | p50 (ms) | p99 (ms) | p99.9 (ms) | max (ms) | "
      "failed | extra load (%%) |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- "
      "|\n");
  std::vector<const Record*> targets;
  const Record* race = nullptr;
  for (const Record& r : rs) {
    if (Str(r, "bench") == "hedge_round") continue;  // its figures are in the rows
    if (Str(r, "bench") == "hedge") {
      std::fprintf(Out(), "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
                   Has(r, "service_ms") ? Fixed(Num(r, "service_ms"), 1).c_str() : "0",
                   Str(r, "run").c_str(), Has(r, "round") ? Str(r, "round").c_str() : "-",
                   Str(r, "calls").c_str(), Fixed(Num(r, "p50_ms"), 2).c_str(),
                   Fixed(Num(r, "p99_ms"), 2).c_str(), Fixed(Num(r, "p999_ms"), 2).c_str(),
                   Fixed(Num(r, "max_ms"), 2).c_str(), Str(r, "failed").c_str(),
                   Fixed(Num(r, "extra_load") * 100, 2).c_str());
    } else if (Str(r, "bench") == "hedge_target") {
      targets.push_back(&r);
    } else {
      race = &r;
    }
  }
  auto service_of = [](const Record& r) { return Has(r, "service_ms") ? Num(r, "service_ms") : 0; };
  const Record* target = targets.empty() ? nullptr : targets.back();
  for (const Record* t : targets) {
    if (service_of(*t) > 0) target = t;
  }
  auto ratio_text = [](const Record& t) {
    std::string text = "hedged " + Fixed(Num(t, "hedged_p99_ms"), 2) + " ms, healthy " +
                       Fixed(Num(t, "healthy_p99_ms"), 2) + " ms, ratio " +
                       Fixed(Num(t, "ratio"), 2);
    if (Has(t, "rounds") && Num(t, "rounds") > 1) {
      text = "median of " + Str(t, "rounds") + " rounds: " + text + " (" +
             Fixed(Num(t, "ratio_min"), 2) + ".." + Fixed(Num(t, "ratio_max"), 2) + ")";
    }
    return text;
  };
  for (const Record* t : targets) {
    if (t == target) continue;
    std::fprintf(
        Out(),
        "\nNot judged, for reference: replicas with a service time of %s ms, %s; extra load "
        "%s %%.\n",
        Fixed(service_of(*t), 1).c_str(), ratio_text(*t).c_str(),
        Fixed(Num(*t, "extra_load") * 100, 2).c_str());
  }
  if (target == nullptr) {
    EmitVerdict(kHedgeP99Target, "-", kNotMeasured);
    EmitVerdict(kHedgeLoadTarget, "-", kNotMeasured);
  } else {
    // One round, or the median of the rounds' ratios with their spread.
    const double ratio = Num(*target, "ratio");
    std::string result = ratio_text(*target);
    if (service_of(*target) > 0) {
      result = "service time " + Fixed(service_of(*target), 1) + " ms, " + result;
    }
    EmitVerdict(kHedgeP99Target, result,
                Num(*target, "healthy_p99_ms") > 0 && ratio <= 2.0 ? kMet : kMissed);
    const double load = Num(*target, "extra_load");
    EmitVerdict(kHedgeLoadTarget, Fixed(load * 100, 2) + " %",
                load <= 0.05 + 1e-9 ? kMet : kMissed);
  }
  if (race == nullptr) {
    EmitVerdict(kRaceTarget, "-", kNotMeasured);
  } else {
    std::fprintf(Out(),
                 "\nRace of 3, one target hangs: %s races, loser cancelled at the callee p50 %s "
                 "ms, p99 %s ms, max %s ms, lost %s.\n",
                 Str(*race, "races").c_str(), Fixed(Num(*race, "p50_ms"), 3).c_str(),
                 Fixed(Num(*race, "p99_ms"), 3).c_str(), Fixed(Num(*race, "max_ms"), 3).c_str(),
                 Str(*race, "lost").c_str());
    const double p99_all = Num(*race, "p99_all_ms");
    std::string result = "p99 " + Fixed(p99_all, 3) + " ms";
    if (Num(*race, "lost") > 0) result += " (" + Str(*race, "lost") + " cancels lost)";
    EmitVerdict(kRaceTarget, result, Num(*race, "races") > 0 && p99_all <= 2.0 ? kMet : kMissed);
  }
}

// "10000 queued calls, <api> API: <= 1 KiB each beyond gRPC's own, no thread growth".
std::string AdmissionTarget(const std::string& api) {
  return "admission, " + api +
         " API, calls queued behind a full limit: <= 1 KiB each beyond gRPC's own, no thread "
         "growth";
}
// Threads a queue of 10 000 may add and still count as "no growth": gRPC's
// pollers and executor, hopbudget's workers (limit + 2); one per queued call
// would be +10 000.
constexpr int kAdmissionThreadSlack = 16;

// admission_bench: the queued arms (callback, sync) against the parked one
// (gRPC's own cost of a waiting call), then the common path.
void AdmissionSection(const std::vector<Record>& rs) {
  const Record* parked = nullptr;
  std::vector<const Record*> queued, common;
  for (const Record& r : rs) {
    if (Str(r, "mode") == "parked") parked = &r;
    if (Str(r, "mode") == "queued") queued.push_back(&r);
    if (Str(r, "mode") == "common") common.push_back(&r);
  }
  std::fprintf(
      Out(),
      "| arm | API | calls | waiting | RSS bytes/call | heap bytes/call | threads "
      "before/waiting/after | failed |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (const Record* r : queued) {
    std::fprintf(Out(), "| queued (admission) | %s | %s | %s | %s | %s | %s/%s/%s | %s |\n",
                 Str(*r, "api").c_str(), Str(*r, "calls").c_str(), Str(*r, "waiting").c_str(),
                 Str(*r, "rss_bytes_per_call").c_str(), Str(*r, "heap_bytes_per_call").c_str(),
                 Str(*r, "threads_before").c_str(), Str(*r, "threads_waiting").c_str(),
                 Str(*r, "threads_after").c_str(), Str(*r, "failed").c_str());
  }
  if (parked != nullptr) {
    std::fprintf(
        Out(), "| parked in handlers (gRPC's own) | %s | %s | %s | %s | %s | %s/%s/%s | %s |\n",
        Str(*parked, "api").c_str(), Str(*parked, "calls").c_str(), Str(*parked, "waiting").c_str(),
        Str(*parked, "rss_bytes_per_call").c_str(), Str(*parked, "heap_bytes_per_call").c_str(),
        Str(*parked, "threads_before").c_str(), Str(*parked, "threads_waiting").c_str(),
        Str(*parked, "threads_after").c_str(), Str(*parked, "failed").c_str());
  }
  for (const std::string api : {"callback", "sync"}) {
    const Record* q = nullptr;
    for (const Record* r : queued) {
      if (Str(*r, "api") == api) q = r;
    }
    if (q == nullptr || parked == nullptr) {
      EmitVerdict(AdmissionTarget(api), "-", kNotMeasured);
      continue;
    }
    const bool complete = Num(*q, "reached") == 1 && Num(*q, "waiting") == Num(*q, "calls") &&
                          Num(*parked, "reached") == 1 && Num(*q, "calls") > 0;
    const double beyond = Num(*q, "rss_bytes_per_call") - Num(*parked, "rss_bytes_per_call");
    const double heap_beyond = Num(*q, "heap_bytes_per_call") - Num(*parked, "heap_bytes_per_call");
    const double threads = Num(*q, "threads_waiting") - Num(*q, "threads_before");
    const std::string result = "RSS " + Fixed(beyond, 0) + " B/call beyond gRPC's own (heap " +
                               Fixed(heap_beyond, 0) + "), threads " + (threads >= 0 ? "+" : "") +
                               Fixed(threads, 0) + " for " + Str(*q, "waiting") + " queued";
    if (!complete) {
      EmitVerdict(AdmissionTarget(api), result,
                  std::string(kNotMeasured) + " (not every call was queued or parked)");
      continue;
    }
    // Both measures: RSS is what the target names, but moves in pages and
    // keeps freed memory (about +-1 KiB per call between runs here); heap in
    // use is exact. Either over 1 KiB misses.
    std::string verdict =
        beyond <= 1024 && heap_beyond <= 1024 && threads <= kAdmissionThreadSlack ? kMet : kMissed;
    if (Num(*q, "failed") > 0 || Num(*q, "drained") != 1) {
      verdict = std::string(kMissed) + " (" + Str(*q, "failed") + " calls failed, drained " +
                Str(*q, "drained") + ")";
    }
    EmitVerdict(AdmissionTarget(api), result, verdict);
  }
  for (const Record* c : common) {
    std::fprintf(
        Out(),
        "\nCommon path, %s API (room to spare, %s in flight, %s calls x %s rounds): admission "
        "on %s us/call, off %s us/call, on/off %s (rounds %s..%s), failed %s, queued %s.\n",
        Str(*c, "api").c_str(), Str(*c, "inflight").c_str(), Str(*c, "calls").c_str(),
        Str(*c, "rounds").c_str(), Str(*c, "on_us").c_str(), Str(*c, "off_us").c_str(),
        Fixed(Num(*c, "ratio"), 3).c_str(), Fixed(Num(*c, "ratio_min"), 3).c_str(),
        Fixed(Num(*c, "ratio_max"), 3).c_str(), Str(*c, "failed").c_str(),
        Str(*c, "queued").c_str());
  }
}

// slots_bench: 10 000 callers waiting for 100 held slots of DownstreamSlots.
constexpr int kSlotsJudgedCalls = 10000;
// Threads: those outside gRPC's own pools (the main thread, the library's
// timer service and workers: unnamed, bench_util.h UnnamedThreadCount) must
// not grow at all while the callers wait; gRPC's named pools grow on their
// own (+1 seen here in most runs, keepalive and timer work of the holders'
// channel), so the total may grow by kThreadSlack, as in the scale target.
// A thread per waiting call would add 10 000.
constexpr int kSlotsThreadSlack = 16;
constexpr char kSlotsThreadTarget[] =
    "slots, 10000 calls waiting for 100 slots: no thread growth (outside gRPC's pools: +0, the "
    "library's timer thread started before; all threads: <= +16)";
// Why 5 ms: one shared timer expires the waits, armed for the earliest
// give-up time; the timer service fires within ~2 ms p99 on a loaded 2-core
// machine (the request cap's enforcement precision, docs/benchmarks.md), and the
// expiries due together are answered in a row on its thread, a few
// microseconds each (10 000 spread over 1 s: ~10 per millisecond). A wait
// that expired only when a slot freed, on a polling tick, or on the call's
// own deadline instead of deadline - min_attempt_budget (20 ms later) is
// late by 10 ms or more: the bound catches it, and leaves 2.5x the timer's
// own p99 for scheduling on a busy machine.
constexpr double kSlotsLateMs = 5.0;
constexpr char kSlotsLateTarget[] =
    "slots: waits expire on time, p99 of (answer - (deadline - min_attempt_budget)) <= 5 ms";
constexpr char kSlotsServerTarget[] =
    "slots: no waiting call reaches the server, each answered DEADLINE_EXCEEDED slot-wait";

void SlotsSection(const std::vector<Record>& rs) {
  std::fprintf(
      Out(),
      "| callers | slots | rounds | waiting | threads before/waiting/after | outside gRPC's pools "
      "| heap B/call | RSS B/call | lateness p50 / p99 / max (ms) | min (ms) | wrong / lost | "
      "server calls |\n"
      "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  const Record* judged = nullptr;
  for (const Record& r : rs) {
    std::fprintf(
        Out(),
        "| %s | %s | %s | %s | %s/%s/%s | %s/%s/%s | %s | %s | %s / %s / %s | %s | %s / %s | %s "
        "|\n",
        Str(r, "calls").c_str(), Str(r, "slots").c_str(), Str(r, "rounds").c_str(),
        Str(r, "waiting").c_str(), Str(r, "threads_before").c_str(),
        Str(r, "threads_waiting").c_str(), Str(r, "threads_after").c_str(),
        Str(r, "own_threads_before").c_str(), Str(r, "own_threads_waiting").c_str(),
        Str(r, "own_threads_after").c_str(), Str(r, "heap_bytes_per_call").c_str(),
        Str(r, "rss_bytes_per_call").c_str(), Str(r, "late_p50_ms").c_str(),
        Str(r, "late_p99_ms").c_str(), Str(r, "late_max_ms").c_str(), Str(r, "late_min_ms").c_str(),
        Str(r, "wrong").c_str(), Str(r, "lost").c_str(), Str(r, "server_calls").c_str());
    if (Num(r, "calls") >= kSlotsJudgedCalls) judged = &r;
  }
  if (judged == nullptr) {
    const std::string why = std::string(kNotMeasured) + " (fewer than " +
                            std::to_string(kSlotsJudgedCalls) + " callers)";
    for (const char* target : {kSlotsThreadTarget, kSlotsLateTarget, kSlotsServerTarget}) {
      EmitVerdict(target, "-", why);
    }
    return;
  }
  const Record& r = *judged;
  const double wrong = Num(r, "wrong"), lost = Num(r, "lost");
  // Threads: only a run in which every caller waited at once says anything.
  const double growth = Num(r, "threads_waiting") - Num(r, "threads_before");
  const double own = Num(r, "own_threads_waiting") - Num(r, "own_threads_before");
  auto signed_count = [](double v) { return (v >= 0 ? "+" : "") + Fixed(v, 0); };
  const std::string threads = "outside gRPC's pools " + signed_count(own) + " (" +
                              Str(r, "own_threads_before") + " -> " +
                              Str(r, "own_threads_waiting") + "), all " + signed_count(growth) +
                              " (" + Str(r, "threads_before") + " -> " + Str(r, "threads_waiting") +
                              ") while " + Str(r, "waiting") + " waited";
  if (Num(r, "all_waited") != 1 || !Has(r, "own_threads_waiting")) {
    EmitVerdict(kSlotsThreadTarget, threads,
                std::string(kNotMeasured) + " (not every caller was waiting at once)");
  } else {
    EmitVerdict(kSlotsThreadTarget, threads,
                own <= 0 && growth <= kSlotsThreadSlack ? kMet : kMissed);
  }
  // Lateness: wrong and lost answers count as infinitely late.
  const double p99_all = Num(r, "p99_all_ms");
  std::string late = "p99 " + Ms(p99_all) + " (p50 " + Fixed(Num(r, "late_p50_ms"), 3) + ", max " +
                     Fixed(Num(r, "late_max_ms"), 3) + ")";
  std::string verdict = Has(r, "p99_all_ms") && p99_all <= kSlotsLateMs ? kMet : kMissed;
  if (wrong + lost > 0) {
    verdict += " (" + Fixed(wrong, 0) + " answered otherwise, " + Fixed(lost, 0) +
               " never answered, counted as late)";
  }
  if (!Has(r, "p99_all_ms")) verdict = kNotMeasured;
  EmitVerdict(kSlotsLateTarget, late, verdict);
  // The server: any call it saw while the callers waited is a miss, and so
  // is a caller answered otherwise (it may have been sent).
  const double server_calls = Num(r, "server_calls");
  const std::string seen = Fixed(server_calls, 0) + " calls reached the server, " +
                           Fixed(wrong, 0) + " answered otherwise, " + Fixed(lost, 0) +
                           " never answered";
  EmitVerdict(
      kSlotsServerTarget, seen,
      Has(r, "server_calls") && server_calls == 0 && wrong == 0 && lost == 0 ? kMet : kMissed);
}

// ---------------------------------------------------------------- chain
// Saved work under overload on the demo chain (scripts/bench.sh run_chain):
// a baseline chain and a hopbudget chain side by side, each load level a
// multiple of the baseline's capacity. One "kind=setup" line (capacity, the
// baseline chain's; hopbudget_capacity; budget_ms; duration_s), then one
// "kind=run" line per run: its mode (baseline; hopbudget, whose client
// throttles itself; hopbudget-client-unthrottled, the same chain under a
// client that does not back off), factor, rate, round, chainctl load's
// counts, ok_p99_ms ("-" when chainctl did not report it) and
// work_by_hop_ms ("hop:ms,..."). Past capacity each level runs several
// rounds: a level (mode and factor) is judged on its median goodput
// (min..max beside it), the sum of its late calls and work after the
// deadline, and its highest p99 of OK calls.
constexpr char kChainBaseline[] = "baseline";
constexpr char kChainHopbudget[] = "hopbudget";
constexpr char kChainUnthrottled[] = "hopbudget-client-unthrottled";
constexpr char kChainWorkTarget[] =
    "work after the client deadline at 2x and 4x, hopbudget / baseline: <= 1 %";
constexpr char kChainLateTarget[] =
    "calls started after the client deadline at 2x and 4x (hopbudget): 0";
constexpr char kChainUnthrottledGoodputTarget[] =
    "goodput at 2x and 4x >= 90 % of the capacity (hopbudget chain, a client that does not back "
    "off)";
constexpr char kChainUnthrottledLateTarget[] =
    "calls started after the client deadline at 2x and 4x (hopbudget chain, a client that does "
    "not back off): 0";
constexpr char kChainUnthrottledWorkTarget[] =
    "work after the client deadline at 2x and 4x, hopbudget chain with a client that does not "
    "back off / baseline: <= 1 %";
constexpr char kChainCapacityTarget[] = "demo chain capacity, hopbudget >= baseline";
// The two targets that name the run's capacity and budget (without a setup
// line, they name neither).
std::string ChainGoodputTarget(double capacity) {
  return "goodput at 2x and 4x >= 90 % of the capacity (hopbudget" +
         (capacity > 0 ? "; capacity " + Fixed(capacity, 0) + "/s" : std::string()) + ")";
}
std::string ChainP99Target(double budget_ms) {
  return "p99 latency of successful calls inside the " +
         (budget_ms > 0 ? Fixed(budget_ms, 0) + "ms " : std::string()) +
         "budget at every level (hopbudget)";
}

void ChainNothingMeasured(const std::string& why) {
  for (const std::string& t :
       {std::string(kChainWorkTarget), std::string(kChainLateTarget), ChainGoodputTarget(0),
        ChainP99Target(0), std::string(kChainUnthrottledGoodputTarget),
        std::string(kChainUnthrottledLateTarget), std::string(kChainUnthrottledWorkTarget),
        std::string(kChainCapacityTarget)}) {
    EmitVerdict(t, why, kNotMeasured);
  }
}

// The runs of one mode at one load level (its rounds) taken together.
struct ChainLevel {
  std::string factor;           // as the runs print it: 0.5, 1, 2, 4
  std::vector<double> goodput;  // per round, OK calls per second
  double late = 0;              // calls started after the deadline, summed
  double work_ms = 0;           // work after the deadline, summed
  double ok_p99_ms = 0;         // the highest of the rounds'
  bool ok_p99_all = true;       // every round reported its p99 of OK calls
};
using ChainLevels = std::map<double, ChainLevel>;  // by factor

bool HasOkP99(const Record& r) { return Has(r, "ok_p99_ms") && Str(r, "ok_p99_ms") != "-"; }

std::string Rounded(double v) { return Fixed(std::round(v), 0); }

// "gateway 0, orders 1, ledger 0" from "gateway:0.2,orders:1.4,ledger:0".
std::string ChainWorkByHop(const Record& r) {
  const std::string list = Str(r, "work_by_hop_ms");
  if (list.empty() || list == "-") return "-";
  std::string out;
  for (absl::string_view hop_ms : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    std::pair<std::string, std::string> p = absl::StrSplit(hop_ms, absl::MaxSplits(':', 1));
    double ms = 0;
    if (!absl::SimpleAtod(p.second, &ms)) ms = 0;
    if (!out.empty()) out += ", ";
    out += p.first + " " + Rounded(ms);
  }
  return out;
}

// "2x: 3211/s = 161 %", with "(median of 3; 157..162 %)" for several rounds.
std::string ChainGoodputText(const ChainLevel& l, double capacity) {
  std::vector<double> g = l.goodput;
  const double median = Median(g);  // sorts
  std::string text =
      l.factor + "x: " + Rounded(median) + "/s = " + Rounded(median / capacity * 100) + " %";
  if (g.size() > 1) {
    text += " (median of " + std::to_string(g.size()) + "; " + Rounded(g.front() / capacity * 100) +
            ".." + Rounded(g.back() / capacity * 100) + " %)";
  }
  return text;
}

void ChainSection(const std::vector<Record>& rs) {
  const Record* setup = nullptr;
  std::vector<const Record*> runs;
  for (const Record& r : rs) {
    if (Str(r, "kind") == "setup") setup = &r;
    if (Str(r, "kind") == "run") runs.push_back(&r);
  }
  if (setup == nullptr || runs.empty() || Num(*setup, "capacity") <= 0 ||
      Num(*setup, "hopbudget_capacity") <= 0 || Num(*setup, "budget_ms") <= 0 ||
      Num(*setup, "duration_s") <= 0) {
    std::fprintf(Out(), "_No complete chain run: not measured._\n");
    ChainNothingMeasured(setup == nullptr ? "no setup line"
                         : runs.empty()   ? "no runs"
                                          : "incomplete setup line");
    return;
  }
  const double capacity = Num(*setup, "capacity");
  const double hb_capacity = Num(*setup, "hopbudget_capacity");
  const double budget_ms = Num(*setup, "budget_ms");
  const double seconds = Num(*setup, "duration_s");
  std::fprintf(
      Out(),
      "| load | offered/s | mode | round | sent | not sent | throttled by the client | OK | "
      "goodput/s | DEADLINE_EXCEEDED | retries | p50 (ms) | p99 (ms) | p99 of OK (ms) | calls "
      "started after deadline | work after deadline (ms) | by hop (ms) |\n"
      "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- "
      "| --- | --- |\n");
  std::map<std::string, ChainLevels> modes;
  for (const Record* r : runs) {
    std::fprintf(
        Out(),
        "| %sx | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
        Str(*r, "factor").c_str(), Str(*r, "rate").c_str(), Str(*r, "mode").c_str(),
        Has(*r, "round") ? Str(*r, "round").c_str() : "1", Str(*r, "sent").c_str(),
        Str(*r, "not_sent").c_str(), Str(*r, "client_throttled").c_str(), Str(*r, "ok").c_str(),
        Fixed(Num(*r, "goodput"), 1).c_str(), Str(*r, "deadline_exceeded").c_str(),
        Str(*r, "retries").c_str(), Fixed(Num(*r, "p50_ms"), 1).c_str(),
        Fixed(Num(*r, "p99_ms"), 1).c_str(),
        HasOkP99(*r) ? Fixed(Num(*r, "ok_p99_ms"), 1).c_str() : "-",
        Str(*r, "calls_started_after_deadline").c_str(),
        Rounded(Num(*r, "work_after_deadline_ms")).c_str(), ChainWorkByHop(*r).c_str());
    ChainLevel& l = modes[Str(*r, "mode")][Num(*r, "factor")];
    if (l.goodput.empty()) l.factor = Str(*r, "factor");
    l.goodput.push_back(Num(*r, "goodput"));
    l.late += Num(*r, "calls_started_after_deadline");
    l.work_ms += Num(*r, "work_after_deadline_ms");
    if (HasOkP99(*r)) {
      l.ok_p99_ms = std::max(l.ok_p99_ms, Num(*r, "ok_p99_ms"));
    } else {
      l.ok_p99_all = false;
    }
  }
  const ChainLevels& bl = modes[kChainBaseline];
  const ChainLevels& hb = modes[kChainHopbudget];
  const ChainLevels& un = modes[kChainUnthrottled];
  // The levels past capacity (2x, 4x) of a mode.
  auto over = [](const ChainLevels& levels) {
    std::vector<const ChainLevel*> out;
    for (const auto& [x, l] : levels) {
      if (x >= 2) out.push_back(&l);
    }
    return out;
  };
  auto all = [](const ChainLevels& levels) {
    std::vector<const ChainLevel*> out;
    for (const auto& [x, l] : levels) out.push_back(&l);
    return out;
  };
  // "2x: 0, 4x: 0": each level's text, joined.
  auto list = [](const std::vector<const ChainLevel*>& levels,
                 const std::function<std::string(const ChainLevel&)>& text) {
    std::string out;
    for (const ChainLevel* l : levels) out += (out.empty() ? "" : ", ") + text(*l);
    return out;
  };
  auto late_text = [](const ChainLevel& l) { return l.factor + "x: " + Fixed(l.late, 0); };
  auto work_of = [](const std::vector<const ChainLevel*>& levels) {
    double ms = 0;
    for (const ChainLevel* l : levels) ms += l->work_ms;
    return ms;
  };
  auto late_of = [](const std::vector<const ChainLevel*>& levels) {
    double n = 0;
    for (const ChainLevel* l : levels) n += l->late;
    return n;
  };
  auto goodput_met = [&](const std::vector<const ChainLevel*>& levels) {
    for (const ChainLevel* l : levels) {
      if (MedianOf(l->goodput) < 0.9 * capacity) return false;
    }
    return true;
  };
  std::vector<std::vector<std::string>> verdicts;  // target, result, verdict
  auto verdict = [&](const std::string& target, const std::string& result, bool met) {
    verdicts.push_back({target, result, met ? kMet : kMissed});
  };
  auto none = [&](const std::string& target, const std::string& result) {
    verdicts.push_back({target, result, kNotMeasured});
  };
  const double bl_work = work_of(over(bl));
  // hopbudget's client against the baseline: only with every level of both.
  if (bl.empty() || bl.size() != hb.size()) {
    const std::string why = std::to_string(bl.size()) + " baseline and " +
                            std::to_string(hb.size()) + " hopbudget load levels";
    for (const std::string& t : {std::string(kChainWorkTarget), std::string(kChainLateTarget),
                                 ChainGoodputTarget(capacity), ChainP99Target(budget_ms)}) {
      none(t, why);
    }
  } else {
    const double h = work_of(over(hb));
    if (bl_work > 0) {
      verdict(kChainWorkTarget,
              "hopbudget " + Rounded(h) + " ms vs baseline " + Rounded(bl_work) + " ms = **" +
                  Fixed(h / bl_work * 100, 1) + " %**",
              h <= 0.01 * bl_work);
    } else {
      none(kChainWorkTarget,
           "the baseline did no work after the deadline (hopbudget " + Rounded(h) + " ms)");
    }
    if (over(hb).empty()) {
      none(kChainLateTarget, "no hopbudget runs at 2x or 4x");
      none(ChainGoodputTarget(capacity), "no hopbudget runs at 2x or 4x");
    } else {
      verdict(kChainLateTarget, list(over(hb), late_text), late_of(over(hb)) == 0);
      verdict(ChainGoodputTarget(capacity),
              list(over(hb), [&](const ChainLevel& l) { return ChainGoodputText(l, capacity); }),
              goodput_met(over(hb)));
    }
    bool reported = true;
    double worst = 0;
    for (const auto& [x, l] : hb) {
      reported = reported && l.ok_p99_all;
      worst = std::max(worst, l.ok_p99_ms);
    }
    if (reported) {
      verdict(
          ChainP99Target(budget_ms),
          list(all(hb),
               [](const ChainLevel& l) { return l.factor + "x: " + Rounded(l.ok_p99_ms) + " ms"; }),
          worst <= budget_ms);
    } else {
      none(ChainP99Target(budget_ms), "chainctl did not report it");
    }
  }
  // The hopbudget chain under a client that does not back off.
  if (un.empty()) {
    for (const char* t : {kChainUnthrottledGoodputTarget, kChainUnthrottledLateTarget,
                          kChainUnthrottledWorkTarget}) {
      none(t, std::string("no ") + kChainUnthrottled + " runs");
    }
  } else {
    verdict(kChainUnthrottledGoodputTarget,
            list(all(un), [&](const ChainLevel& l) { return ChainGoodputText(l, capacity); }),
            goodput_met(all(un)));
    verdict(kChainUnthrottledLateTarget, list(all(un), late_text), late_of(all(un)) == 0);
    const double h = work_of(all(un));
    if (bl_work > 0) {
      verdict(kChainUnthrottledWorkTarget,
              Rounded(h) + " ms vs " + Rounded(bl_work) + " ms = **" + Fixed(h / bl_work * 100, 1) +
                  " %**",
              h <= 0.01 * bl_work);
    } else {
      none(kChainUnthrottledWorkTarget,
           "the baseline did no work after the deadline (hopbudget " + Rounded(h) + " ms)");
    }
  }
  verdict(kChainCapacityTarget,
          "hopbudget " + Fixed(hb_capacity, 0) + "/s, baseline " + Fixed(capacity, 0) + "/s",
          hb_capacity >= capacity);
  std::fprintf(Out(), "\n| target | result | verdict |\n| --- | --- | --- |\n");
  for (const std::vector<std::string>& v : verdicts) {
    std::fprintf(Out(), "| %s | %s | %s |\n", v[0].c_str(), v[1].c_str(), v[2].c_str());
    EmitVerdict(v[0], v[1], v[2]);
  }
  // The chart's data (scripts/bench.sh: chain.dat), a line per load level
  // both chains ran: "CHART chain <factor> <goodput, baseline> <goodput,
  // hopbudget> <work after the deadline per second of a run, baseline>
  // <the same, hopbudget>", work in handler-seconds per second.
  for (const auto& [x, b] : bl) {
    auto it = hb.find(x);
    if (it == hb.end()) continue;
    const ChainLevel& h = it->second;
    auto per_second = [&](const ChainLevel& l) {
      return l.work_ms / static_cast<double>(l.goodput.size()) / 1000 / seconds;
    };
    std::fprintf(Log(), "CHART chain %s %s %s %s %s\n", b.factor.c_str(),
                 Fixed(MedianOf(b.goodput), 3).c_str(), Fixed(MedianOf(h.goodput), 3).c_str(),
                 Fixed(per_second(b), 6).c_str(), Fixed(per_second(h), 6).c_str());
  }
}

// The verdicts of a section that has no results at all.
// ---------------------------------------------------------------- overload
// The hopbudget chain alone at multiples of its own capacity (scripts/bench.sh
// run_overload): one "kind=setup" line, then one "kind=round" line per round
// with the chain's counts and, per hop, <hop>_calls, <hop>_refused and
// <hop>_cpu_ms (and, from bench.sh, <hop>_shed: admission's shed reasons
// with their counts in the round, and <hop>_limit). Every round of the
// bounded chain is judged: a target about "every round" is missed by its
// worst one. Rounds with gateway=unbounded (a second chain whose gateway
// has no stream bound) are listed beside them, never judged.
constexpr char kOverloadUnthrottledTarget[] =
    "overload, client that does not back off: goodput >= 80 % of the chain's capacity at 2x, "
    "4x, 8x, 16x, every round";
constexpr char kOverloadThrottledTarget[] =
    "overload, client that throttles itself: goodput >= 90 % of the chain's capacity at every "
    "level, every round";
constexpr char kOverloadLateTarget[] =
    "overload: no work after the client deadline and no call started after it, at every level";
constexpr char kOverloadP99Target[] = "overload: p99 of OK calls inside the budget at every level";
const std::vector<std::string>& OverloadHops() {
  static const std::vector<std::string> hops = {"gateway", "orders", "ledger"};
  return hops;
}

// Least squares of a hop's CPU per round against its calls of each kind:
// cpu = sum over kinds of price[kind] * count[kind]. The kinds are served
// (handlers that did work) and refused (answered without work); at the edge
// also unhandled: calls the client sent that no handler saw (expired or
// cancelled inside gRPC), whose cost would otherwise be charged to the
// other two. A price the rounds cannot tell apart (no calls of that kind,
// or kinds that always came in the same proportion) is negative.
struct CallPrice {
  std::vector<double> us;  // per kind, microseconds
  int rounds = 0;
};
CallPrice FitPrice(const std::vector<const Record*>& rounds, const std::string& hop, bool edge) {
  const int k = edge ? 3 : 2;
  std::vector<std::vector<double>> a(k, std::vector<double>(k + 1, 0));  // normal equations
  CallPrice p;
  p.us.assign(k, -1);
  for (const Record* r : rounds) {
    if (!Has(*r, hop + "_cpu_ms")) continue;
    std::vector<double> x = {Num(*r, hop + "_calls"), Num(*r, hop + "_refused")};
    if (edge) x.push_back(std::max(0.0, Num(*r, "sent") - x[0] - x[1]));
    const double y = Num(*r, hop + "_cpu_ms") * 1000;
    for (int i = 0; i < k; ++i) {
      for (int j = 0; j < k; ++j) a[i][j] += x[i] * x[j];
      a[i][k] += x[i] * y;
    }
    ++p.rounds;
  }
  // Kinds never seen, or too rare to price (under 1 % of the hop's calls
  // over all rounds: a few calls' cost is lost in the noise of the rest),
  // are left out; Gaussian elimination on the others.
  std::vector<double> totals(k, 0);
  for (const Record* r : rounds) {
    if (!Has(*r, hop + "_cpu_ms")) continue;
    const double c = Num(*r, hop + "_calls"), f = Num(*r, hop + "_refused");
    totals[0] += c;
    totals[1] += f;
    if (edge) totals[2] += std::max(0.0, Num(*r, "sent") - c - f);
  }
  double all = 0;
  for (double t : totals) all += t;
  std::vector<int> used;
  for (int i = 0; i < k; ++i) {
    if (a[i][i] > 0 && totals[i] >= 0.01 * all) used.push_back(i);
  }
  const int n = static_cast<int>(used.size());
  if (n == 0 || p.rounds < n) return p;
  std::vector<std::vector<double>> m(n, std::vector<double>(n + 1));
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) m[i][j] = a[used[i]][used[j]];
    m[i][n] = a[used[i]][k];
  }
  for (int c = 0; c < n; ++c) {
    int pivot = c;
    for (int r = c + 1; r < n; ++r) {
      if (std::fabs(m[r][c]) > std::fabs(m[pivot][c])) pivot = r;
    }
    std::swap(m[c], m[pivot]);
    if (std::fabs(m[c][c]) <= 1e-9 * a[used[c]][used[c]]) return p;  // not separable
    for (int r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = m[r][c] / m[c][c];
      for (int j = c; j <= n; ++j) m[r][j] -= f * m[c][j];
    }
  }
  for (int i = 0; i < n; ++i) p.us[used[i]] = m[i][n] / m[i][i];
  return p;
}

// Rounds shown beside the judged ones, never judged: a gateway without a
// stream bound (gateway=unbounded, runs before 2026-12-08), or the chain's
// gateway called directly rather than through its edge (gateway=direct).
bool ShownOnly(const Record& r) {
  return Has(r, "gateway") && (Str(r, "gateway") == "unbounded" || Str(r, "gateway") == "direct");
}

void OverloadSection(const std::vector<Record>& rs) {
  const Record* setup = nullptr;
  std::vector<const Record*> all_rounds, rounds;  // rounds: the bounded chain's
  for (const Record& r : rs) {
    if (Str(r, "kind") == "setup") setup = &r;
    if (Str(r, "kind") != "round") continue;
    all_rounds.push_back(&r);
    if (!ShownOnly(r)) rounds.push_back(&r);
  }
  if (setup == nullptr || rounds.empty() || Num(*setup, "capacity") <= 0) {
    std::fprintf(Out(), "_No complete overload run: not measured._\n");
    for (const char* t : {kOverloadUnthrottledTarget, kOverloadThrottledTarget, kOverloadLateTarget,
                          kOverloadP99Target}) {
      EmitVerdict(t, "-", kNotMeasured);
    }
    return;
  }
  const double capacity = Num(*setup, "capacity");
  const double seconds = std::max(Num(*setup, "duration_s"), 1e-9);
  // A round whose load generator started fewer than 95 % of the calls it
  // was to offer (sent, and those its own throttle refused), used 90 % of
  // its core or more, or made its calls 50 ms late or more (p99), measured
  // the load generator, not the chain: its
  // answers wait in its own queues until their deadlines pass. Listed,
  // never judged.
  auto offered_share = [&](const Record& r) {
    const double due = Num(r, "rate") * seconds;
    return due > 0 ? (Num(r, "sent") + Num(r, "client_throttled")) / due : 0;
  };
  auto client_core = [&](const Record& r) {
    return Num(r, "total_s") > 0 ? Num(r, "client_cpu_s") / Num(r, "total_s") : 0;
  };
  // A generator that made its calls late (send_lag_p99_ms, h2_load's) set
  // the pace too, whatever its CPU.
  auto judged = [&](const Record& r) {
    return offered_share(r) >= 0.95 && client_core(r) < 0.9 &&
           (!Has(r, "send_lag_p99_ms") || Num(r, "send_lag_p99_ms") < 50);
  };
  const double budget_ms = Num(*setup, "budget_ms");
  auto goodput = [&](const Record& r) { return Num(r, "ok") / seconds; };
  auto share = [&](const Record& r) { return goodput(r) / capacity * 100; };
  std::fprintf(Out(), "Capacity of the hopbudget chain %s: **%s/s** (%s).\n\n",
               Has(*setup, "edge_limit") ? "behind its edge" : "alone", Fixed(capacity, 0).c_str(),
               Str(*setup, "placement").c_str());
  // The second chain's first load, before it has seen any traffic: what a
  // cold hop's admission does at 1x (docs/admission.md, "Cold start").
  for (const Record& r : rs) {
    if (Str(r, "kind") != "cold" || Num(r, "sent") <= 0) continue;
    std::fprintf(Out(),
                 "Cold start (a chain that had seen no call, at %s calls/s for %s s): %s of %s "
                 "calls OK (%s %%).\n\n",
                 Str(r, "rate").c_str(), Str(r, "duration_s").c_str(), Str(r, "ok").c_str(),
                 Str(r, "sent").c_str(), Fixed(100 * Num(r, "ok") / Num(r, "sent"), 1).c_str());
  }
  auto arm = [](const Record& r) {
    if (!ShownOnly(r)) return Str(r, "client");
    return Str(r, "client") +
           (Str(r, "gateway") == "direct" ? ", gateway called directly" : ", unbounded gateway");
  };
  std::fprintf(
      Out(),
      "| load | offered/s | client | round | sent | throttled by the client | started, of due | "
      "load generator's CPU, of its core | expired in its queue, never sent | OK "
      "| goodput/s | of capacity | p99 of OK (ms) | started after deadline | work after deadline "
      "(ms) | gateway / orders / ledger: served, refused, CPU (ms) |\n"
      "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- "
      "| --- |\n");
  for (const Record* r : all_rounds) {
    std::string hops;
    for (const std::string& h : OverloadHops()) {
      if (!hops.empty()) hops += " / ";
      hops += Str(*r, h + "_calls") + ", " + Str(*r, h + "_refused") + ", " +
              Fixed(Num(*r, h + "_cpu_ms"), 0);
    }
    std::fprintf(
        Out(),
        "| %sx | %s | %s | %s | %s | %s | %s %%%s | %s %% | %s | %s | %s | %s %% | %s | %s | %s "
        "| %s |\n",
        Str(*r, "factor").c_str(), Str(*r, "rate").c_str(), arm(*r).c_str(),
        Str(*r, "round").c_str(), Str(*r, "sent").c_str(), Str(*r, "client_throttled").c_str(),
        Fixed(offered_share(*r) * 100, 0).c_str(), judged(*r) ? "" : " (not judged)",
        Fixed(client_core(*r) * 100, 0).c_str(),
        Has(*r, "expired_unsent") ? Str(*r, "expired_unsent").c_str() : "-", Str(*r, "ok").c_str(),
        Fixed(goodput(*r), 0).c_str(), Fixed(share(*r), 0).c_str(),
        Fixed(Num(*r, "ok_p99_ms"), 1).c_str(), Str(*r, "calls_started_after_deadline").c_str(),
        Fixed(Num(*r, "work_after_deadline_ms"), 0).c_str(), hops.c_str());
  }
  // Per level and arm: every round's share, its minimum and median, and
  // the most work after the deadline in one round.
  struct Arm {
    std::vector<double> shares;
    double most_late_work_ms = 0;
  };
  std::map<std::pair<double, std::string>, Arm> arms;
  for (const Record* r : all_rounds) {
    Arm& a = arms[{Num(*r, "factor"), arm(*r)}];
    a.shares.push_back(share(*r));
    a.most_late_work_ms = std::max(a.most_late_work_ms, Num(*r, "work_after_deadline_ms"));
  }
  std::fprintf(
      Out(),
      "\n| load | client | rounds | goodput, of capacity: min / median | work after deadline, "
      "most in a round (ms) |\n| --- | --- | --- | --- | --- |\n");
  for (auto& [key, a] : arms) {
    std::vector<double> sorted = a.shares;
    const double lo = *std::min_element(a.shares.begin(), a.shares.end());
    std::fprintf(Out(), "| %sx | %s | %zu | %s %% / %s %% | %s |\n", Fixed(key.first, 0).c_str(),
                 key.second.c_str(), a.shares.size(), Fixed(lo, 0).c_str(),
                 Fixed(Median(sorted), 0).c_str(), Fixed(a.most_late_work_ms, 0).c_str());
  }
  // What a served, a refused and (at the edge) an unhandled call cost at
  // each hop.
  std::fprintf(
      Out(),
      "\n| hop | CPU per served call (us) | per refused call (us) | per call no handler saw "
      "(us) | refused / served | rounds fitted |\n| --- | --- | --- | --- | --- | --- |\n");
  for (const std::string& h : OverloadHops()) {
    const bool edge = h == OverloadHops().front();
    const CallPrice p = FitPrice(rounds, h, edge);
    auto us = [](double v) { return v < 0 ? std::string("-") : Fixed(v, 1); };
    std::fprintf(Out(), "| %s | %s | %s | %s | %s | %d |\n", h.c_str(), us(p.us[0]).c_str(),
                 us(p.us[1]).c_str(), edge ? us(p.us[2]).c_str() : "-",
                 p.us[0] > 0 && p.us[1] >= 0 ? Fixed(p.us[1] / p.us[0], 3).c_str() : "-", p.rounds);
  }
  std::fprintf(Out(), "\n");
  // Rounds below their target, and which hop's admission refused in them.
  std::vector<const Record*> short_rounds;
  for (const Record* r : rounds) {
    const bool throttled = Str(*r, "client") == "throttled";
    if (!throttled && Num(*r, "factor") < 2) continue;  // the target starts at 2x
    if (judged(*r) && share(*r) < (throttled ? 90 : 80)) short_rounds.push_back(r);
  }
  if (!short_rounds.empty()) {
    std::fprintf(
        Out(),
        "Judged rounds below their target, and what each hop's admission shed in them "
        "(reason:calls, and its limit at the end of the round):\n\n| load | client | round | "
        "of capacity | gateway | orders | ledger |\n| --- | --- | --- | --- | --- | --- | --- "
        "|\n");
    for (const Record* r : short_rounds) {
      std::string cells;
      for (const std::string& h : OverloadHops()) {
        cells += Has(*r, h + "_shed")
                     ? Str(*r, h + "_shed") + " (limit " + Str(*r, h + "_limit") + ") |"
                     : std::string("- |");
        if (&h != &OverloadHops().back()) cells += " ";
      }
      std::fprintf(Out(), "| %sx | %s | %s | %s %% | %s\n", Str(*r, "factor").c_str(),
                   Str(*r, "client").c_str(), Str(*r, "round").c_str(), Fixed(share(*r), 0).c_str(),
                   cells.c_str());
    }
    std::fprintf(Out(), "\n");
  }
  // The verdicts, each on its worst round.
  auto judge_share = [&](const char* target, const std::string& client, double floor,
                         double min_factor) {
    const Record* worst = nullptr;
    int unjudged = 0;
    for (const Record* r : rounds) {
      if (Str(*r, "client") != client || Num(*r, "factor") < min_factor) continue;
      if (!judged(*r)) {
        ++unjudged;
        continue;
      }
      if (worst == nullptr || share(*r) < share(*worst)) worst = r;
    }
    const std::string skipped =
        unjudged == 0 ? ""
                      : "; " + std::to_string(unjudged) +
                            " round(s) the load generator could not drive, not judged";
    if (worst == nullptr) {
      EmitVerdict(target, "-" + skipped, kNotMeasured);
      return;
    }
    std::string verdict = share(*worst) >= floor ? kMet : kMissed;
    if (unjudged > 0 && verdict == kMet) verdict = std::string(kNotMeasured) + " (in part)";
    EmitVerdict(target,
                "worst round " + Fixed(share(*worst), 0) + " % (" + Str(*worst, "factor") +
                    "x, round " + Str(*worst, "round") + ")" + skipped,
                verdict);
  };
  judge_share(kOverloadUnthrottledTarget, "unthrottled", 80, 2);
  judge_share(kOverloadThrottledTarget, "throttled", 90, 1);
  double work = 0, late = 0, worst_p99 = 0;
  for (const Record* r : rounds) {
    if (!judged(*r)) continue;
    work += Num(*r, "work_after_deadline_ms");
    late += Num(*r, "calls_started_after_deadline");
    worst_p99 = std::max(worst_p99, Num(*r, "ok_p99_ms"));
  }
  EmitVerdict(kOverloadLateTarget,
              Fixed(work, 0) + " ms of work after the deadline, " + Fixed(late, 0) +
                  " calls started after it (all judged rounds)",
              work == 0 && late == 0 ? kMet : kMissed);
  EmitVerdict(kOverloadP99Target,
              "highest p99 " + Fixed(worst_p99, 1) + " ms, budget " + Fixed(budget_ms, 0) + " ms",
              worst_p99 < budget_ms ? kMet : kMissed);
}

// ---------------------------------------------------------------- refusal
// load_gen's runs against echo_server --answer (scripts/bench.sh
// run_refusal, its bench=overhead lines renamed bench=refusal): per API and
// in flight, six arms MODE/ANSWER (MODE the server's), each run once a
// round. The server's CPU
// and context switches per call count every call that ended in the window,
// answered OK or not.
const std::vector<std::string>& RefusalArms() {
  static const std::vector<std::string> arms = {"plain/echo",          "plain/error",
                                                "budget-only/echo",    "budget-only/refuse",
                                                "budget-only/expired", "budget-only/shed"};
  return arms;
}
constexpr char kRefusalServed[] = "plain/echo";
constexpr char kRefusalError[] = "plain/error";
constexpr char kRefusalRefused[] = "budget-only/refuse";
constexpr char kRefusalExpired[] = "budget-only/expired";
constexpr char kRefusalShed[] = "budget-only/shed";

std::string RefusalArmLabel(const std::string& arm) {
  if (arm == "plain/echo") return "plain/echo (served)";
  if (arm == "plain/error") return "plain/error (gRPC's error answer)";
  if (arm == "budget-only/echo") return "budget-only/echo (served, hopbudget)";
  if (arm == "budget-only/refuse") return "budget-only/refuse (hopbudget's refusal)";
  if (arm == "budget-only/expired") return "budget-only/expired (ended on arrival, budget spent)";
  if (arm == "budget-only/shed") return "budget-only/shed (shed by admission, RESOURCE_EXHAUSTED)";
  return arm;
}

void RefusalSection(const std::vector<Record>& rs) {
  // (api, inflight) -> arm -> round -> record
  std::map<std::pair<std::string, int>, std::map<std::string, std::map<int, Record>>> g;
  for (const Record& r : rs) {
    const std::string answer = Has(r, "answer") ? Str(r, "answer") : "echo";
    g[{Str(r, "api"), static_cast<int>(Num(r, "inflight"))}][Str(r, "mode") + "/" + answer]
     [static_cast<int>(Num(r, "round"))] = r;
  }
  // arm's server CPU per call over `ref`'s, round by round (rounds both ran).
  auto ratios = [](const std::map<int, Record>& arm, const std::map<int, Record>* ref) {
    std::vector<double> out;
    if (ref == nullptr) return out;
    for (const auto& [round, r] : arm) {
      auto it = ref->find(round);
      if (it == ref->end() || Num(it->second, "server_cpu_us") <= 0) continue;
      out.push_back(Num(r, "server_cpu_us") / Num(it->second, "server_cpu_us"));
    }
    return out;
  };
  auto arm_of = [](std::map<std::string, std::map<int, Record>>& arms,
                   const std::string& arm) -> const std::map<int, Record>* {
    auto it = arms.find(arm);
    return it == arms.end() ? nullptr : &it->second;
  };
  std::fprintf(
      Out(),
      "Server CPU and context switches per call: median over rounds (min..max); / served = "
      "the arm's server CPU per call over the same round's plain/echo run, median of the "
      "rounds' ratios (min..max).\n\n");
  std::fprintf(Out(),
               "| API | in flight | arm | rounds | server CPU us/call | context switches/call | "
               "/ served |\n| --- | --- | --- | --- | --- | --- | --- |\n");
  for (auto& [key, arms] : g) {
    const std::map<int, Record>* served = arm_of(arms, kRefusalServed);
    for (const std::string& arm : RefusalArms()) {
      const std::map<int, Record>* runs = arm_of(arms, arm);
      if (runs == nullptr) continue;
      std::vector<double> cpu, cs;
      for (const auto& [round, r] : *runs) {
        cpu.push_back(Num(r, "server_cpu_us"));
        cs.push_back(Num(r, "server_cs_per_call"));
      }
      const std::string ratio =
          arm == kRefusalServed ? "reference" : Spread(ratios(*runs, served), 3);
      std::fprintf(Out(), "| %s | %d | %s | %zu | %s | %s | %s |\n", key.first.c_str(), key.second,
                   RefusalArmLabel(arm).c_str(), runs->size(), Spread(cpu, 2).c_str(),
                   Fixed(MedianOf(cs), 2).c_str(), ratio.c_str());
    }
  }
  std::fprintf(Out(), "\n");
  for (auto& [key, arms] : g) {
    const std::map<int, Record>* refused = arm_of(arms, kRefusalRefused);
    const std::map<int, Record>* served = arm_of(arms, kRefusalServed);
    const std::map<int, Record>* error = arm_of(arms, kRefusalError);
    const std::string where = key.first + " API, " + std::to_string(key.second) + " in flight";
    const std::vector<double> of_served =
        refused == nullptr ? std::vector<double>() : ratios(*refused, served);
    const std::vector<double> of_error =
        refused == nullptr ? std::vector<double>() : ratios(*refused, error);
    if (of_served.empty() && of_error.empty()) {
      std::fprintf(Out(), "- %s: hopbudget's refusal not measured (no %s run beside a %s one).\n",
                   where.c_str(), kRefusalRefused, kRefusalServed);
      continue;
    }
    std::vector<double> cpu;
    for (const auto& [round, r] : *refused) cpu.push_back(Num(r, "server_cpu_us"));
    auto share = [](std::vector<double> v) {
      if (v.empty()) return std::string("- (not measured)");
      const double m = Median(v);  // sorts
      return Fixed(m, 3) + "x (" + Fixed(v.front(), 3) + ".." + Fixed(v.back(), 3) + ")";
    };
    std::fprintf(
        Out(),
        "- %s: hopbudget's refusal costs %s us of server CPU, %s of a served call and %s of "
        "gRPC's own error answer.\n",
        where.c_str(), Fixed(MedianOf(cpu), 2).c_str(), share(of_served).c_str(),
        share(of_error).c_str());
    // A call whose budget was spent on its way: refused on arrival too, but
    // through the arrived-expired path (docs/overload.md).
    if (const std::map<int, Record>* expired = arm_of(arms, kRefusalExpired); expired != nullptr) {
      std::vector<double> ecpu;
      for (const auto& [round, r] : *expired) ecpu.push_back(Num(r, "server_cpu_us"));
      std::fprintf(Out(),
                   "- %s: a call that arrives with its budget spent costs %s us, %s of a served "
                   "call and %s of hopbudget's refusal.\n",
                   where.c_str(), Fixed(MedianOf(ecpu), 2).c_str(),
                   share(ratios(*expired, served)).c_str(),
                   share(ratios(*expired, refused)).c_str());
    }
    // A call over admission's limit: RESOURCE_EXHAUSTED with pushback, the
    // answer most of an overloaded edge's calls get (docs/overload.md).
    if (const std::map<int, Record>* shed = arm_of(arms, kRefusalShed); shed != nullptr) {
      std::vector<double> scpu;
      for (const auto& [round, r] : *shed) scpu.push_back(Num(r, "server_cpu_us"));
      std::fprintf(
          Out(),
          "- %s: a call shed by admission costs %s us, %s of a served call and %s of gRPC's "
          "own error answer.\n",
          where.c_str(), Fixed(MedianOf(scpu), 2).c_str(), share(ratios(*shed, served)).c_str(),
          share(ratios(*shed, error)).c_str());
    }
  }
}

// Issue 30: a Hop's table swapped under 2 000 calls/s (reload_bench). No
// call may fail and none may see a budget that mixes two tables; the p99 of
// OK calls in the reload rounds, each against the steady round next to it,
// must stay within the steady rounds' own spread ((max - min) / median).
// Fewer than 3 rounds of each, or a generator more than 50 ms behind its
// schedule, cannot say: not measured.
constexpr char kReloadTarget[] =
    "reload under 2 000 calls/s: no failed call, no call whose budget mixes two tables, p99 "
    "within the steady rounds' spread";

void ReloadSection(const std::vector<Record>& rs) {
  std::map<int, Record> reload, steady;
  std::fprintf(
      Out(),
      "| round | mode | calls/s | calls | failed | mixed | reloads | p50 (us) | p99 (us) | behind "
      "schedule, max (ms) |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  double failed = 0, mixed = 0, lag = 0, rps = 0;
  for (const Record& r : rs) {
    std::fprintf(Out(), "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
                 Str(r, "round").c_str(), Str(r, "mode").c_str(), Str(r, "rps").c_str(),
                 Str(r, "calls").c_str(), Str(r, "failed").c_str(), Str(r, "mixed").c_str(),
                 Str(r, "reloads").c_str(), Str(r, "p50_us").c_str(), Str(r, "p99_us").c_str(),
                 Str(r, "lag_max_ms").c_str());
    const int round = static_cast<int>(Num(r, "round"));
    (Str(r, "mode") == "reload" ? reload : steady)[round] = r;
    mixed += Num(r, "mixed");
    lag = std::max(lag, Num(r, "lag_max_ms"));
    rps = Num(r, "rps");
    if (Str(r, "mode") == "reload") failed += Num(r, "failed");
  }
  std::vector<double> ratios, steady_p99;
  for (const auto& [round, r] : reload) {
    auto it = steady.find(round);
    if (it == steady.end() || Num(it->second, "p99_us") <= 0) continue;
    ratios.push_back(Num(r, "p99_us") / Num(it->second, "p99_us"));
    steady_p99.push_back(Num(it->second, "p99_us"));
  }
  if (ratios.size() < 3 || rps < 2000) {
    EmitVerdict(
        kReloadTarget, "-",
        std::string(kNotMeasured) + " (fewer than 3 rounds of both modes at 2 000 calls/s)");
    return;
  }
  if (lag > 50) {
    EmitVerdict(kReloadTarget, "-",
                std::string(kNotMeasured) + " (the generator fell " + Fixed(lag, 0) +
                    " ms behind its schedule)");
    return;
  }
  std::sort(steady_p99.begin(), steady_p99.end());
  const double noise = (steady_p99.back() - steady_p99.front()) / Median(steady_p99);
  const double ratio = MedianOf(ratios);
  const std::string result = Fixed(failed, 0) + " failed, " + Fixed(mixed, 0) + " mixed; p99 " +
                             Fixed(ratio, 3) + "x the steady rounds', their spread " +
                             Fixed(100 * noise, 1) + " %";
  std::vector<std::string> missed;
  if (failed > 0) missed.push_back("failed calls");
  if (mixed > 0) missed.push_back("mixed budgets");
  if (ratio > 1 + noise) missed.push_back("p99");
  std::string verdict = "met";
  if (!missed.empty()) {
    verdict = "**missed**:";
    for (const std::string& m : missed) verdict += " " + m + ",";
    verdict.pop_back();
  }
  EmitVerdict(kReloadTarget, result, verdict);
}

void NothingMeasured(const std::string& section) {
  if (section == "overhead") {
    for (const std::string api : {"callback", "sync"}) {
      EmitVerdict("overhead " + api + " API, " + std::to_string(kJudgedInflight) +
                      " in flight: QPS (c)/(a) >= 0.95, p99 (c)/(a) <= 1.10",
                  "-", kNotMeasured);
    }
  } else if (section == "precision") {
    for (const std::string& source : PrecisionSources()) {
      EmitVerdict("enforcement precision, " + source + ": p99 lateness <= 1 ms", "-", kNotMeasured);
    }
  } else if (section == "cancel") {
    EmitVerdict("a client cancel reaching the third hop: p99 <= 2 ms", "-", kNotMeasured);
  } else if (section == "hedge") {
    for (const char* target : {kHedgeP99Target, kHedgeLoadTarget, kRaceTarget}) {
      EmitVerdict(target, "-", kNotMeasured);
    }
  } else if (section == "admission") {
    for (const std::string api : {"callback", "sync"}) {
      EmitVerdict(AdmissionTarget(api), "-", kNotMeasured);
    }
  } else if (section == "scale") {
    EmitVerdict(ScaleTarget(kJudgedConcurrency), "-", kNotMeasured);
  } else if (section == "slots") {
    for (const char* target : {kSlotsThreadTarget, kSlotsLateTarget, kSlotsServerTarget}) {
      EmitVerdict(target, "-", kNotMeasured);
    }
  } else if (section == "reload") {
    EmitVerdict(kReloadTarget, "-", kNotMeasured);
  } else if (section == "overload") {
    for (const char* t : {kOverloadUnthrottledTarget, kOverloadThrottledTarget, kOverloadLateTarget,
                          kOverloadP99Target}) {
      EmitVerdict(t, "-", kNotMeasured);
    }
  } else if (section == "chain") {
    ChainNothingMeasured("-");
  }
}

void RunSection(const std::string& section, std::istream& in) {
  const std::vector<Record> rs = ReadResults(in, section);
  if (rs.empty()) {
    std::fprintf(Out(),
                 "_No results for this section (the benchmark did not run or failed; see the "
                 "logs): not measured._\n");
    NothingMeasured(section);
    return;
  }
  if (section == "overhead") Overhead(rs);
  if (section == "scale") Scale(rs);
  if (section == "precision") Precision(rs);
  if (section == "cancel") Cancel(rs);
  if (section == "chain") ChainSection(rs);
  if (section == "hedge") Hedge(rs);
  if (section == "admission") AdmissionSection(rs);
  if (section == "slots") SlotsSection(rs);
  if (section == "overload") OverloadSection(rs);
  if (section == "refusal") RefusalSection(rs);
  if (section == "reload") ReloadSection(rs);
}

// One section on `results`, what it prints kept apart from this process's
// own standard output and error.
SectionOutput RunSectionInMemory(const std::string& section, const std::string& results) {
  char* tables = nullptr;
  char* log = nullptr;
  size_t tables_size = 0, log_size = 0;
  FILE* tables_file = open_memstream(&tables, &tables_size);
  FILE* log_file = open_memstream(&log, &log_size);
  if (tables_file == nullptr || log_file == nullptr) Die("open_memstream failed");
  Streams() = {tables_file, log_file};
  std::istringstream in(results);
  RunSection(section, in);
  Streams() = {};
  std::fclose(tables_file);
  std::fclose(log_file);
  SectionOutput out{std::string(tables, tables_size), std::string(log, log_size)};
  std::free(tables);
  std::free(log);
  return out;
}

int Main(int argc, char** argv) {
  const cli::CommandLine cl = cli::ParseOrExit(
      argc, argv, "bench_report",
      "bench_report: reads RESULT lines on stdin and writes one section of the "
      "benchmark report (Markdown) with its verdicts; or writes the whole report.\n\n"
      "  ... | bench_report "
      "--section=overhead|scale|precision|cancel|chain|hedge|admission|slots|"
      "overload|refusal|reload\n"
      "  bench_report --write-report --raw=DIR --out=FILE --settings=FILE");
  if (absl::GetFlag(FLAGS_write_report)) {
    cli::ExitIfBad("bench_report",
                   cli::FirstError({cl.WasSet("section")
                                        ? absl::InvalidArgumentError(
                                              "--section and --write-report exclude each other")
                                        : absl::OkStatus(),
                                    cli::Required("raw", absl::GetFlag(FLAGS_raw)),
                                    cli::Required("out", absl::GetFlag(FLAGS_out)),
                                    cli::Required("settings", absl::GetFlag(FLAGS_settings))}));
    const absl::Status written = WriteReport(absl::GetFlag(FLAGS_raw), absl::GetFlag(FLAGS_out),
                                             absl::GetFlag(FLAGS_settings), RunSectionInMemory);
    // Exit 2, as for a bad flag: an input the report cannot be written from.
    if (!written.ok()) {
      std::fprintf(stderr, "bench_report: %s\n", std::string(written.message()).c_str());
      return 2;
    }
    return 0;
  }
  for (const char* flag : {"raw", "out", "settings"}) {
    if (cl.WasSet(flag)) {
      cli::ExitIfBad("bench_report",
                     absl::InvalidArgumentError(absl::StrCat("--", flag, " needs --write-report")));
    }
  }
  const std::string section = absl::GetFlag(FLAGS_section);
  cli::ExitIfBad("bench_report",
                 cli::OneOf("section", section,
                            {"overhead", "scale", "precision", "cancel", "chain", "hedge",
                             "admission", "slots", "overload", "refusal", "reload"}));
  RunSection(section, std::cin);
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace hopbudget

int main(int argc, char** argv) { return hopbudget::bench::Main(argc, argv); }
