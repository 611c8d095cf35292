// Copyright hopbudget authors.
#include "hopbudget/advanced/prometheus_collectable.h"

#include <cmath>
#include <cstdlib>
#include <map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "hopbudget/advanced/attribution.h"
#include "hopbudget/advanced/exposition.h"
#include "hopbudget/advanced/process_metrics.h"

namespace hopbudget {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

absl::Status Bad(absl::string_view line, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("hopbudget: ", why, ": \"", line, "\""));
}

bool ParseValue(absl::string_view text, double* v) {
  if (text == "+Inf") {
    *v = INFINITY;
    return true;
  }
  if (text == "-Inf") {
    *v = -INFINITY;
    return true;
  }
  if (text == "NaN") {
    *v = NAN;
    return true;
  }
  return absl::SimpleAtod(text, v);
}

// `name{k="v",...} value`: the labels unescaped (\\, \", \n).
bool ParseSample(absl::string_view line, std::string* name,
                 std::vector<ClientMetric::Label>* labels, double* value) {
  const size_t brace = line.find('{');
  const size_t space = line.rfind(' ');
  if (space == absl::string_view::npos) return false;
  if (!ParseValue(line.substr(space + 1), value)) return false;
  if (brace == absl::string_view::npos || brace > space) {
    *name = std::string(line.substr(0, space));
    return true;
  }
  *name = std::string(line.substr(0, brace));
  size_t i = brace + 1;
  while (i < line.size() && line[i] != '}') {
    const size_t eq = line.find("=\"", i);
    if (eq == absl::string_view::npos) return false;
    ClientMetric::Label label;
    label.name = std::string(line.substr(i, eq - i));
    i = eq + 2;
    for (; i < line.size() && line[i] != '"'; ++i) {
      if (line[i] == '\\' && i + 1 < line.size()) {
        ++i;
        label.value += line[i] == 'n' ? '\n' : line[i];
      } else {
        label.value += line[i];
      }
    }
    if (i >= line.size()) return false;
    ++i;  // the closing quote
    if (i < line.size() && line[i] == ',') ++i;
    labels->push_back(std::move(label));
  }
  return i < line.size();
}

class HopbudgetCollectable final : public prometheus::Collectable {
 public:
  explicit HopbudgetCollectable(PrometheusOptions options)
      : options_(std::move(options)),
        metrics_(options_.metrics != nullptr ? *options_.metrics : Metrics::Default()) {}

  std::vector<MetricFamily> Collect() const override {
    std::string text = FormatPrometheusText(metrics_.Snapshot(), options_.hop);
    if (options_.process_metrics) {
      if (absl::StatusOr<ProcessStats> p = ReadProcessStats(); p.ok()) {
        text += FormatProcessMetrics(*p);
      }
    }
    absl::StatusOr<std::vector<MetricFamily>> families = ParseHopbudgetText(text);
    // Our own text always parses (tested); never fail a scrape over it.
    return families.ok() ? *std::move(families) : std::vector<MetricFamily>{};
  }

 private:
  const PrometheusOptions options_;
  Metrics& metrics_;
};

}  // namespace

absl::StatusOr<std::vector<MetricFamily>> ParseHopbudgetText(absl::string_view text) {
  std::vector<MetricFamily> out;
  // For histograms: the series of the current family by labels without le.
  std::map<std::vector<ClientMetric::Label>, size_t> series;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (absl::ConsumePrefix(&line, "# HELP ")) {
      const size_t space = line.find(' ');
      MetricFamily f;
      f.name = std::string(line.substr(0, space));
      f.help = space == absl::string_view::npos ? "" : std::string(line.substr(space + 1));
      out.push_back(std::move(f));
      series.clear();
      continue;
    }
    if (absl::ConsumePrefix(&line, "# TYPE ")) {
      const std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
      if (parts.size() != 2 || out.empty() || out.back().name != parts[0]) {
        return Bad(line, "TYPE without its HELP");
      }
      const absl::string_view t = parts[1];
      out.back().type = t == "counter"     ? MetricType::Counter
                        : t == "gauge"     ? MetricType::Gauge
                        : t == "histogram" ? MetricType::Histogram
                                           : MetricType::Untyped;
      continue;
    }
    if (line[0] == '#') continue;
    std::string name;
    std::vector<ClientMetric::Label> labels;
    double value = 0;
    if (!ParseSample(line, &name, &labels, &value)) return Bad(line, "not a sample");
    if (out.empty()) return Bad(line, "sample before any family");
    MetricFamily& f = out.back();
    if (f.type != MetricType::Histogram) {
      if (name != f.name) return Bad(line, "sample of another family");
      ClientMetric m;
      m.label = std::move(labels);
      if (f.type == MetricType::Counter) {
        m.counter.value = value;
      } else if (f.type == MetricType::Gauge) {
        m.gauge.value = value;
      } else {
        m.untyped.value = value;
      }
      f.metric.push_back(std::move(m));
      continue;
    }
    double le = 0;
    bool is_bucket = false;
    for (auto it = labels.begin(); it != labels.end(); ++it) {
      if (it->name == "le") {
        if (!ParseValue(it->value, &le)) return Bad(line, "bad le");
        labels.erase(it);
        is_bucket = true;
        break;
      }
    }
    auto [pos, inserted] = series.emplace(labels, f.metric.size());
    if (inserted) {
      ClientMetric m;
      m.label = labels;
      f.metric.push_back(std::move(m));
    }
    ClientMetric::Histogram& h = f.metric[pos->second].histogram;
    if (is_bucket && name == f.name + "_bucket") {
      h.bucket.push_back({static_cast<uint64_t>(value), le});  // +Inf included, as
                                                               // prometheus::Histogram does
    } else if (name == f.name + "_sum") {
      h.sample_sum = value;
    } else if (name == f.name + "_count") {
      h.sample_count = static_cast<uint64_t>(value);
    } else {
      return Bad(line, "sample of another family");
    }
  }
  return out;
}

absl::StatusOr<std::shared_ptr<prometheus::Collectable>> NewPrometheusCollectable(
    PrometheusOptions options) {
  if (absl::Status s = ValidateHopName(options.hop); !s.ok()) return s;
  return std::shared_ptr<prometheus::Collectable>(
      std::make_shared<HopbudgetCollectable>(std::move(options)));
}

}  // namespace hopbudget
