// Copyright hopbudget authors.
#include "hopbudget/advanced/exposition.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "hopbudget/advanced/process_metrics.h"
#include "metric_table.h"

namespace hopbudget {
namespace {

// Label values: backslash, double quote and line feed are escaped (0.0.4).
std::string LabelValue(absl::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// Integers as integers (counters past 1e6 must not turn into 1.23457e+06),
// others in the shortest form that reads back as the same double.
std::string Number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  if (v == std::floor(v) && std::fabs(v) < 9007199254740992.0) {
    return absl::StrCat(static_cast<int64_t>(v));
  }
  std::string out = absl::StrFormat("%.15g", v);
  if (std::strtod(out.c_str(), nullptr) != v) out = absl::StrFormat("%.17g", v);
  return out;
}

class Writer {
 public:
  void Family(absl::string_view name, absl::string_view type, absl::string_view help) {
    absl::StrAppend(&out_, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
  }
  // `labels`: already formatted `k="v",k="v"` (may be empty).
  void Sample(absl::string_view name, absl::string_view labels, double value) {
    absl::StrAppend(&out_, name);
    if (!labels.empty()) absl::StrAppend(&out_, "{", labels, "}");
    absl::StrAppend(&out_, " ", Number(value), "\n");
  }
  void Histogram(absl::string_view name, absl::string_view labels, const HistogramSnapshot& h) {
    uint64_t cumulative = 0;
    const std::string prefix = labels.empty() ? "" : absl::StrCat(labels, ",");
    for (size_t i = 0; i < h.counts.size(); ++i) {
      cumulative += h.counts[i];
      const std::string le = i < h.bounds.size() ? Number(h.bounds[i]) : std::string("+Inf");
      Sample(absl::StrCat(name, "_bucket"), absl::StrCat(prefix, "le=\"", le, "\""),
             static_cast<double>(cumulative));
    }
    Sample(absl::StrCat(name, "_sum"), labels, h.sum);
    Sample(absl::StrCat(name, "_count"), labels, static_cast<double>(h.count));
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

std::string L(absl::string_view k, absl::string_view v) {
  return absl::StrCat(k, "=\"", LabelValue(v), "\"");
}

// `method` and its `role` (application or infrastructure), on every family
// labelled by method, so that `role="application"` keeps health checks,
// reflection and admin calls out of budgets and latencies. The method is
// written as gRFC A66's grpc.method: "pkg.Service/Method", no leading slash.
// New families labelled by method use this too.
std::string MethodLabels(const MethodSnapshot& m) {
  return absl::StrCat(L("method", absl::StripPrefix(m.method, "/")), ",",
                      L("role", MethodRoleName(m.role)));
}

std::string CodeName(int code) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

std::string JsonMillis(absl::Duration d) {
  if (d == absl::InfiniteDuration()) return "null";
  return absl::StrFormat("%.3f", absl::ToDoubleMilliseconds(d));
}

std::string SourceLabel(DeadlineSource s) { return std::string(DeadlineSourceName(s)); }

}  // namespace

std::string JsonString(absl::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      switch (c) {
        case '"':
          out += "\\\"";
          break;
        case '\\':
          out += "\\\\";
          break;
        case '\n':
          out += "\\n";
          break;
        case '\r':
          out += "\\r";
          break;
        case '\t':
          out += "\\t";
          break;
        default:
          if (c < 0x20 || c == 0x7f) {
            out += absl::StrFormat("\\u%04x", c);
          } else {
            out.push_back(static_cast<char>(c));
          }
      }
      ++i;
      continue;
    }
    // A well-formed UTF-8 sequence (RFC 3629: no overlong forms, no
    // surrogates, nothing above U+10FFFF) is copied; anything else becomes
    // U+FFFD, one per byte.
    int len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    bool valid = len > 0 && i + len <= s.size() && !(c == 0xC0 || c == 0xC1 || c > 0xF4);
    if (valid) {
      // The second byte's range narrows after these lead bytes.
      const unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
      unsigned char lo = 0x80, hi = 0xBF;
      if (c == 0xE0) lo = 0xA0;  // overlong 3-byte
      if (c == 0xED) hi = 0x9F;  // UTF-16 surrogates
      if (c == 0xF0) lo = 0x90;  // overlong 4-byte
      if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
      valid = c1 >= lo && c1 <= hi;
    }
    for (int k = 2; valid && k < len; ++k) {
      valid = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
    }
    if (valid) {
      out.append(s.data() + i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  out += "\"";
  return out;
}

absl::string_view RetrySkipReason(RetryOutcome outcome) {
  // One vocabulary: the retry policy's own outcome names.
  if (outcome == RetryOutcome::kRetry || outcome == RetryOutcome::kSucceeded) return "";
  return RetryOutcomeName(outcome);
}

std::string FormatPrometheusText(const MetricsSnapshot& s, absl::string_view hop) {
  Writer w;
  w.Family("hopbudget_info", "gauge", "The hop (service name) this process serves as.");
  w.Sample("hopbudget_info", L("hop", hop), 1);
  w.Family("hopbudget_build_info", "gauge",
           "1, labelled with the version of hopbudget this binary was built from.");
  w.Sample("hopbudget_build_info", L("version", BuildVersion()), 1);

  w.Family("hopbudget_calls_total", "counter",
           "Finished calls seen by hopbudget, by side, method and status code (client side: "
           "each attempt of a retrying channel).");
  for (const MethodSnapshot& m : s.methods) {
    for (int side = 0; side < kSideCount; ++side) {
      for (int code = 0; code < kStatusCodeCount; ++code) {
        if (m.calls[side][code] == 0) continue;
        w.Sample("hopbudget_calls_total",
                 absl::StrCat(L("side", SideName(static_cast<Side>(side))), ",", MethodLabels(m),
                              ",", L("code", CodeName(code))),
                 static_cast<double>(m.calls[side][code]));
      }
    }
  }

  // Call latency, one family per kind (gRFC A66's three duration metrics).
  const std::pair<const char*, const char*> latency_families[kLatencyKindCount] = {
      {"hopbudget_client_attempt_duration_seconds",
       "Client attempts from start to status, by method and status code (gRFC A66 "
       "grpc.client.attempt.duration)."},
      {"hopbudget_client_call_duration_seconds",
       "Logical client calls, all attempts and backoffs included, by method and status code "
       "(gRFC A66 grpc.client.call.duration)."},
      {"hopbudget_server_call_duration_seconds",
       "Server calls from arrival to status sent, by method and status code (gRFC A66 "
       "grpc.server.call.duration)."}};
  for (int kind = 0; kind < kLatencyKindCount; ++kind) {
    const auto& [name, help] = latency_families[kind];
    w.Family(name, "histogram", help);
    for (const MethodSnapshot& m : s.methods) {
      for (const LatencySnapshot& l : m.latency) {
        if (static_cast<int>(l.kind) != kind) continue;
        w.Histogram(
            name, absl::StrCat(MethodLabels(m), ",", L("code", CodeName(static_cast<int>(l.code)))),
            l.seconds);
      }
    }
  }

  w.Family("hopbudget_deadline_exceeded_total", "counter",
           "DEADLINE_EXCEEDED answers by side, the budget that fired and the hop where it fired.");
  for (const DeadlineExceededCount& d : s.deadline_exceeded_by_hop) {
    w.Sample("hopbudget_deadline_exceeded_total",
             absl::StrCat(L("side", SideName(d.side)), ",", L("source", SourceLabel(d.source)), ",",
                          L("hop", d.hop)),
             static_cast<double>(d.count));
  }

  // One histogram family with a series per method that observed anything.
  auto per_method = [&](const char* name, const char* help,
                        HistogramSnapshot MethodSnapshot::*field) {
    w.Family(name, "histogram", help);
    for (const MethodSnapshot& m : s.methods) {
      if ((m.*field).count > 0) w.Histogram(name, MethodLabels(m), m.*field);
    }
  };
  per_method("hopbudget_budget_at_arrival_seconds",
             "Budget the caller gave an inbound call, before this hop's caps (calls with a "
             "deadline).",
             &MethodSnapshot::budget_at_arrival);
  per_method("hopbudget_request_budget_seconds",
             "Request budget of an inbound call after this hop's caps (bounded calls).",
             &MethodSnapshot::request_budget);
  per_method("hopbudget_budget_remaining_seconds",
             "Budget an inbound call had left when it was answered.",
             &MethodSnapshot::budget_remaining);
  w.Family("hopbudget_calls_without_deadline_total", "counter",
           "Inbound calls that arrived with no deadline at all.");
  for (const MethodSnapshot& m : s.methods) {
    if (m.calls_without_deadline > 0) {
      w.Sample("hopbudget_calls_without_deadline_total", MethodLabels(m),
               static_cast<double>(m.calls_without_deadline));
    }
  }
  per_method("hopbudget_attempts_per_call", "Attempts per logical call of a retrying channel.",
             &MethodSnapshot::attempts);
  w.Family("hopbudget_retries_total", "counter",
           "Retries started, by method and the code of the attempt that failed.");
  for (const MethodSnapshot& m : s.methods) {
    for (int code = 0; code < kStatusCodeCount; ++code) {
      if (m.retries[code] == 0) continue;
      w.Sample("hopbudget_retries_total",
               absl::StrCat(MethodLabels(m), ",", L("code", CodeName(code))),
               static_cast<double>(m.retries[code]));
    }
  }
  w.Family("hopbudget_calls_succeeded_after_retry_total", "counter",
           "Logical calls of a retrying channel or RetryLoop that succeeded after at least one "
           "retry.");
  for (const MethodSnapshot& m : s.methods) {
    if (m.succeeded_after_retry == 0) continue;
    w.Sample("hopbudget_calls_succeeded_after_retry_total", MethodLabels(m),
             static_cast<double>(m.succeeded_after_retry));
  }
  // The process-wide families, one table per subsystem (metric_table.h).
  for (absl::Span<const internal::MetricRow> table : internal::kMetricTables) {
    for (const internal::MetricRow& row : table) {
      if (!row.exposed()) continue;
      w.Family(row.name, internal::MetricTypeName(row.type), row.help);
      if (row.type == internal::MetricType::kHistogram) {
        w.Histogram(row.name, "", s.*row.histogram);
        continue;
      }
      for (int v = row.first; v < row.first + row.count; ++v) {
        w.Sample(row.name, row.label.empty() ? "" : L(row.label, row.label_value(v)),
                 row.load(s, v));
      }
    }
  }
  return w.Take();
}

std::string FormatDeadlinezJson(const MetricsSnapshot& s, const std::vector<RecentCall>& recent,
                                absl::string_view hop, absl::Time now) {
  std::string out = absl::StrCat("{\"hop\":", JsonString(hop),
                                 ",\"now_unix_ms\":", absl::ToUnixMillis(now), ",\"recent\":[");
  for (size_t i = 0; i < recent.size(); ++i) {
    const RecentCall& c = recent[i];
    absl::StrAppend(
        &out, i == 0 ? "" : ",", "{\"method\":", JsonString(c.method), ",\"start_unix_ms\":",
        absl::StrFormat("%.3f", absl::ToDoubleMilliseconds(c.start - absl::UnixEpoch())),
        ",\"code\":", JsonString(absl::StatusCodeToString(c.code)),
        ",\"source\":", JsonString(DeadlineSourceName(c.source)),
        ",\"retry_skipped\":", JsonString(RetrySkipReason(c.retry_skipped)), ",\"trace\":[");
    for (size_t j = 0; j < c.trace.hops.size(); ++j) {
      const HopTrace& h = c.trace.hops[j];
      absl::StrAppend(&out, j == 0 ? "" : ",", "{\"hop\":", JsonString(h.hop),
                      ",\"budget_ms\":", JsonMillis(h.budget_at_arrival),
                      ",\"spent_ms\":", JsonMillis(h.spent), ",\"attempts\":", h.attempts,
                      ",\"code\":", JsonString(absl::StatusCodeToString(h.code)),
                      ",\"source\":", JsonString(DeadlineSourceName(h.source)), "}");
    }
    absl::StrAppend(&out, "],\"truncated\":", c.trace.truncated ? "true" : "false", "}");
  }
  out += "],\"timeouts_by_source\":{";
  for (int side = 0; side < kSideCount; ++side) {
    absl::StrAppend(&out, side == 0 ? "" : ",", JsonString(SideName(static_cast<Side>(side))),
                    ":{");
    for (int src = 1; src < kDeadlineSourceCount; ++src) {
      absl::StrAppend(&out, src == 1 ? "" : ",",
                      JsonString(DeadlineSourceName(static_cast<DeadlineSource>(src))), ":",
                      s.deadline_exceeded_by_source[side][src]);
    }
    out += "}";
  }
  absl::StrAppend(&out, "},\"shield\":{\"in_flight\":", s.shield_in_flight,
                  ",\"started\":", s.shield(ShieldEvent::kStarted),
                  ",\"completed\":", s.shield(ShieldEvent::kCompleted),
                  ",\"failed\":", s.shield(ShieldEvent::kFailed),
                  ",\"exceeded_bound\":", s.shield(ShieldEvent::kExceededBound),
                  ",\"refused\":", s.shield(ShieldEvent::kRefused),
                  ",\"unobserved\":", s.shield(ShieldEvent::kUnobserved), "}");
  // Retries of this hop's calls: started, saved calls, and why failed
  // attempts were not retried (the reasons of hopbudget_retries_skipped_total).
  uint64_t saved = 0;
  for (const MethodSnapshot& m : s.methods) saved += m.succeeded_after_retry;
  absl::StrAppend(&out, ",\"retries\":{\"started\":", s.retry_decision(RetryOutcome::kRetry),
                  ",\"succeeded_after_retry\":", saved, ",\"skipped\":{");
  bool first = true;
  for (int o = 0; o < kRetryOutcomeCount; ++o) {
    const absl::string_view reason = RetrySkipReason(static_cast<RetryOutcome>(o));
    if (reason.empty()) continue;
    absl::StrAppend(&out, first ? "" : ",", JsonString(reason), ":", s.retry_decisions[o]);
    first = false;
  }
  out += "}}}";
  return out;
}

}  // namespace hopbudget
