// Copyright hopbudget authors.
#include "timer_service.h"

#include <algorithm>

namespace hopbudget {
namespace internal {

TimerService::TimerService(Clock& clock, Options options) : clock_(clock) {
  if (options.start_thread) thread_ = std::thread([this] { Loop(); });
}

TimerService::~TimerService() {
  {
    internal::MutexLock lock(&mu_);
    stop_ = true;
    changed_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
}

TimerService& TimerService::Shared() {
  static TimerService* const service = new TimerService(Clock::Real());
  return *service;
}

TimerService::TimerId TimerService::Schedule(absl::Time when, absl::Duration slack, Callback fn) {
  internal::MutexLock lock(&mu_);
  const TimerId id = next_id_++;
  if (when == absl::InfiniteFuture()) return id;
  queue_.emplace(Key{when, id}, std::move(fn));
  when_.emplace(id, when);
  // Not only a new front: after a slack timer the thread may sleep past the
  // front, and after a Cancel() it may wake before it (and then re-reads the
  // queue, so a timer behind that wake-up needs no signal either).
  if (when + std::max(slack, absl::ZeroDuration()) < wake_at_) {
    ++wakeups_;
    wake_at_ = absl::InfinitePast();  // one signal is enough until it sleeps again
    changed_.Signal();
  }
  return id;
}

TimerService::CancelOutcome TimerService::Cancel(TimerId id) {
  internal::MutexLock lock(&mu_);
  auto it = when_.find(id);
  if (it != when_.end()) {
    queue_.erase(Key{it->second, id});
    when_.erase(it);
    return CancelOutcome::kCancelled;
  }
  if (running_ == id && running_thread_ != std::this_thread::get_id()) {
    while (running_ == id) callback_done_.Wait(&mu_);
  }
  return CancelOutcome::kTooLate;
}

bool TimerService::RunOneLocked() {
  if (queue_.empty()) return false;
  auto first = queue_.begin();
  if (first->first.first > clock_.Now()) return false;
  const TimerId id = first->first.second;
  Callback fn = std::move(first->second);
  queue_.erase(first);
  when_.erase(id);
  running_ = id;
  running_thread_ = std::this_thread::get_id();
  mu_.Unlock();
  std::move(fn)();
  mu_.Lock();
  running_ = 0;
  running_thread_ = std::thread::id();
  callback_done_.SignalAll();
  return true;
}

int TimerService::RunDue() {
  internal::MutexLock lock(&mu_);
  int ran = 0;
  while (RunOneLocked()) ++ran;
  return ran;
}

size_t TimerService::pending() const {
  internal::MutexLock lock(&mu_);
  return queue_.size();
}

uint64_t TimerService::wakeups() const {
  internal::MutexLock lock(&mu_);
  return wakeups_;
}

absl::Time TimerService::next_wake() const {
  internal::MutexLock lock(&mu_);
  return wake_at_;
}

void TimerService::Loop() {
  internal::MutexLock lock(&mu_);
  while (!stop_) {
    if (RunOneLocked()) continue;
    if (queue_.empty()) {
      wake_at_ = absl::InfiniteFuture();
      changed_.Wait(&mu_);
    } else {
      wake_at_ = queue_.begin()->first.first;
      changed_.WaitWithTimeout(&mu_, wake_at_ - clock_.Now());
    }
    wake_at_ = absl::InfinitePast();
  }
}

}  // namespace internal
}  // namespace hopbudget
