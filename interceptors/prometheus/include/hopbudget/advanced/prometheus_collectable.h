// Copyright hopbudget authors.
//
// prometheus_collectable.h: hopbudget's metrics inside an existing
// prometheus-cpp registry. A service that already serves /metrics with
// prometheus-cpp (Debian prometheus-cpp-dev) adds hopbudget's families with
// one call, instead of running hopbudget::http beside it:
//
//   prometheus::Exposer exposer("127.0.0.1:9102");
//   hopbudget::PrometheusOptions options;
//   options.hop = "orders";
//   auto hopbudget = hopbudget::NewPrometheusCollectable(options);  // StatusOr
//   exposer.RegisterCollectable(*hopbudget);  // keep `*hopbudget` alive
//
// Collect() serves the same series as FormatPrometheusText() (and, when
// asked, FormatProcessMetrics()): the families are built from that text, so
// the two cannot drift apart. The hot path is untouched: the work happens at
// scrape time only.
//
// Built only when CMake finds prometheus-cpp (target hopbudget::prometheus).
// Thread safety: Collect() may be called concurrently.
#ifndef HOPBUDGET_ADVANCED_PROMETHEUS_COLLECTABLE_H_
#define HOPBUDGET_ADVANCED_PROMETHEUS_COLLECTABLE_H_

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "hopbudget/advanced/metrics.h"

namespace hopbudget {

struct PrometheusOptions {
  // The hop this process serves as (hopbudget_info). Required; a valid hop
  // name (1..64 characters of [A-Za-z0-9._-]).
  std::string hop;
  // The registry to serve; nullptr: Metrics::Default(). Must outlive the
  // collectable.
  Metrics* metrics = nullptr;
  // Also the process_* families. Off by default: a prometheus-cpp service
  // usually exports its own, and a family twice is an invalid exposition.
  bool process_metrics = false;
};

// Errors: InvalidArgument for a bad hop name.
[[nodiscard]] absl::StatusOr<std::shared_ptr<prometheus::Collectable>> NewPrometheusCollectable(
    PrometheusOptions options);

// The families of a text exposition that FormatPrometheusText() or
// FormatProcessMetrics() wrote, as prometheus-cpp builds them. Errors:
// InvalidArgument naming the line that does not parse.
[[nodiscard]] absl::StatusOr<std::vector<prometheus::MetricFamily>> ParseHopbudgetText(
    absl::string_view text);

}  // namespace hopbudget

#endif  // HOPBUDGET_ADVANCED_PROMETHEUS_COLLECTABLE_H_
