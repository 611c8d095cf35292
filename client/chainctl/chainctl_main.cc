// Copyright hopbudget authors.
//
// chainctl: drives the demo chain (server/).
//
//   chainctl order   --gateway H:P --budget 800ms [--key K] [--item sku:qty,...]
//   chainctl watch   --gateway H:P --key K [--budget 800ms]   (WatchOrder, message by message)
//   chainctl load    --gateway H:P --rps N --duration D --budget B [--concurrency C]
//                    [--json FILE] [--admin H:P,H:P,H:P] [--requests-out FILE]
//                    [--method place-order|get-order [--read-keys N]]
//   chainctl audit   --db LEDGER.db --requests FILE      (exactly once, by key and content)
//   chainctl probe   --gateway H:P --admin G,O,L         (the client deadline reaches every hop)
//   chainctl metrics --targets H:P,H:P,H:P [--watch] [--json]     (HTTP ports)
//   chainctl faults  --admin H:P [--latency SPEC] [--error-rate P] [--hang P]
//                    [--hang-next N] [--slow-commit D] [--silence[=false]] [--clear]
//   chainctl stats   --admin H:P,H:P,H:P
//   chainctl scenarios --hopbudget G,O,L --baseline G,O,L [--orders N] [--only a,b]
//                    [--hopbudget-requests-out FILE] [--baseline-requests-out FILE]
//
// Exit codes: 0 ok, 1 the call / a check failed, 2 bad arguments.
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "chain.h"
#include "client/cli/cli_flags.h"
#include "inspect.h"
#include "ledger_rows.h"
#include "summary.h"

// Every command's flags (absl flags are one set per binary; each command
// takes the ones ParseCommand lists for it).
ABSL_FLAG(std::string, gateway, "", "gateway HOST:PORT (required)");
ABSL_FLAG(absl::Duration, budget, absl::Milliseconds(800),
          "the client's deadline per call, from its start (probe: default 5s)");
ABSL_FLAG(std::string, key, "", "idempotency key (default: a new one)");
ABSL_FLAG(std::string, item, "sku-1:1", "items, sku[:qty],...");
ABSL_FLAG(double, rps, 50, "calls started per second, 0.1..100000");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(5), "how long to start calls");
ABSL_FLAG(int, concurrency, 256, "calls in flight at most, 1..100000 (more are not sent)");
ABSL_FLAG(std::string, json, "",
          "also write the result as JSON to this file; - (or --json alone) writes it to stdout "
          "instead of the table");
ABSL_FLAG(double, max_error_rate, -1,
          "exit 1 when more than this share of the calls failed (0..1; default: only when "
          "every call failed)");
ABSL_FLAG(std::string, method, "place-order",
          "what each call does: place-order (a new order) or get-order (reads of --read-keys "
          "orders placed first; with --admin=ORDERS the summary shows the hedges orders sent "
          "and the extra load)");
ABSL_FLAG(int, read_keys, 20, "get-order: orders placed first and read round robin, 1..10000");
ABSL_FLAG(std::string, admin, "", "gRPC HOST:PORT,... of the services (Admin service)");
ABSL_FLAG(double, client_throttle, 0,
          "load: 0 (off), or the SRE book's adaptive throttling with this K (>= 1, e.g. 2): "
          "the client refuses calls itself, unsent, so that it sends about K times what the "
          "gateway accepts");
ABSL_FLAG(std::string, key_prefix, "", "idempotency keys are PREFIX-N (default load-<time>)");
ABSL_FLAG(bool, quiet, false,
          "no live progress line (there is none when stderr is not a terminal)");
ABSL_FLAG(std::string, requests_out, "",
          "write every request and its outcome to this file, for `chainctl audit` (each order "
          "then also carries an item ref-<key>)");
ABSL_FLAG(std::string, db, "", "the ledger's SQLite file (required; read only)");
ABSL_FLAG(std::string, requests, "",
          "what `chainctl load --requests-out` (or `scenarios --*-requests-out`) wrote "
          "(required)");
ABSL_FLAG(std::string, targets, "", "HTTP HOST:PORT of each service's /metrics (required)");
ABSL_FLAG(bool, watch, false, "refresh until Ctrl-C");
ABSL_FLAG(absl::Duration, interval, absl::Seconds(2), "refresh interval with --watch");
ABSL_FLAG(std::string, latency, "none",
          "none, fixed:100ms, uniform:50ms-200ms, exp:100ms, spike:5%:1s");
ABSL_FLAG(double, error_rate, 0, "probability of UNAVAILABLE, 0..1");
ABSL_FLAG(double, hang, 0, "probability of hanging until cancelled, 0..1");
ABSL_FLAG(int, hang_next, 0, "the next N calls hang");
ABSL_FLAG(absl::Duration, slow_commit, absl::ZeroDuration(),
          "ledger: each commit first waits this long");
ABSL_FLAG(bool, silence, false,
          "ledger: WatchOrder streams send no message, staying open (--silence=false ends it)");
ABSL_FLAG(bool, clear, false, "start from no faults instead of the current ones");
ABSL_FLAG(std::string, hopbudget, "",
          "the hopbudget chain: GATEWAY,ORDERS,LEDGER gRPC HOST:PORTs (required)");
ABSL_FLAG(std::string, baseline, "",
          "the baseline chain: GATEWAY,ORDERS,LEDGER gRPC HOST:PORTs (required)");
ABSL_FLAG(int, orders, 3, "orders per scenario and mode, 1..100");
ABSL_FLAG(std::string, only, "", "scenarios to run, e.g. a,c (default all: a,b,c,d)");
ABSL_FLAG(std::string, hopbudget_requests_out, "",
          "write the hopbudget chain's orders and outcomes here, for `chainctl audit`");
ABSL_FLAG(std::string, baseline_requests_out, "",
          "write the baseline chain's orders and outcomes here, for `chainctl audit`");

namespace hopbudget::chainctl {
namespace {

constexpr char kUsage[] =
    "usage: chainctl <command> [flags]   (chainctl <command> --help for its flags)\n"
    "  order      place one order; prints the result, the attribution of a failure and\n"
    "             the per-hop budget waterfall\n"
    "  watch      watch one order's status (WatchOrder) through the chain: each message as\n"
    "             it arrives, then how the stream ended and the budget that ended it\n"
    "  load       open-loop load with a summary table (and --json)\n"
    "  metrics    the inspection table of the services' /metrics\n"
    "  faults     change a service's faults at run time (Admin service)\n"
    "  stats      the services' deadline accounting (Admin GetStats; and --json)\n"
    "  audit      check the ledger's rows against the requests `load` or `scenarios` recorded:\n"
    "             each order at most once (by key and by content), each acknowledged once\n"
    "  probe      check that the client deadline header reaches every hop (one order sent\n"
    "             with a deadline already past must be counted late at each of them)\n"
    "  scenarios  replay the seeds' incidents on a baseline and a hopbudget chain\n";

// One command's flags (as in ABSL_FLAG) and usage: another command's flag
// is refused ("unknown flag"), and --help lists these only.
cli::CommandLine ParseCommand(int argc, char** argv, const std::string& command,
                              const std::string& usage, std::vector<std::string> flags) {
  cli::CliOptions options;
  options.program = "chainctl " + command;
  options.usage = usage;
  options.flags = std::move(flags);
  options.value_optional = {"json"};  // --json alone: JSON on stdout
  options.first = 2;
  cli::CommandLine cl = cli::ParseOrExit(argc, argv, options);
  if (!cl.positional.empty()) {
    cli::ExitIfBad(options.program, absl::InvalidArgumentError(absl::StrCat(
                                        "unexpected argument \"", cl.positional[0], "\"")));
  }
  return cl;
}

// A bad value found after parsing: said like a parse error, exit 2.
int Fail(const std::string& command, const std::string& message) {
  cli::ExitIfBad("chainctl " + command, absl::InvalidArgumentError(message));
  return 2;
}

// One FormatRequestRecord line per request; false (and says so) when the
// file cannot be written.
bool WriteRequests(const std::string& path, const std::vector<RequestRecord>& requests) {
  std::ofstream f(path);
  for (const RequestRecord& r : requests) f << FormatRequestRecord(r) << "\n";
  if (!f) std::cerr << "chainctl: cannot write " << path << "\n";
  return static_cast<bool>(f);
}

int Order(int argc, char** argv) {
  ParseCommand(
      argc, argv, "order",
      "chainctl order: place one order; prints the result, the attribution of a "
      "failure and the per-hop budget waterfall.\n\n"
      "  chainctl order --gateway=HOST:PORT [--budget=800ms] [--key=K] [--item=sku:qty,...]",
      {"gateway", "budget", "key", "item"});
  const std::string gateway = absl::GetFlag(FLAGS_gateway);
  const std::string key = absl::GetFlag(FLAGS_key);
  const std::string items_text = absl::GetFlag(FLAGS_item);
  const absl::Duration budget = absl::GetFlag(FLAGS_budget);
  cli::ExitIfBad("chainctl order", cli::FirstError({cli::Required("gateway", gateway),
                                                    cli::Positive("budget", budget)}));
  absl::StatusOr<std::vector<ItemSpec>> items = ParseItems(items_text);
  if (!items.ok()) {
    return Fail("order", absl::StrCat("--item=", items_text, ": ", items.status().message()));
  }
  demo::Order order;
  order.set_key(key.empty() ? absl::StrCat("cli-", absl::ToUnixMicros(absl::Now())) : key);
  for (const ItemSpec& i : *items) {
    demo::Item* it = order.add_items();
    it->set_sku(i.sku);
    it->set_quantity(i.quantity);
  }
  auto stub = demo::Gateway::NewStub(EdgeChannel(gateway));
  OrderOutcome o = PlaceOrder(*stub, order, budget);
  if (o.status.ok()) {
    std::cout << "OK in " << absl::FormatDuration(absl::Trunc(o.latency, absl::Microseconds(10)))
              << ": order_id=" << o.result.order_id() << " key=" << o.result.key()
              << (o.result.replayed() ? " (replayed: this key was committed before)" : "") << "\n";
  } else {
    std::cout << absl::StatusCodeToString(static_cast<absl::StatusCode>(o.status.error_code()))
              << " after " << absl::FormatDuration(absl::Trunc(o.latency, absl::Microseconds(10)))
              << ": " << o.status.error_message() << "\n";
    if (!o.attribution.empty()) std::cout << "attribution: " << o.attribution << "\n";
  }
  if (!o.waterfall.empty()) std::cout << o.waterfall << (o.waterfall.back() == '\n' ? "" : "\n");
  return o.status.ok() ? 0 : 1;
}

std::string Ms(absl::Duration d) {
  return absl::StrFormat("%.1fms", absl::ToDoubleMilliseconds(d));
}

int Watch(int argc, char** argv) {
  ParseCommand(argc, argv, "watch",
               "chainctl watch: watch one order's status through the chain (WatchOrder): prints "
               "each message as it arrives, then the status the stream ended with and its "
               "attribution (the budget that ended it: source, hop, budget, elapsed). A watch "
               "runs until a deadline ends it: exit 0 when that was a whole-call deadline (the "
               "--budget asked, source client, or a hop's request cap, source request), 1 when "
               "anything else ended it (an idle cut, an error, a cancel).\n\n"
               "  chainctl watch --gateway=HOST:PORT --key=K [--budget=800ms]",
               {"gateway", "key", "budget"});
  const std::string gateway = absl::GetFlag(FLAGS_gateway);
  const std::string key = absl::GetFlag(FLAGS_key);
  const absl::Duration budget = absl::GetFlag(FLAGS_budget);
  cli::ExitIfBad("chainctl watch",
                 cli::FirstError({cli::Required("gateway", gateway), cli::Required("key", key),
                                  cli::Positive("budget", budget)}));
  if (key.size() > 128) {
    return Fail("watch", absl::StrCat("--key=", key.substr(0, 16), "...: ", key.size(),
                                      " bytes (an order key has 1..128)"));
  }
  auto stub = demo::Gateway::NewStub(EdgeChannel(gateway));
  WatchOutcome o =
      WatchOrder(*stub, key, budget, [](const demo::OrderStatus& m, absl::Duration at) {
        std::cout << "message " << m.seq() << " after " << Ms(at) << ": "
                  << demo::OrderStatus::State_Name(m.state());
        if (m.state() == demo::OrderStatus::COMMITTED) {
          std::cout << " order_id=" << m.result().order_id();
        }
        std::cout << " key=" << m.key() << std::endl;  // as it arrives
      });
  std::cout << absl::StatusCodeToString(static_cast<absl::StatusCode>(o.status.error_code()))
            << " after " << Ms(o.latency) << ", " << o.messages << " message(s), silent for "
            << Ms(o.silence) << " before the end" << (o.status.error_message().empty() ? "" : ": ")
            << o.status.error_message() << "\n";
  if (!o.attribution.empty()) std::cout << "attribution: " << o.attribution << "\n";
  return WatchLastedItsBudget(o) ? 0 : 1;
}

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

int Audit(int argc, char** argv) {
  ParseCommand(argc, argv, "audit",
               "chainctl audit: check the ledger's rows against the requests `load` or "
               "`scenarios` recorded: each order at most once (by key and by content), each "
               "acknowledged once.\n\n"
               "  chainctl audit --db=LEDGER.db --requests=FILE",
               {"db", "requests"});
  const std::string db = absl::GetFlag(FLAGS_db);
  const std::string requests_path = absl::GetFlag(FLAGS_requests);
  cli::ExitIfBad("chainctl audit", cli::FirstError({cli::Required("db", db),
                                                    cli::Required("requests", requests_path)}));
  std::ifstream in(requests_path);
  if (!in) {
    std::cerr << "chainctl: cannot read " << requests_path << "\n";
    return 1;
  }
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<std::vector<RequestRecord>> requests = ParseRequestRecords(text.str());
  if (!requests.ok()) {
    std::cerr << "chainctl: " << requests_path << ": " << requests.status().message() << "\n";
    return 2;
  }
  absl::StatusOr<std::vector<LedgerRow>> rows = ReadLedgerRows(db);
  if (!rows.ok()) {
    std::cerr << "chainctl: " << rows.status().message() << "\n";
    return 1;
  }
  absl::StatusOr<AuditResult> a = AuditExactlyOnce(*requests, *rows);
  if (!a.ok()) {
    std::cerr << "chainctl: " << requests_path << ": " << a.status().message() << "\n";
    return 2;
  }
  std::cout << FormatAudit(*a) << "\n";
  return a->violations.empty() ? 0 : 1;
}

int Probe(int argc, char** argv) {
  cli::CommandLine cl = ParseCommand(
      argc, argv, "probe",
      "chainctl probe: check that the client deadline header reaches every hop (one order "
      "sent with a deadline already past must be counted late at each of them).\n\n"
      "  chainctl probe --gateway=HOST:PORT --admin=GATEWAY,ORDERS,LEDGER [--budget=5s]",
      {"gateway", "admin", "budget"});
  const std::string gateway = absl::GetFlag(FLAGS_gateway);
  const std::string admin = absl::GetFlag(FLAGS_admin);
  // The probe order's real (gRPC) deadline: long, it must reach every hop.
  const absl::Duration budget =
      cl.WasSet("budget") ? absl::GetFlag(FLAGS_budget) : absl::Seconds(5);
  cli::ExitIfBad("chainctl probe",
                 cli::FirstError({cli::Required("gateway", gateway), cli::Required("admin", admin),
                                  cli::Positive("budget", budget)}));
  absl::StatusOr<std::vector<std::string>> targets = ParseTargetList(admin);
  if (!targets.ok()) {
    return Fail("probe", absl::StrCat("--admin=", admin, ": ", targets.status().message()));
  }
  absl::StatusOr<ProbeResult> r = ProbeClientDeadline(gateway, *targets, budget);
  if (!r.ok()) {
    std::cerr << "chainctl: " << r.status().message() << "\n";
    return 1;
  }
  std::cout << r->report;
  return r->ok ? 0 : 1;
}

int Metrics(int argc, char** argv) {
  cli::CommandLine cl =
      ParseCommand(argc, argv, "metrics",
                   "chainctl metrics: the inspection table of the services' /metrics.\n\n"
                   "  chainctl metrics --targets=H:P,H:P,H:P [--watch [--interval=2s]] [--json]",
                   {"targets", "watch", "json", "interval"});
  const std::string targets = absl::GetFlag(FLAGS_targets);
  const std::string json = absl::GetFlag(FLAGS_json);
  cli::ExitIfBad("chainctl metrics",
                 cli::FirstError({cli::Required("targets", targets),
                                  cli::Positive("interval", absl::GetFlag(FLAGS_interval))}));
  if (cl.WasSet("json") && json != "-") {
    return Fail("metrics", absl::StrCat("--json=", json,
                                        ": metrics writes JSON to stdout only "
                                        "(--json or --json=-)"));
  }
  inspect::InspectOptions options;
  options.targets = absl::StrSplit(targets, ',');
  options.watch = absl::GetFlag(FLAGS_watch);
  options.json = cl.WasSet("json");
  options.interval = absl::GetFlag(FLAGS_interval);
  options.terminal = isatty(STDOUT_FILENO) == 1;
  return inspect::RunInspect(options, std::cout, std::cerr);
}

int FaultsCmd(int argc, char** argv) {
  cli::CommandLine cl = ParseCommand(
      argc, argv, "faults",
      "chainctl faults: change a service's faults at run time (Admin service); flags not given "
      "keep their current value (--clear: start from none).\n\n"
      "  chainctl faults --admin=HOST:PORT [--latency=SPEC] [--error-rate=P] [--hang=P] "
      "[--hang-next=N] [--slow-commit=D] [--silence[=false]] [--clear]",
      {"admin", "latency", "error_rate", "hang", "hang_next", "slow_commit", "silence", "clear"});
  const std::string admin = absl::GetFlag(FLAGS_admin);
  const std::string latency = absl::GetFlag(FLAGS_latency);
  cli::ExitIfBad("chainctl faults",
                 cli::FirstError({
                     cli::Required("admin", admin),
                     cli::InRange("error-rate", absl::GetFlag(FLAGS_error_rate), 0.0, 1.0),
                     cli::InRange("hang", absl::GetFlag(FLAGS_hang), 0.0, 1.0),
                     cli::InRange("hang-next", absl::GetFlag(FLAGS_hang_next), 0, 1 << 30),
                     cli::NonNegative("slow-commit", absl::GetFlag(FLAGS_slow_commit)),
                 }));
  demo::Faults f;
  f.set_latency("none");
  if (!absl::GetFlag(FLAGS_clear)) {
    absl::StatusOr<demo::Faults> current = GetFaults(admin);
    if (!current.ok()) {
      std::cerr << "chainctl: " << current.status() << "\n";
      return 1;
    }
    f = *current;
  }
  if (cl.WasSet("latency")) f.set_latency(latency);
  if (cl.WasSet("error_rate")) f.set_error_rate(absl::GetFlag(FLAGS_error_rate));
  if (cl.WasSet("hang")) f.set_hang_rate(absl::GetFlag(FLAGS_hang));
  if (cl.WasSet("hang_next")) f.set_hang_next(absl::GetFlag(FLAGS_hang_next));
  if (cl.WasSet("slow_commit")) {
    f.set_slow_commit_ms(absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_slow_commit)));
  }
  if (cl.WasSet("silence")) f.set_silence(absl::GetFlag(FLAGS_silence));
  absl::StatusOr<demo::Faults> now = SetFaults(admin, f);
  if (!now.ok()) {
    std::cerr << "chainctl: " << now.status() << "\n";
    return now.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  std::cout << admin << ": latency=" << now->latency() << " error_rate=" << now->error_rate()
            << " hang_rate=" << now->hang_rate() << " hang_next=" << now->hang_next()
            << " slow_commit_ms=" << now->slow_commit_ms()
            << " silence=" << (now->silence() ? "true" : "false") << "\n";
  return 0;
}

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

absl::StatusOr<ChainTargets> ParseChain(const std::string& text) {
  absl::StatusOr<std::vector<std::string>> t = ParseTargetList(text);
  if (!t.ok()) return t.status();
  if (t->size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("want 3 targets GATEWAY,ORDERS,LEDGER (gRPC ports), got ", t->size()));
  }
  return ChainTargets{(*t)[0], (*t)[1], (*t)[2]};
}

int Scenarios(int argc, char** argv) {
  ParseCommand(argc, argv, "scenarios",
               "chainctl scenarios: replay the seeds' incidents on a baseline and a hopbudget "
               "chain, side by side.\n\n"
               "  chainctl scenarios --hopbudget=G,O,L --baseline=G,O,L [--orders=N] [--only=a,b]",
               {"hopbudget", "baseline", "orders", "only", "hopbudget_requests_out",
                "baseline_requests_out"});
  const std::string hop = absl::GetFlag(FLAGS_hopbudget);
  const std::string base = absl::GetFlag(FLAGS_baseline);
  const std::string only = absl::GetFlag(FLAGS_only);
  const std::string hop_requests_path = absl::GetFlag(FLAGS_hopbudget_requests_out);
  const std::string base_requests_path = absl::GetFlag(FLAGS_baseline_requests_out);
  ScenarioOptions o;
  o.orders_per_scenario = absl::GetFlag(FLAGS_orders);
  cli::ExitIfBad("chainctl scenarios", cli::InRange("orders", o.orders_per_scenario, 1, 100));
  absl::StatusOr<ChainTargets> h = ParseChain(hop);
  if (!h.ok())
    return Fail("scenarios", absl::StrCat("--hopbudget=", hop, ": ", h.status().message()));
  absl::StatusOr<ChainTargets> b = ParseChain(base);
  if (!b.ok())
    return Fail("scenarios", absl::StrCat("--baseline=", base, ": ", b.status().message()));
  o.hopbudget = *h;
  o.baseline = *b;
  if (!only.empty()) {
    o.only = absl::StrSplit(only, ',');
    for (const std::string& x : o.only) {
      if (x != "a" && x != "b" && x != "c" && x != "d") {
        return Fail("scenarios", absl::StrCat("--only=", only, ": letters a..d"));
      }
    }
  }
  std::vector<RequestRecord> hop_requests, base_requests;
  if (!hop_requests_path.empty()) o.hopbudget_requests = &hop_requests;
  if (!base_requests_path.empty()) o.baseline_requests = &base_requests;
  const int rc = RunScenarios(o, std::cout);
  for (const auto& [path, requests] : {std::make_pair(hop_requests_path, &hop_requests),
                                       std::make_pair(base_requests_path, &base_requests)}) {
    if (path.empty()) continue;
    if (!WriteRequests(path, *requests)) return 1;
  }
  return rc;
}

int Main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << kUsage;
    return 2;
  }
  const std::string cmd = argv[1];
  if (cmd == "order") return Order(argc, argv);
  if (cmd == "watch") return Watch(argc, argv);
  if (cmd == "load") return Load(argc, argv);
  if (cmd == "metrics") return Metrics(argc, argv);
  if (cmd == "faults") return FaultsCmd(argc, argv);
  if (cmd == "stats") return StatsCmd(argc, argv);
  if (cmd == "scenarios") return Scenarios(argc, argv);
  if (cmd == "audit") return Audit(argc, argv);
  if (cmd == "probe") return Probe(argc, argv);
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    std::cout << kUsage;
    return 0;
  }
  std::cerr << "chainctl: unknown command \"" << cmd << "\"\n" << kUsage;
  return 2;
}

}  // namespace
}  // namespace hopbudget::chainctl

int main(int argc, char** argv) { return hopbudget::chainctl::Main(argc, argv); }
