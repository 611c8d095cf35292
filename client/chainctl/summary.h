// Copyright hopbudget authors.
//
// summary.h: the pure parts of chainctl's `load`: per-call outcomes in, the
// summary out (a table for people, JSON for scripts). No gRPC.
//
//   hopbudget::chainctl::SummaryBuilder b;
//   b.Add({absl::StatusCode::kOk, absl::Milliseconds(12)});
//   b.Add({absl::StatusCode::kDeadlineExceeded, absl::Milliseconds(800), "attempt", "orders"});
//   b.AddService({"ledger", 0, 12.5, 3});   // Admin GetStats after - before
//   hopbudget::chainctl::LoadSummary s = b.Build();
//   std::cout << FormatSummaryTable(s);
//
// JSON keys (stable, see FormatSummaryJson): sent, ok, errors_by_code,
// deadline_exceeded_by_source (source -> hop -> count), retries,
// latency_ms {p50, p90, p95, p99, p999, average, fastest, slowest},
// calls_started_after_deadline, work_after_deadline_ms, plus not_sent,
// per_hop, total_s, rps (calls answered per second of the run), error_rate
// histogram_ms ([{le, count}]: ten even buckets from fastest to slowest,
// as ghz prints them), send_lag_ms {p99, max} (how far behind its schedule
// the generator made its calls: an open loop that falls behind offers less
// than it says) and expired_unsent (calls whose deadline passed while they
// waited in the generator for an HTTP/2 stream; only a generator that owns
// that queue can count them, chainctl's gRPC does not say).
//
// Thread safety: SummaryBuilder is not thread-safe (the caller locks).
#ifndef HOPBUDGET_CHAINCTL_SUMMARY_H_
#define HOPBUDGET_CHAINCTL_SUMMARY_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "hopbudget/advanced/client_throttle.h"

namespace hopbudget::chainctl {

// One finished call of the load.
struct CallRecord {
  absl::StatusCode code = absl::StatusCode::kOk;
  absl::Duration latency = absl::ZeroDuration();
  // DEADLINE_EXCEEDED only: the attribution's source and hop ("" when the
  // status carried none: counted as source "unattributed").
  std::string source;
  std::string hop;
};

// One service's Admin GetStats, after minus before.
struct ServiceDelta {
  std::string hop;
  int64_t calls_started_after_deadline = 0;
  double work_after_deadline_ms = 0;
  int64_t retries = 0;  // calls that arrived as retries
  // Orders only (Admin Stats): reads it sent to the ledger replicas, hedges
  // among them, calls refused a ledger slot (slot-wait).
  int64_t reads = 0;
  int64_t read_hedges = 0;
  int64_t slot_refusals = 0;
  // Handler calls that did work, calls answered without any (refused on
  // arrival or shed), and the CPU the process spent meanwhile (Admin Stats
  // cpu_us), in milliseconds.
  int64_t calls = 0;
  int64_t refused = 0;
  double cpu_ms = 0;
};

struct LoadSummary {
  int64_t sent = 0;
  int64_t ok = 0;
  int64_t not_sent = 0;  // open loop: dropped at the concurrency limit
  // Refused by the client's own adaptive throttle (--client-throttle): made
  // by the application, never sent. OK ratios count them as requests.
  int64_t client_throttled = 0;
  std::map<std::string, int64_t> errors_by_code;  // canonical code name -> count
  std::map<std::string, std::map<std::string, int64_t>> deadline_exceeded_by_source;
  int64_t retries = 0;
  double p50_ms = 0;
  double p90_ms = 0;
  double p95_ms = 0;
  double p99_ms = 0;
  double p999_ms = 0;
  // Of the OK answers only: what a caller that got its answer waited.
  double ok_p50_ms = 0;
  double ok_p99_ms = 0;
  double average_ms = 0;
  double fastest_ms = 0;
  double slowest_ms = 0;
  // From the first call sent to the last answer: the achieved rate is
  // sent / total.
  absl::Duration total = absl::ZeroDuration();
  // The load generator's own CPU over `total`: near one core's worth (or
  // more), it, not the chain, set the pace.
  absl::Duration client_cpu = absl::ZeroDuration();
  double rps = 0;
  double error_rate = 0;  // (sent - ok) / sent; 0 when nothing was sent
  struct Bucket {
    double le_ms;  // upper bound
    int64_t count;
  };
  std::vector<Bucket> histogram;  // ten even buckets, fastest..slowest
  // How late, against the open loop's schedule, calls were made.
  double send_lag_p99_ms = 0;
  double send_lag_max_ms = 0;
  // Ended DEADLINE_EXCEEDED in the generator's own queue, never sent (an
  // HTTP/2 stream bound held them): counted among the errors as well.
  int64_t expired_unsent = 0;
  int64_t calls_started_after_deadline = 0;
  double work_after_deadline_ms = 0;
  // Summed over per_hop: reads sent downstream, hedges among them, and
  // extra_load = read_hedges / reads (0 without reads); slot-wait refusals.
  int64_t reads = 0;
  int64_t read_hedges = 0;
  double extra_load = 0;
  int64_t slot_refusals = 0;
  std::vector<ServiceDelta> per_hop;
};

// The q-quantile (0 <= q <= 1) by nearest rank: the smallest value with at
// least q of the values at or below it. 0 for no values.
double Percentile(std::vector<double> values, double q);

// Whether a load counts as failed: more than `max_error_rate` (0..1) of its
// calls failed, or, with a negative `max_error_rate` (not given), every call
// sent failed. A load that sent nothing has not failed.
bool LoadFailed(const LoadSummary& s, double max_error_rate);

class SummaryBuilder {
 public:
  void Add(const CallRecord& call);
  void CountNotSent() { ++not_sent_; }
  void CountClientThrottled() { ++client_throttled_; }
  void AddService(const ServiceDelta& delta) { services_.push_back(delta); }
  // How long the run took, first call to last answer.
  void SetTotal(absl::Duration total) { total_ = total; }
  // The CPU the load generator itself used meanwhile (user + system).
  void SetClientCpu(absl::Duration cpu) { client_cpu_ = cpu; }
  // A call made `lag` after its time in the open loop's schedule.
  void AddSendLag(absl::Duration lag) { send_lags_ms_.push_back(absl::ToDoubleMilliseconds(lag)); }
  void CountExpiredUnsent() { ++expired_unsent_; }
  LoadSummary Build() const;

 private:
  std::vector<CallRecord> calls_;
  std::vector<ServiceDelta> services_;
  int64_t not_sent_ = 0;
  int64_t client_throttled_ = 0;
  int64_t expired_unsent_ = 0;
  std::vector<double> send_lags_ms_;
  absl::Duration total_ = absl::ZeroDuration();
  absl::Duration client_cpu_ = absl::ZeroDuration();
};

std::string FormatSummaryTable(const LoadSummary& s);
std::string FormatSummaryJson(const LoadSummary& s);
// OK / the calls the application made (sent, and refused by the client's own
// throttle): what a capacity ramp judges a step by. 0 when none were made.
double OkShare(const LoadSummary& s);

// The shortest decimal text, without an exponent, that reads back as `v`
// ("61.25", "0", "2430", "0.8388541666666667"): the benchmarks' RESULT
// lines write numbers so. "0" for a NaN or an infinity.
std::string ShortestDecimal(double v);

// The inverse of FormatSummaryJson (chainctl load --json, h2_load --json),
// for what reads a run back (chainctl demo). A field that is not there
// stays at its default; the figures come back as written (to 0.001 ms).
// InvalidArgument, naming the field, for text that is not a JSON object or
// a field of the wrong type.
absl::StatusOr<LoadSummary> ParseSummaryJson(absl::string_view json);

// The client throttle of a load generator's `--client-throttle=K`: nullopt
// for 0 (off), else ClientThrottlePolicy with k = K and a 5 s window (not
// the SRE book's two minutes: a load run is seconds long, and the throttle
// must follow the gateway within it). InvalidArgument "--client-throttle=K:
// 0 (off) or a number >= 1 (...)" for any other K.
absl::StatusOr<absl::optional<ClientThrottlePolicy>> LoadClientThrottle(double k);

// "host:port,host:port": each a non-empty host and a port in 1..65535.
// InvalidArgument naming the bad entry otherwise; an empty list is an error.
absl::StatusOr<std::vector<std::string>> ParseTargetList(absl::string_view text);

struct ItemSpec {
  std::string sku;
  int quantity = 1;
};
// "sku-1:2,sku-2" (quantity defaults to 1; 1..1000).
absl::StatusOr<std::vector<ItemSpec>> ParseItems(absl::string_view text);
// The inverse of ParseItems: "sku-1:2,sku-2:1".
std::string FormatItems(const std::vector<ItemSpec>& items);

// ---- Exactly once, checked against the ledger's table ----------------------
//
// A client that wants to check "one row per order" must be able to find each
// order's row by more than the idempotency key: the key column is UNIQUE, so
// counting rows per key can never see two. The audit finds rows by the key
// the client chose AND by the content it sent, so an order committed twice
// under two keys (a retry that invents a key, a hop that rewrites it) is
// caught. That needs content unique per order: WithOrderReference adds an
// item naming the order.
//
//   std::vector<RequestRecord> sent = ...;       // what the client sent and saw
//   std::vector<LedgerRow> rows = ...;           // ReadLedgerRows (ledger_rows.h)
//   absl::StatusOr<AuditResult> a = AuditExactlyOnce(sent, rows);
//   if (a.ok() && a->violations.empty()) ...     // exactly once

// `items` plus one item "ref-<key>" x1, so that the content of an order is
// unique to it (and says which order it is).
std::vector<ItemSpec> WithOrderReference(const std::vector<ItemSpec>& items, absl::string_view key);

// The ledger's items column for these items: "sku-1 x2, sku-2 x1" (the
// format of server/ledger/ledger_main.cc; tests/e2e pins the two together).
std::string LedgerItemsText(const std::vector<ItemSpec>& items);

// One request a client sent, and what it saw. Several requests with the same
// key are one order sent again (a client retry): they must carry the same items.
struct RequestRecord {
  std::string key;
  std::vector<ItemSpec> items;
  absl::StatusCode code = absl::StatusCode::kUnknown;
  int64_t order_id = 0;  // the reply's order_id when code is kOk
};

// One line per request, tab-separated: key, items (FormatItems), status code
// name, order_id. Keys and skus must not hold tabs or newlines.
std::string FormatRequestRecord(const RequestRecord& r);
// The lines of FormatRequestRecord (empty lines skipped). InvalidArgument
// naming the line number and what is wrong otherwise.
absl::StatusOr<std::vector<RequestRecord>> ParseRequestRecords(absl::string_view text);

// One row of the ledger's table (orders: order_id, idem_key, items).
struct LedgerRow {
  int64_t order_id = 0;
  std::string key;
  std::string items;  // as the ledger wrote it (LedgerItemsText)
};

struct AuditResult {
  int64_t requests = 0;      // records in
  int64_t orders = 0;        // distinct orders (key + items) among them
  int64_t acknowledged = 0;  // orders with at least one OK reply
  int64_t committed = 0;     // orders with a row (under their key, with their items)
  // Committed though no reply was OK (the client gave up or failed, the
  // commit still landed): allowed, at most once like any other.
  int64_t committed_unacknowledged = 0;
  int64_t other_rows = 0;  // rows of orders not in the records (not audited)
  // Each a sentence naming the order and the rows; empty = exactly once.
  std::vector<std::string> violations;
};

// For every order in `requests`: at most one row has its items, that row has
// its key, no row with its key has other items; an acknowledged order has
// that row, with the order_id every OK reply gave. InvalidArgument when the
// records cannot be told apart: two orders with the same items, or one key
// sent with two different item lists.
absl::StatusOr<AuditResult> AuditExactlyOnce(const std::vector<RequestRecord>& requests,
                                             const std::vector<LedgerRow>& rows);

// "163 requests, 160 orders: 150 acknowledged, each in exactly one row ..."
// or the violations, one per line (at most `max_violations`).
std::string FormatAudit(const AuditResult& a, size_t max_violations = 10);

// How `chainctl scenarios` names the budget that fired, plainly: the
// attribution's source and hop ("client", "chainctl") as "the client's own
// deadline, at chainctl"; an unknown source as itself.
std::string PlainSource(absl::string_view source, absl::string_view hop);

// One error a client saw: its code and, for DEADLINE_EXCEEDED, the budget
// that fired (source, "" when not attributed) and the hop where it fired.
struct ErrorSeen {
  std::string code;    // "DEADLINE_EXCEEDED"
  std::string source;  // "client", "attempt", ...; "" when unknown
  std::string hop;
};

// The errors of a scenario cell, grouped by code and budget, most frequent
// first: "3x DEADLINE_EXCEEDED, the client's own deadline (1 at ledger, 2 at
// orders); 1x UNAVAILABLE". "-" when there is none.
std::string ErrorKinds(const std::vector<ErrorSeen>& errors);

// Rows as columns, each as wide as its widest cell plus two spaces, every
// line after `indent`, no trailing spaces: a long cell never runs into the
// next column.
std::string AlignColumns(const std::vector<std::vector<std::string>>& rows,
                         absl::string_view indent);

}  // namespace hopbudget::chainctl

#endif  // HOPBUDGET_CHAINCTL_SUMMARY_H_
