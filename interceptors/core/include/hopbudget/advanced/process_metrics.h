// Copyright hopbudget authors.
//
// process_metrics.h: the standard `process_*` families of Prometheus client
// libraries (client_golang, client_python, prometheus-cpp users expect them)
// read from Linux's /proc, and the build's version, so that a service that
// serves hopbudget's /metrics needs no second instrumentation library for
// CPU, memory, file descriptors and start time.
//
//   process_cpu_seconds_total       counter  user + system CPU time
//   process_resident_memory_bytes   gauge    resident set size
//   process_virtual_memory_bytes    gauge    virtual memory size
//   process_open_fds                gauge    open file descriptors
//   process_max_fds                 gauge    the soft RLIMIT_NOFILE (absent when unlimited)
//   process_start_time_seconds      gauge    start time, seconds since the Unix epoch
//
// Parsing is a pure function of the files' text (tested on fixtures); only
// ReadProcessStats() touches /proc. Thread safety: all functions are
// reentrant.
//
// Example (http_exporter.h does this on every scrape unless told not to):
//   absl::StatusOr<hopbudget::ProcessStats> p = hopbudget::ReadProcessStats();
//   if (p.ok()) body += hopbudget::FormatProcessMetrics(*p);
#ifndef HOPBUDGET_ADVANCED_PROCESS_METRICS_H_
#define HOPBUDGET_ADVANCED_PROCESS_METRICS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hopbudget {

struct ProcessStats {
  double cpu_seconds = 0;
  int64_t resident_bytes = 0;
  int64_t virtual_bytes = 0;
  int64_t open_fds = 0;
  int64_t max_fds = -1;  // -1: unlimited
  double start_time_seconds = 0;
};

// What /proc says, as text, and the two system constants it is read with.
struct ProcSources {
  std::string self_stat;           // /proc/self/stat
  std::string stat;                // /proc/stat (for btime, the boot time)
  std::string self_limits;         // /proc/self/limits
  int64_t open_fds = 0;            // entries of /proc/self/fd
  int64_t ticks_per_second = 100;  // sysconf(_SC_CLK_TCK)
  int64_t page_size = 4096;        // sysconf(_SC_PAGESIZE)
};

// Errors: InvalidArgument naming the file and field that did not parse.
[[nodiscard]] absl::StatusOr<ProcessStats> ParseProcessStats(const ProcSources& sources);

// This process's stats from /proc. Errors: Unavailable when /proc cannot be
// read (not Linux, /proc not mounted), and ParseProcessStats()'s.
[[nodiscard]] absl::StatusOr<ProcessStats> ReadProcessStats();

// The families above in the text exposition format 0.0.4, HELP and TYPE
// included.
std::string FormatProcessMetrics(const ProcessStats& stats);

// The version of hopbudget this binary was built from (CMake's project
// version), as hopbudget_build_info{version} shows it.
absl::string_view BuildVersion();

}  // namespace hopbudget

#endif  // HOPBUDGET_ADVANCED_PROCESS_METRICS_H_
