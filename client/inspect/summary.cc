// Copyright hopbudget authors.
#include "summary.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "hopbudget/advanced/deadline_source.h"

namespace hopbudget::inspect {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The family `name`, checked to be of `type` (untyped is accepted: a
// hand-written exposition may omit TYPE lines). nullptr when absent.
absl::StatusOr<const Family*> Get(const Exposition& e, absl::string_view name, MetricType type) {
  const Family* f = e.Find(name);
  if (f == nullptr) return nullptr;
  if (f->type != type && f->type != MetricType::kUntyped) {
    return absl::InvalidArgumentError(absl::StrCat(name, " is a ", MetricTypeName(f->type),
                                                   ", expected a ", MetricTypeName(type)));
  }
  return f;
}

// Counter values are added as they are; a NaN or negative value (a broken
// exporter) would poison every sum, so it counts as 0.
double Clean(double v) { return std::isfinite(v) && v > 0 ? v : 0; }

}  // namespace

// The library's own list (deadline_source.h), so that a new source is
// known here the day it exists.
const std::vector<std::string>& KnownSources() {
  static const auto* sources = [] {
    auto* names = new std::vector<std::string>;
    for (int i = 1; i < kDeadlineSourceCount; ++i) {  // 0 is kNone
      names->emplace_back(DeadlineSourceName(static_cast<DeadlineSource>(i)));
    }
    return names;
  }();
  return *sources;
}

double HistogramQuantile(double q, std::vector<Bucket> buckets) {
  if (std::isnan(q)) return kNaN;
  if (q < 0) return -std::numeric_limits<double>::infinity();
  if (q > 1) return std::numeric_limits<double>::infinity();
  std::sort(buckets.begin(), buckets.end(),
            [](const Bucket& a, const Bucket& b) { return a.upper_bound < b.upper_bound; });
  // Merge equal bounds (summing, as sum by (le) does before the call).
  std::vector<Bucket> merged;
  for (const Bucket& b : buckets) {
    if (!merged.empty() && merged.back().upper_bound == b.upper_bound) {
      merged.back().count += b.count;
    } else {
      merged.push_back(b);
    }
  }
  if (merged.size() < 2 || !std::isinf(merged.back().upper_bound) ||
      merged.back().upper_bound < 0) {
    return kNaN;
  }
  // Counts scraped at slightly different moments may dip; Prometheus keeps
  // the running maximum.
  double max = 0;
  for (Bucket& b : merged) {
    if (std::isnan(b.count)) b.count = 0;
    max = std::max(max, b.count);
    b.count = max;
  }
  const double total = merged.back().count;
  if (total <= 0) return kNaN;
  double rank = q * total;
  size_t i = 0;
  while (i < merged.size() - 1 && merged[i].count < rank) ++i;
  if (i == merged.size() - 1) return merged[merged.size() - 2].upper_bound;
  if (i == 0 && merged[0].upper_bound <= 0) return merged[0].upper_bound;
  double start = 0;
  double end = merged[i].upper_bound;
  double count = merged[i].count;
  if (i > 0) {
    start = merged[i - 1].upper_bound;
    count -= merged[i - 1].count;
    rank -= merged[i - 1].count;
  }
  if (count <= 0) return end;
  return start + (end - start) * (rank / count);
}

absl::StatusOr<HopSummary> Summarize(const Exposition& e) {
  HopSummary s;
  for (const std::string& side : {std::string("server"), std::string("client")}) {
    for (const std::string& source : KnownSources()) s.timeouts[side][source] = 0;
  }

  absl::StatusOr<const Family*> f = Get(e, "hopbudget_info", MetricType::kGauge);
  if (!f.ok()) return f.status();
  if (*f != nullptr) {
    for (const Sample& sample : (*f)->samples) {
      if (sample.HasLabel("hop")) {
        s.hop = std::string(sample.Label("hop"));
        break;
      }
    }
  }

  f = Get(e, "hopbudget_calls_total", MetricType::kCounter);
  if (!f.ok()) return f.status();
  if (*f != nullptr) {
    for (const Sample& sample : (*f)->samples) {
      const double v = Clean(sample.value);
      const bool ok = sample.Label("code") == "OK";
      if (sample.Label("side") == "server") {
        s.calls += v;
        if (ok) s.ok += v;
      } else if (sample.Label("side") == "client") {
        s.client_calls += v;
        if (ok) s.client_ok += v;
      }
    }
  }

  f = Get(e, "hopbudget_deadline_exceeded_total", MetricType::kCounter);
  if (!f.ok()) return f.status();
  if (*f != nullptr) {
    for (const Sample& sample : (*f)->samples) {
      const absl::string_view side = sample.Label("side");
      if (side != "server" && side != "client") continue;
      const absl::string_view source = sample.Label("source");
      s.timeouts[std::string(side)][source.empty() ? "unknown" : std::string(source)] +=
          Clean(sample.value);
    }
  }

  f = Get(e, "hopbudget_retries_total", MetricType::kCounter);
  if (!f.ok()) return f.status();
  if (*f != nullptr) {
    for (const Sample& sample : (*f)->samples) {
      s.retries += Clean(sample.value);
      // `code` since the label was renamed; `reason` from older exporters.
      const absl::string_view code =
          sample.HasLabel("code") ? sample.Label("code") : sample.Label("reason");
      s.retries_by_code[std::string(code)] += Clean(sample.value);
    }
  }

  f = Get(e, "hopbudget_retries_skipped_total", MetricType::kCounter);
  if (!f.ok()) return f.status();
  if (*f != nullptr) {
    for (const Sample& sample : (*f)->samples) {
      s.retries_skipped += Clean(sample.value);
      s.retries_skipped_by_reason[std::string(sample.Label("reason"))] += Clean(sample.value);
    }
  }

  f = Get(e, "hopbudget_calls_without_deadline_total", MetricType::kCounter);
  if (!f.ok()) return f.status();
  if (*f != nullptr) {
    for (const Sample& sample : (*f)->samples) s.calls_without_deadline += Clean(sample.value);
  }

  f = Get(e, "hopbudget_budget_at_arrival_seconds", MetricType::kHistogram);
  if (!f.ok()) return f.status();
  std::vector<Bucket> buckets;
  if (*f != nullptr) {
    for (const Sample& sample : (*f)->samples) {
      // Health checks, reflection and admin calls would blur the budgets the
      // application's callers bring.
      if (sample.Label("role") == "infrastructure") continue;
      if (sample.name == "hopbudget_budget_at_arrival_seconds_count") {
        s.budget_observations += Clean(sample.value);
      } else if (sample.name == "hopbudget_budget_at_arrival_seconds_bucket") {
        double le;
        const absl::string_view text = sample.Label("le");
        if (text == "+Inf" || text == "Inf") {
          le = std::numeric_limits<double>::infinity();
        } else if (!absl::SimpleAtod(text, &le) || std::isnan(le)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "hopbudget_budget_at_arrival_seconds_bucket with invalid le \"", text, "\""));
        }
        buckets.push_back({le, Clean(sample.value)});
      }
    }
  }
  s.budget_p50_seconds = HistogramQuantile(0.5, buckets);
  s.budget_p99_seconds = HistogramQuantile(0.99, buckets);

  f = Get(e, "hopbudget_shield_in_flight", MetricType::kGauge);
  if (!f.ok()) return f.status();
  if (*f != nullptr) {
    for (const Sample& sample : (*f)->samples) s.shield_in_flight += Clean(sample.value);
  }
  for (const char* outcome : {"completed", "failed", "exceeded_bound", "refused"}) {
    s.shield_outcomes[outcome] = 0;
  }
  f = Get(e, "hopbudget_shield_operations_total", MetricType::kCounter);
  if (!f.ok()) return f.status();
  if (*f != nullptr) {
    for (const Sample& sample : (*f)->samples) {
      s.shield_outcomes[std::string(sample.Label("outcome"))] += Clean(sample.value);
    }
  }
  return s;
}

namespace {

double TimeoutsOnSide(const HopSummary& s, const std::string& side) {
  double total = 0;
  auto it = s.timeouts.find(side);
  if (it == s.timeouts.end()) return 0;
  for (const auto& [source, n] : it->second) total += n;
  return total;
}

}  // namespace

absl::StatusOr<HopRates> RatesBetween(const HopSummary& before, const HopSummary& after,
                                      absl::Duration over) {
  if (over <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no time between the scrapes (", absl::FormatDuration(over), ")"));
  }
  if (before.hop != after.hop) {
    return absl::InvalidArgumentError(
        absl::StrCat("hop changed from ", before.hop, " to ", after.hop));
  }
  const double seconds = absl::ToDoubleSeconds(over);
  HopRates r;
  r.over = over;
  const struct {
    double from, to;
    double* rate;
  } counters[] = {
      {before.calls, after.calls, &r.calls_per_second},
      {before.ok, after.ok, &r.ok_per_second},
      {TimeoutsOnSide(before, "server"), TimeoutsOnSide(after, "server"), &r.timeouts_per_second},
      {before.retries, after.retries, &r.retries_per_second},
  };
  for (const auto& c : counters) {
    if (c.to < c.from) {
      return absl::InvalidArgumentError("a counter went down (the process restarted?)");
    }
    *c.rate = (c.to - c.from) / seconds;
  }
  return r;
}

}  // namespace hopbudget::inspect
