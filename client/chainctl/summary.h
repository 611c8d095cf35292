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
// latency_ms {p50, p99}, calls_started_after_deadline, work_after_deadline_ms,
// plus not_sent and per_hop.
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
};

struct LoadSummary {
  int64_t sent = 0;
  int64_t ok = 0;
  int64_t not_sent = 0;  // open loop: dropped at the concurrency limit
  std::map<std::string, int64_t> errors_by_code;  // canonical code name -> count
  std::map<std::string, std::map<std::string, int64_t>> deadline_exceeded_by_source;
  int64_t retries = 0;
  double p50_ms = 0;
  double p99_ms = 0;
  int64_t calls_started_after_deadline = 0;
  double work_after_deadline_ms = 0;
  std::vector<ServiceDelta> per_hop;
};

// The q-quantile (0 <= q <= 1) by nearest rank: the smallest value with at
// least q of the values at or below it. 0 for no values.
double Percentile(std::vector<double> values, double q);

class SummaryBuilder {
 public:
  void Add(const CallRecord& call);
  void CountNotSent() { ++not_sent_; }
  void AddService(const ServiceDelta& delta) { services_.push_back(delta); }
  LoadSummary Build() const;

 private:
  std::vector<CallRecord> calls_;
  std::vector<ServiceDelta> services_;
  int64_t not_sent_ = 0;
};

std::string FormatSummaryTable(const LoadSummary& s);
std::string FormatSummaryJson(const LoadSummary& s);

// "host:port,host:port": each a non-empty host and a port in 1..65535.
// InvalidArgument naming the bad entry otherwise; an empty list is an error.
absl::StatusOr<std::vector<std::string>> ParseTargetList(absl::string_view text);

struct ItemSpec {
  std::string sku;
  int quantity = 1;
};
// "sku-1:2,sku-2" (quantity defaults to 1; 1..1000).
absl::StatusOr<std::vector<ItemSpec>> ParseItems(absl::string_view text);

}  // namespace hopbudget::chainctl

#endif  // HOPBUDGET_CHAINCTL_SUMMARY_H_
