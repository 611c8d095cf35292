// Copyright hopbudget authors.
#include "hopbudget/advanced/retry_policy.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "hopbudget/advanced/wire.h"

namespace hopbudget {
namespace {

constexpr int kMaxAttemptsLimit = 10;
constexpr int kMaxTokensLimit = 1000;
constexpr int64_t kMilli = 1000;

bool IsFinite(absl::Duration d) {
  return d != absl::InfiniteDuration() && d != -absl::InfiniteDuration();
}

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("retry policy: ", what));
}

// Whether an attempt that starts with `left` before parent deadline -
// hop_reserve gets a budget DeriveCallDeadline accepts (it refuses budgets
// below min_attempt_budget, and zero ones even when the minimum is zero).
bool HasRoom(const BudgetPolicy& budget, absl::Duration left) {
  return left >= budget.min_attempt_budget && left > absl::ZeroDuration();
}

// The longest wait after which HasRoom still holds; only when HasRoom(left).
// With a zero minimum the next attempt is still left 1 ns, not nothing.
absl::Duration LongestWait(const BudgetPolicy& budget, absl::Duration left) {
  const absl::Duration keep = std::max(budget.min_attempt_budget, absl::Nanoseconds(1));
  return std::max(absl::ZeroDuration(), left - keep);  // inf - keep == inf
}

// Retryable in the sense of DecideRetry step 4 (steps 1 and 3 excluded).
// An attempt that waited its whole budget for a ready backend sent nothing:
// another attempt is as safe as it is after its own cap fired.
bool IsAttemptTimeout(const AttemptResult& result) {
  return result.code == absl::StatusCode::kDeadlineExceeded &&
         (result.fired == DeadlineSource::kAttempt || result.fired == DeadlineSource::kNoBackend);
}

bool IsNoBackend(const AttemptResult& result) {
  return result.code == absl::StatusCode::kDeadlineExceeded &&
         result.fired == DeadlineSource::kNoBackend;
}

bool IsListed(const RetryPolicy& retry, absl::StatusCode code) {
  return std::find(retry.retryable_codes.begin(), retry.retryable_codes.end(), code) !=
         retry.retryable_codes.end();
}

bool IsRetryableFailure(const RetryPolicy& retry, const AttemptResult& result) {
  if (result.code == absl::StatusCode::kOk) return false;
  if (result.code == absl::StatusCode::kDeadlineExceeded) return IsAttemptTimeout(result);
  return IsListed(retry, result.code);
}

absl::Status ValidateRetryFields(const RetryPolicy& r) {
  if (r.max_attempts < 1 || r.max_attempts > kMaxAttemptsLimit) {
    return Invalid(absl::StrCat("max_attempts (", r.max_attempts, ") is out of range [1, ",
                                kMaxAttemptsLimit, "]"));
  }
  for (absl::StatusCode code : r.retryable_codes) {
    const int n = static_cast<int>(code);
    if (code == absl::StatusCode::kOk) {
      return Invalid("retryable_codes lists OK: a success is never retried");
    }
    if (n < 1 || n > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
      return Invalid(absl::StrCat("retryable_codes lists ", n, ", not a status code (1..16)"));
    }
  }
  if (r.initial_backoff <= absl::ZeroDuration() || !IsFinite(r.initial_backoff)) {
    return Invalid(absl::StrCat("initial_backoff (", FormatBudget(r.initial_backoff),
                                ") must be > 0 and finite"));
  }
  if (!IsFinite(r.max_backoff)) {
    return Invalid("max_backoff (inf) must be finite: a retry could wait forever");
  }
  if (r.max_backoff < r.initial_backoff) {
    return Invalid(absl::StrCat("max_backoff (", FormatBudget(r.max_backoff),
                                ") < initial_backoff (", FormatBudget(r.initial_backoff), ")"));
  }
  // Written so that NaN fails too.
  if (!(r.backoff_multiplier >= 1.0) || !std::isfinite(r.backoff_multiplier)) {
    return Invalid(
        absl::StrCat("backoff_multiplier (", r.backoff_multiplier, ") must be >= 1 and finite"));
  }
  return absl::OkStatus();
}

// Attempts that start within one request of request_cap (finite), the first
// at time 0, each running `timeouts ? until its deadline : for no time`, each
// wait `timeouts ? BackoffCeiling : 0`, clipped exactly as DecideRetry clips.
// At most max_attempts iterations.
int AttemptsThatFit(const BudgetPolicy& budget, const RetryPolicy& retry, bool timeouts) {
  const absl::Duration usable = budget.request_cap - budget.hop_reserve;
  absl::Duration t = absl::ZeroDuration();
  int started = 0;
  while (started < retry.max_attempts) {
    absl::Duration left = usable - t;
    if (!HasRoom(budget, left)) break;
    ++started;
    if (started == retry.max_attempts) break;
    if (timeouts) t += std::min(budget.attempt_cap, left);  // its deadline
    left = usable - t;
    if (!HasRoom(budget, left)) break;
    if (timeouts) t += std::min(BackoffCeiling(retry, started - 1), LongestWait(budget, left));
  }
  return started;
}

}  // namespace

absl::StatusOr<RetryFit> ValidateRetryPolicy(const BudgetPolicy& budget, const RetryPolicy& retry) {
  if (absl::Status s = ValidateRetryFields(retry); !s.ok()) return s;

  // The retry-specific form of ValidatePolicy's nesting rule, checked first
  // for a better message; only on fields ValidatePolicy would not refuse on
  // their own, so that the arithmetic means something.
  const bool fields_sane =
      IsFinite(budget.request_cap) && budget.request_cap > absl::ZeroDuration() &&
      IsFinite(budget.attempt_cap) && budget.attempt_cap > absl::ZeroDuration() &&
      IsFinite(budget.hop_reserve) && budget.hop_reserve >= absl::ZeroDuration() &&
      IsFinite(budget.min_attempt_budget) && budget.min_attempt_budget >= absl::ZeroDuration();
  if (retry.max_attempts > 1 && fields_sane &&
      budget.attempt_cap + budget.hop_reserve + budget.min_attempt_budget > budget.request_cap) {
    return Invalid(
        absl::StrCat("attempt_cap (", FormatBudget(budget.attempt_cap), ") + hop_reserve (",
                     FormatBudget(budget.hop_reserve), ") + min_attempt_budget (",
                     FormatBudget(budget.min_attempt_budget), ") > request_cap (",
                     FormatBudget(budget.request_cap),
                     "): an attempt that times out leaves no room for a retry; at most 1 of ",
                     retry.max_attempts, " attempts can run"));
  }
  if (absl::Status s = ValidatePolicy(budget); !s.ok()) return s;

  RetryFit fit;
  if (!IsFinite(budget.request_cap)) {
    fit.attempts_if_all_time_out = retry.max_attempts;
    fit.attempts_if_fast_failures = retry.max_attempts;
  } else {
    fit.attempts_if_all_time_out = AttemptsThatFit(budget, retry, /*timeouts=*/true);
    fit.attempts_if_fast_failures = AttemptsThatFit(budget, retry, /*timeouts=*/false);
  }
  // With a finite request_cap, the check above and ValidatePolicy's
  // attempt_cap + hop_reserve < request_cap leave room after a timeout.
  fit.timeout_retry_possible = retry.max_attempts > 1 && IsFinite(budget.attempt_cap);
  return fit;
}

absl::Duration BackoffCeiling(const RetryPolicy& policy, int retry) {
  const absl::Duration max = std::max(absl::ZeroDuration(), policy.max_backoff);
  const absl::Duration initial = policy.initial_backoff;
  if (initial <= absl::ZeroDuration()) return absl::ZeroDuration();
  if (initial >= max) return max;
  if (retry <= 0) return initial;
  // Closed form in double rather than a loop (retry may be INT_MAX) or
  // Duration products (which could overflow): compare the growth with the
  // ratio max / initial, and multiply only when the result stays below max.
  const double m = policy.backoff_multiplier;
  const double multiplier = m >= 1.0 ? m : 1.0;                            // NaN and < 1 count as 1
  const double growth = std::pow(multiplier, static_cast<double>(retry));  // may be inf
  if (growth >= absl::FDivDuration(max, initial)) return max;
  return std::min(max, initial * growth);
}

absl::Duration JitteredBackoff(const RetryPolicy& policy, int retry, double unit_random) {
  const absl::Duration ceiling = BackoffCeiling(policy, retry);
  if (!(unit_random > 0.0)) return absl::ZeroDuration();  // also NaN
  if (unit_random >= 1.0) return ceiling;
  // The product is rounded; keep it inside [0, ceiling] regardless.
  return std::clamp(ceiling * unit_random, absl::ZeroDuration(), ceiling);
}

Pushback ParsePushback(absl::optional<absl::string_view> value) {
  Pushback out;
  if (!value.has_value()) return out;
  const ParsedMillis parsed = ParseMillisTrailer(*value);
  if (parsed.result != HeaderParse::kOk ||
      parsed.value > absl::Milliseconds(std::numeric_limits<int32_t>::max())) {
    out.kind = PushbackKind::kDoNotRetry;
    return out;
  }
  out.kind = PushbackKind::kDelay;
  out.delay = parsed.value;
  return out;
}

absl::string_view RetryOutcomeName(RetryOutcome outcome) {
  switch (outcome) {
    case RetryOutcome::kRetry:
      return "retry";
    case RetryOutcome::kSucceeded:
      return "succeeded";
    case RetryOutcome::kNotRetryableCode:
      return "not_retryable_code";
    case RetryOutcome::kBudgetFired:
      return "budget_fired";
    case RetryOutcome::kCommitted:
      return "committed";
    case RetryOutcome::kAttemptsExhausted:
      return "attempts_exhausted";
    case RetryOutcome::kPushbackDoNotRetry:
      return "pushback_do_not_retry";
    case RetryOutcome::kThrottled:
      return "throttled";
    case RetryOutcome::kNoRoom:
      return "no_room";
  }
  return "unknown";
}

RetryDecision DecideRetry(const BudgetPolicy& budget, const RetryPolicy& retry, int attempt,
                          const AttemptResult& result, bool throttle_allows,
                          absl::Time parent_deadline, absl::Time now, double unit_random) {
  RetryDecision d;
  const auto stop = [&d](RetryOutcome outcome) {
    d.outcome = outcome;
    return d;
  };
  if (result.code == absl::StatusCode::kOk) return stop(RetryOutcome::kSucceeded);
  if (result.committed) return stop(RetryOutcome::kCommitted);
  if (result.code == absl::StatusCode::kDeadlineExceeded && !IsAttemptTimeout(result)) {
    return stop(RetryOutcome::kBudgetFired);
  }
  if (!IsRetryableFailure(retry, result)) return stop(RetryOutcome::kNotRetryableCode);
  if (result.pushback.kind == PushbackKind::kDoNotRetry) {
    return stop(RetryOutcome::kPushbackDoNotRetry);
  }
  // An attempt that waited for a ready backend until its cap reached no
  // server and added no load: the next one goes on waiting at once, and
  // neither max_attempts nor the throttle (which protect servers) stop it.
  const bool no_backend = IsNoBackend(result);
  if (!no_backend && attempt >= retry.max_attempts) {
    return stop(RetryOutcome::kAttemptsExhausted);
  }
  if (!no_backend && !throttle_allows) return stop(RetryOutcome::kThrottled);

  absl::Duration wait = result.pushback.kind == PushbackKind::kDelay ? result.pushback.delay
                        : no_backend                                 ? absl::ZeroDuration()
                                     : JitteredBackoff(retry, attempt - 1, unit_random);
  wait = std::max(wait, absl::ZeroDuration());

  // Time - Time saturates: InfiniteFuture() gives InfiniteDuration() (no
  // clipping), InfinitePast() gives -InfiniteDuration() (no room).
  const absl::Duration left = (parent_deadline - budget.hop_reserve) - now;
  if (!HasRoom(budget, left)) return stop(RetryOutcome::kNoRoom);
  const absl::Duration longest = LongestWait(budget, left);
  // A server's pushback is a request to wait at least that long (gRFC A6):
  // retrying sooner would defy it, so a pushback that does not fit ends the
  // retries. Only our own backoff is clipped.
  if (result.pushback.kind == PushbackKind::kDelay && wait > longest) {
    return stop(RetryOutcome::kNoRoom);
  }
  if (wait > longest) {
    wait = longest;
    d.backoff_clipped = true;
  }
  d.outcome = RetryOutcome::kRetry;
  d.backoff = wait;
  return d;
}

ThrottleEffect ThrottleEffectOf(const RetryPolicy& retry, const AttemptResult& result) {
  if (result.code == absl::StatusCode::kOk) return ThrottleEffect::kSuccess;
  // Nothing reached a server: no failure of a target to count.
  if (IsNoBackend(result)) return ThrottleEffect::kNone;
  if (IsRetryableFailure(retry, result)) return ThrottleEffect::kFailure;
  // Any pushback is the server saying it is overloaded (an admission shed
  // carries one): a hop that sheds load is not retried into harder.
  if (result.pushback.kind != PushbackKind::kAbsent) return ThrottleEffect::kFailure;
  return ThrottleEffect::kNone;
}

namespace {

// token_ratio in milli-tokens, rounded (A6 keeps 3 decimal places). NaN and
// out-of-range values give something outside [1, 1000].
int64_t RatioMilli(double ratio) {
  if (!(ratio > 0.0)) return 0;
  if (ratio > 1.0) return kMilli + 1;
  return std::llround(ratio * kMilli);
}

}  // namespace

absl::Status RetryThrottle::Validate(const RetryThrottleOptions& options) {
  if (options.max_tokens < 1 || options.max_tokens > kMaxTokensLimit) {
    return absl::InvalidArgumentError(absl::StrCat(
        "retry throttle: max_tokens (", options.max_tokens, ") is out of range [1, 1000]"));
  }
  const int64_t ratio = RatioMilli(options.token_ratio);
  if (ratio < 1 || ratio > kMilli) {
    return absl::InvalidArgumentError(
        absl::StrCat("retry throttle: token_ratio (", options.token_ratio,
                     ") is out of range (0, 1] or below the bucket's precision (0.001)"));
  }
  return absl::OkStatus();
}

RetryThrottle::RetryThrottle(RetryThrottleOptions options)
    : max_milli_(std::clamp(options.max_tokens, 1, kMaxTokensLimit) * kMilli),
      ratio_milli_(std::clamp<int64_t>(RatioMilli(options.token_ratio), 1, kMilli)),
      milli_(max_milli_) {}

void RetryThrottle::RecordSuccess() {
  int64_t cur = milli_.load(std::memory_order_relaxed);
  while (!milli_.compare_exchange_weak(cur, std::min(max_milli_, cur + ratio_milli_),
                                       std::memory_order_relaxed)) {
  }
}

void RetryThrottle::RecordFailure() {
  int64_t cur = milli_.load(std::memory_order_relaxed);
  while (!milli_.compare_exchange_weak(cur, std::max<int64_t>(0, cur - kMilli),
                                       std::memory_order_relaxed)) {
  }
}

bool RetryThrottle::RetryAllowed() const {
  // tokens > max_tokens / 2, without rounding the half.
  return 2 * milli_.load(std::memory_order_relaxed) > max_milli_;
}

double RetryThrottle::tokens() const {
  return static_cast<double>(milli_.load(std::memory_order_relaxed)) / kMilli;
}

absl::StatusOr<RetrySetup> ValidateRetrySetup(const BudgetPolicy& budget, const RetryPolicy& retry,
                                              const RetryThrottleOptions& throttle,
                                              bool accept_unfit_policy) {
  if (absl::Status s = ValidatePolicy(budget); !s.ok()) return s;
  if (absl::Status s = RetryThrottle::Validate(throttle); !s.ok()) return s;
  BudgetPolicy unbounded = budget;
  unbounded.request_cap = absl::InfiniteDuration();
  unbounded.max_inbound_budget = absl::InfiniteDuration();
  if (absl::Status s = ValidateRetryPolicy(unbounded, retry).status(); !s.ok()) return s;
  absl::StatusOr<RetryFit> fit = ValidateRetryPolicy(budget, retry);
  if (fit.ok()) return RetrySetup::kFits;
  if (!accept_unfit_policy) return fit.status();
  return RetrySetup::kUnfitAccepted;
}

}  // namespace hopbudget
