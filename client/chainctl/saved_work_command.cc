// Copyright hopbudget authors.
//
// chainctl saved-work: the chain benchmark's runs (scripts/bench.sh --only
// chain; bench_report --section=chain reads what it writes).
//
// Two demo chains side by side, from the chain's one description: a
// hopbudget one (its ledger's shield bound 600 ms) and a baseline one (a
// constant 1 s timeout per hop, a naive retry loop), each hop with the
// caller's latency mix (--gateway-flags, ...). Each chain's capacity is
// measured first (CapacityRamp, `chainctl load` steps of --ramp-step from
// --ramp-start); then each load level, a multiple of the baseline's capacity
// (0.5x, 1x, 2x, 4x), runs on both chains, their order alternating from run
// to run, a --gap after each run so that one chain's leftover work does not
// load the other's run. At 2x and 4x each level runs --rounds rounds, and
// the hopbudget chain also runs under a caller that does not back off
// (hopbudget-client-unthrottled); the hopbudget chain's own caller throttles
// itself (--client-throttle). Every run is one RESULT line in --out, after a
// setup line with both capacities.
//
// Exit status 0 when every run ran; 1 when a chain did not start or a load
// failed; 2 for a bad command line.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "capacity_ramp.h"
#include "commands.h"
#include "processes.h"
#include "summary.h"
#include "topology.h"

ABSL_FLAG(absl::Duration, ramp_step, absl::Seconds(3), "saved-work: each capacity ramp step");
ABSL_FLAG(int64_t, ramp_start, 50, "saved-work: the capacity ramp's first rate, calls/s");

namespace hopbudget::chainctl {
namespace {

// The chains' modes, as the RESULT lines name them.
constexpr char kBaseline[] = "baseline";
constexpr char kHopbudget[] = "hopbudget";
constexpr char kUnthrottled[] = "hopbudget-client-unthrottled";

class SavedWork {
 public:
  SavedWork(std::string self, std::string work, std::vector<StartedHop> hb,
            std::vector<StartedHop> bl)
      : self_(std::move(self)), work_(std::move(work)), hb_(std::move(hb)), bl_(std::move(bl)) {}

  // One open-loop run of `mode` at `rps` for `duration` (chainctl load);
  // its summary JSON in `file`, its output in `file`.txt.
  absl::StatusOr<LoadSummary> Load(const std::string& mode, int64_t rps, absl::Duration duration,
                                   const std::string& file) {
    const std::vector<StartedHop>& chain = mode == kBaseline ? bl_ : hb_;
    std::vector<std::string> args = {"load",
                                     "--gateway",
                                     Address(chain, Hop::kGateway),
                                     "--rps",
                                     absl::StrCat(rps),
                                     "--duration",
                                     absl::FormatDuration(duration),
                                     "--budget",
                                     absl::FormatDuration(absl::GetFlag(FLAGS_budget)),
                                     "--concurrency",
                                     "4096",
                                     "--admin",
                                     Admin(chain),
                                     "--json",
                                     file,
                                     "--quiet"};
    if (mode == kHopbudget) {
      args.push_back("--client-throttle=" + ShortestDecimal(absl::GetFlag(FLAGS_client_throttle)));
    }
    const std::string text = file + ".txt";
    absl::StatusOr<pid_t> pid = Spawn(self_, args, text, text);
    if (!pid.ok()) return pid.status();
    int status = 0;
    while (waitpid(*pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (ExitCode(status) != 0) {
      return absl::InternalError(absl::StrCat("chainctl load failed:\n", ReadFile(text)));
    }
    absl::StatusOr<LoadSummary> s = ParseSummaryJson(ReadFile(file));
    if (!s.ok()) return absl::InternalError(absl::StrCat(file, ": ", s.status().message()));
    return s;
  }

 private:
  static std::string Address(const std::vector<StartedHop>& chain, Hop hop) {
    for (const StartedHop& h : chain) {
      if (h.hop == hop) return absl::StrCat("127.0.0.1:", h.port);
    }
    return "";
  }
  static std::string Admin(const std::vector<StartedHop>& chain) {
    return absl::StrCat(Address(chain, Hop::kGateway), ",", Address(chain, Hop::kOrders), ",",
                        Address(chain, Hop::kLedger));
  }

  std::string self_, work_;
  std::vector<StartedHop> hb_, bl_;
};

// What a run wrote, as one RESULT line: ok_p99_ms "-" when the load did not
// report it, work_by_hop_ms "hop:ms,..." ("-" without hops).
std::string RunLine(const std::string& mode, const std::string& factor, int64_t rate, int round,
                    absl::Duration duration, const LoadSummary& s) {
  std::vector<std::string> by_hop;
  for (const ServiceDelta& d : s.per_hop) {
    by_hop.push_back(absl::StrCat(d.hop, ":", ShortestDecimal(d.work_after_deadline_ms)));
  }
  auto exceeded = s.errors_by_code.find("DEADLINE_EXCEEDED");
  return absl::StrCat(
      "RESULT bench=chain kind=run mode=", mode, " factor=", factor, " rate=", rate,
      " round=", round, " sent=", s.sent, " ok=", s.ok, " not_sent=", s.not_sent,
      " client_throttled=", s.client_throttled,
      " goodput=", ShortestDecimal(s.ok / absl::ToDoubleSeconds(duration)),
      " deadline_exceeded=", exceeded == s.errors_by_code.end() ? 0 : exceeded->second,
      " retries=", s.retries, " p50_ms=", ShortestDecimal(s.p50_ms),
      " p99_ms=", ShortestDecimal(s.p99_ms), " ok_p99_ms=", ShortestDecimal(s.ok_p99_ms),
      " calls_started_after_deadline=", s.calls_started_after_deadline,
      " work_after_deadline_ms=", ShortestDecimal(s.work_after_deadline_ms),
      " work_by_hop_ms=", by_hop.empty() ? "-" : absl::StrJoin(by_hop, ","));
}

}  // namespace

int SavedWorkCmd(int argc, char** argv) {
  ParseCommand(argc, argv, "saved-work",
               "chainctl saved-work: the chain benchmark's runs (scripts/bench.sh --only chain): "
               "a hopbudget and a baseline chain, their capacities, then 0.5x, 1x, 2x and 4x of "
               "the baseline's on both, one RESULT line per run in --out.\n\n"
               "  chainctl saved-work --bin=BUILD/server --work=DIR --out=FILE "
               "--client-throttle=K\n"
               "      [--duration=8s] [--rounds=3] [--gap=2s] [--budget=500ms] [--ramp-step=3s] "
               "[--ramp-start=50]\n"
               "      [--gateway-flags='--latency=...'] [--orders-flags=...] [--ledger-flags=...]",
               {"bin", "work", "out", "duration", "rounds", "gap", "budget", "client_throttle",
                "ramp_step", "ramp_start", "gateway_flags", "orders_flags", "ledger_flags"});
  const std::string bin = absl::GetFlag(FLAGS_bin), work = absl::GetFlag(FLAGS_work),
                    out = absl::GetFlag(FLAGS_out);
  const int rounds = absl::GetFlag(FLAGS_rounds);
  const absl::Duration duration = absl::GetFlag(FLAGS_duration), gap = absl::GetFlag(FLAGS_gap),
                       ramp_step = absl::GetFlag(FLAGS_ramp_step);
  const int64_t ramp_start = absl::GetFlag(FLAGS_ramp_start);
  cli::ExitIfBad("chainctl saved-work",
                 cli::FirstError({cli::Required("bin", bin), cli::Required("work", work),
                                  cli::Required("out", out)}));
  if (rounds < 1) return Fail("saved-work", absl::StrCat("--rounds=", rounds, ": must be >= 1"));
  if (!(absl::GetFlag(FLAGS_client_throttle) >= 1)) {
    return Fail(
        "saved-work",
        absl::StrCat("--client-throttle=", ShortestDecimal(absl::GetFlag(FLAGS_client_throttle)),
                     ": the hopbudget chain's caller throttles itself: K >= 1"));
  }
  if (duration <= absl::ZeroDuration() || ramp_step <= absl::ZeroDuration()) {
    return Fail("saved-work", "--duration and --ramp-step must be > 0");
  }
  if (ramp_start < 1) {
    return Fail("saved-work", absl::StrCat("--ramp-start=", ramp_start, ": must be >= 1"));
  }
  if (mkdir(work.c_str(), 0755) != 0 && errno != EEXIST) {
    return Fail("saved-work", absl::StrCat("--work=", work, ": ", std::strerror(errno)));
  }
  std::ofstream results(out, std::ios::trunc);
  if (!results) return Fail("saved-work", absl::StrCat("--out=", out, ": cannot write it"));

  // The two chains' budgets are the description's; each hop's latency is
  // the caller's, and so is the hopbudget ledger's 600 ms shield bound.
  auto start = [&](const std::string& mode) -> absl::StatusOr<std::vector<StartedHop>> {
    const std::string dir = absl::StrCat(work, "/", mode == kHopbudget ? "hb" : "bl", "-chain");
    if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      return absl::InternalError(absl::StrCat(dir, ": ", std::strerror(errno)));
    }
    ChainSpec spec = ChainFromFlags(dir + "/" + mode + ".db");
    spec.mode = mode;
    if (mode == kHopbudget) spec.extra[Hop::kLedger].push_back("--shield-bound=600ms");
    return StartChain(spec, bin, dir);
  };
  absl::StatusOr<std::vector<StartedHop>> hb = start(kHopbudget);
  if (!hb.ok()) {
    std::cerr << "chainctl saved-work: the hopbudget chain did not start: " << hb.status().message()
              << "\n";
    return 1;
  }
  absl::StatusOr<std::vector<StartedHop>> bl = start(kBaseline);
  if (!bl.ok()) {
    std::cerr << "chainctl saved-work: the baseline chain did not start: " << bl.status().message()
              << "\n";
    StopChain(*hb);
    return 1;
  }
  SavedWork w(SelfPath(argv[0]), work, *hb, *bl);
  auto fail = [&](const absl::Status& s) {
    std::cerr << "chainctl saved-work: " << s.message() << "\n";
    StopChain(*hb);
    StopChain(*bl);
    return 1;
  };

  // Each chain's capacity on its own chain.
  auto capacity_of = [&](const std::string& mode) {
    std::cout << "capacity ramp (" << mode << " chain, " << absl::FormatDuration(ramp_step)
              << " per step, budget " << absl::FormatDuration(absl::GetFlag(FLAGS_budget))
              << "):" << std::endl;
    return CapacityRamp(ramp_start, 6400, [&](int64_t rps) -> absl::StatusOr<double> {
      absl::StatusOr<LoadSummary> s =
          w.Load(mode, rps, ramp_step, absl::StrCat(work, "/ramp-", mode, "-", rps, ".json"));
      if (!s.ok()) return s.status();
      std::cout << "  offered " << rps << "/s -> OK share " << ShortestDecimal(OkShare(*s))
                << std::endl;
      absl::SleepFor(gap);
      return OkShare(*s);
    });
  };
  absl::StatusOr<int64_t> capacity = capacity_of(kBaseline);
  if (!capacity.ok()) return fail(capacity.status());
  absl::StatusOr<int64_t> hb_capacity = capacity_of(kHopbudget);
  if (!hb_capacity.ok()) return fail(hb_capacity.status());
  std::cout << "capacity: baseline " << *capacity << "/s, hopbudget " << *hb_capacity << "/s"
            << std::endl;
  results << "RESULT bench=chain kind=setup capacity=" << *capacity
          << " hopbudget_capacity=" << *hb_capacity
          << " budget_ms=" << absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_budget))
          << " duration_s=" << ShortestDecimal(absl::ToDoubleSeconds(duration))
          << " rounds=" << rounds << "\n"
          << std::flush;

  // Past capacity (2x, 4x), where one run's goodput swings by a fifth from
  // run to run, each level runs --rounds rounds and is judged on the median.
  const std::pair<const char*, double> kLevels[] = {{"0.5", 0.5}, {"1", 1}, {"2", 2}, {"4", 4}};
  int order = 0;
  for (const auto& [factor, f] : kLevels) {
    const int64_t rate = std::max<int64_t>(1, static_cast<int64_t>(*capacity * f + 0.5));
    const bool past = f >= 2;
    for (int round = 1; round <= (past ? rounds : 1); ++round) {
      std::vector<std::string> modes = {kBaseline, kHopbudget};
      if (order++ % 2 == 1) std::swap(modes[0], modes[1]);
      if (past) modes.push_back(kUnthrottled);
      for (const std::string& mode : modes) {
        const std::string file =
            absl::StrCat(work, "/load-", factor, "-", mode, "-", round, ".json");
        absl::StatusOr<LoadSummary> s = w.Load(mode, rate, duration, file);
        if (!s.ok()) return fail(s.status());
        const std::string line = RunLine(mode, factor, rate, round, duration, *s);
        results << line << "\n" << std::flush;
        std::cout << line << std::endl;
        absl::SleepFor(gap);
      }
    }
  }
  std::string failed = StopChain(*hb);
  failed += StopChain(*bl);
  if (!failed.empty()) {
    std::cerr << "chainctl saved-work: a chain did not stop cleanly:\n" << failed;
    return 1;
  }
  return 0;
}

}  // namespace hopbudget::chainctl
