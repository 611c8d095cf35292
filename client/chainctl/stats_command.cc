// Copyright hopbudget authors.
//
// chainctl stats: the services' deadline accounting (Admin GetStats; and --json).
#include <cstdint>
#include <fstream>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "chain.h"
#include "commands.h"
#include "summary.h"

namespace hopbudget::chainctl {

int StatsCmd(int argc, char** argv) {
  ParseCommand(argc, argv, "stats",
               "chainctl stats: the services' deadline accounting (Admin GetStats).\n\n"
               "  chainctl stats --admin=H:P,H:P,H:P [--json=FILE|-]",
               {"admin", "json"});
  const std::string admin = absl::GetFlag(FLAGS_admin);
  const std::string json_path = absl::GetFlag(FLAGS_json);
  cli::ExitIfBad("chainctl stats", cli::Required("admin", admin));
  absl::StatusOr<std::vector<std::string>> targets = ParseTargetList(admin);
  if (!targets.ok()) {
    return Fail("stats", absl::StrCat("--admin=", admin, ": ", targets.status().message()));
  }
  // The JSON file is opened before any call: a path that cannot be written
  // is said at once.
  const bool json_to_stdout = json_path == "-";
  std::ofstream json_file;
  if (!json_path.empty() && !json_to_stdout) {
    json_file.open(json_path);
    if (!json_file) return Fail("stats", absl::StrCat("--json=", json_path, ": cannot write it"));
  }
  int rc = 0;
  std::vector<std::pair<std::string, absl::StatusOr<demo::Stats>>> rows;
  for (const std::string& t : *targets) {
    absl::StatusOr<demo::Stats> s = GetStats(t);
    rows.emplace_back(t, s);
    if (json_to_stdout) {
      if (!s.ok()) rc = 1;
      continue;  // stdout carries the JSON and nothing else
    }
    if (!s.ok()) {
      std::cerr << "chainctl: " << s.status() << "\n";
      rc = 1;
      continue;
    }
    std::cout << t << " " << s->hop() << " (" << s->mode() << "): calls " << s->calls()
              << ", started after deadline " << s->calls_started_after_deadline()
              << ", work after deadline " << static_cast<int64_t>(s->work_after_deadline_ms())
              << " ms, retries received " << s->retries_received() << ", commits " << s->commits()
              << ", replays " << s->replays() << ", stopped at bound " << s->commits_stopped()
              << ", in flight " << s->in_flight() << "\n";
  }
  if (json_to_stdout) {
    std::cout << FormatStatsJson(rows);
    for (const auto& [t, s] : rows) {
      if (!s.ok()) std::cerr << "chainctl: " << t << ": " << s.status() << "\n";
    }
  }
  if (json_file.is_open()) {
    json_file << FormatStatsJson(rows);
    if (!json_file.flush()) {
      std::cerr << "chainctl: cannot write " << json_path << "\n";
      return 1;
    }
  }
  return rc;
}

}  // namespace hopbudget::chainctl
