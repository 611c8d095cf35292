// Copyright hopbudget authors.
//
// grpc_glue.h (internal): the few conversions between gRPC's types and
// hopbudget's, shared by the interceptors.
#ifndef HOPBUDGET_INTERNAL_GRPC_GLUE_H_
#define HOPBUDGET_INTERNAL_GRPC_GLUE_H_

#include <chrono>
#include <string>

#include "absl/strings/string_view.h"

#include "absl/time/time.h"
#include "hopbudget/server.h"

namespace hopbudget {
namespace internal {

// Request metadata set by NewDownstreamContext() for the client interceptor,
// which removes it before the headers are sent: which budget defines the
// call's deadline, and how long that budget is ("attempt/100000", in
// microseconds, so attribution reports the budget as configured rather than
// as measured from the interceptor's start). Harmless if a channel without
// hopbudget sends it.
inline constexpr char kInternalSourceKey[] = "hopbudget-internal-source";

struct SourceTag {
  DeadlineSource source = DeadlineSource::kNone;
  absl::Duration budget = absl::InfiniteDuration();
};
std::string FormatSourceTag(DeadlineSource source, absl::Duration budget);
// Unparseable tags give kNone with an infinite budget.
SourceTag ParseSourceTag(absl::string_view tag);
// Per-call stream idle budget in microseconds (SetStreamIdleBudget()).
inline constexpr char kInternalIdleKey[] = "hopbudget-internal-idle-us";

// gRPC reports "no deadline" as time_point::max(); absl::FromChrono would turn
// that into a finite year-2262 time.
inline absl::Time ToAbslTime(std::chrono::system_clock::time_point tp) {
  if (tp == std::chrono::system_clock::time_point::max()) return absl::InfiniteFuture();
  if (tp == std::chrono::system_clock::time_point::min()) return absl::InfinitePast();
  return absl::FromChrono(tp);
}

// The InboundBudget bound to this thread by an InboundScope, or nullptr.
const InboundBudget* CurrentInbound();

}  // namespace internal
}  // namespace hopbudget

#endif  // HOPBUDGET_INTERNAL_GRPC_GLUE_H_
