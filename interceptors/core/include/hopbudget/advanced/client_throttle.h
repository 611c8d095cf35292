// Copyright hopbudget authors.
//
// client_throttle.h: client-side adaptive throttling (Google SRE book,
// ch. 21, "Client-side throttling"). Pure decisions, no gRPC types.
//
// A backend that sheds load still pays for every refusal: it receives the
// call, decides and answers. When clients keep sending four times what it
// can serve, the refusals alone eat the capacity the shedding was meant to
// save. Each client therefore counts, over a trailing window, the requests
// its application made (`requests`) and those the backend accepted
// (`accepts`), and refuses a new request itself, without sending it, with
// probability
//
//   max(0, (requests - k * accepts) / (requests + 1))
//
// While the backend accepts everything the probability is 0. Once it
// refuses, the client sends about k times what it accepts: with k = 2 (the
// book's choice) a backend at 4x its capacity sees about 2x, and the
// refusals it still answers keep the counts current, so the client follows
// as capacity comes back. Requests refused locally count as requests: that
// is what makes the throttle adaptive. A request counts once its fate is
// known (refused here, or answered), so that calls still in flight do not
// weigh against accepts that have not come back yet: a client that has
// just started does not refuse its first calls.
//
// Distinct from RetryThrottle (retry_policy.h, gRFC A6), which stops
// retries to a failing target and never holds back a first attempt.
//
// What counts as accepted: BackendAnswerOf. Any answer but an overload one;
// RESOURCE_EXHAUSTED (a shed, with or without pushback), UNAVAILABLE and
// DEADLINE_EXCEEDED (the call was not served in time, whoever's budget
// fired) count as refusals.
//
// Thread safety: the free functions are pure. ClientThrottle may be used
// from any number of threads at once; it is lock-free (each count is one
// 64-bit atomic per bucket holding the bucket's epoch and its count, updated
// with compare-and-swap, so no count is lost or credited to the wrong
// bucket when a bucket is reused).
//
// Example (a client's call path):
//   auto throttle = *hopbudget::ClientThrottle::Create({}, &clock);
//   if (throttle->Decide(uniform01(rng)) == hopbudget::ThrottleDecision::kRejectLocally) {
//     return RESOURCE_EXHAUSTED;  // not sent
//   }
//   grpc::Status s = stub->Call(&ctx, req, &resp);
//   throttle->Record(hopbudget::BackendAnswerOf(
//       static_cast<absl::StatusCode>(s.error_code())));
#ifndef HOPBUDGET_ADVANCED_CLIENT_THROTTLE_H_
#define HOPBUDGET_ADVANCED_CLIENT_THROTTLE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <ostream>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "hopbudget/advanced/clock.h"

namespace hopbudget {

struct ClientThrottlePolicy {
  // How many times what the backend accepts a client keeps sending, >= 1.
  // Lower is more aggressive (less waste, slower to notice recovery).
  double k = 2.0;
  // How far back requests and accepts count, > 0.
  absl::Duration window = absl::Minutes(2);
  // The window is kept as this many buckets (its resolution), 1 .. 1000.
  int buckets = 20;
};

// InvalidArgument naming the field when `policy` is out of range.
absl::Status ValidateClientThrottlePolicy(const ClientThrottlePolicy& policy);

enum class ThrottleDecision {
  kSend,           // send the request
  kRejectLocally,  // refuse it here; it never reaches the backend
};
absl::string_view ThrottleDecisionName(ThrottleDecision decision);
template <typename Sink>
void AbslStringify(Sink& sink, ThrottleDecision value) {
  sink.Append(ThrottleDecisionName(value));
}
inline std::ostream& operator<<(std::ostream& os, ThrottleDecision value) {
  return os << ThrottleDecisionName(value);
}

enum class BackendAnswer {
  kAccepted,  // served (whatever it answered)
  kRejected,  // refused or not served in time: overload
};
absl::string_view BackendAnswerName(BackendAnswer answer);
template <typename Sink>
void AbslStringify(Sink& sink, BackendAnswer value) {
  sink.Append(BackendAnswerName(value));
}
inline std::ostream& operator<<(std::ostream& os, BackendAnswer value) {
  return os << BackendAnswerName(value);
}

// RESOURCE_EXHAUSTED, UNAVAILABLE and DEADLINE_EXCEEDED are refusals; every
// other code (OK, and errors the backend computed) is an accepted request.
BackendAnswer BackendAnswerOf(absl::StatusCode code);

// max(0, (requests - k * accepts) / (requests + 1)), in [0, 1). Negative
// counts are taken as 0.
double ClientRejectProbability(double requests, double accepts, double k);

// kRejectLocally when `uniform01` (a uniform draw in [0, 1) from the
// caller's generator) falls below ClientRejectProbability.
ThrottleDecision DecideClientThrottle(double requests, double accepts, double k, double uniform01);

// The counts over a trailing window and the decision on them. Create()
// refuses a policy ValidateClientThrottlePolicy rejects; `clock` is not
// owned and must outlive the throttle.
class ClientThrottle {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<ClientThrottle>> Create(
      const ClientThrottlePolicy& policy, Clock* clock);

  ClientThrottle(const ClientThrottle&) = delete;
  ClientThrottle& operator=(const ClientThrottle&) = delete;

  // Decides whether a request is sent, and counts it if it is refused
  // here. `uniform01` as for DecideClientThrottle. A request refused here
  // is not Record()ed.
  ThrottleDecision Decide(double uniform01);
  // Counts a request that was sent, and what the backend did with it.
  void Record(BackendAnswer answer);

  struct Counts {
    int64_t requests = 0;
    int64_t accepts = 0;
  };
  // The counts in the window ending now: the current bucket and the
  // buckets - 1 before it, so between window - window / buckets and window
  // of history.
  Counts InWindow() const;
  // ClientRejectProbability of InWindow().
  double RejectProbability() const;

 private:
  ClientThrottle(const ClientThrottlePolicy& policy, Clock* clock);
  int64_t EpochNow() const;
  void Add(std::atomic<uint64_t>* slots, int64_t epoch);
  int64_t Sum(const std::atomic<uint64_t>* slots, int64_t epoch) const;

  const ClientThrottlePolicy policy_;
  Clock& clock_;
  const absl::Time start_;
  const absl::Duration bucket_width_;
  // One word per bucket: the bucket's epoch (high 24 bits) and its count
  // (low 40 bits).
  std::unique_ptr<std::atomic<uint64_t>[]> requests_;
  std::unique_ptr<std::atomic<uint64_t>[]> accepts_;
};

}  // namespace hopbudget

#endif  // HOPBUDGET_ADVANCED_CLIENT_THROTTLE_H_
