// Copyright hopbudget authors.
#include "hopbudget/advanced/deadline_source.h"

namespace hopbudget {
namespace {

struct SourceNames {
  DeadlineSource source;
  absl::string_view name;
  absl::string_view reason;
};

constexpr SourceNames kNames[kDeadlineSourceCount] = {
    {DeadlineSource::kNone, "none", ""},
    {DeadlineSource::kClient, "client", "CLIENT_DEADLINE_EXCEEDED"},
    {DeadlineSource::kRequest, "request", "REQUEST_BUDGET_EXHAUSTED"},
    {DeadlineSource::kAttempt, "attempt", "ATTEMPT_BUDGET_EXHAUSTED"},
    {DeadlineSource::kIdle, "idle", "STREAM_IDLE_BUDGET_EXHAUSTED"},
    {DeadlineSource::kDownstream, "downstream", "DOWNSTREAM_DEADLINE_EXCEEDED"},
    {DeadlineSource::kExhaustedBeforeCall, "exhausted-before-call", "BUDGET_EXHAUSTED_BEFORE_CALL"},
    {DeadlineSource::kArrivedExpired, "arrived-expired", "ARRIVED_EXPIRED"},
    {DeadlineSource::kShield, "shield", "SHIELD_BOUND_EXCEEDED"},
    {DeadlineSource::kSlotWait, "slot-wait", "SLOT_WAIT_EXHAUSTED"},
    {DeadlineSource::kQueueWait, "queue-wait", "ADMISSION_QUEUE_EXHAUSTED"},
    {DeadlineSource::kCannotFinish, "cannot-finish", "PREDICTED_TO_MISS_DEADLINE"},
    {DeadlineSource::kNoBackend, "no-backend", "NO_READY_BACKEND_IN_BUDGET"},
};

}  // namespace

absl::string_view DeadlineSourceName(DeadlineSource source) {
  const auto i = static_cast<int>(source);
  return i < kDeadlineSourceCount ? kNames[i].name : "none";
}

absl::optional<DeadlineSource> ParseDeadlineSource(absl::string_view name) {
  for (const auto& n : kNames) {
    if (n.name == name) return n.source;
  }
  return absl::nullopt;
}

absl::string_view DeadlineSourceReason(DeadlineSource source) {
  const auto i = static_cast<int>(source);
  return i < kDeadlineSourceCount ? kNames[i].reason : "";
}

absl::optional<DeadlineSource> DeadlineSourceFromReason(absl::string_view reason) {
  if (reason.empty()) return absl::nullopt;
  for (const auto& n : kNames) {
    if (n.reason == reason) return n.source;
  }
  return absl::nullopt;
}

}  // namespace hopbudget
