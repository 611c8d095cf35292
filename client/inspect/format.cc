// Copyright hopbudget authors.
#include "format.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "hopbudget/advanced/exposition.h"

namespace hopbudget::inspect {
namespace {

// Counts are doubles in the exposition; whole numbers print as integers.
std::string Number(double v) {
  if (std::isnan(v) || std::isinf(v)) return "null";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return absl::StrFormat("%.0f", v);
  return absl::StrFormat("%.6g", v);
}

std::string Cell(double v) { return std::isnan(v) ? "-" : Number(v); }

std::string TimeoutCell(const std::map<std::string, double>& by_source) {
  std::vector<std::string> parts;
  // Known sources first, in their canonical order, then anything else.
  for (const std::string& source : KnownSources()) {
    auto it = by_source.find(source);
    if (it != by_source.end() && it->second > 0)
      parts.push_back(absl::StrCat(source, "=", Number(it->second)));
  }
  for (const auto& [source, n] : by_source) {
    if (n > 0 &&
        std::find(KnownSources().begin(), KnownSources().end(), source) == KnownSources().end()) {
      parts.push_back(absl::StrCat(source, "=", Number(n)));
    }
  }
  return parts.empty() ? "-" : absl::StrJoin(parts, " ");
}

std::string JsonCounts(const std::map<std::string, double>& counts, bool known_sources_first) {
  std::vector<std::string> parts;
  if (known_sources_first) {
    for (const std::string& source : KnownSources()) {
      auto it = counts.find(source);
      parts.push_back(
          absl::StrCat(JsonString(source), ":", Number(it == counts.end() ? 0 : it->second)));
    }
  }
  for (const auto& [key, n] : counts) {
    if (known_sources_first &&
        std::find(KnownSources().begin(), KnownSources().end(), key) != KnownSources().end()) {
      continue;
    }
    parts.push_back(absl::StrCat(JsonString(key), ":", Number(n)));
  }
  return absl::StrCat("{", absl::StrJoin(parts, ","), "}");
}

const std::map<std::string, double>& SideOrEmpty(const HopSummary& s, const std::string& side) {
  static const auto* empty = new std::map<std::string, double>();
  auto it = s.timeouts.find(side);
  return it == s.timeouts.end() ? *empty : it->second;
}

// Columns padded to their widest cell; a row of fewer than 4 cells (an
// error) spans the rest of the line and does not widen the columns.
std::string AlignRows(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (row.size() < 4) continue;  // an error row spans the rest of the line
    width.resize(std::max(width.size(), row.size()));
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size())
        line += std::string(width[i] - std::min(width[i], row[i].size()) + 2, ' ');
    }
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

// ,"rates":{...} when there are rates, else nothing.
std::string RatesJson(const std::optional<HopRates>& rates) {
  if (!rates.has_value()) return "";
  return absl::StrCat(",\"rates\":{\"over_seconds\":", Number(absl::ToDoubleSeconds(rates->over)),
                      ",\"calls_per_second\":", Number(rates->calls_per_second),
                      ",\"ok_per_second\":", Number(rates->ok_per_second),
                      ",\"timeouts_per_second\":", Number(rates->timeouts_per_second),
                      ",\"retries_per_second\":", Number(rates->retries_per_second), "}");
}

std::string Rate(double per_second) { return absl::StrFormat("%.1f", per_second); }

}  // namespace

std::string FormatSeconds(double seconds) {
  if (std::isnan(seconds)) return "-";
  if (std::isinf(seconds)) return seconds > 0 ? "+Inf" : "-Inf";
  const double abs = std::fabs(seconds);
  if (abs >= 1) return absl::StrFormat("%.3gs", seconds);
  if (abs >= 1e-3) return absl::StrFormat("%.4gms", seconds * 1e3);
  if (abs == 0) return "0s";
  return absl::StrFormat("%.0fus", seconds * 1e6);
}

std::string FormatTable(const std::vector<TargetResult>& results) {
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"HOP", "TARGET", "CALLS", "OK", "SUCCESS", "TIMEOUTS(SERVER)", "TIMEOUTS(CLIENT)",
                  "RETRIES", "SKIPPED", "BUDGET_P50", "BUDGET_P99", "SHIELD"});
  std::vector<std::string> errors;  // rows that do not follow the columns
  for (const TargetResult& r : results) {
    if (!r.summary.ok()) {
      rows.push_back({"-", r.target, absl::StrCat("error: ", r.summary.status().message())});
      continue;
    }
    const HopSummary& s = *r.summary;
    rows.push_back({s.hop.empty() ? "?" : s.hop, r.target, Cell(s.calls), Cell(s.ok),
                    s.calls > 0 ? absl::StrFormat("%.1f%%", 100.0 * s.ok / s.calls) : "-",
                    TimeoutCell(SideOrEmpty(s, "server")), TimeoutCell(SideOrEmpty(s, "client")),
                    Cell(s.retries), Cell(s.retries_skipped), FormatSeconds(s.budget_p50_seconds),
                    FormatSeconds(s.budget_p99_seconds), Cell(s.shield_in_flight)});
  }
  std::string out = AlignRows(rows);
  // --watch: what is happening now, next to the totals since start.
  std::vector<std::vector<std::string>> rate_rows;
  absl::Duration over;
  for (const TargetResult& r : results) {
    if (!r.summary.ok() || !r.rates.has_value()) continue;
    over = r.rates->over;
    const HopRates& x = *r.rates;
    rate_rows.push_back({r.summary->hop.empty() ? "?" : r.summary->hop, r.target,
                         Rate(x.calls_per_second), Rate(x.ok_per_second),
                         Rate(x.timeouts_per_second), Rate(x.retries_per_second)});
  }
  if (!rate_rows.empty()) {
    rate_rows.insert(rate_rows.begin(),
                     {"HOP", "TARGET", "CALLS/S", "OK/S", "TIMEOUTS/S(SERVER)", "RETRIES/S"});
    absl::StrAppend(&out, "\nper second over the last ", absl::FormatDuration(over), ":\n",
                    AlignRows(rate_rows));
  }
  return out;
}

std::string FormatJson(const std::vector<TargetResult>& results) {
  std::vector<std::string> targets;
  for (const TargetResult& r : results) {
    if (!r.summary.ok()) {
      targets.push_back(
          absl::StrCat("{\"target\":", JsonString(r.target),
                       ",\"ok\":false,\"error\":", JsonString(r.summary.status().message()), "}"));
      continue;
    }
    const HopSummary& s = *r.summary;
    targets.push_back(absl::StrCat(
        "{\"target\":", JsonString(r.target), ",\"ok\":true,\"hop\":", JsonString(s.hop),
        ",\"calls\":", Number(s.calls), ",\"success\":", Number(s.ok),
        ",\"success_ratio\":", s.calls > 0 ? Number(s.ok / s.calls) : "null",
        ",\"client_calls\":", Number(s.client_calls), ",\"client_success\":", Number(s.client_ok),
        ",\"timeouts\":{\"server\":", JsonCounts(SideOrEmpty(s, "server"), true),
        ",\"client\":", JsonCounts(SideOrEmpty(s, "client"), true), "}", ",\"retries\":{\"total\":",
        Number(s.retries), ",\"by_code\":", JsonCounts(s.retries_by_code, false), "}",
        ",\"retries_skipped\":{\"total\":", Number(s.retries_skipped),
        ",\"by_reason\":", JsonCounts(s.retries_skipped_by_reason, false), "}",
        ",\"budget_at_arrival_seconds\":{\"count\":", Number(s.budget_observations),
        ",\"p50\":", Number(s.budget_p50_seconds), ",\"p99\":", Number(s.budget_p99_seconds), "}",
        ",\"calls_without_deadline\":", Number(s.calls_without_deadline),
        ",\"shield\":{\"in_flight\":", Number(s.shield_in_flight),
        ",\"outcomes\":", JsonCounts(s.shield_outcomes, false), "}", RatesJson(r.rates), "}"));
  }
  return absl::StrCat("{\"targets\":[", absl::StrJoin(targets, ","), "]}\n");
}

}  // namespace hopbudget::inspect
