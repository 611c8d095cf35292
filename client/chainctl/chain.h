// Copyright hopbudget authors.
//
// chain.h: chainctl's calls into the demo chain: one order (optionally
// cancelled mid-way), the Admin service of each process, open-loop load,
// and the scenarios that replay the seeds' incidents in both modes.
//
// Every order carries the demo-only header x-demo-client-deadline-us (the
// client's absolute deadline), which services forward and use to account for
// work done after it; chainctl's channel has hopbudget's client interceptor
// (hop "chainctl"), so the exact budget travels in hopbudget-budget-us.
//
// Thread safety: functions are independent; each makes its own channels.
#ifndef HOPBUDGET_CHAINCTL_CHAIN_H_
#define HOPBUDGET_CHAINCTL_CHAIN_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "demo/demo.grpc.pb.h"
#include "hopbudget/advanced/client_throttle.h"
#include "summary.h"

namespace hopbudget::chainctl {

// The edge channel to a gateway (hopbudget's client interceptor, hop
// "chainctl"), watching the gateway's health.
std::shared_ptr<grpc::Channel> EdgeChannel(const std::string& target);

struct OrderOutcome {
  grpc::Status status;
  demo::OrderResult result;
  absl::Duration latency = absl::ZeroDuration();
  std::string attribution;  // "source=attempt hop=orders budget=300ms elapsed=301ms", or ""
  std::string source, hop;  // of the attribution
  std::string waterfall;    // FormatWaterfall of the trace trailer, when there is one
};

// Places one order with `budget`; when `cancel_after` is set, cancels the
// call then (TryCancel) and waits for it to end.
OrderOutcome PlaceOrder(demo::Gateway::Stub& stub, const demo::Order& order, absl::Duration budget,
                        absl::optional<absl::Duration> cancel_after = absl::nullopt);

struct WatchOutcome {
  grpc::Status status;  // how the stream ended
  int messages = 0;
  absl::Duration latency = absl::ZeroDuration();  // from the start to the status
  // From the last message (or the start, when none came) to the status.
  absl::Duration silence = absl::ZeroDuration();
  std::string attribution;  // as OrderOutcome's, or ""
  std::string source, hop;  // of the attribution
};

// Watches the order `key` through the gateway (WatchOrder) with `budget`:
// calls `on_message` with each message as it arrives and the time since
// the start, and returns how the stream ended (one blocking call).
WatchOutcome WatchOrder(
    demo::Gateway::Stub& stub, const std::string& key, absl::Duration budget,
    const std::function<void(const demo::OrderStatus&, absl::Duration)>& on_message);

// A watch "lasted its budget": it ended OK, or DEADLINE_EXCEEDED by a
// whole-call deadline (source client: the budget the client asked for; or
// request: a hop's cap on every request). Any other end (an idle cut, an
// error, a cancel) is a failed watch.
bool WatchLastedItsBudget(const WatchOutcome& outcome);

absl::StatusOr<demo::Stats> GetStats(const std::string& admin, bool reset = false);
absl::StatusOr<demo::Faults> SetFaults(const std::string& admin, const demo::Faults& faults);
absl::StatusOr<demo::Faults> GetFaults(const std::string& admin);

// `chainctl stats --json`: one JSON document (one line), a row per target
// in order: {"stats":[{"target":..,"ok":true,"hop":..,"mode":..,"calls":..,
// ...,"faults":{..}}, {"target":..,"ok":false,"error":..}]}. Counts are
// JSON numbers (not proto3 JSON's int64 strings), for jq and scripts.
std::string FormatStatsJson(
    const std::vector<std::pair<std::string, absl::StatusOr<demo::Stats>>>& rows);

// What a load calls at the gateway.
enum class LoadMethod {
  kPlaceOrder,  // a new order per call
  // Reads (GetOrder) of `read_keys` orders placed first, round robin: the
  // read path orders hedges across the ledger's replicas.
  kGetOrder,
};

struct LoadOptions {
  std::string gateway;
  LoadMethod method = LoadMethod::kPlaceOrder;
  int read_keys = 20;  // kGetOrder: orders placed before the reads, >= 1
  double rps = 50;
  absl::Duration duration = absl::Seconds(5);
  absl::Duration budget = absl::Milliseconds(800);
  int concurrency = 256;
  std::vector<std::string> admin;  // processes to read GetStats from, before and after
  std::vector<ItemSpec> items = {{"sku-1", 1}};
  bool progress = true;
  std::string key_prefix;  // "" = load-<unix micros>
  // When set, receives every request sent and what it got (for
  // AuditExactlyOnce), and each order carries WithOrderReference items, so
  // that its row can be found by content as well as by key.
  std::vector<RequestRecord>* requests = nullptr;
  // When set, the client throttles itself (client_throttle.h, the SRE
  // book's adaptive throttling): a call the throttle refuses is counted as
  // client_throttled and never sent; what the gateway answers teaches it.
  absl::optional<ClientThrottlePolicy> client_throttle;
};

// Open loop: starts calls at `rps` whatever their latency (the callback API:
// no thread per call), up to `concurrency` in flight (more are counted as
// not sent). Prints a live progress line to `err`. kGetOrder first places
// `read_keys` orders (an error if one fails); the summary's reads,
// read_hedges and extra_load come from the Admin stats of `admin` (orders
// counts them).
absl::StatusOr<LoadSummary> RunLoad(const LoadOptions& options, std::ostream& err);

struct ProbeResult {
  bool ok = false;     // every hop counted the probe as started after the client deadline
  std::string report;  // one line per hop: its hop name and what it counted
};

// Checks that the client deadline header (x-demo-client-deadline-us) reaches
// every hop, so that the accounting measures something: places one order
// whose header says the client deadline passed `late_by` ago (its gRPC
// deadline is `budget` from now, so the chain serves it normally), and reads
// each process's GetStats before and after. `admin` lists the chain's
// processes, gateway first. An error when a process or the order cannot be
// reached.
absl::StatusOr<ProbeResult> ProbeClientDeadline(const std::string& gateway,
                                                const std::vector<std::string>& admin,
                                                absl::Duration budget,
                                                absl::Duration late_by = absl::Seconds(1));

struct ChainTargets {
  std::string gateway, orders, ledger;
};

struct ScenarioOptions {
  ChainTargets hopbudget;
  ChainTargets baseline;
  int orders_per_scenario = 3;
  std::vector<std::string> only;  // scenario letters (a..d); empty = all
  // When set, receive every order sent to that chain and what it got (for
  // AuditExactlyOnce); orders then carry WithOrderReference items.
  std::vector<RequestRecord>* hopbudget_requests = nullptr;
  std::vector<RequestRecord>* baseline_requests = nullptr;
};

// Runs the scenarios in both modes and prints the side-by-side tables and
// the checks. Returns 0 when every check passed, 1 otherwise.
int RunScenarios(const ScenarioOptions& options, std::ostream& out);

}  // namespace hopbudget::chainctl

#endif  // HOPBUDGET_CHAINCTL_CHAIN_H_
