// Copyright hopbudget authors.
#include "summary.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "hopbudget/exposition.h"

namespace hopbudget::chainctl {

double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  q = std::min(1.0, std::max(0.0, q));
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(values.size())));
  return values[rank == 0 ? 0 : rank - 1];
}

void SummaryBuilder::Add(const CallRecord& call) { calls_.push_back(call); }

LoadSummary SummaryBuilder::Build() const {
  LoadSummary s;
  s.not_sent = not_sent_;
  std::vector<double> latencies;
  for (const CallRecord& c : calls_) {
    ++s.sent;
    latencies.push_back(absl::ToDoubleMilliseconds(c.latency));
    if (c.code == absl::StatusCode::kOk) {
      ++s.ok;
      continue;
    }
    ++s.errors_by_code[absl::StatusCodeToString(c.code)];
    if (c.code == absl::StatusCode::kDeadlineExceeded) {
      const std::string source = c.source.empty() ? "unattributed" : c.source;
      const std::string hop = c.hop.empty() ? "?" : c.hop;
      ++s.deadline_exceeded_by_source[source][hop];
    }
  }
  s.p50_ms = Percentile(latencies, 0.50);
  s.p99_ms = Percentile(latencies, 0.99);
  for (const ServiceDelta& d : services_) {
    s.retries += d.retries;
    s.calls_started_after_deadline += d.calls_started_after_deadline;
    s.work_after_deadline_ms += d.work_after_deadline_ms;
    s.per_hop.push_back(d);
  }
  return s;
}

std::string FormatSummaryTable(const LoadSummary& s) {
  std::string out;
  auto row = [&out](absl::string_view name, const std::string& value) {
    absl::StrAppend(&out, absl::StrFormat("  %-44s %s\n", name, value));
  };
  row("sent", absl::StrCat(s.sent));
  row("ok", absl::StrCat(s.ok));
  if (s.not_sent > 0) row("not sent (concurrency limit)", absl::StrCat(s.not_sent));
  for (const auto& [code, n] : s.errors_by_code) row(absl::StrCat("error ", code), absl::StrCat(n));
  for (const auto& [source, hops] : s.deadline_exceeded_by_source) {
    for (const auto& [hop, n] : hops) {
      row(absl::StrCat("DEADLINE_EXCEEDED source=", source, " hop=", hop), absl::StrCat(n));
    }
  }
  row("retries (arrived at a service)", absl::StrCat(s.retries));
  row("latency p50 / p99", absl::StrFormat("%.1f ms / %.1f ms", s.p50_ms, s.p99_ms));
  row("calls started after the client deadline", absl::StrCat(s.calls_started_after_deadline));
  row("work after the client deadline", absl::StrFormat("%.1f ms", s.work_after_deadline_ms));
  for (const ServiceDelta& d : s.per_hop) {
    row(absl::StrCat("  ", d.hop, ": started late / work after / retries"),
        absl::StrFormat("%d / %.1f ms / %d", d.calls_started_after_deadline,
                        d.work_after_deadline_ms, d.retries));
  }
  return out;
}

namespace {
std::string JsonNumber(double v) {
  if (!std::isfinite(v)) return "0";
  return absl::StrFormat("%.3f", v);
}
}  // namespace

std::string FormatSummaryJson(const LoadSummary& s) {
  std::string out = "{";
  absl::StrAppend(&out, "\"sent\":", s.sent, ",\"ok\":", s.ok, ",\"not_sent\":", s.not_sent);
  absl::StrAppend(&out, ",\"errors_by_code\":{");
  bool first = true;
  for (const auto& [code, n] : s.errors_by_code) {
    absl::StrAppend(&out, first ? "" : ",", JsonString(code), ":", n);
    first = false;
  }
  absl::StrAppend(&out, "},\"deadline_exceeded_by_source\":{");
  first = true;
  for (const auto& [source, hops] : s.deadline_exceeded_by_source) {
    absl::StrAppend(&out, first ? "" : ",", JsonString(source), ":{");
    first = false;
    bool first_hop = true;
    for (const auto& [hop, n] : hops) {
      absl::StrAppend(&out, first_hop ? "" : ",", JsonString(hop), ":", n);
      first_hop = false;
    }
    out += "}";
  }
  absl::StrAppend(&out, "},\"retries\":", s.retries, ",\"latency_ms\":{\"p50\":",
                  JsonNumber(s.p50_ms), ",\"p99\":", JsonNumber(s.p99_ms), "}");
  absl::StrAppend(&out, ",\"calls_started_after_deadline\":", s.calls_started_after_deadline,
                  ",\"work_after_deadline_ms\":", JsonNumber(s.work_after_deadline_ms));
  absl::StrAppend(&out, ",\"per_hop\":[");
  first = true;
  for (const ServiceDelta& d : s.per_hop) {
    absl::StrAppend(&out, first ? "" : ",", "{\"hop\":", JsonString(d.hop),
                    ",\"calls_started_after_deadline\":", d.calls_started_after_deadline,
                    ",\"work_after_deadline_ms\":", JsonNumber(d.work_after_deadline_ms),
                    ",\"retries\":", d.retries, "}");
    first = false;
  }
  out += "]}";
  return out;
}

absl::StatusOr<std::vector<std::string>> ParseTargetList(absl::string_view text) {
  std::vector<std::string> out;
  if (text.empty()) return absl::InvalidArgumentError("empty target list (want host:port,...)");
  for (absl::string_view t : absl::StrSplit(text, ',')) {
    const size_t colon = t.rfind(':');
    int port = 0;
    if (colon == absl::string_view::npos || colon == 0 ||
        !absl::SimpleAtoi(t.substr(colon + 1), &port) || port < 1 || port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad target \"", t, "\" (want host:port, port 1..65535)"));
    }
    out.emplace_back(t);
  }
  return out;
}

absl::StatusOr<std::vector<ItemSpec>> ParseItems(absl::string_view text) {
  std::vector<ItemSpec> out;
  if (text.empty()) return absl::InvalidArgumentError("no items (want sku[:qty],...)");
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    ItemSpec item;
    const size_t colon = part.find(':');
    item.sku = std::string(part.substr(0, colon));
    if (item.sku.empty()) return absl::InvalidArgumentError(absl::StrCat("bad item \"", part, "\": empty sku"));
    if (colon != absl::string_view::npos &&
        (!absl::SimpleAtoi(part.substr(colon + 1), &item.quantity) || item.quantity < 1 ||
         item.quantity > 1000)) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad item \"", part, "\": quantity must be 1..1000"));
    }
    out.push_back(item);
  }
  return out;
}

}  // namespace hopbudget::chainctl
