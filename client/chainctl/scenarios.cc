// Copyright hopbudget authors.
//
// The seeds' incidents, each replayed on the baseline chain (constant
// timeouts per hop, a naive retry loop, an unbounded commit) and on the
// hopbudget chain, with the numbers side by side.
#include <algorithm>
#include <functional>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "chain.h"
#include "summary.h"

namespace hopbudget::chainctl {
namespace {

struct ModeResult {
  bool setup_ok = true;
  std::string setup_error;
  int ok = 0;
  int errors = 0;
  std::vector<ErrorSeen> errors_seen;
  std::vector<double> latencies_ms;
  int64_t retries = 0;
  int64_t commits = 0;          // rows written by the ledger
  int64_t commits_stopped = 0;  // stopped at the shield bound
  int64_t commits_joined = 0;   // retries that joined the commit of their key in flight
  int64_t started_late = 0;
  double work_after_ms = 0;
  double ledger_work_after_ms = 0;
  std::map<std::string, double> stop_lag_ms;  // hop -> worst (scenario d)
  std::string waterfall;                      // of the first order, when traced
};

struct Scenario {
  std::string letter;
  std::string title;
  std::string what;  // one line: the setup
  std::string why;   // one line: what it shows, and why the numbers differ between the modes
  absl::Duration budget = absl::Milliseconds(800);
  absl::optional<absl::Duration> cancel_after;
  absl::Duration settle = absl::Milliseconds(1500);
  // Faults per hop (gateway, orders, ledger), set before the orders.
  std::function<void(int n, demo::Faults& gateway, demo::Faults& orders, demo::Faults& ledger)>
      faults;
};

// One scenario order's items; with `reference`, an item naming the order
// too, so that an audit can find its row by content (WithOrderReference).
std::vector<ItemSpec> ItemsOf(const std::string& key, bool reference) {
  const std::vector<ItemSpec> items = {{"sku-1", 1}};
  return reference ? WithOrderReference(items, key) : items;
}

ModeResult RunMode(const ChainTargets& t, const Scenario& sc, const std::string& mode, int n,
                   std::vector<RequestRecord>* requests) {
  ModeResult r;
  const std::vector<std::string> admins = {t.gateway, t.orders, t.ledger};
  demo::Faults f[3];
  for (auto& x : f) x.set_latency("none");
  sc.faults(n, f[0], f[1], f[2]);
  for (int k = 0; k < 3; ++k) {
    absl::StatusOr<demo::Stats> s = GetStats(admins[k], /*reset=*/true);
    absl::StatusOr<demo::Faults> set = SetFaults(admins[k], f[k]);
    if (!s.ok() || !set.ok()) {
      r.setup_ok = false;
      r.setup_error = !s.ok() ? s.status().ToString() : set.status().ToString();
      return r;
    }
  }
  auto stub = demo::Gateway::NewStub(EdgeChannel(t.gateway));
  const std::string prefix =
      absl::StrCat("scn-", sc.letter, "-", mode, "-", absl::ToUnixMicros(absl::Now()));
  std::vector<OrderOutcome> outcomes(n);
  std::vector<absl::Time> starts(n);
  std::vector<std::thread> threads;  // a handful of orders at once, like concurrent users
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      demo::Order order;
      order.set_key(absl::StrCat(prefix, "-", i));
      for (const ItemSpec& spec : ItemsOf(order.key(), requests != nullptr)) {
        demo::Item* item = order.add_items();
        item->set_sku(spec.sku);
        item->set_quantity(spec.quantity);
      }
      starts[i] = absl::Now();
      outcomes[i] = PlaceOrder(*stub, order, sc.budget, sc.cancel_after);
    });
  }
  for (std::thread& th : threads) th.join();
  if (requests != nullptr) {
    for (int i = 0; i < n; ++i) {
      const std::string key = absl::StrCat(prefix, "-", i);
      requests->push_back({key, ItemsOf(key, true),
                           static_cast<absl::StatusCode>(outcomes[i].status.error_code()),
                           outcomes[i].status.ok() ? outcomes[i].result.order_id() : 0});
    }
  }
  absl::SleepFor(sc.settle);  // let work that outlived the client end, so it is counted

  if (!outcomes.empty()) r.waterfall = outcomes[0].waterfall;
  for (const OrderOutcome& o : outcomes) {
    r.latencies_ms.push_back(absl::ToDoubleMilliseconds(o.latency));
    if (o.status.ok()) {
      ++r.ok;
    } else {
      ++r.errors;
      r.errors_seen.push_back(
          {absl::StatusCodeToString(static_cast<absl::StatusCode>(o.status.error_code())), o.source,
           o.hop});
    }
  }
  absl::Time cancel_at = absl::InfinitePast();
  if (sc.cancel_after.has_value()) {
    for (absl::Time s : starts) cancel_at = std::max(cancel_at, s + *sc.cancel_after);
  }
  for (int k = 0; k < 3; ++k) {
    absl::StatusOr<demo::Stats> s = GetStats(admins[k]);
    SetFaults(admins[k], demo::Faults()).IgnoreError();
    if (!s.ok()) {
      r.setup_ok = false;
      r.setup_error = s.status().ToString();
      return r;
    }
    r.started_late += s->calls_started_after_deadline();
    r.work_after_ms += s->work_after_deadline_ms();
    if (k == 2) {
      r.ledger_work_after_ms = s->work_after_deadline_ms();
      r.commits = s->commits();
      r.commits_stopped = s->commits_stopped();
      r.commits_joined = s->commits_joined();
      r.retries = s->retries_received();
    }
    if (sc.cancel_after.has_value() && s->last_end_unix_us() > 0) {
      r.stop_lag_ms[s->hop()] = std::max(
          0.0, absl::ToDoubleMilliseconds(absl::FromUnixMicros(s->last_end_unix_us()) - cancel_at));
    }
  }
  return r;
}

double Max(const std::vector<double>& v) {
  return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}

}  // namespace

int RunScenarios(const ScenarioOptions& options, std::ostream& out) {
  const int n = options.orders_per_scenario;
  std::vector<Scenario> all;
  all.push_back({"a", "timeouts that add up across hops vs one propagated deadline",
                 "300 ms of work at each of 3 hops, client budget 800 ms; baseline: each hop "
                 "gives the next a constant timeout",
                 "baseline hops each wait out their own 1 s timeout, so they work on after the "
                 "client's 800 ms are gone; hopbudget gives each hop what is left of the one "
                 "deadline, so the chain stops when the client does",
                 absl::Milliseconds(800), absl::nullopt, absl::Milliseconds(1500),
                 [](int, demo::Faults& g, demo::Faults& o, demo::Faults& l) {
                   g.set_latency("fixed:300ms");
                   o.set_latency("fixed:300ms");
                   l.set_latency("fixed:300ms");
                 }});
  all.push_back({"b", "the retry loop that never retries vs attempt budgets from the remainder",
                 "the ledger's first call per order hangs, client budget 800 ms; baseline: 3 "
                 "attempts x constant timeout inside a shorter outer deadline",
                 "baseline's first attempt waits its whole 1 s timeout, past the client's "
                 "deadline, so its retry never runs in time; hopbudget caps each attempt from "
                 "what is left (300 ms), so the retry runs and the order succeeds",
                 absl::Milliseconds(800), absl::nullopt, absl::Milliseconds(1500),
                 [](int n, demo::Faults&, demo::Faults&, demo::Faults& l) { l.set_hang_next(n); }});
  all.push_back(
      {"c", "a commit held hostage by a dead peer vs a bounded shield",
       "every ledger commit waits 3 s on a dead peer, client budget 800 ms; baseline: "
       "the commit cannot be stopped; hopbudget: shield with a bound",
       "baseline's commit lands 3 s later, after the client saw an error; hopbudget's "
       "ledger stops each held commit at its 600 ms shield bound, writing nothing. "
       "Orders' attempt cap (300 ms) fires before that bound, so orders retries the "
       "held commit (same key, a retry is safe); a retry that arrives while its key's "
       "commit still runs joins it instead of starting another",
       absl::Milliseconds(800), absl::nullopt, absl::Milliseconds(3000),
       [](int, demo::Faults&, demo::Faults&, demo::Faults& l) { l.set_slow_commit_ms(3000); }});
  all.push_back({"d", "a client that cancels mid-chain: how fast each hop stops",
                 "the ledger hangs, client budget 5 s, the client cancels after 300 ms",
                 "baseline propagates no cancel: each hop works on until its own timeout; "
                 "hopbudget cancels each downstream call as soon as its caller's call ends",
                 absl::Seconds(5), absl::Milliseconds(300), absl::Milliseconds(2000),
                 [](int n, demo::Faults&, demo::Faults&, demo::Faults& l) { l.set_hang_next(n); }});

  int failures = 0;
  auto check = [&](bool ok, const std::string& what) {
    out << "   " << (ok ? "ok  " : "!!  ") << what << "\n";
    if (!ok) ++failures;
  };
  for (const Scenario& sc : all) {
    if (!options.only.empty() &&
        std::find(options.only.begin(), options.only.end(), sc.letter) == options.only.end()) {
      continue;
    }
    out << "\n== (" << sc.letter << ") " << sc.title << "\n   " << sc.what << ", " << n
        << " orders at once\n"
        << std::flush;
    const ModeResult b = RunMode(options.baseline, sc, "baseline", n, options.baseline_requests);
    const ModeResult h = RunMode(options.hopbudget, sc, "hopbudget", n, options.hopbudget_requests);
    if (!b.setup_ok || !h.setup_ok) {
      out << "   !! cannot reach the chain: " << (b.setup_ok ? h.setup_error : b.setup_error)
          << "\n";
      ++failures;
      continue;
    }
    // Columns as wide as their widest cell: a long cell never runs into
    // the next column.
    std::vector<std::vector<std::string>> rows;
    auto row = [&rows](absl::string_view name, const std::string& bv, const std::string& hv) {
      rows.push_back({std::string(name), bv, hv});
    };
    row("", "baseline", "hopbudget");
    row("client: ok / errors", absl::StrCat(b.ok, " / ", b.errors),
        absl::StrCat(h.ok, " / ", h.errors));
    row("client: errors", ErrorKinds(b.errors_seen), ErrorKinds(h.errors_seen));
    row("client: slowest answer", absl::StrFormat("%.0f ms", Max(b.latencies_ms)),
        absl::StrFormat("%.0f ms", Max(h.latencies_ms)));
    row("retries that reached the ledger", absl::StrCat(b.retries), absl::StrCat(h.retries));
    row("rows committed", absl::StrCat(b.commits), absl::StrCat(h.commits));
    row("committed though the client saw an error",
        absl::StrCat(std::max<int64_t>(0, b.commits - b.ok)),
        absl::StrCat(std::max<int64_t>(0, h.commits - h.ok)));
    if (sc.letter == "c") {
      row("commits stopped at the shield bound", absl::StrCat(b.commits_stopped),
          absl::StrCat(h.commits_stopped));
      row("retries that joined the running commit", absl::StrCat(b.commits_joined),
          absl::StrCat(h.commits_joined));
      row("ledger: work after the client deadline",
          absl::StrFormat("%.0f ms", b.ledger_work_after_ms),
          absl::StrFormat("%.0f ms", h.ledger_work_after_ms));
    }
    row("calls started after the client deadline", absl::StrCat(b.started_late),
        absl::StrCat(h.started_late));
    row("work after the client deadline (all hops)", absl::StrFormat("%.0f ms", b.work_after_ms),
        absl::StrFormat("%.0f ms", h.work_after_ms));
    if (sc.letter == "d") {
      for (const char* hop : {"gateway", "orders", "ledger"}) {
        auto lag = [hop](const ModeResult& r) {
          auto it = r.stop_lag_ms.find(hop);
          return it == r.stop_lag_ms.end() ? std::string("-")
                                           : absl::StrFormat("%.0f ms", it->second);
        };
        row(absl::StrCat(hop, ": stopped after the cancel"), lag(b), lag(h));
      }
    }
    out << AlignColumns(rows, "   ");
    out << "   why: " << sc.why << "\n";
    if (!h.waterfall.empty()) {
      out << "   one hopbudget order, hop by hop:\n";
      for (absl::string_view line : absl::StrSplit(h.waterfall, '\n')) {
        if (!line.empty()) out << "     " << line << "\n";
      }
    }
    // What the chain must show (generous margins: a loaded machine is slow).
    if (sc.letter == "a") {
      check(h.commits - h.ok == 0, "hopbudget: nothing committed behind the client's back");
      check(h.work_after_ms < b.work_after_ms,
            "hopbudget: less work after the client deadline than baseline");
      check(h.started_late == 0, "hopbudget: no call started after the client deadline");
    } else if (sc.letter == "b") {
      check(h.ok == n, "hopbudget: every order succeeded on a retry within the budget");
      check(h.retries >= n, "hopbudget: the retries really ran");
      check(b.ok == 0, "baseline: no order succeeded (the retry could never run in time)");
    } else if (sc.letter == "c") {
      check(h.commits_stopped >= 1, "hopbudget: held commits were stopped at the shield bound");
      check(h.commits_joined >= 1 && h.commits_stopped < n + h.retries,
            "hopbudget: retries joined the commit still running for their key (fewer "
            "commits than attempts)");
      check(h.ledger_work_after_ms < b.ledger_work_after_ms,
            "hopbudget: the ledger worked less after the client deadline than baseline");
      check(b.commits - b.ok >= 1, "baseline: commits landed after the client had given up");
    } else if (sc.letter == "d") {
      double worst_h = 0, worst_b = 0;
      for (const auto& [hop, v] : h.stop_lag_ms) worst_h = std::max(worst_h, v);
      for (const auto& [hop, v] : b.stop_lag_ms) worst_b = std::max(worst_b, v);
      check(h.stop_lag_ms.size() == 3 && worst_h < 250,
            absl::StrFormat("hopbudget: every hop stopped within 250 ms of the cancel (%.0f ms)",
                            worst_h));
      check(worst_h < worst_b, "hopbudget: hops stopped sooner than baseline");
    }
  }
  out << "\n"
      << (failures == 0 ? "scenarios: every check passed"
                        : absl::StrCat("scenarios: ", failures, " check(s) failed"))
      << "\n";
  return failures == 0 ? 0 : 1;
}

}  // namespace hopbudget::chainctl
