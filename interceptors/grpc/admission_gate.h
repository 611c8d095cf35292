// Copyright hopbudget authors.
//
// admission_gate.h (internal): what the server interceptor needs around the
// core's Admission (admission.h): which methods it covers, one predictor per
// method, the one expiry timer of the queue, and the workers that start or
// refuse waiting calls.
//
// Why workers: a waiting call is held by not calling Proceed() on its first
// interception batch, and whoever calls Proceed() later runs the handler on
// its own thread (sync API) or creates the reactor (callback API). That must
// be neither the timer thread nor a thread inside another call's
// interceptor, so bounded pools do it: as many threads as the limit can
// reach for blocking (sync) handlers, two for non-blocking ones, and two
// for refusals.
#ifndef HOPBUDGET_INTERNAL_ADMISSION_GATE_H_
#define HOPBUDGET_INTERNAL_ADMISSION_GATE_H_

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "hopbudget/advanced/admission.h"
#include "hopbudget/server.h"
#include "timer_service.h"

namespace hopbudget {
namespace internal {

// A waiting call, as the gate hands it back. Implemented by the server
// interceptor; `Admission::Waiter::user` points at it.
class AdmissionClient {
 public:
  virtual void Admitted() = 0;
  virtual void Shed(ArrivalDecision why) = 0;

 protected:
  ~AdmissionClient() = default;
};

// A bounded pool of threads started on demand. Thread-safe.
class WorkerPool {
 public:
  explicit WorkerPool(int max_threads);
  ~WorkerPool();  // runs what is queued, then joins
  void Run(absl::AnyInvocable<void() &&> task);
  int threads() const;

 private:
  void Loop();
  const int max_threads_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<absl::AnyInvocable<void() &&>> tasks_;
  std::vector<std::thread> threads_;
  int idle_ = 0;
  bool stopping_ = false;
};

class AdmissionGate {
 public:
  struct Method {
    bool covered = false;
    std::unique_ptr<LatencyPredictor> predictor;  // only when covered
  };

  // `timers` and `clock` must outlive the gate.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<AdmissionGate>> Create(
      const AdmissionOptions& options, absl::Duration min_attempt_budget, Clock* clock,
      TimerService* timers);
  ~AdmissionGate();

  // The state of `method` (a gRPC method name, stable for the server's
  // life). Never null.
  const Method& For(const char* method);
  Admission& admission() { return *admission_; }
  const AdmissionPolicy& policy() const { return admission_->policy(); }

  // Starts each admitted waiter and refuses each shed one, on the workers.
  void Dispatch(const Admission::Ready& ready);
  // A waiter was queued with `expiry`: make sure the queue's timer fires by
  // then.
  void Queued(absl::Time expiry);

 private:
  AdmissionGate(const AdmissionOptions& options, std::unique_ptr<Admission> admission,
                TimerService* timers);
  void OnTimer(uint64_t generation);

  const AdmissionOptions options_;
  const std::unique_ptr<Admission> admission_;
  TimerService& timers_;
  std::mutex methods_mu_;
  absl::flat_hash_map<const char*, std::unique_ptr<Method>> methods_;
  std::mutex timer_mu_;
  TimerService::TimerId timer_ = 0;
  absl::Time armed_at_ = absl::InfiniteFuture();
  uint64_t generation_ = 0;  // of the timer in charge
  bool stopping_ = false;
  // Last: joined first, while the rest still exists. Refusals have their
  // own threads: a refused handler returns at once, and must not wait
  // behind blocking handlers to answer before its caller's deadline.
  WorkerPool refusers_;
  WorkerPool starters_;
};

}  // namespace internal
}  // namespace hopbudget

#endif  // HOPBUDGET_INTERNAL_ADMISSION_GATE_H_
