// Copyright hopbudget authors.
#include "retry_step.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "metrics_recorder.h"

namespace hopbudget {
namespace internal {

void RetryStep::FeedThrottle(const AttemptResult& result) {
  switch (ThrottleEffectOf(retry_, result)) {
    case ThrottleEffect::kSuccess:
      throttle_.RecordSuccess();
      break;
    case ThrottleEffect::kFailure:
      throttle_.RecordFailure();
      break;
    case ThrottleEffect::kNone:
      break;
  }
}

RetryDecision RetryStep::Decide(const AttemptResult& result, int attempt,
                                absl::Time logical_deadline) {
  double draw = 0.0;
  if (result.code != absl::StatusCode::kOk) {
    if (!bitgen_.has_value()) bitgen_.emplace();
    draw = absl::Uniform(*bitgen_, 0.0, 1.0);
  }
  const RetryDecision d =
      DecideRetry(attempt_policy_, retry_, attempt, result, throttle_.RetryAllowed(),
                  logical_deadline, clock_.Now(), draw);
  internal::Record(metrics_).CountRetryDecision(d.outcome);
  if (d.outcome == RetryOutcome::kRetry) {
    internal::Record(metrics_).CountRetry(method_, result.code);
    if (d.backoff_clipped) internal::Record(metrics_).CountBackoffClipped();
    if (result.pushback.kind == PushbackKind::kDelay)
      internal::Record(metrics_).CountPushbackHonoured();
  }
  return d;
}

grpc::Status NotRetried(grpc::Status status, const RetryDecision& d) {
  if (d.outcome != RetryOutcome::kNoRoom ||
      status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return status;
  }
  return grpc::Status(
      status.error_code(),
      absl::StrCat(status.error_message(), " (hopbudget: no budget left for a retry)"),
      status.error_details());
}

}  // namespace internal
}  // namespace hopbudget
