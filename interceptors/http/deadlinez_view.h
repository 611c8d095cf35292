// Copyright hopbudget authors.
//
// deadlinez_view.h: the decisions behind /deadlinez.json, pure functions of
// values and time so that they are tested table-style on a FakeClock
// (deadlinez_view_test.cc); HttpExporter only translates HTTP to them.
//
//   - ParseDeadlinezFilter: the query parameters ?failed=1&method=&source=,
//     each bad one refused with a message that names it;
//   - OrderAndFilter: recent calls newest first by *start* (the age the page
//     shows is since the start, so the order and the ages agree), then the
//     filter;
//   - RateRing: a bounded ring of timestamped counter samples, from which
//     the counts over the last 1 and 10 minutes are read beside the totals
//     (as rpcz pages show them);
//   - FormatDeadlinezDocument: core's FormatDeadlinezJson() plus what the
//     http layer adds (filter, windows, policy, peers).
//
// When samples are taken (HttpExporter): on a timer every kRateStep, and on
// each /deadlinez.json request. The timer is what makes the windows right
// on the first view in an incident (the process was sampled before anyone
// looked); the request adds nothing but keeps tests deterministic on a
// FakeClock. Record() keeps a sample only when kRateStep has passed since the
// last one kept, so a burst of views cannot push history out of the ring.
//
// Thread safety: the functions are pure; RateRing is internally locked.
#ifndef HOPBUDGET_INTERCEPTORS_HTTP_DEADLINEZ_VIEW_H_
#define HOPBUDGET_INTERCEPTORS_HTTP_DEADLINEZ_VIEW_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "hopbudget/advanced/budget.h"
#include "hopbudget/advanced/http_exporter.h"
#include "hopbudget/advanced/metrics.h"
#include "hopbudget/advanced/retry_policy.h"
#include "sync.h"

namespace hopbudget::internal {

// Which recent calls the page lists. Empty strings: no filter on that field.
struct DeadlinezFilter {
  bool failed_only = false;  // code != OK
  std::string method;        // full method "/pkg.Service/Method", or "other"
  std::string source;        // a DeadlineSourceName(): the budget that fired
};

// From decoded query parameters, in order. Accepted: failed=1|0|true|false,
// method=/pkg.Service/Method|other, source=<DeadlineSourceName>, each at most
// once. Anything else is InvalidArgument naming the parameter and what is
// accepted; a page that silently ignored a misspelt filter would show an
// unfiltered list as if it were filtered.
absl::StatusOr<DeadlinezFilter> ParseDeadlinezFilter(
    const std::vector<std::pair<std::string, std::string>>& params);

// Newest first by start time (ties: the order given, which is newest
// finished first), then only the calls `filter` keeps.
std::vector<RecentCall> OrderAndFilter(std::vector<RecentCall> calls,
                                       const DeadlinezFilter& filter);

// The counters shown with rates: names are stable JSON keys
// ("calls.server", "failed.server", "timeouts.server.attempt",
// "shield.completed", "retries.started", "retries.skipped.no_room", ...,
// "shadow.refuse", "shadow.cut", "shadow.fail_fast").
const std::vector<std::string>& SummaryCounterNames();
// Their values in `snapshot`, in SummaryCounterNames() order.
std::vector<uint64_t> SummaryCounters(const MetricsSnapshot& snapshot);

inline constexpr absl::Duration kRateStep = absl::Seconds(10);
inline constexpr absl::Duration kRateWindows[] = {absl::Minutes(1), absl::Minutes(10)};

// What changed over one window ending now.
struct WindowCounts {
  absl::Duration window;  // the window asked for (1 min, 10 min)
  // Time the deltas cover: from the sample used as the window's start to
  // now. >= window when the ring reaches back far enough (complete), up to
  // window + kRateStep; shorter when the process is younger than the window.
  // Zero when there is no sample before now (no rate can be given).
  absl::Duration span;
  bool complete = false;
  std::vector<uint64_t> deltas;  // SummaryCounterNames() order
};

class RateRing {
 public:
  // Keeps samples `step` apart, enough to reach `longest` back (plus one).
  explicit RateRing(absl::Duration step = kRateStep, absl::Duration longest = kRateWindows[1]);

  enum class RecordOutcome { kKept, kTooSoon };
  // Keeps `values` as the sample at `at` unless one was kept less than
  // `step` before; the oldest sample goes when the ring is full.
  RecordOutcome Record(absl::Time at, std::vector<uint64_t> values);

  // For each of `windows`, the deltas of `current` (read at `now`) against
  // the newest sample at or before now - window; when none is that old, the
  // oldest sample (span shorter than the window, complete = false).
  std::vector<WindowCounts> Windows(absl::Time now, const std::vector<uint64_t>& current,
                                    const std::vector<absl::Duration>& windows) const;

  size_t size() const;
  size_t capacity() const { return capacity_; }

 private:
  struct Sample {
    absl::Time at;
    std::vector<uint64_t> values;
  };
  const absl::Duration step_;
  const size_t capacity_;
  mutable internal::Mutex mu_;
  std::deque<Sample> samples_ ABSL_GUARDED_BY(mu_);  // oldest first
};

// Everything /deadlinez.json shows, read once per request.
struct DeadlinezInputs {
  std::string hop;
  MetricsSnapshot snapshot;
  std::vector<RecentCall> recent;  // as Metrics::RecentCalls() returns them
  absl::Time now;
  DeadlinezFilter filter;
  std::vector<WindowCounts> windows;
  std::optional<BudgetPolicy> policy;
  std::optional<RetryPolicy> retry_policy;
  std::vector<HttpPeer> peers;
};

// The JSON document (docs/metrics.md, "/deadlinez"): FormatDeadlinezJson() of the
// ordered, filtered calls, plus "filter", "recent_total", "methods_seen",
// "sources_seen", "totals", "windows", "policy" and "peers".
std::string FormatDeadlinezDocument(const DeadlinezInputs& in);

}  // namespace hopbudget::internal

#endif  // HOPBUDGET_INTERCEPTORS_HTTP_DEADLINEZ_VIEW_H_
