# Fails when the library (interceptors/**) uses Abseil's synchronization
# types directly instead of interceptors/core/sync.h. Debian's Abseil is not
# built for ThreadSanitizer, so a direct absl::Mutex, CondVar or Notification
# is invisible to a TSan build (HOPBUDGET_TSAN) and every field it guards
# would be reported as a race, hiding the real ones. sync.h is the one place
# that may name them. Comment lines are not code and are skipped.
# Run as: cmake -DROOT=<source dir> -P check_sync.cmake
file(GLOB_RECURSE files ${ROOT}/interceptors/*.h ${ROOT}/interceptors/*.cc)
list(FILTER files EXCLUDE REGEX "/interceptors/core/sync\\.h$")
list(LENGTH files n)
if(n EQUAL 0)
  message(FATAL_ERROR "no library sources found under ${ROOT}/interceptors")
endif()
set(pattern "absl::(Mutex|MutexLock|ReaderMutexLock|WriterMutexLock|ReleasableMutexLock|MutexLockMaybe|CondVar|Condition|Notification|BlockingCounter|Barrier)([^A-Za-z_]|$)|absl/synchronization/")
set(bad "")
foreach(f IN LISTS files)
  file(STRINGS ${f} lines REGEX "${pattern}")
  foreach(l IN LISTS lines)
    if(NOT l MATCHES "^[ \t]*//")
      string(APPEND bad "\n  ${f}: ${l}")
    endif()
  endforeach()
endforeach()
if(bad)
  message(FATAL_ERROR "sync: the library must lock through interceptors/core/sync.h "
    "(hopbudget::internal::Mutex, MutexLock, CondVar, Condition, Notification), "
    "so that a ThreadSanitizer build sees every lock; found:${bad}")
endif()
message(STATUS "sync ok: ${n} library files, every lock through interceptors/core/sync.h")
