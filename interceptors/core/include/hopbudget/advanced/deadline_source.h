// Copyright hopbudget authors.
//
// deadline_source.h: which budget a deadline came from, and so which budget
// fired when a call ends in DEADLINE_EXCEEDED.
//
// The names are what appears on the wire (`hopbudget-source` trailer), in
// metrics labels and in logs; the reasons are the `ErrorInfo.reason` values in
// `grpc-status-details-bin`. Both are stable.
//
//   source                  name                    reason
//   kClient                 client                  CLIENT_DEADLINE_EXCEEDED
//   kRequest                request                 REQUEST_BUDGET_EXHAUSTED
//   kAttempt                attempt                 ATTEMPT_BUDGET_EXHAUSTED
//   kIdle                   idle                    STREAM_IDLE_BUDGET_EXHAUSTED
//   kDownstream             downstream              DOWNSTREAM_DEADLINE_EXCEEDED
//   kExhaustedBeforeCall    exhausted-before-call   BUDGET_EXHAUSTED_BEFORE_CALL
//   kArrivedExpired         arrived-expired         ARRIVED_EXPIRED
//   kShield                 shield                  SHIELD_BOUND_EXCEEDED
//   kSlotWait               slot-wait               SLOT_WAIT_EXHAUSTED
//   kQueueWait              queue-wait              ADMISSION_QUEUE_EXHAUSTED
//   kCannotFinish           cannot-finish           PREDICTED_TO_MISS_DEADLINE
//   kNoBackend              no-backend              NO_READY_BACKEND_IN_BUDGET
//
// kDownstream is a hop's local view ("it fired further down"); attribution
// that travels upstream always names the origin source and hop instead, except
// when a handler dropped that detail, in which case the origin stays unknown.
//
// Thread safety: pure functions.
#ifndef HOPBUDGET_ADVANCED_DEADLINE_SOURCE_H_
#define HOPBUDGET_ADVANCED_DEADLINE_SOURCE_H_

#include <cstdint>
#include <ostream>

#include "absl/strings/string_view.h"
#include "absl/types/optional.h"

namespace hopbudget {

enum class DeadlineSource : uint8_t {
  kNone = 0,             // no budget applies (infinite deadline)
  kClient,               // the deadline the inbound caller gave this hop
  kRequest,              // this service's per-request cap
  kAttempt,              // a per-attempt cap on a downstream call
  kIdle,                 // a stream was silent longer than its idle budget
  kDownstream,           // a budget fired at a hop further down the chain
  kExhaustedBeforeCall,  // too little budget left to start a downstream call
  kArrivedExpired,       // the inbound call arrived expired or below minimum
  kShield,               // the bound of shielded work (shield.h)
  kSlotWait,             // no concurrency slot towards a downstream in time (slots.h)
  kQueueWait,            // waited for admission until the budget ran out (admission.h)
  kCannotFinish,         // less budget than the predicted handler time (admission.h)
  kNoBackend,            // no ready backend before the budget ran out (client.h)
};

inline constexpr int kDeadlineSourceCount = 13;

// "client", "request", ... ; "none" for kNone.
absl::string_view DeadlineSourceName(DeadlineSource source);
// For absl::StrCat and absl::StrFormat("%v") (Abseil releases that read
// AbslStringify), and for GoogleTest and streams: the name above.
template <typename Sink>
void AbslStringify(Sink& sink, DeadlineSource value) {
  sink.Append(DeadlineSourceName(value));
}
inline std::ostream& operator<<(std::ostream& os, DeadlineSource value) {
  return os << DeadlineSourceName(value);
}

// Inverse of DeadlineSourceName. Unknown names give nullopt.
absl::optional<DeadlineSource> ParseDeadlineSource(absl::string_view name);

// The ErrorInfo reason, e.g. "ATTEMPT_BUDGET_EXHAUSTED"; "" for kNone.
absl::string_view DeadlineSourceReason(DeadlineSource source);

// Inverse of DeadlineSourceReason. Unknown reasons give nullopt.
absl::optional<DeadlineSource> DeadlineSourceFromReason(absl::string_view reason);

}  // namespace hopbudget

#endif  // HOPBUDGET_ADVANCED_DEADLINE_SOURCE_H_
