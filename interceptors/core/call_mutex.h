// Copyright hopbudget authors.
//
// call_mutex.h (internal): the mutex of per-call and registry state on the
// hot path.
//
// Why not absl::Mutex: Debian builds abseil without NDEBUG, which turns on
// absl::Mutex's debug deadlock detection. Every acquisition then updates a
// process-wide lock-order graph under one global lock, and every new mutex
// is a node in it; per-call mutexes made that graph a global lock on every
// call. CallMutex is a std::mutex with the same thread-safety annotations,
// so the analysis still checks what it guards. Long-lived, rarely taken
// locks (timers, shields) use internal::Mutex (sync.h) for its CondVar and
// Await.
#ifndef HOPBUDGET_INTERNAL_CALL_MUTEX_H_
#define HOPBUDGET_INTERNAL_CALL_MUTEX_H_

#include <mutex>
#include <shared_mutex>

#include "absl/base/thread_annotations.h"

namespace hopbudget {
namespace internal {

class ABSL_LOCKABLE CallMutex {
 public:
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
  std::mutex mu_;
};

class ABSL_SCOPED_LOCKABLE CallMutexLock {
 public:
  explicit CallMutexLock(CallMutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~CallMutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  CallMutexLock(const CallMutexLock&) = delete;
  CallMutexLock& operator=(const CallMutexLock&) = delete;

 private:
  CallMutex* const mu_;
};

// Read-mostly state shared by all calls of a channel.
class ABSL_LOCKABLE SharedCallMutex {
 public:
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  void ReaderLock() ABSL_SHARED_LOCK_FUNCTION() { mu_.lock_shared(); }
  void ReaderUnlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

class ABSL_SCOPED_LOCKABLE SharedCallMutexReaderLock {
 public:
  explicit SharedCallMutexReaderLock(SharedCallMutex* mu) ABSL_SHARED_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->ReaderLock();
  }
  ~SharedCallMutexReaderLock() ABSL_UNLOCK_FUNCTION() { mu_->ReaderUnlock(); }
  SharedCallMutexReaderLock(const SharedCallMutexReaderLock&) = delete;
  SharedCallMutexReaderLock& operator=(const SharedCallMutexReaderLock&) = delete;

 private:
  SharedCallMutex* const mu_;
};

class ABSL_SCOPED_LOCKABLE SharedCallMutexLock {
 public:
  explicit SharedCallMutexLock(SharedCallMutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->Lock();
  }
  ~SharedCallMutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  SharedCallMutexLock(const SharedCallMutexLock&) = delete;
  SharedCallMutexLock& operator=(const SharedCallMutexLock&) = delete;

 private:
  SharedCallMutex* const mu_;
};

}  // namespace internal
}  // namespace hopbudget

#endif  // HOPBUDGET_INTERNAL_CALL_MUTEX_H_
