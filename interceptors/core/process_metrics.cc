// Copyright hopbudget authors.
#include "hopbudget/advanced/process_metrics.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

#ifndef HOPBUDGET_VERSION
#error "HOPBUDGET_VERSION must be defined by the build (CMake's project version)"
#endif

namespace hopbudget {
namespace {

absl::Status Bad(absl::string_view file, absl::string_view field) {
  return absl::InvalidArgumentError(absl::StrCat("hopbudget: cannot parse ", field, " in ", file));
}

// The shortest form that reads back as the same double.
std::string Number(double v) {
  std::string out = absl::StrFormat("%.15g", v);
  if (std::strtod(out.c_str(), nullptr) != v) out = absl::StrFormat("%.17g", v);
  return out;
}

}  // namespace

absl::StatusOr<ProcessStats> ParseProcessStats(const ProcSources& src) {
  if (src.ticks_per_second <= 0) return Bad("sysconf", "ticks_per_second");
  if (src.page_size <= 0) return Bad("sysconf", "page_size");
  ProcessStats p;
  // The command name (field 2) is in parentheses and may hold spaces and
  // parentheses itself: the fields that follow start after the last ')'.
  const size_t close = src.self_stat.rfind(')');
  if (close == std::string::npos) return Bad("/proc/self/stat", "comm");
  const std::vector<absl::string_view> f =
      absl::StrSplit(absl::string_view(src.self_stat).substr(close + 1), ' ', absl::SkipEmpty());
  // f[0] is field 3 (state): field n is f[n - 3].
  auto field = [&](int n, int64_t* out) {
    return n - 3 < static_cast<int>(f.size()) &&
           absl::SimpleAtoi(absl::StripAsciiWhitespace(f[n - 3]), out);
  };
  int64_t utime = 0, stime = 0, start_ticks = 0, vsize = 0, rss_pages = 0;
  if (!field(14, &utime)) return Bad("/proc/self/stat", "utime (field 14)");
  if (!field(15, &stime)) return Bad("/proc/self/stat", "stime (field 15)");
  if (!field(22, &start_ticks)) return Bad("/proc/self/stat", "starttime (field 22)");
  if (!field(23, &vsize)) return Bad("/proc/self/stat", "vsize (field 23)");
  if (!field(24, &rss_pages)) return Bad("/proc/self/stat", "rss (field 24)");
  p.cpu_seconds = static_cast<double>(utime + stime) / static_cast<double>(src.ticks_per_second);
  p.virtual_bytes = vsize;
  p.resident_bytes = rss_pages * src.page_size;

  int64_t btime = -1;
  for (absl::string_view line : absl::StrSplit(src.stat, '\n')) {
    if (absl::ConsumePrefix(&line, "btime ")) {
      if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &btime)) break;
    }
  }
  if (btime < 0) return Bad("/proc/stat", "btime");
  p.start_time_seconds = static_cast<double>(btime) + static_cast<double>(start_ticks) /
                                                          static_cast<double>(src.ticks_per_second);

  bool limit_found = false;
  for (absl::string_view line : absl::StrSplit(src.self_limits, '\n')) {
    if (!absl::ConsumePrefix(&line, "Max open files")) continue;
    const std::vector<absl::string_view> cols = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (cols.empty()) return Bad("/proc/self/limits", "Max open files");
    if (cols[0] == "unlimited") {
      p.max_fds = -1;
    } else if (!absl::SimpleAtoi(cols[0], &p.max_fds)) {
      return Bad("/proc/self/limits", "Max open files");
    }
    limit_found = true;
  }
  if (!limit_found) return Bad("/proc/self/limits", "Max open files");
  if (src.open_fds < 0) return Bad("/proc/self/fd", "entries");
  p.open_fds = src.open_fds;
  return p;
}

absl::StatusOr<ProcessStats> ReadProcessStats() {
  auto slurp = [](const char* path, std::string* out) {
    std::ifstream in(path);
    if (!in) return false;
    std::ostringstream s;
    s << in.rdbuf();
    *out = s.str();
    return true;
  };
  ProcSources src;
  if (!slurp("/proc/self/stat", &src.self_stat) || !slurp("/proc/stat", &src.stat) ||
      !slurp("/proc/self/limits", &src.self_limits)) {
    return absl::UnavailableError("hopbudget: cannot read /proc (process_* metrics)");
  }
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return absl::UnavailableError("hopbudget: cannot read /proc/self/fd");
  int64_t n = 0;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(dir);
  src.open_fds = n - 1;  // not the descriptor opendir() held while counting
  src.ticks_per_second = sysconf(_SC_CLK_TCK);
  src.page_size = sysconf(_SC_PAGESIZE);
  return ParseProcessStats(src);
}

std::string FormatProcessMetrics(const ProcessStats& p) {
  std::string out;
  auto family = [&](absl::string_view name, absl::string_view type, absl::string_view help,
                    const std::string& value) {
    absl::StrAppend(&out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n", name, " ",
                    value, "\n");
  };
  family("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.",
         Number(p.cpu_seconds));
  family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
         absl::StrCat(p.resident_bytes));
  family("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.",
         absl::StrCat(p.virtual_bytes));
  family("process_open_fds", "gauge", "Number of open file descriptors.", absl::StrCat(p.open_fds));
  if (p.max_fds >= 0) {
    family("process_max_fds", "gauge", "Maximum number of open file descriptors.",
           absl::StrCat(p.max_fds));
  }
  family("process_start_time_seconds", "gauge",
         "Start time of the process since unix epoch in seconds.", Number(p.start_time_seconds));
  return out;
}

absl::string_view BuildVersion() { return HOPBUDGET_VERSION; }

}  // namespace hopbudget
