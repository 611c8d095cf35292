// Copyright hopbudget authors.
#include "admission_gate.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "hopbudget/advanced/policy_table.h"

namespace hopbudget {
namespace internal {

WorkerPool::WorkerPool(int max_threads) : max_threads_(std::max(1, max_threads)) {}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void WorkerPool::Run(absl::AnyInvocable<void() &&> task) {
  std::lock_guard<std::mutex> lock(mu_);
  tasks_.push_back(std::move(task));
  // A new thread only when nobody idles and the cap allows: blocking
  // handlers hold their worker for as long as they run.
  if (idle_ == 0 && static_cast<int>(threads_.size()) < max_threads_) {
    threads_.emplace_back([this] { Loop(); });
  } else {
    cv_.notify_one();
  }
}

int WorkerPool::threads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(threads_.size());
}

void WorkerPool::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    ++idle_;
    cv_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
    --idle_;
    if (tasks_.empty()) return;  // stopping, nothing left
    auto task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    std::move(task)();
    lock.lock();
  }
}

namespace {

int WorkersFor(const AdmissionOptions& o) {
  if (o.handlers == HandlerThreads::kNonBlocking) return 2;
  return o.policy.limit == LimitKind::kAdaptive ? o.policy.max_limit : o.policy.max_in_flight;
}

}  // namespace

absl::StatusOr<std::unique_ptr<AdmissionGate>> AdmissionGate::Create(
    const AdmissionOptions& options, absl::Duration min_attempt_budget, Clock* clock,
    TimerService* timers) {
  for (const std::string& m : options.methods) {
    if (m.size() < 3 || m[0] != '/' || m.find('/', 1) == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "admission: methods: \"", m, "\" is not a full method name (/package.Service/Method)"));
    }
  }
  auto admission = Admission::Create(options.policy, min_attempt_budget, clock);
  if (!admission.ok()) return admission.status();
  return std::unique_ptr<AdmissionGate>(new AdmissionGate(options, *std::move(admission), timers));
}

AdmissionGate::AdmissionGate(const AdmissionOptions& options, std::unique_ptr<Admission> admission,
                             TimerService* timers)
    : options_(options),
      admission_(std::move(admission)),
      timers_(*timers),
      refusers_(2),
      starters_(WorkersFor(options)) {}

AdmissionGate::~AdmissionGate() {
  TimerService::TimerId timer;
  {
    std::lock_guard<std::mutex> lock(timer_mu_);
    stopping_ = true;
    timer = timer_;
    timer_ = 0;
  }
  if (timer != 0) timers_.Cancel(timer);
}

const AdmissionGate::Method& AdmissionGate::For(const char* method) {
  std::lock_guard<std::mutex> lock(methods_mu_);
  std::unique_ptr<Method>& m = methods_[method];
  if (m == nullptr) {
    m = std::make_unique<Method>();
    const absl::string_view name(method);
    // gRPC's own services are never held back: health checks must answer
    // under overload, and reflection and channelz are how an operator looks
    // in.
    m->covered =
        !IsGrpcServiceMethod(name) &&
        (options_.methods.empty() || std::find(options_.methods.begin(), options_.methods.end(),
                                               name) != options_.methods.end());
    if (m->covered) m->predictor = std::make_unique<LatencyPredictor>(options_.policy);
  }
  return *m;
}

void AdmissionGate::Dispatch(const Admission::Ready& ready) {
  for (Admission::Waiter* w : ready.admitted) {
    auto* client = static_cast<AdmissionClient*>(w->user);
    starters_.Run([client] { client->Admitted(); });
  }
  for (const auto& [w, why] : ready.shed) {
    auto* client = static_cast<AdmissionClient*>(w->user);
    refusers_.Run([client, why = why] { client->Shed(why); });
  }
}

void AdmissionGate::Queued(absl::Time expiry) {
  TimerService::TimerId old = 0;
  {
    std::lock_guard<std::mutex> lock(timer_mu_);
    if (stopping_ || expiry >= armed_at_) return;
    old = timer_;
    armed_at_ = expiry;
    const uint64_t generation = ++generation_;
    timer_ = timers_.Schedule(expiry, [this, generation] { OnTimer(generation); });
  }
  // The earlier timer replaces the later one (if that one is firing now,
  // Cancel waits for it; it sees it is no longer in charge).
  if (old != 0) timers_.Cancel(old);
}

void AdmissionGate::OnTimer(uint64_t generation) {
  Admission::Ready ready;
  admission_->Expire(&ready);
  Dispatch(ready);
  std::lock_guard<std::mutex> lock(timer_mu_);
  // One timer is in charge at a time: a newer one armed by Queued() takes
  // over, and this one arms nothing.
  if (stopping_ || generation != generation_) return;
  const absl::Time next = admission_->NextExpiry();
  armed_at_ = next;
  timer_ = 0;
  if (next != absl::InfiniteFuture()) {
    const uint64_t g = ++generation_;
    timer_ = timers_.Schedule(next, [this, g] { OnTimer(g); });
  }
}

}  // namespace internal
}  // namespace hopbudget
