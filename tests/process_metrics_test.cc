// Copyright hopbudget authors.
//
// process_* families parsed from /proc text fixtures (pure), then read from
// this process's own /proc.
#include "hopbudget/advanced/process_metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "hopbudget/advanced/exposition.h"
#include "hopbudget/advanced/metrics.h"

namespace hopbudget {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A real /proc/self/stat line whose command name holds a space and a ')'.
constexpr char kSelfStat[] =
    "4242 (my) server) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 50 0 0 20 0 7 0 "
    "360000 104857600 2560 18446744073709551615 1 1 0 0 0 0 0 4096 1260 0 0 0 17 1 0 0 0 0 0\n";
constexpr char kStat[] = "cpu  1 2 3 4\nintr 5\nbtime 1700000000\nprocesses 9\n";
constexpr char kLimits[] =
    "Limit                     Soft Limit           Hard Limit           Units     \n"
    "Max cpu time              unlimited            unlimited            seconds   \n"
    "Max open files            1024                 524288               files     \n";

ProcSources Fixture() {
  ProcSources s;
  s.self_stat = kSelfStat;
  s.stat = kStat;
  s.self_limits = kLimits;
  s.open_fds = 12;
  s.ticks_per_second = 100;
  s.page_size = 4096;
  return s;
}

TEST(ProcessStatsParseTest, FieldsComeFromAfterTheLastParenthesis) {
  absl::StatusOr<ProcessStats> p = ParseProcessStats(Fixture());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->cpu_seconds, 3.0);                  // (250 + 50) ticks / 100
  EXPECT_EQ(p->virtual_bytes, 104857600);                 // field 23
  EXPECT_EQ(p->resident_bytes, 2560 * 4096);              // field 24, in pages
  EXPECT_DOUBLE_EQ(p->start_time_seconds, 1700003600.0);  // btime + 360000 / 100
  EXPECT_EQ(p->open_fds, 12);
  EXPECT_EQ(p->max_fds, 1024);  // the soft limit
}

TEST(ProcessStatsParseTest, UnlimitedOpenFilesLeavesMaxFdsOut) {
  ProcSources s = Fixture();
  s.self_limits = "Max open files            unlimited            unlimited            files\n";
  absl::StatusOr<ProcessStats> p = ParseProcessStats(s);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->max_fds, -1);
  EXPECT_THAT(FormatProcessMetrics(*p), Not(HasSubstr("process_max_fds")));
}

TEST(ProcessStatsParseTest, BadInputIsRefusedNamingTheFileAndField) {
  struct Case {
    const char* name;
    void (*spoil)(ProcSources&);
    const char* message;
  };
  const Case cases[] = {
      {"no comm", [](ProcSources& s) { s.self_stat = "4242 S 1"; }, "comm in /proc/self/stat"},
      {"truncated", [](ProcSources& s) { s.self_stat = "1 (a) S 1 2 3 4 5 6 7 8 9 10"; },
       "utime (field 14) in /proc/self/stat"},
      {"rss not a number",
       [](ProcSources& s) { s.self_stat = "1 (a) S 0 0 0 0 0 0 0 0 0 0 1 1 0 0 0 0 0 0 5 100 x"; },
       "rss (field 24)"},
      {"no btime", [](ProcSources& s) { s.stat = "cpu 1 2 3\n"; }, "btime in /proc/stat"},
      {"no open files limit", [](ProcSources& s) { s.self_limits = "Max cpu time 1 1 s\n"; },
       "Max open files in /proc/self/limits"},
      {"zero ticks", [](ProcSources& s) { s.ticks_per_second = 0; }, "ticks_per_second"},
      {"zero page size", [](ProcSources& s) { s.page_size = 0; }, "page_size"},
  };
  for (const Case& c : cases) {
    ProcSources s = Fixture();
    c.spoil(s);
    absl::StatusOr<ProcessStats> p = ParseProcessStats(s);
    ASSERT_FALSE(p.ok()) << c.name;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_THAT(std::string(p.status().message()), HasSubstr(c.message)) << c.name;
  }
}

TEST(ProcessMetricsFormatTest, StandardNamesAndTypes) {
  const std::string text = FormatProcessMetrics(*ParseProcessStats(Fixture()));
  EXPECT_THAT(text, HasSubstr("# TYPE process_cpu_seconds_total counter\n"
                              "process_cpu_seconds_total 3\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE process_resident_memory_bytes gauge\n"
                              "process_resident_memory_bytes 10485760\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE process_virtual_memory_bytes gauge\n"
                              "process_virtual_memory_bytes 104857600\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE process_open_fds gauge\nprocess_open_fds 12\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE process_max_fds gauge\nprocess_max_fds 1024\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE process_start_time_seconds gauge\n"
                              "process_start_time_seconds 1700003600\n"));
}

// This process, from its own /proc: plausible values, not exact ones.
TEST(ProcessStatsReadTest, OwnProcessHasMemoryDescriptorsAndAStartTimeInThePast) {
  absl::StatusOr<ProcessStats> p = ReadProcessStats();
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_GT(p->resident_bytes, 1 << 20);
  EXPECT_GE(p->virtual_bytes, p->resident_bytes);
  EXPECT_GE(p->open_fds, 3);  // stdin, stdout, stderr
  if (p->max_fds >= 0) {
    EXPECT_GE(p->max_fds, p->open_fds);
  }
  const double now = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
  EXPECT_LE(p->start_time_seconds, now + 1);
  EXPECT_GT(p->start_time_seconds, now - 24 * 3600);  // a test binary started today
  EXPECT_GE(p->cpu_seconds, 0);
}

TEST(BuildInfoTest, VersionIsCMakesProjectVersion) {
  EXPECT_EQ(BuildVersion(), HOPBUDGET_EXPECTED_VERSION);
  Metrics m;
  EXPECT_THAT(FormatPrometheusText(m.Snapshot(), "orders"),
              HasSubstr(std::string("# TYPE hopbudget_build_info gauge\n"
                                    "hopbudget_build_info{version=\"") +
                        HOPBUDGET_EXPECTED_VERSION + "\"} 1\n"));
}

}  // namespace
}  // namespace hopbudget
