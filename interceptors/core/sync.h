// Copyright hopbudget authors.
//
// sync.h (internal): the library's Mutex, MutexLock, CondVar, Condition and
// Notification. Every lock in interceptors/** goes through this header (the
// ctest `layers.sync_through_one_header` fails on a direct absl::Mutex,
// absl::CondVar or absl::Notification there; CallMutex in call_mutex.h is a
// std::mutex and needs nothing).
//
// Why: Debian's Abseil is not built for ThreadSanitizer, so absl::Mutex's
// lock and unlock (futexes and atomics inside an uninstrumented library) are
// invisible to TSan: in a TSan build every field it guards looks racy, and
// the reports mean nothing. So:
//   - normal builds: these names are absl's own types (aliases; no cost, the
//     same deadlock detection, the same behaviour as before);
//   - TSan builds (HOPBUDGET_TSAN, set by -DHOPBUDGET_TSAN=ON, or any
//     -fsanitize=thread compile): small std::mutex/std::condition_variable
//     types with the subset of absl's API the library uses and the same
//     semantics, which TSan sees through its pthread interceptors.
//
// The TSan types keep absl's contracts that the library relies on:
//   - Await(cond) / AwaitWithTimeout / AwaitWithDeadline block with the lock
//     held until cond is true; the condition is re-evaluated whenever another
//     thread releases the mutex (Unlock, or a CondVar wait), as absl does.
//     Deadlines are real time (absl::Now()), like absl's.
//   - CondVar::Wait* release the mutex while waiting and hold it again on
//     return; spurious wakeups are possible (callers loop, as with absl).
//   - WaitWithTimeout/WaitWithDeadline return true on timeout;
//     AwaitWithTimeout/AwaitWithDeadline return the condition's value.
//   - Thread-safety annotations are the same, so clang's analysis checks the
//     same GUARDED_BY fields in both builds.
// Not provided (not used): reader locks, TryLock, Condition on member
// functions, absl's deadlock detection in the TSan build (TSan has its own).
//
// Thread safety: as absl's. Lifetime: a Mutex must outlive every waiter.
#ifndef HOPBUDGET_INTERNAL_SYNC_H_
#define HOPBUDGET_INTERNAL_SYNC_H_

#include "absl/base/config.h"
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#if !defined(HOPBUDGET_TSAN) && defined(ABSL_HAVE_THREAD_SANITIZER)
#define HOPBUDGET_TSAN 1
#endif

#ifdef HOPBUDGET_TSAN
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <utility>
#endif

namespace hopbudget {
namespace internal {

#ifndef HOPBUDGET_TSAN

using Mutex = absl::Mutex;
using MutexLock = absl::MutexLock;
using CondVar = absl::CondVar;
using Condition = absl::Condition;
using Notification = absl::Notification;

#else  // HOPBUDGET_TSAN

inline absl::Time DeadlineFromTimeout(absl::Duration timeout) {
  return timeout == absl::InfiniteDuration() ? absl::InfiniteFuture() : absl::Now() + timeout;
}

class Condition {
 public:
  template <typename T>
  Condition(bool (*func)(T*), T* arg)  // NOLINT: absl's signature
      : eval_(&CallFunc<T>), func_(reinterpret_cast<void (*)()>(func)), arg_(arg) {}
  explicit Condition(const bool* cond) : eval_(&ReadBool), arg_(cond) {}
  // A callable returning bool (a lambda), called as (*obj)().
  template <typename T, typename = decltype(static_cast<bool>(std::declval<const T&>()()))>
  explicit Condition(const T* obj) : eval_(&CallObject<T>), arg_(obj) {}

  bool Eval() const { return eval_(*this); }

 private:
  template <typename T>
  static bool CallFunc(const Condition& c) {
    return reinterpret_cast<bool (*)(T*)>(c.func_)(static_cast<T*>(const_cast<void*>(c.arg_)));
  }
  template <typename T>
  static bool CallObject(const Condition& c) {
    return (*static_cast<const T*>(c.arg_))();
  }
  static bool ReadBool(const Condition& c) { return *static_cast<const bool*>(c.arg_); }

  bool (*eval_)(const Condition&);
  void (*func_)() = nullptr;
  const void* arg_;
};

class CondVar;

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  explicit Mutex(absl::ConstInitType) {}
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    // A waiter in Await() re-checks its condition whenever the lock is
    // released, as absl::Mutex does.
    const bool wake = awaiters_ > 0;
    mu_.unlock();
    if (wake) released_.notify_all();
  }
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

  void Await(const Condition& cond) ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    AwaitWithDeadline(cond, absl::InfiniteFuture());
  }
  bool AwaitWithTimeout(const Condition& cond, absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    return AwaitWithDeadline(cond, DeadlineFromTimeout(timeout));
  }
  bool AwaitWithDeadline(const Condition& cond, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
    ++awaiters_;
    bool ok = cond.Eval();
    while (!ok) {
      if (WaitOn(released_, lock, deadline)) {
        ok = cond.Eval();
        break;
      }
      ok = cond.Eval();
    }
    --awaiters_;
    lock.release();
    return ok;
  }

 private:
  friend class CondVar;

  // Waits on `cv` until notified or `deadline` (real time); true on timeout.
  static bool WaitOn(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                     absl::Time deadline) {
    if (deadline == absl::InfiniteFuture()) {
      cv.wait(lock);
      return false;
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return true;
    return cv.wait_for(lock, absl::ToChronoNanoseconds(left)) == std::cv_status::timeout;
  }
  // Called with the lock held, before a CondVar wait releases it.
  void NotifyAwaiters() {
    if (awaiters_ > 0) released_.notify_all();
  }

  std::mutex mu_;
  std::condition_variable released_;  // the lock was released (for Await)
  int awaiters_ = 0;                  // guarded by mu_
};

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

class CondVar {
 public:
  void Wait(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    WaitWithDeadline(mu, absl::InfiniteFuture());
  }
  bool WaitWithTimeout(Mutex* mu, absl::Duration timeout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return WaitWithDeadline(mu, DeadlineFromTimeout(timeout));
  }
  bool WaitWithDeadline(Mutex* mu, absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    mu->NotifyAwaiters();
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool timed_out = Mutex::WaitOn(cv_, lock, deadline);
    lock.release();
    return timed_out;
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

class Notification {
 public:
  Notification() = default;
  Notification(const Notification&) = delete;
  Notification& operator=(const Notification&) = delete;

  void Notify() {
    MutexLock lock(&mu_);
    notified_ = true;
    cv_.SignalAll();
  }
  bool HasBeenNotified() const {
    MutexLock lock(&mu_);
    return notified_;
  }
  void WaitForNotification() const {
    MutexLock lock(&mu_);
    while (!notified_) cv_.Wait(&mu_);
  }
  bool WaitForNotificationWithTimeout(absl::Duration timeout) const {
    return WaitForNotificationWithDeadline(DeadlineFromTimeout(timeout));
  }
  bool WaitForNotificationWithDeadline(absl::Time deadline) const {
    MutexLock lock(&mu_);
    while (!notified_) {
      if (cv_.WaitWithDeadline(&mu_, deadline)) break;
    }
    return notified_;
  }

 private:
  mutable Mutex mu_;
  mutable CondVar cv_;
  bool notified_ ABSL_GUARDED_BY(mu_) = false;
};

#endif  // HOPBUDGET_TSAN

}  // namespace internal
}  // namespace hopbudget

#endif  // HOPBUDGET_INTERNAL_SYNC_H_
