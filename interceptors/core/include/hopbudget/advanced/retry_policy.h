// Copyright hopbudget authors.
//
// retry_policy.h: budget-aware retries. Pure decisions, no gRPC types.
//
// Every attempt's budget comes from the one shrinking deadline
// (DeriveCallDeadline in budget.h; why: docs/retries.md):
//   attempt deadline = min(request deadline - hop_reserve, now + attempt_cap)
// and every wait between attempts is clipped so that the next attempt still
// starts with at least min_attempt_budget: a retry never sleeps past the
// deadline, and the last attempt gets whatever remains.
//
// The pieces, in the order a retrying interceptor uses them:
//   - ValidateRetryPolicy, at start-up: ranges, and whether a retry after an
//     attempt timeout can ever run under the BudgetPolicy;
//   - after each attempt: RetryThrottle::RecordSuccess/RecordFailure (see
//     ThrottleEffectOf), then DecideRetry, which says retry (and how long to
//     wait) or why not;
//   - JitteredBackoff and ParsePushback are the building blocks of DecideRetry
//     and are public for tests and logs.
//
// gRPC status codes equal absl::StatusCode numerically; a gRPC interceptor
// casts (static_cast<absl::StatusCode>(status.error_code())).
//
// Where this differs from gRFC A6 (a DEADLINE_EXCEEDED retried only when
// this hop's attempt cap fired; pushback never shortened; no backoff reset
// after a pushback): docs/retries.md.
//
// Thread safety: the free functions are pure functions on values; the structs
// are plain values. RetryThrottle may be used concurrently (lock-free).
//
// Example (one logical call; `clock`, `bitgen`, `throttle` owned elsewhere):
//   hopbudget::RetryPolicy retry;
//   retry.max_attempts = 3;
//   absl::StatusOr<hopbudget::RetryFit> fit =
//       hopbudget::ValidateRetryPolicy(budget_policy, retry);  // at start-up
//   if (!fit.ok()) return fit.status();
//   for (int attempt = 1;; ++attempt) {
//     hopbudget::CallDeadline call = hopbudget::DeriveCallDeadline(
//         budget_policy, request.deadline, request.source, clock.Now());
//     if (call.outcome == hopbudget::CallOutcome::kExhausted) break;
//     hopbudget::AttemptResult result = RunAttempt(call);
//     switch (hopbudget::ThrottleEffectOf(retry, result)) {
//       case hopbudget::ThrottleEffect::kSuccess: throttle.RecordSuccess(); break;
//       case hopbudget::ThrottleEffect::kFailure: throttle.RecordFailure(); break;
//       case hopbudget::ThrottleEffect::kNone: break;
//     }
//     hopbudget::RetryDecision d = hopbudget::DecideRetry(
//         budget_policy, retry, attempt, result, throttle.RetryAllowed(),
//         request.deadline, clock.Now(), absl::Uniform(bitgen, 0.0, 1.0));
//     if (d.outcome != hopbudget::RetryOutcome::kRetry) break;
//     SleepFor(d.backoff);
//   }
#ifndef HOPBUDGET_ADVANCED_RETRY_POLICY_H_
#define HOPBUDGET_ADVANCED_RETRY_POLICY_H_

#include <atomic>
#include <cstdint>
#include <ostream>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "hopbudget/advanced/budget.h"
#include "hopbudget/advanced/deadline_source.h"

namespace hopbudget {

// How one logical call is retried. Check with ValidateRetryPolicy.
struct RetryPolicy {
  // Total attempts, the first one included: 1 (no retries) .. 10.
  int max_attempts = 3;
  // Codes after which a retry may help. Not OK; each a valid code (1..16).
  // May be empty: an attempt-budget timeout (DEADLINE_EXCEEDED with
  // DeadlineSource::kAttempt) is retryable whether or not DEADLINE_EXCEEDED is
  // listed, and any other DEADLINE_EXCEEDED never is (see DecideRetry).
  std::vector<absl::StatusCode> retryable_codes = {absl::StatusCode::kUnavailable};
  // Upper bound of the first wait (before attempt 2). > 0, finite.
  absl::Duration initial_backoff = absl::Milliseconds(10);
  // Upper bound of every wait. >= initial_backoff, finite.
  absl::Duration max_backoff = absl::Seconds(1);
  // Growth of the upper bound per retry. >= 1, finite.
  double backoff_multiplier = 2.0;
};

// What ValidateRetryPolicy found about how many attempts fit in one request.
// All counts assume the request starts with its whole request_cap (the caller
// allowed at least that) and the first attempt starts at once; a tighter
// client deadline, or time the handler spends first, can only lower them.
struct RetryFit {
  // Attempts that start when every attempt runs until its deadline (its
  // attempt_cap, or the request deadline - hop_reserve if sooner) and every
  // wait is at its maximum (full jitter's ceiling), clipped as DecideRetry
  // clips it. The last of them may be cut short by the request deadline.
  // 1 .. max_attempts.
  int attempts_if_all_time_out = 1;
  // Attempts that start when every attempt fails at once and every wait is
  // zero (full jitter's floor). 1 .. max_attempts; for a finite request_cap
  // this is always max_attempts, since clipping never lets instant failures
  // use up the budget.
  int attempts_if_fast_failures = 1;
  // Whether an attempt that used its whole attempt budget can be followed by
  // another one: after it, at least min_attempt_budget is left before the
  // request deadline - hop_reserve, with zero wait. False when max_attempts is
  // 1, and when attempt_cap is infinite (the attempt budget is then the
  // request's, and using it up leaves nothing).
  bool timeout_retry_possible = false;
};

// Validates `retry` alone and against `budget`. Checks, in order:
//   1. each field of `retry` is in range (the message names the field);
//   2. with max_attempts > 1 and finite, non-negative fields: when
//        attempt_cap + hop_reserve + min_attempt_budget > request_cap,
//      an attempt that times out leaves no room for a retry: InvalidArgument,
//      e.g. "retry policy: attempt_cap (10s) + hop_reserve (2ms) +
//      min_attempt_budget (1ms) > request_cap (5s): an attempt that times out
//      leaves no room for a retry; at most 1 of 3 attempts can run".
//      This runs before step 3 so that the incident configuration, which
//      ValidatePolicy also rejects, gets the message that names the attempts;
//   3. ValidatePolicy(budget): its error is returned as is.
// An infinite request_cap is never rejected by step 2 and its fit is
// unbounded: both counts are max_attempts. An infinite attempt_cap is not
// rejected either (there is no attempt-budget timeout to retry after).
// Returns the fit (see RetryFit) when both policies are valid.
[[nodiscard]] absl::StatusOr<RetryFit> ValidateRetryPolicy(const BudgetPolicy& budget,
                                                           const RetryPolicy& retry);

// Full-jitter exponential backoff: the wait before the retry with index
// `retry` (0 = the wait before attempt 2) is uniform in
//   [0, min(max_backoff, initial_backoff * backoff_multiplier^retry)]
// as `unit_random` goes over [0, 1). The caller supplies `unit_random`
// (absl::Uniform(bitgen, 0.0, 1.0) in production, fixed values in tests).
// Edge cases: a negative `retry` counts as 0; any `retry` (up to INT_MAX)
// saturates at max_backoff without overflow or a loop; `unit_random` is
// clamped to [0, 1] (NaN counts as 0), so 1.0 gives the ceiling itself.
// With a policy that ValidateRetryPolicy would refuse, the result still lies
// in [0, max(0, max_backoff)].
absl::Duration JitteredBackoff(const RetryPolicy& policy, int retry, double unit_random);

// The upper bound JitteredBackoff draws from: min(max_backoff,
// initial_backoff * backoff_multiplier^retry), with the same edge cases.
absl::Duration BackoffCeiling(const RetryPolicy& policy, int retry);

// gRFC A6 server pushback, `grpc-retry-pushback-ms`.
inline constexpr char kPushbackHeader[] = "grpc-retry-pushback-ms";

enum class PushbackKind {
  kAbsent,      // no pushback: use the policy's backoff
  kDelay,       // wait `delay` instead of the backoff
  kDoNotRetry,  // the server asked not to retry (or sent garbage)
};
// Stable names for logs and test failures: "absent", "delay", "do_not_retry".
// AbslStringify and operator<< print them (GoogleTest, streams).
inline absl::string_view PushbackKindName(PushbackKind value) {
  switch (value) {
    case PushbackKind::kAbsent:
      return "absent";
    case PushbackKind::kDelay:
      return "delay";
    case PushbackKind::kDoNotRetry:
      return "do_not_retry";
  }
  return "unknown";
}
template <typename Sink>
void AbslStringify(Sink& sink, PushbackKind value) {
  sink.Append(PushbackKindName(value));
}
inline std::ostream& operator<<(std::ostream& os, PushbackKind value) {
  return os << PushbackKindName(value);
}

struct Pushback {
  PushbackKind kind = PushbackKind::kAbsent;
  absl::Duration delay = absl::ZeroDuration();  // set only for kDelay
};

// Parses a `grpc-retry-pushback-ms` value from an untrusted server:
//   - nullopt (header absent) -> kAbsent;
//   - a decimal count of milliseconds accepted by ParseMillisTrailer (wire.h:
//     ASCII digits only, no sign, space, point or exponent) and at most
//     INT32_MAX (A6 sends a signed 32-bit integer) -> kDelay;
//   - anything else, including negative ("-1" is how A6 says "do not retry"),
//     empty, malformed or oversized values -> kDoNotRetry.
// A6 asks for no unnecessary leading zeros; "007" is accepted as 7 ms
// (refusing it would only turn a delay into "do not retry").
Pushback ParsePushback(absl::optional<absl::string_view> value);

// What ended an attempt, as the interceptor saw it.
struct AttemptResult {
  absl::StatusCode code = absl::StatusCode::kOk;
  // For DEADLINE_EXCEEDED: which budget fired. kAttempt means this attempt's
  // own cap (CallDeadline::source was kAttempt), kNoBackend that it waited
  // for a ready backend until then and sent nothing; anything else (the
  // request or client budget, a budget further down, unknown) is not
  // retryable.
  DeadlineSource fired = DeadlineSource::kNone;
  Pushback pushback;
  // A streaming response already delivered a message to the application:
  // never retry (gRFC A6 "committed").
  bool committed = false;
};

enum class RetryOutcome {
  kRetry,               // wait `backoff`, then start attempt number `attempt + 1`
  kSucceeded,           // code OK: nothing to retry
  kNotRetryableCode,    // the code is not in retryable_codes
  kBudgetFired,         // DEADLINE_EXCEEDED where a non-attempt budget fired
  kCommitted,           // a response message was already delivered
  kAttemptsExhausted,   // this was attempt number max_attempts
  kPushbackDoNotRetry,  // the server's pushback said not to retry
  kThrottled,           // the retry throttle (token bucket) is at or below half
  kNoRoom,              // the next attempt could not start with min_attempt_budget
};

inline constexpr int kRetryOutcomeCount = 9;

// Stable names for metric labels and logs: "retry", "succeeded",
// "not_retryable_code", "budget_fired", "committed", "attempts_exhausted",
// "pushback_do_not_retry", "throttled", "no_room". Unknown values: "unknown".
absl::string_view RetryOutcomeName(RetryOutcome outcome);
// For absl::StrCat and absl::StrFormat("%v") (Abseil releases that read
// AbslStringify), and for GoogleTest and streams: the name above.
template <typename Sink>
void AbslStringify(Sink& sink, RetryOutcome value) {
  sink.Append(RetryOutcomeName(value));
}
inline std::ostream& operator<<(std::ostream& os, RetryOutcome value) {
  return os << RetryOutcomeName(value);
}

struct RetryDecision {
  // A default-constructed decision never retries.
  RetryOutcome outcome = RetryOutcome::kNotRetryableCode;
  // Only for kRetry: how long to wait before the next attempt, >= 0, already
  // clipped to the deadline.
  absl::Duration backoff = absl::ZeroDuration();
  // Only for kRetry: the jittered or pushback wait was shortened so that the
  // next attempt starts with min_attempt_budget left.
  bool backoff_clipped = false;
};

// Decides what to do after attempt number `attempt` (1-based) ended with
// `result`, at `now`. `parent_deadline` is the logical call's deadline (the
// one the next attempt's deadline derives from, normally
// RequestBudget::deadline; InfiniteFuture() for none).
//
// Checks, in this order; the first that applies wins:
//   1. code OK -> kSucceeded;
//   2. result.committed -> kCommitted;
//   3. DEADLINE_EXCEEDED with fired not kAttempt or kNoBackend -> kBudgetFired;
//   4. code not in retryable_codes, and not an attempt-budget timeout
//      (DEADLINE_EXCEEDED with fired kAttempt or kNoBackend) -> kNotRetryableCode;
//   5. pushback kDoNotRetry -> kPushbackDoNotRetry;
//   6. attempt >= max_attempts -> kAttemptsExhausted;
//   7. !throttle_allows -> kThrottled (pass RetryThrottle::RetryAllowed(),
//      read after recording this attempt);
//   8. wait = pushback delay if kDelay, else
//      JitteredBackoff(retry, attempt - 1, unit_random);
//   (An attempt that found no backend, DEADLINE_EXCEEDED with fired
//   kNoBackend, reached no server: steps 6 and 7 do not apply to it and its
//   wait is zero, so that the call goes on waiting for a backend as long as
//   step 9 finds room. It still counts in `attempt`. With an
//   InfiniteFuture() parent deadline that is until the call is cancelled,
//   as with gRPC's wait_for_ready.)
//   9. if even a zero wait would leave less than min_attempt_budget (or
//      nothing at all, when it is zero) before parent_deadline - hop_reserve
//      -> kNoRoom: the next attempt's DeriveCallDeadline would be kExhausted;
//  10. a pushback delay that does not fit -> kNoRoom (it is never shortened);
//      otherwise the wait is shortened, if needed, so the next attempt starts with at
//      least min_attempt_budget (and more than zero) left before
//      parent_deadline - hop_reserve, and so never sleeps past the deadline
//      -> kRetry with `backoff` and `backoff_clipped`.
// With kRetry, DeriveCallDeadline(budget, parent_deadline, source,
// now + backoff) is kProceed (given a valid `budget`, whose attempt_cap is
// >= min_attempt_budget). An expired or InfinitePast() parent deadline gives
// kNoRoom at step 9; an InfiniteFuture() one never clips.
RetryDecision DecideRetry(const BudgetPolicy& budget, const RetryPolicy& retry, int attempt,
                          const AttemptResult& result, bool throttle_allows,
                          absl::Time parent_deadline, absl::Time now, double unit_random);

// What an ended attempt does to a RetryThrottle (gRFC A6: only failures that
// a retry could address count, so that malformed requests do not throttle).
enum class ThrottleEffect {
  kNone,     // not counted
  kSuccess,  // RecordSuccess(): code OK
  kFailure,  // RecordFailure(): a code DecideRetry treats as retryable (step 4
             // above: listed, or an attempt-budget timeout), or any answer
             // carrying a pushback (the server is overloaded: an admission
             // shed, server.h, carries one). An attempt that found no backend
             // is kNone: it reached no server.
};
// Stable names for logs and test failures: "none", "success", "failure".
// AbslStringify and operator<< print them (GoogleTest, streams).
inline absl::string_view ThrottleEffectName(ThrottleEffect value) {
  switch (value) {
    case ThrottleEffect::kNone:
      return "none";
    case ThrottleEffect::kSuccess:
      return "success";
    case ThrottleEffect::kFailure:
      return "failure";
  }
  return "unknown";
}
template <typename Sink>
void AbslStringify(Sink& sink, ThrottleEffect value) {
  sink.Append(ThrottleEffectName(value));
}
inline std::ostream& operator<<(std::ostream& os, ThrottleEffect value) {
  return os << ThrottleEffectName(value);
}

// Classifies `result` for the throttle. Independent of `committed` and of the
// attempt number: the server failed either way.
ThrottleEffect ThrottleEffectOf(const RetryPolicy& retry, const AttemptResult& result);

// gRFC A6 retryThrottling options.
struct RetryThrottleOptions {
  // Size of the bucket: 1 .. 1000.
  int max_tokens = 10;
  // Tokens one success adds back: (0, 1], kept to 3 decimal places (A6), so
  // it must be at least 0.0005 (which rounds to 0.001).
  double token_ratio = 0.1;
};

// gRFC A6 retry throttling: one token bucket per target (per server name).
// It starts full (max_tokens). Each failed attempt of a retryable kind
// (ThrottleEffectOf) costs 1 token, each success adds token_ratio; the count
// stays within [0, max_tokens]. Retries are allowed only while
// tokens > max_tokens / 2, so a target that fails more than it succeeds stops
// receiving retries, while first attempts always go out.
//
// Record the attempt before asking RetryAllowed(), so that the failure that
// reaches the threshold is itself not retried (as gRPC core does).
//
// Thread safety: all methods may be called concurrently; lock-free (one
// std::atomic<int64_t> of milli-tokens, updated with compare-and-swap, so
// every update is counted and the bounds hold under contention).
//
// Example:
//   hopbudget::RetryThrottle throttle;  // per target
//   throttle.RecordFailure();
//   bool allowed = throttle.RetryAllowed();
class RetryThrottle {
 public:
  // Options out of range are clamped to the nearest valid value; call
  // Validate() first to refuse them instead.
  explicit RetryThrottle(RetryThrottleOptions options = {});

  RetryThrottle(const RetryThrottle&) = delete;
  RetryThrottle& operator=(const RetryThrottle&) = delete;

  // InvalidArgument naming the field when `options` is out of range.
  static absl::Status Validate(const RetryThrottleOptions& options);

  void RecordSuccess();
  void RecordFailure();

  // tokens > max_tokens / 2.
  bool RetryAllowed() const;

  // The current count, in tokens (a multiple of 0.001).
  double tokens() const;

 private:
  const int64_t max_milli_;    // max_tokens * 1000
  const int64_t ratio_milli_;  // token_ratio * 1000, rounded
  std::atomic<int64_t> milli_;
};

// What a retrying channel or loop is set up with, checked as a whole.
enum class RetrySetup {
  kFits,           // every check passed
  kUnfitAccepted,  // only the fit failed, and accept_unfit_policy allowed it
};
// Stable names for logs and test failures: "fits", "unfit_accepted".
// AbslStringify and operator<< print them (GoogleTest, streams).
inline absl::string_view RetrySetupName(RetrySetup value) {
  switch (value) {
    case RetrySetup::kFits:
      return "fits";
    case RetrySetup::kUnfitAccepted:
      return "unfit_accepted";
  }
  return "unknown";
}
template <typename Sink>
void AbslStringify(Sink& sink, RetrySetup value) {
  sink.Append(RetrySetupName(value));
}
inline std::ostream& operator<<(std::ostream& os, RetrySetup value) {
  return os << RetrySetupName(value);
}

// Checks, in order: ValidatePolicy(budget), RetryThrottle::Validate,
// ValidateRetryPolicy's ranges (with no request cap, where nothing can fail
// to fit), then the fit against request_cap. A fit that fails is returned
// as the error unless `accept_unfit_policy`.
[[nodiscard]] absl::StatusOr<RetrySetup> ValidateRetrySetup(const BudgetPolicy& budget,
                                                            const RetryPolicy& retry,
                                                            const RetryThrottleOptions& throttle,
                                                            bool accept_unfit_policy);

}  // namespace hopbudget

#endif  // HOPBUDGET_ADVANCED_RETRY_POLICY_H_
