// Copyright hopbudget authors.
//
// chainctl load: open-loop load against the gateway, with a summary table (and
// --json); can record every request for `chainctl audit`.
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "chain.h"
#include "commands.h"
#include "summary.h"

ABSL_FLAG(double, rps, 50, "calls started per second, 0.1..100000");
ABSL_FLAG(int, concurrency, 256, "calls in flight at most, 1..100000 (more are not sent)");
ABSL_FLAG(double, max_error_rate, -1,
          "exit 1 when more than this share of the calls failed (0..1; default: only when "
          "every call failed)");
ABSL_FLAG(std::string, method, "place-order",
          "what each call does: place-order (a new order) or get-order (reads of --read-keys "
          "orders placed first; with --admin=ORDERS the summary shows the hedges orders sent "
          "and the extra load)");
ABSL_FLAG(int, read_keys, 20, "get-order: orders placed first and read round robin, 1..10000");
ABSL_FLAG(std::string, key_prefix, "", "idempotency keys are PREFIX-N (default load-<time>)");
ABSL_FLAG(bool, quiet, false,
          "no live progress line (there is none when stderr is not a terminal)");
ABSL_FLAG(std::string, requests_out, "",
          "write every request and its outcome to this file, for `chainctl audit` (each order "
          "then also carries an item ref-<key>)");

namespace hopbudget::chainctl {

int Load(int argc, char** argv) {
  ParseCommand(
      argc, argv, "load",
      "chainctl load: open-loop load with a summary table (and --json).\n\n"
      "  chainctl load --gateway=HOST:PORT --rps=N --duration=D --budget=B "
      "[--concurrency=C] [--json=FILE|-] [--admin=H:P,...] [--requests-out=FILE] "
      "[--method=place-order|get-order [--read-keys=N]] [--client-throttle=K]",
      {"gateway", "rps", "duration", "budget", "concurrency", "json", "max_error_rate", "admin",
       "item", "key_prefix", "quiet", "requests_out", "method", "read_keys", "client_throttle"});
  LoadOptions o;
  o.gateway = absl::GetFlag(FLAGS_gateway);
  o.rps = absl::GetFlag(FLAGS_rps);
  o.duration = absl::GetFlag(FLAGS_duration);
  o.budget = absl::GetFlag(FLAGS_budget);
  o.concurrency = absl::GetFlag(FLAGS_concurrency);
  o.key_prefix = absl::GetFlag(FLAGS_key_prefix);
  const std::string json_path = absl::GetFlag(FLAGS_json);
  const double max_error_rate = absl::GetFlag(FLAGS_max_error_rate);
  const std::string admin = absl::GetFlag(FLAGS_admin);
  const std::string items_text = absl::GetFlag(FLAGS_item);
  const bool quiet = absl::GetFlag(FLAGS_quiet);
  const std::string requests_path = absl::GetFlag(FLAGS_requests_out);
  const std::string method = absl::GetFlag(FLAGS_method);
  o.read_keys = absl::GetFlag(FLAGS_read_keys);
  absl::StatusOr<absl::optional<ClientThrottlePolicy>> throttle =
      LoadClientThrottle(absl::GetFlag(FLAGS_client_throttle));
  if (!throttle.ok()) return Fail("load", std::string(throttle.status().message()));
  o.client_throttle = *throttle;
  if (method == "get-order") {
    o.method = LoadMethod::kGetOrder;
  } else if (method != "place-order") {
    return Fail("load", absl::StrCat("--method=", method, ": place-order or get-order"));
  }
  if (o.method == LoadMethod::kGetOrder && !requests_path.empty()) {
    return Fail("load", "--requests-out: records orders placed; get-order only reads");
  }
  cli::ExitIfBad(
      "chainctl load",
      cli::FirstError({
          cli::Required("gateway", o.gateway),
          cli::InRange("rps", o.rps, 0.1, 100000.0),
          cli::Positive("duration", o.duration),
          cli::Positive("budget", o.budget),
          cli::InRange("concurrency", o.concurrency, 1, 100000),
          cli::InRange("read-keys", o.read_keys, 1, 10000),
          max_error_rate == -1 ? absl::OkStatus()
                               : cli::InRange("max-error-rate", max_error_rate, 0.0, 1.0),
      }));
  if (!admin.empty()) {
    absl::StatusOr<std::vector<std::string>> t = ParseTargetList(admin);
    if (!t.ok()) return Fail("load", absl::StrCat("--admin=", admin, ": ", t.status().message()));
    o.admin = *t;
  }
  absl::StatusOr<std::vector<ItemSpec>> items = ParseItems(items_text);
  if (!items.ok()) {
    return Fail("load", absl::StrCat("--item=", items_text, ": ", items.status().message()));
  }
  o.items = *items;
  o.progress = !quiet && isatty(STDERR_FILENO) == 1;
  if (o.key_prefix.find_first_of("\t\n\r") != std::string::npos) {
    return Fail("load", "--key-prefix: no tabs or newlines");
  }
  // Output files are opened before the run: a path that cannot be written
  // is said at once, not after the whole load.
  const bool json_to_stdout = json_path == "-";
  std::ofstream json_file;
  if (!json_path.empty() && !json_to_stdout) {
    json_file.open(json_path);
    if (!json_file) return Fail("load", absl::StrCat("--json=", json_path, ": cannot write it"));
  }
  if (!requests_path.empty()) {
    std::ofstream probe(requests_path);
    if (!probe) {
      return Fail("load", absl::StrCat("--requests-out=", requests_path, ": cannot write it"));
    }
  }
  std::vector<RequestRecord> requests;
  if (!requests_path.empty()) o.requests = &requests;
  absl::StatusOr<LoadSummary> s = RunLoad(o, std::cerr);
  if (!s.ok()) {
    std::cerr << "chainctl: " << s.status() << "\n";
    return 1;
  }
  if (json_to_stdout) {
    std::cout << FormatSummaryJson(*s) << "\n";  // and nothing else on stdout
  } else {
    std::cout << FormatSummaryTable(*s);
  }
  if (json_file.is_open()) {
    json_file << FormatSummaryJson(*s) << "\n";
    if (!json_file) {
      std::cerr << "chainctl: cannot write " << json_path << "\n";
      return 1;
    }
  }
  if (!requests_path.empty() && !WriteRequests(requests_path, requests)) return 1;
  if (LoadFailed(*s, max_error_rate)) {
    std::cerr << "chainctl: " << s->sent - s->ok << " of " << s->sent << " calls failed ("
              << absl::StrFormat("%.1f %%", s->error_rate * 100) << ")\n";
    return 1;
  }
  return 0;
}

}  // namespace hopbudget::chainctl
