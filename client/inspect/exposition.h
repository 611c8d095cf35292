// Copyright hopbudget authors.
//
// exposition.h: a parser of the Prometheus text exposition format 0.0.4
// (what GET /metrics returns), for hopbudget-inspect.
//
// Accepted: `# HELP name text` (escapes \\ and \n), `# TYPE name type`
// (counter, gauge, histogram, summary, untyped), other `#` comments
// (ignored), blank lines, and samples
//   name[{label="value",...}] value [timestamp_ms]
// with blanks or tabs around tokens, an optional trailing comma in the label
// set, label value escapes \\ \" \n, values as decimal/exponent floats or
// NaN, +Inf, -Inf, Inf. A line may end in \r\n.
//
// Grouping: samples `x_bucket`, `x_sum`, `x_count` belong to family `x` when
// `x` is declared a histogram (`x_sum`, `x_count` and `x` itself for a
// summary); any other sample forms (or joins) the untyped family of its own
// name.
//
// Rejected, with the line number: a malformed name, label or value, an
// unterminated label set or string, an unknown escape, a duplicate label, an
// unknown TYPE, a second TYPE for one family or a TYPE after its samples, a
// histogram bucket without a numeric `le`, trailing garbage. Nothing from a
// rejected document is returned: a half-parsed scrape would print wrong
// numbers.
//
// Thread safety: pure functions.
//
// Example:
//   absl::StatusOr<Exposition> e = ParseExposition("up 1\n");
//   const Family* up = e->Find("up");   // up->samples[0].value == 1
#ifndef HOPBUDGET_CLIENT_INSPECT_EXPOSITION_H_
#define HOPBUDGET_CLIENT_INSPECT_EXPOSITION_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"

namespace hopbudget::inspect {

enum class MetricType { kUntyped, kCounter, kGauge, kHistogram, kSummary };

absl::string_view MetricTypeName(MetricType type);

struct Sample {
  std::string name;                                         // full sample name, e.g. "x_bucket"
  std::vector<std::pair<std::string, std::string>> labels;  // in exposition order
  double value = 0;
  absl::optional<int64_t> timestamp_ms;

  // The value of label `key`, or "" when absent (as in PromQL).
  absl::string_view Label(absl::string_view key) const;
  bool HasLabel(absl::string_view key) const;
};

struct Family {
  std::string name;
  MetricType type = MetricType::kUntyped;
  std::string help;
  std::vector<Sample> samples;  // in exposition order
};

struct Exposition {
  std::vector<Family> families;  // in order of first appearance
  // The family named `name`, or nullptr.
  const Family* Find(absl::string_view name) const;
};

absl::StatusOr<Exposition> ParseExposition(absl::string_view text);

}  // namespace hopbudget::inspect

#endif  // HOPBUDGET_CLIENT_INSPECT_EXPOSITION_H_
