// Copyright hopbudget authors.
//
// bench_util.h: small helpers shared by the benchmark binaries (not part of
// the library): flag parsing with clear errors, latency statistics, the
// three server/client modes of the overhead benchmark, /proc and heap
// readers, a count that can be waited on, and the output format.
//
// Output format: every binary prints a human-readable table and, for the
// script, one line per measured result:
//   RESULT bench=<name> key=value key=value ...
// Values never contain spaces. scripts/bench.sh collects these lines and
// bench_report turns them into the markdown report.
//
// Clocks: latencies are measured with std::chrono::steady_clock. Lateness
// against a deadline uses absl::Now() because deadlines are absl::Time (the
// realtime clock); over the few milliseconds measured, a clock step is
// unlikely, and a slewing clock changes a 10 ms interval by < 1 us.
#ifndef HOPBUDGET_BENCH_BENCH_UTIL_H_
#define HOPBUDGET_BENCH_BENCH_UTIL_H_

#include <dirent.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/client_interceptor.h>
#include <grpcpp/support/server_interceptor.h>
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/cli/cli_flags.h"

namespace hopbudget {
namespace bench {

// A benchmark that cannot run as asked (its command line is read with
// client/cli/cli_flags.h; this is for what goes wrong after): says why and
// exits 2, so that a script never silently measures the wrong thing.
[[noreturn]] inline void Die(const std::string& msg) {
  std::fprintf(stderr, "error: %s\n", msg.c_str());
  std::exit(2);
}

// --deadlock-detection=default|off, defined by the benchmarks that take it
// (HOPBUDGET_BENCH_DEADLOCK_DETECTION_FLAG() at file scope in their main
// file). absl::Mutex checks lock ordering for deadlocks (a graph of every
// mutex held while another is taken) when absl was built without NDEBUG, as
// Debian's libabsl is; every process pays for it, gRPC's own locks included.
// `off` measures what a build with NDEBUG absl would see. Call after
// parsing, before any thread starts.
#define HOPBUDGET_BENCH_DEADLOCK_DETECTION_FLAG()       \
  ABSL_FLAG(std::string, deadlock_detection, "default", \
            "default or off: absl::Mutex deadlock detection (Debian's absl runs it)")
inline absl::Status ApplyDeadlockDetectionFlag(const std::string& value) {
  if (absl::Status s = cli::OneOf("deadlock-detection", value, {"default", "off"}); !s.ok()) {
    return s;
  }
  if (value == "off") absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return absl::OkStatus();
}

// Percentiles of a sample (nearest rank). Sorts `v`.
struct Stats {
  size_t n = 0;
  double p50 = 0, p90 = 0, p99 = 0, max = 0, mean = 0;
};
inline Stats Summarize(std::vector<double>& v) {
  Stats s;
  s.n = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto rank = [&v](double q) {
    size_t i = static_cast<size_t>(q * static_cast<double>(v.size()));
    return v[std::min(i, v.size() - 1)];
  };
  s.p50 = rank(0.50);
  s.p90 = rank(0.90);
  s.p99 = rank(0.99);
  s.max = v.back();
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  return s;
}

// The q-quantile (same rank rule as Summarize) of `samples` plus `failed`
// calls that produced no sample (lost, wrongly answered), counted as
// infinitely late: a target on it is missed when more than 1 - q of all
// calls failed. NaN when there were no calls at all (nothing measured).
inline double QuantileCountingFailures(std::vector<double> samples, int failed, double q) {
  for (int i = 0; i < failed; ++i) samples.push_back(std::numeric_limits<double>::infinity());
  if (samples.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(samples.begin(), samples.end());
  const size_t i = static_cast<size_t>(q * static_cast<double>(samples.size()));
  return samples[std::min(i, samples.size() - 1)];
}

// The median (mean of the two middle values for an even count). Sorts `v`.
inline double Median(std::vector<double>& v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2;
}

inline std::string Fixed(double v, int digits = 3) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

// Seconds on the steady clock since an arbitrary epoch.
inline double MonoSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A field of /proc/self/status ("VmRSS", "Threads"), as a number (kB for Vm*).
inline int64_t ProcStatus(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      int64_t v = 0;
      std::vector<std::string> parts =
          absl::StrSplit(line.substr(field.size() + 1), ' ', absl::SkipWhitespace());
      if (!parts.empty() && absl::SimpleAtoi(parts[0], &v)) return v;
    }
  }
  return -1;
}

// Threads of this process: the entries of /proc/self/task (-1 if unreadable).
inline int ThreadCount() {
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  int n = 0;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(dir);
  return n;
}

// Threads of this process that carry the process's own name
// (/proc/self/task/<id>/comm equal to /proc/self/comm): the main thread and
// every thread started without a name, as the library's (its timer
// service, its worker pools) and the application's are. gRPC names each of
// its own (event_engine, grpc_global_tim, default-executo, ...), so they
// are not counted here. -1 if unreadable.
inline int UnnamedThreadCount() {
  auto comm = [](const std::string& path) {
    std::ifstream in(path);
    std::string name;
    std::getline(in, name);
    return name;
  };
  const std::string own = comm("/proc/self/comm");
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr || own.empty()) {
    if (dir != nullptr) closedir(dir);
    return -1;
  }
  int n = 0;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    if (comm(std::string("/proc/self/task/") + e->d_name + "/comm") == own) ++n;
  }
  closedir(dir);
  return n;
}

// Bytes the allocator has handed out and not taken back (glibc mallinfo2):
// far less noisy than RSS, which moves in pages and keeps freed memory.
inline int64_t HeapInUse() {
  struct mallinfo2 mi = mallinfo2();
  return static_cast<int64_t>(mi.uordblks + mi.hblkhd);
}

// A count that can be waited on (no polling), with the highest value it
// reached since the last TakeMax(). Thread-safe.
class Gauge {
 public:
  void Add(int d) {
    absl::MutexLock lock(&mu_);
    value_ += d;
    if (value_ > max_) max_ = value_;
  }
  // Waits until the value is `target` or `timeout` passed; returns the value
  // then (== target when it was reached).
  int WaitFor(int target, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, target] {
      mu_.AssertReaderHeld();
      return value_ == target;
    };
    mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
    return value_;
  }
  int TakeMax() {
    absl::MutexLock lock(&mu_);
    int m = max_;
    max_ = value_;
    return m;
  }

 private:
  absl::Mutex mu_;
  int value_ ABSL_GUARDED_BY(mu_) = 0;
  int max_ ABSL_GUARDED_BY(mu_) = 0;
};

// The floor of any interceptor-based middleware: interceptors that are
// installed, are called at every hook point, and do nothing.
class NoopClientInterceptor : public grpc::experimental::Interceptor {
 public:
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    methods->Proceed();
  }
};
class NoopClientFactory : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* /*info*/) override {
    return new NoopClientInterceptor;
  }
};
class NoopServerInterceptor : public grpc::experimental::Interceptor {
 public:
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    methods->Proceed();
  }
};
class NoopServerFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* /*info*/) override {
    return new NoopServerInterceptor;
  }
};

}  // namespace bench
}  // namespace hopbudget

#endif  // HOPBUDGET_BENCH_BENCH_UTIL_H_
