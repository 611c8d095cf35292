// Copyright hopbudget authors.
//
// report_writer.h: scripts/bench.sh's report (report.md), written from a
// run's raw directory by bench_report --write-report (bench_report.cc's
// header says what the directory and the settings file hold). The sections'
// tables and verdicts stay bench_report's; this file is the prose around
// them, in the order the report has always had.
#ifndef HOPBUDGET_BENCH_REPORT_WRITER_H_
#define HOPBUDGET_BENCH_REPORT_WRITER_H_

#include <functional>
#include <string>

#include "absl/status/status.h"

namespace hopbudget {
namespace bench {

// What one section printed: its tables, and its VERDICT, HEADLINE and CHART
// lines.
struct SectionOutput {
  std::string tables;
  std::string log;
};
// Runs one section (bench_report --section=SECTION) on `results`, RESULT lines.
using SectionRunner =
    std::function<SectionOutput(const std::string& section, const std::string& results)>;

// Writes `report_path` and, in `raw_dir`, each section's tables
// (SECTION.md), every section's log (verdicts.log) and the chart's data
// (chain.dat). An error names the input that is missing or wrong.
absl::Status WriteReport(const std::string& raw_dir, const std::string& report_path,
                         const std::string& settings_path, const SectionRunner& run_section);

}  // namespace bench
}  // namespace hopbudget

#endif  // HOPBUDGET_BENCH_REPORT_WRITER_H_
