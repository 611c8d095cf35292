// Copyright hopbudget authors.
//
// metrics_names.cc: the names of the enums metrics.h declares, and of a
// metric row's type. A name is the label value the exposition writes and
// what logs, /deadlinez and gtest print (metric_table.h), so each enum has
// one function that all of them call; none of it is recording or storage.
#include "hopbudget/advanced/metrics.h"
#include "metric_table.h"

namespace hopbudget {

absl::string_view MethodRoleName(MethodRole role) {
  return role == MethodRole::kInfrastructure ? "infrastructure" : "application";
}

absl::string_view SideName(Side side) { return side == Side::kServer ? "server" : "client"; }

absl::string_view LeakKindName(LeakKind kind) {
  return kind == LeakKind::kLaterThanInbound ? "later_than_inbound" : "no_deadline";
}

absl::string_view ConfigReloadName(ConfigReload result) {
  switch (result) {
    case ConfigReload::kApplied:
      return "applied";
    case ConfigReload::kRefused:
      return "refused";
  }
  return "unknown";
}

absl::string_view ShieldEventName(ShieldEvent event) {
  switch (event) {
    case ShieldEvent::kStarted:
      return "started";
    case ShieldEvent::kCompleted:
      return "completed";
    case ShieldEvent::kFailed:
      return "failed";
    case ShieldEvent::kExceededBound:
      return "exceeded_bound";
    case ShieldEvent::kRefused:
      return "refused";
    case ShieldEvent::kUnobserved:
      return "unobserved";
    case ShieldEvent::kDrained:
      return "drained";
    case ShieldEvent::kDrainTimedOut:
      return "timed_out";
  }
  return "unknown";
}

absl::string_view LatencyKindName(LatencyKind kind) {
  switch (kind) {
    case LatencyKind::kClientAttempt:
      return "client_attempt";
    case LatencyKind::kClientCall:
      return "client_call";
    case LatencyKind::kServerCall:
      return "server_call";
  }
  return "unknown";
}

absl::string_view ClientCallKindName(ClientCallKind kind) {
  return kind == ClientCallKind::kRetryAttempt ? "retry_attempt" : "plain_call";
}

absl::string_view SlotRefusalReasonName(SlotRefusalReason reason) {
  return reason == SlotRefusalReason::kQueueFull ? "queue_full" : "no_time_to_wait";
}

namespace internal {
absl::string_view MetricTypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}
}  // namespace internal

}  // namespace hopbudget
