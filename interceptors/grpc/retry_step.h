// Copyright hopbudget authors.
//
// retry_step.h (internal): the step every retrying form takes when one of
// its attempts ends, shared by the retrying channel (retry_interceptor.cc)
// and the typed retry loop (retry_loop.cc), so that both feed the throttle,
// draw jitter, decide (DecideRetry) and count alike.
//
// Thread safety: not thread-safe (it owns the jitter generator); each
// logical call has its own, used under that call's lock.
#ifndef HOPBUDGET_INTERNAL_RETRY_STEP_H_
#define HOPBUDGET_INTERNAL_RETRY_STEP_H_

#include <grpcpp/support/status.h>

#include "absl/random/random.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "hopbudget/advanced/clock.h"
#include "hopbudget/advanced/metrics.h"
#include "hopbudget/advanced/retry_policy.h"

namespace hopbudget {
namespace internal {

class RetryStep {
 public:
  // Not owned; each must outlive the step. `attempt_policy` is the policy
  // attempts derive from (hop_reserve already taken off the logical deadline).
  RetryStep(const BudgetPolicy& attempt_policy, const RetryPolicy& retry, RetryThrottle& throttle,
            Metrics& metrics, MethodId method, Clock& clock)
      : attempt_policy_(attempt_policy),
        retry_(retry),
        throttle_(throttle),
        metrics_(metrics),
        method_(method),
        clock_(clock) {}

  // Attempt number `attempt` ended with `result`: FeedThrottle(), then
  // Decide().
  RetryDecision AfterAttempt(const AttemptResult& result, int attempt,
                             absl::Time logical_deadline) {
    FeedThrottle(result);
    return Decide(result, attempt, logical_deadline);
  }
  // Every ended attempt counts in the channel's throttle (gRFC A6), whatever
  // follows it, a cancel included.
  void FeedThrottle(const AttemptResult& result);
  // Draws the jitter (a failure only: a success is never retried), decides
  // whether another attempt fits before `logical_deadline`, and counts the
  // decision (a retry also by the failed code, a clipped backoff, a pushback
  // taken).
  RetryDecision Decide(const AttemptResult& result, int attempt, absl::Time logical_deadline);

 private:
  const BudgetPolicy& attempt_policy_;
  const RetryPolicy& retry_;
  RetryThrottle& throttle_;
  Metrics& metrics_;
  const MethodId method_;
  Clock& clock_;
  // Seeded on the first failure: seeding draws from absl's shared entropy
  // pool, which most calls, ending OK, never need.
  absl::optional<absl::BitGen> bitgen_;
};

// The status the logical call ends with when `d` says no retry follows the
// attempt that ended with `status`: `status` itself, and when only the room
// for another attempt was missing (kNoRoom) on an error that is not
// DEADLINE_EXCEEDED, its message says so.
grpc::Status NotRetried(grpc::Status status, const RetryDecision& d);

}  // namespace internal
}  // namespace hopbudget

#endif  // HOPBUDGET_INTERNAL_RETRY_STEP_H_
