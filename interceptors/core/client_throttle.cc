// Copyright hopbudget authors.

#include "hopbudget/advanced/client_throttle.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace hopbudget {
namespace {

constexpr int kCountBits = 40;
constexpr uint64_t kCountMask = (uint64_t{1} << kCountBits) - 1;
constexpr uint64_t kEpochMask = (uint64_t{1} << (64 - kCountBits)) - 1;

uint64_t EpochTag(int64_t epoch) { return static_cast<uint64_t>(epoch) & kEpochMask; }

}  // namespace

absl::Status ValidateClientThrottlePolicy(const ClientThrottlePolicy& policy) {
  if (!(policy.k >= 1.0) || !std::isfinite(policy.k)) {
    return absl::InvalidArgumentError(
        absl::StrCat("client throttle: k must be a finite number >= 1, got ", policy.k));
  }
  if (policy.window <= absl::ZeroDuration() || policy.window == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("client throttle: window must be positive and finite, got ",
                     absl::FormatDuration(policy.window)));
  }
  if (policy.buckets < 1 || policy.buckets > 1000) {
    return absl::InvalidArgumentError(
        absl::StrCat("client throttle: buckets must be in 1..1000, got ", policy.buckets));
  }
  if (policy.window / policy.buckets < absl::Microseconds(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("client throttle: window / buckets must be at least 1 us, got ",
                     absl::FormatDuration(policy.window / policy.buckets)));
  }
  return absl::OkStatus();
}

absl::string_view ThrottleDecisionName(ThrottleDecision decision) {
  switch (decision) {
    case ThrottleDecision::kSend:
      return "send";
    case ThrottleDecision::kRejectLocally:
      return "reject_locally";
  }
  return "unknown";
}

absl::string_view BackendAnswerName(BackendAnswer answer) {
  switch (answer) {
    case BackendAnswer::kAccepted:
      return "accepted";
    case BackendAnswer::kRejected:
      return "rejected";
  }
  return "unknown";
}

BackendAnswer BackendAnswerOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
      return BackendAnswer::kRejected;
    default:
      return BackendAnswer::kAccepted;
  }
}

double ClientRejectProbability(double requests, double accepts, double k) {
  requests = std::max(requests, 0.0);
  accepts = std::max(accepts, 0.0);
  return std::max(0.0, (requests - k * accepts) / (requests + 1.0));
}

ThrottleDecision DecideClientThrottle(double requests, double accepts, double k, double uniform01) {
  return uniform01 < ClientRejectProbability(requests, accepts, k)
             ? ThrottleDecision::kRejectLocally
             : ThrottleDecision::kSend;
}

absl::StatusOr<std::unique_ptr<ClientThrottle>> ClientThrottle::Create(
    const ClientThrottlePolicy& policy, Clock* clock) {
  if (absl::Status s = ValidateClientThrottlePolicy(policy); !s.ok()) return s;
  if (clock == nullptr) return absl::InvalidArgumentError("client throttle: clock is null");
  return std::unique_ptr<ClientThrottle>(new ClientThrottle(policy, clock));
}

ClientThrottle::ClientThrottle(const ClientThrottlePolicy& policy, Clock* clock)
    : policy_(policy),
      clock_(*clock),
      start_(clock->Now()),
      bucket_width_(policy.window / policy.buckets),
      requests_(new std::atomic<uint64_t>[static_cast<size_t>(policy.buckets)]),
      accepts_(new std::atomic<uint64_t>[static_cast<size_t>(policy.buckets)]) {
  // Epoch 0's tag with a count of 0 in every bucket: an untouched bucket
  // adds nothing whichever epoch it is taken for.
  for (int i = 0; i < policy.buckets; ++i) {
    requests_[i].store(0, std::memory_order_relaxed);
    accepts_[i].store(0, std::memory_order_relaxed);
  }
}

int64_t ClientThrottle::EpochNow() const {
  const absl::Duration since = clock_.Now() - start_;
  if (since <= absl::ZeroDuration()) return 0;
  return since / bucket_width_;  // whole bucket widths
}

void ClientThrottle::Add(std::atomic<uint64_t>* slots, int64_t epoch) {
  std::atomic<uint64_t>& slot = slots[epoch % policy_.buckets];
  const uint64_t tag = EpochTag(epoch) << kCountBits;
  uint64_t seen = slot.load(std::memory_order_relaxed);
  while (true) {
    // A bucket still holding an older epoch starts again from 0 for this
    // one; the exchange fails (and is retried) if another thread got there
    // first, so neither count is lost.
    const uint64_t count = (seen & ~kCountMask) == tag ? (seen & kCountMask) : 0;
    const uint64_t next = tag | std::min(count + 1, kCountMask);
    if (slot.compare_exchange_weak(seen, next, std::memory_order_relaxed)) return;
  }
}

int64_t ClientThrottle::Sum(const std::atomic<uint64_t>* slots, int64_t epoch) const {
  int64_t sum = 0;
  for (int i = 0; i < policy_.buckets; ++i) {
    const uint64_t word = slots[i].load(std::memory_order_relaxed);
    const uint64_t tag = word >> kCountBits;
    // How many buckets ago it was written (modulo the tag's range: a bucket
    // untouched for exactly 2^24 bucket widths would be read as current).
    const uint64_t age = (EpochTag(epoch) - tag) & kEpochMask;
    if (age < static_cast<uint64_t>(policy_.buckets))
      sum += static_cast<int64_t>(word & kCountMask);
  }
  return sum;
}

ThrottleDecision ClientThrottle::Decide(double uniform01) {
  const int64_t epoch = EpochNow();
  const ThrottleDecision d =
      DecideClientThrottle(static_cast<double>(Sum(requests_.get(), epoch)),
                           static_cast<double>(Sum(accepts_.get(), epoch)), policy_.k, uniform01);
  // A request counts once its fate is known: here when it is refused, in
  // Record() when it was sent. Counted when sent, the requests still in
  // flight weighed against accepts that had not come back yet: a client
  // that had just started refused most of its first calls (2.7 % of a
  // 3 s run at 50 calls/s, 17 % at 400/s, before the backend refused
  // anything).
  if (d == ThrottleDecision::kRejectLocally) Add(requests_.get(), epoch);
  return d;
}

void ClientThrottle::Record(BackendAnswer answer) {
  const int64_t epoch = EpochNow();
  Add(requests_.get(), epoch);
  if (answer == BackendAnswer::kAccepted) Add(accepts_.get(), epoch);
}

ClientThrottle::Counts ClientThrottle::InWindow() const {
  const int64_t epoch = EpochNow();
  Counts c;
  c.requests = Sum(requests_.get(), epoch);
  c.accepts = Sum(accepts_.get(), epoch);
  return c;
}

double ClientThrottle::RejectProbability() const {
  const Counts c = InWindow();
  return ClientRejectProbability(static_cast<double>(c.requests), static_cast<double>(c.accepts),
                                 policy_.k);
}

}  // namespace hopbudget
