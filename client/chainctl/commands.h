// Copyright hopbudget authors.
//
// commands.h: chainctl's commands, one file each (order_command.cc, ...),
// and what they share. Each command defines its own flags (ABSL_FLAG) next to
// the code that reads them; the flags several commands take are defined once
// in common.cc and declared here (absl flags are one set per binary: a name is
// defined in exactly one file). Each command takes only the flags its
// ParseCommand call lists.
//
//   int Order(int argc, char** argv) {
//     ParseCommand(argc, argv, "order", "chainctl order: ...", {"gateway", "budget"});
//
// Thread safety: main's thread, before any other thread starts.
#ifndef HOPBUDGET_CHAINCTL_COMMANDS_H_
#define HOPBUDGET_CHAINCTL_COMMANDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/time/time.h"
#include "client/cli/cli_flags.h"
#include "summary.h"
#include "topology.h"

// The flags of more than one command (common.cc).
ABSL_DECLARE_FLAG(std::string, gateway);      // order, watch, load, probe
ABSL_DECLARE_FLAG(absl::Duration, budget);    // order, watch, load, probe
ABSL_DECLARE_FLAG(std::string, key);          // order, watch
ABSL_DECLARE_FLAG(std::string, item);         // order, load
ABSL_DECLARE_FLAG(std::string, json);         // load, metrics, stats
ABSL_DECLARE_FLAG(std::string, admin);        // load, probe, faults, stats
ABSL_DECLARE_FLAG(std::string, db);           // audit, command
ABSL_DECLARE_FLAG(std::string, bin);          // up, demo, overload
ABSL_DECLARE_FLAG(std::string, work);         // up, overload
ABSL_DECLARE_FLAG(std::string, h2load);       // demo, overload
ABSL_DECLARE_FLAG(absl::Duration, duration);  // load, overload
ABSL_DECLARE_FLAG(double, client_throttle);   // load, overload, saved-work
// The benchmarks' runs: overload, saved-work.
ABSL_DECLARE_FLAG(std::string, out);
ABSL_DECLARE_FLAG(int, rounds);
ABSL_DECLARE_FLAG(absl::Duration, gap);
// A chain from its description: up, command (ChainFromFlags).
ABSL_DECLARE_FLAG(std::string, mode);
ABSL_DECLARE_FLAG(bool, replica);
ABSL_DECLARE_FLAG(int64_t, seed);
ABSL_DECLARE_FLAG(std::string, gateway_flags);
ABSL_DECLARE_FLAG(std::string, orders_flags);
ABSL_DECLARE_FLAG(std::string, ledger_flags);
ABSL_DECLARE_FLAG(std::string, replica_flags);

namespace hopbudget::chainctl {

// Each command: argv[1] is its name, argv[2..] its flags. Returns the exit
// code (0 ok, 1 the call / a check failed, 2 bad arguments); a bad command
// line exits 2 and --help exits 0 from within.
int Order(int argc, char** argv);         // order_command.cc
int Watch(int argc, char** argv);         // watch_command.cc
int Load(int argc, char** argv);          // load_command.cc
int Audit(int argc, char** argv);         // audit_command.cc
int Probe(int argc, char** argv);         // probe_command.cc
int Metrics(int argc, char** argv);       // metrics_command.cc
int FaultsCmd(int argc, char** argv);     // faults_command.cc
int StatsCmd(int argc, char** argv);      // stats_command.cc
int Scenarios(int argc, char** argv);     // scenarios_command.cc
int Up(int argc, char** argv);            // up_command.cc
int Command(int argc, char** argv);       // command_command.cc
int DemoCmd(int argc, char** argv);       // demo_command.cc
int OverloadCmd(int argc, char** argv);   // overload_command.cc
int SavedWorkCmd(int argc, char** argv);  // saved_work_command.cc

// One command's flags (as in ABSL_FLAG) and usage: another command's flag
// is refused ("unknown flag"), and --help lists these only.
cli::CommandLine ParseCommand(int argc, char** argv, const std::string& command,
                              const std::string& usage, std::vector<std::string> flags);

// A bad value found after parsing: said like a parse error, exit 2.
int Fail(const std::string& command, const std::string& message);

// The chain --mode, --replica, --seed and the --*-flags describe, its
// ledger's file `db` (topology.h).
ChainSpec ChainFromFlags(std::string db);

// A file's text; "" when it cannot be read (a step that wrote nothing).
std::string ReadFile(const std::string& path);

// One FormatRequestRecord line per request; false (and says so) when the
// file cannot be written.
bool WriteRequests(const std::string& path, const std::vector<RequestRecord>& requests);

}  // namespace hopbudget::chainctl

#endif  // HOPBUDGET_CHAINCTL_COMMANDS_H_
