// Copyright hopbudget authors.
//
// chainctl up: starts one chain from its description (topology.h) and
// keeps it up until SIGTERM or SIGINT.
//
// Each hop of StartOrder in turn: its binary in --bin, its stdout and
// stderr in --work (<hop>.out, <hop>.err), ready when its stdout has the
// ready line ("<name> listening on <port> metrics on <port> ...", or
// "<name> listening on <port>" for the edge, which has no metrics port:
// <M> is then 0; 30 s at most). One line per hop on stdout ("<hop> port
// <P> metrics <M> pid <PID>"), also in --ports-out. On SIGTERM or SIGINT the hops are stopped
// front to back (gateway first: no hop is stopped while one in front of it
// can still call it), each sent SIGTERM and waited for. Exit status 0 when
// every hop exited 0; 1 when a hop did not start, exited on its own (the
// rest are then stopped) or did not stop cleanly (named on stderr); 2 for
// a bad command line.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "commands.h"
#include "processes.h"
#include "topology.h"

ABSL_FLAG(std::string, ports_out, "", "a file for the hops' lines (hop, port, metrics, pid)");

namespace hopbudget::chainctl {
namespace {

// Stops every hop started, front to back; 0 when each exited 0.
int StopAll(const std::vector<StartedHop>& chain) {
  const std::string failed = StopChain(chain);
  if (failed.empty()) return 0;
  for (absl::string_view line : absl::StrSplit(failed, '\n', absl::SkipEmpty())) {
    std::cerr << "chainctl up: " << line << "\n";
  }
  return 1;
}

}  // namespace

int Up(int argc, char** argv) {
  ParseCommand(argc, argv, "up",
               "chainctl up: start a chain (ledger, an optional read replica, orders, gateway, "
               "an optional edge) "
               "from its one description, print each hop's ports and pid, keep it up until "
               "SIGTERM or SIGINT, then stop it front to back.\n\n"
               "  chainctl up --bin=BUILD/server --work=DIR [--mode=hopbudget|baseline] "
               "[--replica] [--edge]\n"
               "      [--gateway-flags='--request-cap=1s ...'] [--orders-flags=...] "
               "[--ledger-flags=...] [--replica-flags=...] [--edge-flags=...] [--ports-out=FILE]",
               {"mode", "bin", "work", "replica", "edge", "seed", "gateway_flags", "orders_flags",
                "ledger_flags", "replica_flags", "edge_flags", "ports_out"});
  const std::string bin = absl::GetFlag(FLAGS_bin), work = absl::GetFlag(FLAGS_work);
  cli::ExitIfBad(
      "chainctl up",
      cli::FirstError({cli::Required("bin", bin), cli::Required("work", work),
                       cli::OneOf("mode", absl::GetFlag(FLAGS_mode), {"hopbudget", "baseline"})}));
  const ChainSpec spec = ChainFromFlags(work + "/" + absl::GetFlag(FLAGS_mode) + ".db");
  if (mkdir(work.c_str(), 0755) != 0 && errno != EEXIST) {
    return Fail("up", absl::StrCat("--work=", work, ": ", std::strerror(errno)));
  }
  // Blocked before any child starts: sigwait takes them, and a signal that
  // comes while the chain starts stops it once started.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGCHLD);  // a hop that exits stops the chain
  sigprocmask(SIG_BLOCK, &stop_signals, nullptr);

  absl::StatusOr<std::vector<StartedHop>> chain = StartChain(spec, bin, work);
  if (!chain.ok()) {
    std::cerr << "chainctl up: " << chain.status().message() << "\n";
    return absl::IsInvalidArgument(chain.status()) ? 2 : 1;
  }
  std::string lines;
  for (const StartedHop& r : *chain) {
    lines += absl::StrCat(HopName(r.hop), " port ", r.port, " metrics ", r.metrics_port, " pid ",
                          r.pid, "\n");
  }
  std::cout << lines << std::flush;
  const std::string ports_out = absl::GetFlag(FLAGS_ports_out);
  if (!ports_out.empty()) {
    // Written whole, then renamed: a reader sees every hop or no file.
    const std::string partial = ports_out + ".partial";
    std::ofstream(partial) << lines;
    if (std::rename(partial.c_str(), ports_out.c_str()) != 0) {
      std::cerr << "chainctl up: --ports-out=" << ports_out << ": " << std::strerror(errno) << "\n";
      StopAll(*chain);
      return 1;
    }
  }
  int sig = 0;
  sigwait(&stop_signals, &sig);
  if (sig == SIGCHLD) {
    std::cerr << "chainctl up: a hop exited: stopping the chain front to back\n";
    StopAll(*chain);
    return 1;
  }
  std::cerr << "chainctl up: " << strsignal(sig) << ": stopping the chain front to back\n";
  return StopAll(*chain);
}

}  // namespace hopbudget::chainctl
