// Copyright hopbudget authors.
//
// summary.h: what hopbudget-inspect shows for one hop, computed from one
// parsed /metrics scrape (metric names:
// docs/metrics.md).
//
//   hop                 hopbudget_info{hop} ("" when the scrape has none)
//   calls, ok           hopbudget_calls_total{side="server"}, and those with code="OK"
//   client_calls/_ok    the same for side="client" (calls this hop made)
//   timeouts            hopbudget_deadline_exceeded_total by side, then source
//                       (summed over the `hop` label); every known source
//                       present, 0 when not exposed
//   retries             hopbudget_retries_total summed, and by code (the failed
//                       attempt's; label `reason` before it was renamed)
//   retries_skipped     hopbudget_retries_skipped_total summed, and by reason
//   budget p50/p99      histogram_quantile over hopbudget_budget_at_arrival_seconds
//                       (buckets summed over application methods: series with
//                       role="infrastructure" are left out), NaN when no observation
//   shield              hopbudget_shield_in_flight, and
//                       hopbudget_shield_operations_total by outcome
//
// A metric missing from the scrape counts as 0 (a process that never retried
// may not expose the family); a family of the wrong type is an error, since
// its numbers would mean something else.
//
// Thread safety: pure functions.
#ifndef HOPBUDGET_CLIENT_INSPECT_SUMMARY_H_
#define HOPBUDGET_CLIENT_INSPECT_SUMMARY_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "exposition.h"

namespace hopbudget::inspect {

// The DEADLINE_EXCEEDED sources, in the order the table and JSON show them.
const std::vector<std::string>& KnownSources();

struct HopSummary {
  std::string hop;
  double calls = 0;         // server side: calls this hop answered
  double ok = 0;            // ... of which OK
  double client_calls = 0;  // client side: calls this hop made
  double client_ok = 0;
  // side ("server", "client") -> source -> count.
  std::map<std::string, std::map<std::string, double>> timeouts;
  double retries = 0;
  std::map<std::string, double> retries_by_code;
  double retries_skipped = 0;
  std::map<std::string, double> retries_skipped_by_reason;
  double budget_observations = 0;  // calls that arrived with a deadline
  double calls_without_deadline = 0;
  double budget_p50_seconds = 0;  // NaN when budget_observations == 0
  double budget_p99_seconds = 0;
  double shield_in_flight = 0;
  std::map<std::string, double> shield_outcomes;
};

// One histogram bucket: cumulative count of observations <= upper_bound.
struct Bucket {
  double upper_bound;
  double count;
};

// Prometheus' histogram_quantile(q, buckets): buckets are sorted, equal
// bounds merged and counts made monotonic; the rank q*total is located by
// linear interpolation inside its bucket (the first bucket starts at 0).
// NaN when there are fewer than 2 buckets, no +Inf bucket or no
// observations; a rank in the +Inf bucket gives the highest finite bound;
// q < 0 gives -Inf and q > 1 +Inf.
double HistogramQuantile(double q, std::vector<Bucket> buckets);

absl::StatusOr<HopSummary> Summarize(const Exposition& exposition);

// Per-second rates of one hop between two scrapes (--watch): what the
// totals cannot say, whether the hop is failing now.
struct HopRates {
  absl::Duration over;          // time between the two scrapes
  double calls_per_second = 0;  // server side: calls answered
  double ok_per_second = 0;
  double timeouts_per_second = 0;  // server side: DEADLINE_EXCEEDED, every source
  double retries_per_second = 0;
};

// The rates from `before` to `after`, `over` apart. InvalidArgument when
// `over` is not positive, the hops differ, or a counter went down (the
// process restarted, and its counters with it): no rate is right then; the
// next pair of scrapes has one.
absl::StatusOr<HopRates> RatesBetween(const HopSummary& before, const HopSummary& after,
                                      absl::Duration over);

}  // namespace hopbudget::inspect

#endif  // HOPBUDGET_CLIENT_INSPECT_SUMMARY_H_
