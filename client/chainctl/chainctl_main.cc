// Copyright hopbudget authors.
//
// chainctl: drives the demo chain (server/).
//
//   chainctl order   --gateway H:P --budget 800ms [--key K] [--item sku:qty,...]
//   chainctl load    --gateway H:P --rps N --duration D --budget B [--concurrency C]
//                    [--json FILE] [--admin H:P,H:P,H:P] [--requests-out FILE]
//   chainctl audit   --db LEDGER.db --requests FILE      (exactly once, by key and content)
//   chainctl probe   --gateway H:P --admin G,O,L         (the client deadline reaches every hop)
//   chainctl metrics --targets H:P,H:P,H:P [--watch] [--json]     (HTTP ports)
//   chainctl faults  --admin H:P [--latency SPEC] [--error-rate P] [--hang P]
//                    [--hang-next N] [--slow-commit D] [--clear]
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

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "chain.h"
#include "ledger_rows.h"
#include "server/common/faults.h"
#include "server/common/flags.h"
#include "summary.h"

#include "inspect.h"

namespace hopbudget::chainctl {
namespace {

using demo::FlagSet;

constexpr char kUsage[] =
    "usage: chainctl <command> [flags]   (chainctl <command> --help for its flags)\n"
    "  order      place one order; prints the result, the attribution of a failure and\n"
    "             the per-hop budget waterfall\n"
    "  load       open-loop load with a summary table (and --json)\n"
    "  metrics    the inspection table of the services' /metrics\n"
    "  faults     change a service's faults at run time (Admin service)\n"
    "  stats      the services' deadline accounting (Admin GetStats)\n"
    "  audit      check the ledger's rows against the requests `load` or `scenarios` recorded:\n"
    "             each order at most once (by key and by content), each acknowledged once\n"
    "  probe      check that the client deadline header reaches every hop (one order sent\n"
    "             with a deadline already past must be counted late at each of them)\n"
    "  scenarios  replay the seeds' incidents on a baseline and a hopbudget chain\n";

// Parses flags; on error prints it with the usage. Returns 2 on error, -1 on
// --help (exit 0), 0 to go on.
int ParseOrExit(FlagSet& flags, int argc, char** argv) {
  bool help = false;
  flags.Bool("help", &help, "show this help");
  absl::Status s = flags.Parse(argc, argv, 2);
  if (!s.ok()) {
    std::cerr << "chainctl: " << s.message() << "\n" << flags.Usage();
    return 2;
  }
  if (help) {
    std::cout << flags.Usage();
    return -1;
  }
  return 0;
}

int Fail(const FlagSet& flags, const std::string& message) {
  std::cerr << "chainctl: " << message << "\n" << flags.Usage();
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
  FlagSet flags("chainctl order");
  std::string gateway, key, items_text = "sku-1:1";
  absl::Duration budget = absl::Milliseconds(800);
  flags.String("gateway", &gateway, "gateway HOST:PORT (required)");
  flags.Duration("budget", &budget, "the client's deadline, from now");
  flags.String("key", &key, "idempotency key (default: a new one)");
  flags.String("item", &items_text, "items, sku[:qty],...");
  if (int rc = ParseOrExit(flags, argc, argv); rc != 0) return rc < 0 ? 0 : rc;
  if (gateway.empty()) return Fail(flags, "--gateway is required");
  if (budget <= absl::ZeroDuration()) return Fail(flags, "--budget must be > 0");
  absl::StatusOr<std::vector<ItemSpec>> items = ParseItems(items_text);
  if (!items.ok()) return Fail(flags, absl::StrCat("--item: ", items.status().message()));
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
              << (o.result.replayed() ? " (replayed: this key was committed before)" : "")
              << "\n";
  } else {
    std::cout << absl::StatusCodeToString(static_cast<absl::StatusCode>(o.status.error_code()))
              << " after " << absl::FormatDuration(absl::Trunc(o.latency, absl::Microseconds(10)))
              << ": " << o.status.error_message() << "\n";
    if (!o.attribution.empty()) std::cout << "attribution: " << o.attribution << "\n";
  }
  if (!o.waterfall.empty()) std::cout << o.waterfall << (o.waterfall.back() == '\n' ? "" : "\n");
  return o.status.ok() ? 0 : 1;
}

int Load(int argc, char** argv) {
  FlagSet flags("chainctl load");
  LoadOptions o;
  std::string json_path, admin, items_text = "sku-1:1";
  bool quiet = false;
  flags.String("gateway", &o.gateway, "gateway HOST:PORT (required)");
  flags.Double("rps", &o.rps, "calls started per second", 0.1, 100000);
  flags.Duration("duration", &o.duration, "how long to start calls");
  flags.Duration("budget", &o.budget, "each call's deadline");
  flags.Int("concurrency", &o.concurrency, "calls in flight at most (more are not sent)", 1, 100000);
  flags.String("json", &json_path,
               "also write the summary as JSON to this file; - writes it to stdout instead of "
               "the table");
  double max_error_rate = -1;
  flags.Double("max-error-rate", &max_error_rate,
               "exit 1 when more than this share of the calls failed (0..1; default: only when "
               "every call failed)",
               0, 1);
  flags.String("admin", &admin, "gRPC HOST:PORT of the services, for their accounting");
  flags.String("item", &items_text, "items, sku[:qty],...");
  flags.String("key-prefix", &o.key_prefix, "idempotency keys are PREFIX-N (default load-<time>)");
  flags.Bool("quiet", &quiet, "no live progress line (there is none when stderr is not a terminal)");
  std::string requests_path;
  flags.String("requests-out", &requests_path,
               "write every request and its outcome to this file, for `chainctl audit` "
               "(each order then also carries an item ref-<key>)");
  if (int rc = ParseOrExit(flags, argc, argv); rc != 0) return rc < 0 ? 0 : rc;
  if (o.gateway.empty()) return Fail(flags, "--gateway is required");
  if (o.budget <= absl::ZeroDuration()) return Fail(flags, "--budget must be > 0");
  if (o.duration <= absl::ZeroDuration()) return Fail(flags, "--duration must be > 0");
  if (!admin.empty()) {
    absl::StatusOr<std::vector<std::string>> t = ParseTargetList(admin);
    if (!t.ok()) return Fail(flags, absl::StrCat("--admin: ", t.status().message()));
    o.admin = *t;
  }
  absl::StatusOr<std::vector<ItemSpec>> items = ParseItems(items_text);
  if (!items.ok()) return Fail(flags, absl::StrCat("--item: ", items.status().message()));
  o.items = *items;
  o.progress = !quiet && isatty(STDERR_FILENO) == 1;
  if (o.key_prefix.find_first_of("\t\n\r") != std::string::npos) {
    return Fail(flags, "--key-prefix: no tabs or newlines");
  }
  // Output files are opened before the run: a path that cannot be written
  // is said at once, not after the whole load.
  const bool json_to_stdout = json_path == "-";
  std::ofstream json_file;
  if (!json_path.empty() && !json_to_stdout) {
    json_file.open(json_path);
    if (!json_file) return Fail(flags, absl::StrCat("--json: cannot write ", json_path));
  }
  if (!requests_path.empty()) {
    std::ofstream probe(requests_path);
    if (!probe) return Fail(flags, absl::StrCat("--requests-out: cannot write ", requests_path));
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
  FlagSet flags("chainctl audit");
  std::string db, requests_path;
  flags.String("db", &db, "the ledger's SQLite file (required; read only)");
  flags.String("requests", &requests_path,
               "what `chainctl load --requests-out` (or `scenarios --*-requests-out`) wrote "
               "(required)");
  if (int rc = ParseOrExit(flags, argc, argv); rc != 0) return rc < 0 ? 0 : rc;
  if (db.empty()) return Fail(flags, "--db is required");
  if (requests_path.empty()) return Fail(flags, "--requests is required");
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
  FlagSet flags("chainctl probe");
  std::string gateway, admin;
  absl::Duration budget = absl::Seconds(5);
  flags.String("gateway", &gateway, "gateway HOST:PORT (required)");
  flags.String("admin", &admin, "gRPC HOST:PORT of every process of the chain (required)");
  flags.Duration("budget", &budget, "the probe order's real (gRPC) deadline, from now");
  if (int rc = ParseOrExit(flags, argc, argv); rc != 0) return rc < 0 ? 0 : rc;
  if (gateway.empty()) return Fail(flags, "--gateway is required");
  if (budget <= absl::ZeroDuration()) return Fail(flags, "--budget must be > 0");
  absl::StatusOr<std::vector<std::string>> targets = ParseTargetList(admin);
  if (!targets.ok()) return Fail(flags, absl::StrCat("--admin: ", targets.status().message()));
  absl::StatusOr<ProbeResult> r = ProbeClientDeadline(gateway, *targets, budget);
  if (!r.ok()) {
    std::cerr << "chainctl: " << r.status().message() << "\n";
    return 1;
  }
  std::cout << r->report;
  return r->ok ? 0 : 1;
}

int Metrics(int argc, char** argv) {
  FlagSet flags("chainctl metrics");
  std::string targets;
  bool watch = false, json = false;
  absl::Duration interval = absl::Seconds(2);
  flags.String("targets", &targets, "HTTP HOST:PORT of each service's /metrics (required)");
  flags.Bool("watch", &watch, "refresh until Ctrl-C");
  flags.Bool("json", &json, "JSON instead of the table");
  flags.Duration("interval", &interval, "refresh interval with --watch");
  if (int rc = ParseOrExit(flags, argc, argv); rc != 0) return rc < 0 ? 0 : rc;
  if (targets.empty()) return Fail(flags, "--targets is required");
  inspect::InspectOptions options;
  options.targets = absl::StrSplit(targets, ',');
  options.watch = watch;
  options.json = json;
  options.interval = interval;
  return inspect::RunInspect(options, std::cout, std::cerr);
}

int FaultsCmd(int argc, char** argv) {
  FlagSet flags("chainctl faults");
  std::string admin, latency, error_rate, hang, hang_next, slow_commit;
  bool clear = false;
  flags.String("admin", &admin, "gRPC HOST:PORT of the service (required)");
  flags.String("latency", &latency, "none, fixed:100ms, uniform:50ms-200ms, exp:100ms");
  flags.String("error-rate", &error_rate, "probability of UNAVAILABLE");
  flags.String("hang", &hang, "probability of hanging until cancelled");
  flags.String("hang-next", &hang_next, "the next N calls hang");
  flags.String("slow-commit", &slow_commit, "ledger: each commit first waits this long");
  flags.Bool("clear", &clear, "start from no faults instead of the current ones");
  if (int rc = ParseOrExit(flags, argc, argv); rc != 0) return rc < 0 ? 0 : rc;
  if (admin.empty()) return Fail(flags, "--admin is required");
  demo::Faults f;
  f.set_latency("none");
  if (!clear) {
    absl::StatusOr<demo::Faults> current = GetFaults(admin);
    if (!current.ok()) {
      std::cerr << "chainctl: " << current.status() << "\n";
      return 1;
    }
    f = *current;
  }
  if (flags.WasSet("latency")) {
    if (absl::Status s = demo::ParseLatencySpec(latency).status(); !s.ok()) {
      return Fail(flags, absl::StrCat("--latency: ", s.message()));
    }
    f.set_latency(latency);
  }
  if (flags.WasSet("error-rate")) {
    absl::StatusOr<double> p = demo::ParseProbability(error_rate);
    if (!p.ok()) return Fail(flags, absl::StrCat("--error-rate: ", p.status().message()));
    f.set_error_rate(*p);
  }
  if (flags.WasSet("hang")) {
    absl::StatusOr<double> p = demo::ParseProbability(hang);
    if (!p.ok()) return Fail(flags, absl::StrCat("--hang: ", p.status().message()));
    f.set_hang_rate(*p);
  }
  if (flags.WasSet("hang-next")) {
    int n = 0;
    if (!absl::SimpleAtoi(hang_next, &n) || n < 0) return Fail(flags, "--hang-next: want N >= 0");
    f.set_hang_next(n);
  }
  if (flags.WasSet("slow-commit")) {
    absl::StatusOr<absl::Duration> d = demo::ParseDuration(slow_commit);
    if (!d.ok()) return Fail(flags, absl::StrCat("--slow-commit: ", d.status().message()));
    f.set_slow_commit_ms(absl::ToInt64Milliseconds(*d));
  }
  absl::StatusOr<demo::Faults> now = SetFaults(admin, f);
  if (!now.ok()) {
    std::cerr << "chainctl: " << now.status() << "\n";
    return now.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  std::cout << admin << ": latency=" << now->latency() << " error_rate=" << now->error_rate()
            << " hang_rate=" << now->hang_rate() << " hang_next=" << now->hang_next()
            << " slow_commit_ms=" << now->slow_commit_ms() << "\n";
  return 0;
}

int StatsCmd(int argc, char** argv) {
  FlagSet flags("chainctl stats");
  std::string admin;
  flags.String("admin", &admin, "gRPC HOST:PORT,... of the services (required)");
  if (int rc = ParseOrExit(flags, argc, argv); rc != 0) return rc < 0 ? 0 : rc;
  absl::StatusOr<std::vector<std::string>> targets = ParseTargetList(admin);
  if (!targets.ok()) return Fail(flags, absl::StrCat("--admin: ", targets.status().message()));
  int rc = 0;
  for (const std::string& t : *targets) {
    absl::StatusOr<demo::Stats> s = GetStats(t);
    if (!s.ok()) {
      std::cerr << "chainctl: " << s.status() << "\n";
      rc = 1;
      continue;
    }
    std::cout << t << " " << s->hop() << " (" << s->mode() << "): calls " << s->calls()
              << ", started after deadline " << s->calls_started_after_deadline()
              << ", work after deadline " << static_cast<int64_t>(s->work_after_deadline_ms())
              << " ms, retries received " << s->retries_received() << ", commits "
              << s->commits() << ", replays " << s->replays() << ", stopped at bound "
              << s->commits_stopped() << ", in flight " << s->in_flight() << "\n";
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
  FlagSet flags("chainctl scenarios");
  std::string hop, base, only;
  ScenarioOptions o;
  flags.String("hopbudget", &hop, "the hopbudget chain: GATEWAY,ORDERS,LEDGER gRPC HOST:PORTs (required)");
  flags.String("baseline", &base, "the baseline chain: GATEWAY,ORDERS,LEDGER gRPC HOST:PORTs (required)");
  flags.Int("orders", &o.orders_per_scenario, "orders per scenario and mode", 1, 100);
  flags.String("only", &only, "scenarios to run, e.g. a,c (default all: a,b,c,d)");
  std::string hop_requests_path, base_requests_path;
  flags.String("hopbudget-requests-out", &hop_requests_path,
               "write the hopbudget chain's orders and outcomes here, for `chainctl audit`");
  flags.String("baseline-requests-out", &base_requests_path,
               "write the baseline chain's orders and outcomes here, for `chainctl audit`");
  if (int rc = ParseOrExit(flags, argc, argv); rc != 0) return rc < 0 ? 0 : rc;
  absl::StatusOr<ChainTargets> h = ParseChain(hop);
  if (!h.ok()) return Fail(flags, absl::StrCat("--hopbudget: ", h.status().message()));
  absl::StatusOr<ChainTargets> b = ParseChain(base);
  if (!b.ok()) return Fail(flags, absl::StrCat("--baseline: ", b.status().message()));
  o.hopbudget = *h;
  o.baseline = *b;
  if (!only.empty()) {
    o.only = absl::StrSplit(only, ',');
    for (const std::string& s : o.only) {
      if (s != "a" && s != "b" && s != "c" && s != "d") return Fail(flags, "--only: letters a..d");
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
