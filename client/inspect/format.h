// Copyright hopbudget authors.
//
// format.h: hopbudget-inspect's two outputs, from the per-target results.
//
// Table (for people): one row per target, columns
//   HOP TARGET CALLS OK SUCCESS TIMEOUTS(SERVER) TIMEOUTS(CLIENT) RETRIES
//   SKIPPED BUDGET_P50 BUDGET_P99 SHIELD
// Timeout cells list the non-zero sources ("request=2 attempt=1"), "-" when
// none; budgets are durations ("149.9ms", "1.25s"), "-" without
// observations; a failed target shows "error: <message>" after its target.
// Columns are padded to the widest cell; the output ends in a newline.
//
// JSON (for scripts): one document on one line (so that --watch prints one
// per line), ending in a newline:
//   {"targets":[{"target":"127.0.0.1:9100","ok":true,"hop":"orders",
//     "calls":12,"success":11,"success_ratio":0.9167,
//     "client_calls":10,"client_success":9,
//     "timeouts":{"server":{"client":1,...},"client":{"attempt":2,...}},
//     "retries":{"total":3,"by_code":{"UNAVAILABLE":3}},
//     "retries_skipped":{"total":1,"by_reason":{"no_room":1}},
//     "budget_at_arrival_seconds":{"count":12,"p50":0.75,"p99":0.79},
//     "calls_without_deadline":0,
//     "shield":{"in_flight":0,"outcomes":{"completed":0,...}}},
//    {"target":"127.0.0.1:1","ok":false,"error":"..."}]}
// success_ratio and the quantiles are null when undefined (no calls, no
// observations); counts are integers when they are whole numbers.
//
// Thread safety: pure functions.
#ifndef HOPBUDGET_CLIENT_INSPECT_FORMAT_H_
#define HOPBUDGET_CLIENT_INSPECT_FORMAT_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "summary.h"

namespace hopbudget::inspect {

struct TargetResult {
  std::string target;  // as the user wrote it
  absl::StatusOr<HopSummary> summary;
  // --watch, from the second scrape on: rates since the previous one (unset
  // for the first scrape, a failed one, or a restarted process).
  std::optional<HopRates> rates;
};

std::string FormatTable(const std::vector<TargetResult>& results);
std::string FormatJson(const std::vector<TargetResult>& results);

// "149.9ms", "1.25s", "800us", "-" for NaN.
std::string FormatSeconds(double seconds);

}  // namespace hopbudget::inspect

#endif  // HOPBUDGET_CLIENT_INSPECT_FORMAT_H_
