// Copyright hopbudget authors.
//
// exposition.h: a Metrics registry as Prometheus text and as the JSON behind
// /deadlinez, for any HTTP server. http_exporter.h serves both with
// cpp-httplib; a service with an HTTP server of its own can serve these
// strings instead.
//
// The metric families (docs/metrics.md), all with the `hopbudget_` prefix;
// every family labelled by `method` also has `role` (MethodRole), written
// after `method` and not repeated in the list below. `method` is written as
// gRFC A66's grpc.method, "pkg.Service/Method" (no leading slash), or "other":
//   hopbudget_info{hop}                                 gauge, 1
//   hopbudget_build_info{version}                       gauge, 1
//   hopbudget_calls_total{side,method,code}             counter
//   hopbudget_deadline_exceeded_total{side,source,hop}  counter
//   hopbudget_client_attempt_duration_seconds{method,code}  histogram (gRFC A66
//   hopbudget_client_call_duration_seconds{method,code}     grpc.client.attempt.duration,
//   hopbudget_server_call_duration_seconds{method,code}     .call.duration, grpc.server...)
//   hopbudget_budget_at_arrival_seconds{method}         histogram (server)
//   hopbudget_request_budget_seconds{method}            histogram (server)
//   hopbudget_budget_remaining_seconds{method}          histogram (server)
//   hopbudget_calls_without_deadline_total{method}      counter (server)
//   hopbudget_attempts_per_call{method}                 histogram (retrying client)
//   hopbudget_retries_total{method,code}                counter
//   hopbudget_calls_succeeded_after_retry_total{method} counter
//   hopbudget_retries_skipped_total{reason}             counter
//   hopbudget_deadline_leaks_total{kind}, hopbudget_bad_budget_header_total{kind},
//   hopbudget_bad_attribution_total, hopbudget_trace_dropped_total{reason},
//   hopbudget_timers_armed_total, hopbudget_backoff_clipped_total,
//   hopbudget_pushback_honoured_total, hopbudget_unfit_policy_calls_total,
//   hopbudget_shield_started_total, hopbudget_shield_operations_total{outcome},
//   hopbudget_shield_in_flight (gauge), hopbudget_shield_unobserved_total,
//   hopbudget_shield_drains_total{result}
//   hopbudget_races_total{outcome}, hopbudget_race_losers_cancelled_total,
//   hopbudget_hedged_calls_total, hopbudget_hedges_sent_total,
//   hopbudget_hedges_won_total, hopbudget_hedges_skipped_total{reason},
//   hopbudget_hedge_losers_cancelled_total, hopbudget_hedge_extra_load_ratio
//   (gauge), hopbudget_slot_wait_seconds (histogram),
//   hopbudget_backend_wait_seconds (histogram),
//   hopbudget_slot_refusals_total{reason}
//
// Thread safety: the functions are pure.
#ifndef HOPBUDGET_ADVANCED_EXPOSITION_H_
#define HOPBUDGET_ADVANCED_EXPOSITION_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "hopbudget/advanced/metrics.h"

namespace hopbudget {

// The Content-Type of FormatPrometheusText()'s output.
inline constexpr char kPrometheusContentType[] = "text/plain; version=0.0.4; charset=utf-8";

// `snapshot` in the Prometheus text exposition format 0.0.4. `hop` names the
// process in hopbudget_info (no other family repeats it: a scraper adds its
// own target labels).
std::string FormatPrometheusText(const MetricsSnapshot& snapshot, absl::string_view hop);

// The document /deadlinez renders: the hop, the recent calls (newest first)
// with their traces, DEADLINE_EXCEEDED counts by side and source, the
// shield's counters, and retries (started, calls they saved, failed attempts
// not retried by reason). Format in docs/metrics.md ("/deadlinez").
std::string FormatDeadlinezJson(const MetricsSnapshot& snapshot,
                                const std::vector<RecentCall>& recent, absl::string_view hop,
                                absl::Time now);

// `s` as a JSON string literal, quotes included, the way the documents above
// write strings: `"`, `\` and control characters escaped; valid UTF-8
// copied; bytes that are not valid UTF-8 replaced by U+FFFD, so that the
// document stays valid whatever a peer sent. For tools that write JSON next
// to these documents (hopbudget-inspect, chainctl).
std::string JsonString(absl::string_view s);

// The reason label of hopbudget_retries_skipped_total for a decision: its
// RetryOutcomeName() ("no_room", "throttled", ...), the one vocabulary of
// retry outcomes; "" for the decisions that are not skipped retries (kRetry,
// kSucceeded).
absl::string_view RetrySkipReason(RetryOutcome outcome);

}  // namespace hopbudget

#endif  // HOPBUDGET_ADVANCED_EXPOSITION_H_
