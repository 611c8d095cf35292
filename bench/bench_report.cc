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
// per round with their spread), scale, precision, cancel.
#include <cstdio>
#include <algorithm>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench_util.h"

namespace hopbudget {
namespace bench {
namespace {

using Record = std::map<std::string, std::string>;

std::vector<Record> ReadResults(const std::string& section) {
  std::vector<Record> out;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.rfind("RESULT ", 0) != 0) continue;
    Record r;
    for (absl::string_view kv : absl::StrSplit(line.substr(7), ' ', absl::SkipEmpty())) {
      std::pair<std::string, std::string> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
      r[p.first] = p.second;
    }
    if (r["bench"] == section) out.push_back(r);
  }
  return out;
}

double Num(const Record& r, const std::string& key) {
  auto it = r.find(key);
  double v = 0;
  if (it == r.end() || !absl::SimpleAtod(it->second, &v)) return 0;
  return v;
}
std::string Str(const Record& r, const std::string& key) {
  auto it = r.find(key);
  return it == r.end() ? "" : it->second;
}

const std::vector<std::string>& ModeList() {
  static const std::vector<std::string> modes = {"plain", "noop", "hopbudget", "budget-only"};
  return modes;
}

double MedianOf(std::vector<double> v) { return Median(v); }
std::string Spread(std::vector<double> v, int digits) {
  if (v.empty()) return "-";
  const double m = Median(v);  // sorts
  return Fixed(m, digits) + " (" + Fixed(v.front(), digits) + ".." + Fixed(v.back(), digits) + ")";
}

void Overhead(const std::vector<Record>& rs) {
  // (api, inflight) -> mode -> round -> record
  std::map<std::pair<std::string, int>, std::map<std::string, std::map<int, Record>>> g;
  for (const Record& r : rs) {
    g[{Str(r, "api"), static_cast<int>(Num(r, "inflight"))}][Str(r, "mode")]
     [static_cast<int>(Num(r, "round"))] = r;
  }
  std::printf("Medians over rounds; QPS spread is min..max.\n\n");
  std::printf("| API | in flight | mode | rounds | QPS | QPS min..max | p50 (us) | p99 (us) | "
              "CPU us/call (client+server) | errors |\n"
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (auto& [key, modes] : g) {
    for (const std::string& mode : ModeList()) {
      auto it = modes.find(mode);
      if (it == modes.end()) continue;
      std::vector<double> qps, p50, p99, cpu;
      double errors = 0;
      for (auto& [round, r] : it->second) {
        qps.push_back(Num(r, "qps"));
        cpu.push_back(Num(r, "cpu_us_per_call"));
        p50.push_back(Num(r, "p50_us"));
        p99.push_back(Num(r, "p99_us"));
        errors += Num(r, "errors");
      }
      std::vector<double> q = qps;
      std::sort(q.begin(), q.end());
      std::printf("| %s | %d | %s | %zu | %.0f | %.0f..%.0f | %.1f | %.1f | %.1f | %.0f |\n",
                  key.first.c_str(), key.second,
                  mode == "plain"       ? "(a) plain"
                  : mode == "noop"      ? "(b) no-op pair"
                  : mode == "hopbudget" ? "(c) hopbudget"
                                        : "(d) budget only, no retrying channel",
                  qps.size(), MedianOf(qps), q.front(), q.back(), MedianOf(p50), MedianOf(p99),
                  MedianOf(cpu), errors);
    }
  }
  std::printf("\nRatios per round (same round, adjacent runs), median (min..max):\n\n");
  std::printf("CPU c-a is the CPU time per call hopbudget adds over no interceptors (client + "
              "server), the figure least disturbed by other load on the machine.\n\n");
  std::printf("| API | in flight | QPS c/a | p99 c/a | QPS c/b | p99 c/b | CPU c-a (us/call) | "
              "QPS d/a | CPU d-a (us/call) | target (at 32: QPS c/a >= 0.95, p99 c/a <= 1.10) |\n"
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (auto& [key, modes] : g) {
    std::vector<double> qa, pa, qb, pb, ca, qd, cd;
    for (auto& [round, d] : modes["budget-only"]) {
      if (!modes["plain"].count(round)) continue;
      const Record& a = modes["plain"][round];
      if (Num(a, "qps") > 0) qd.push_back(Num(d, "qps") / Num(a, "qps"));
      cd.push_back(Num(d, "cpu_us_per_call") - Num(a, "cpu_us_per_call"));
    }
    for (auto& [round, c] : modes["hopbudget"]) {
      if (modes["plain"].count(round)) {
        const Record& a = modes["plain"][round];
        if (Num(a, "qps") > 0) qa.push_back(Num(c, "qps") / Num(a, "qps"));
        if (Num(a, "p99_us") > 0) pa.push_back(Num(c, "p99_us") / Num(a, "p99_us"));
        ca.push_back(Num(c, "cpu_us_per_call") - Num(a, "cpu_us_per_call"));
      }
      if (modes["noop"].count(round)) {
        const Record& b = modes["noop"][round];
        if (Num(b, "qps") > 0) qb.push_back(Num(c, "qps") / Num(b, "qps"));
        if (Num(b, "p99_us") > 0) pb.push_back(Num(c, "p99_us") / Num(b, "p99_us"));
      }
    }
    std::string verdict = "-";
    if (key.second >= 32 && !qa.empty() && !pa.empty()) {
      const bool q_ok = MedianOf(qa) >= 0.95;
      const bool p_ok = MedianOf(pa) <= 1.10;
      verdict = std::string(q_ok ? "QPS met" : "QPS **missed**") + ", " +
                (p_ok ? "p99 met" : "p99 **missed**");
    }
    std::printf("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", key.first.c_str(),
                key.second, Spread(qa, 3).c_str(), Spread(pa, 3).c_str(), Spread(qb, 3).c_str(),
                Spread(pb, 3).c_str(), Spread(ca, 1).c_str(), Spread(qd, 3).c_str(),
                Spread(cd, 1).c_str(), verdict.c_str());
    std::fprintf(stderr,
                 "HEADLINE overhead api=%s inflight=%d qps_c_over_a=%.3f p99_c_over_a=%.3f\n",
                 key.first.c_str(), key.second, qa.empty() ? 0 : MedianOf(qa),
                 pa.empty() ? 0 : MedianOf(pa));
  }
}

void Scale(const std::vector<Record>& rs) {
  std::map<int, std::map<std::string, Record>> g;  // concurrency -> mode -> record
  for (const Record& r : rs) g[static_cast<int>(Num(r, "concurrency"))][Str(r, "mode")] = r;
  std::printf("Per parked call, medians over rounds. \"C++ new\" = bytes live from operator new "
              "(interceptor objects, hopbudget's per-call state, the gRPC C++ layer, messages); "
              "\"heap\" = all malloc'd bytes (gRPC core's call arenas too); RSS = resident "
              "pages (coarse). CPU = process CPU (user+sys) per call from issue to end.\n\n");
  std::printf("| concurrency | mode | parked (min) | C++ new B/call | heap B/call | RSS B/call | "
              "CPU us/call | threads before/parked/after |\n"
              "| --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (auto& [n, modes] : g) {
    for (const std::string mode : {"plain", "noop", "hopbudget"}) {
      auto it = modes.find(mode);
      if (it == modes.end()) continue;
      const Record& r = it->second;
      std::printf("| %d | %s | %s | %.0f | %.0f | %.0f | %.1f | %s/%s/%s |\n", n, mode.c_str(),
                  Str(r, "min_parked").c_str(), Num(r, "new_bytes_per_call"),
                  Num(r, "heap_bytes_per_call"), Num(r, "rss_bytes_per_call"),
                  Num(r, "cpu_us_per_call"), Str(r, "threads_before").c_str(),
                  Str(r, "threads_parked").c_str(), Str(r, "threads_after").c_str());
    }
  }
  std::printf("\nAttributable to hopbudget: hopbudget - plain (hopbudget - no-op pair).\n\n");
  std::printf("| concurrency | C++ new B/call | heap B/call | CPU us/call |\n"
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
    std::printf("| %d | %s | %s | %s |\n", n, diff("new_bytes_per_call", 0).c_str(),
                diff("heap_bytes_per_call", 0).c_str(), diff("cpu_us_per_call", 1).c_str());
  }
}

void Precision(const std::vector<Record>& rs) {
  std::printf("| source | budget (ms) | calls | p50 (ms) | p99 (ms) | max (ms) | not attributed | "
              "target p99 <= 1 ms |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (const Record& r : rs) {
    std::printf("| %s | %s | %s | %.3f | %.3f | %.3f | %s | %s |\n", Str(r, "source").c_str(),
                Str(r, "budget_ms").c_str(), Str(r, "calls").c_str(), Num(r, "p50_ms"),
                Num(r, "p99_ms"), Num(r, "max_ms"), Str(r, "wrong").c_str(),
                Num(r, "p99_ms") <= 1.0 ? "met" : "**missed**");
  }
}

void Cancel(const std::vector<Record>& rs) {
  std::printf("| hops | calls | p50 (ms) | p90 (ms) | p99 (ms) | max (ms) | lost | "
              "target p99 <= 2 ms |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (const Record& r : rs) {
    std::printf("| %s | %s | %.3f | %.3f | %.3f | %.3f | %s | %s |\n", Str(r, "hops").c_str(),
                Str(r, "calls").c_str(), Num(r, "p50_ms"), Num(r, "p90_ms"), Num(r, "p99_ms"),
                Num(r, "max_ms"), Str(r, "lost").c_str(),
                Num(r, "p99_ms") <= 2.0 ? "met" : "**missed**");
  }
}

int Main(int argc, char** argv) {
  Flags flags(argc, argv, {"section"});
  const std::string section =
      flags.OneOf("section", "overhead", {"overhead", "scale", "precision", "cancel"});
  const std::vector<Record> rs = ReadResults(section);
  if (rs.empty()) {
    std::printf("_No results for this section (the benchmark did not run or failed; see the "
                "logs)._\n");
    return 0;
  }
  if (section == "overhead") Overhead(rs);
  if (section == "scale") Scale(rs);
  if (section == "precision") Precision(rs);
  if (section == "cancel") Cancel(rs);
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace hopbudget

int main(int argc, char** argv) { return hopbudget::bench::Main(argc, argv); }
