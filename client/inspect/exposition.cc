// Copyright hopbudget authors.
#include "exposition.h"

#include <cmath>
#include <cstdlib>
#include <limits>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace hopbudget::inspect {
namespace {

bool IsNameStart(char c, bool colon_ok) {
  return absl::ascii_isalpha(static_cast<unsigned char>(c)) || c == '_' || (colon_ok && c == ':');
}
bool IsNameChar(char c, bool colon_ok) {
  return IsNameStart(c, colon_ok) || absl::ascii_isdigit(static_cast<unsigned char>(c));
}

// A cursor over one line; every method reports what it expected on failure.
class Line {
 public:
  Line(absl::string_view text, int number) : text_(text), number_(number) {}

  void SkipBlanks() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
  }
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return AtEnd() ? '\0' : text_[pos_]; }
  bool Consume(char c) {
    if (Peek() != c) return false;
    ++pos_;
    return true;
  }
  // [a-zA-Z_:][a-zA-Z0-9_:]* for metric names, without ':' for label names.
  absl::string_view Name(bool colon_ok) {
    const size_t start = pos_;
    if (AtEnd() || !IsNameStart(text_[pos_], colon_ok)) return {};
    while (pos_ < text_.size() && IsNameChar(text_[pos_], colon_ok)) ++pos_;
    return text_.substr(start, pos_ - start);
  }
  // Up to the next blank or the end.
  absl::string_view Token() {
    const size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != ' ' && text_[pos_] != '\t') ++pos_;
    return text_.substr(start, pos_ - start);
  }
  absl::string_view Rest() const { return AtEnd() ? absl::string_view() : text_.substr(pos_); }

  absl::Status Error(absl::string_view what) const {
    std::string near(text_.substr(std::min(pos_, text_.size()), 24));
    return absl::InvalidArgumentError(absl::StrCat(
        "line ", number_, ": ", what,
        pos_ < text_.size() ? absl::StrCat(" at \"", near, "\"") : std::string(" at end of line")));
  }

  // A label value after its opening quote, up to and including the closing one.
  absl::StatusOr<std::string> QuotedValue() {
    std::string out;
    while (true) {
      if (AtEnd()) return Error("unterminated label value");
      const char c = text_[pos_++];
      if (c == '"') return out;
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (AtEnd()) return Error("unterminated escape in label value");
      const char e = text_[pos_++];
      switch (e) {
        case '\\':
          out.push_back('\\');
          break;
        case '"':
          out.push_back('"');
          break;
        case 'n':
          out.push_back('\n');
          break;
        default:
          --pos_;
          return Error(absl::StrCat("unknown escape \\", std::string(1, e)));
      }
    }
  }

 private:
  absl::string_view text_;
  int number_;
  size_t pos_ = 0;
};

absl::optional<double> ParseValue(absl::string_view s) {
  if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
  if (s == "+Inf" || s == "Inf") return std::numeric_limits<double>::infinity();
  if (s == "-Inf") return -std::numeric_limits<double>::infinity();
  if (s.empty()) return absl::nullopt;
  // absl::SimpleAtod also takes "inf", "nan" and hex; the format does not.
  for (char c : s) {
    if (!(absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' ||
          c == '+' || c == '-')) {
      return absl::nullopt;
    }
  }
  double v;
  if (!absl::SimpleAtod(s, &v)) return absl::nullopt;
  return v;
}

absl::optional<MetricType> ParseType(absl::string_view s) {
  if (s == "counter") return MetricType::kCounter;
  if (s == "gauge") return MetricType::kGauge;
  if (s == "histogram") return MetricType::kHistogram;
  if (s == "summary") return MetricType::kSummary;
  if (s == "untyped") return MetricType::kUntyped;
  return absl::nullopt;
}

std::string UnescapeHelp(absl::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && (s[i + 1] == '\\' || s[i + 1] == 'n')) {
      out.push_back(s[i + 1] == 'n' ? '\n' : '\\');
      ++i;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

class Parser {
 public:
  absl::StatusOr<Exposition> Run(absl::string_view text) {
    int number = 0;
    for (absl::string_view raw : absl::StrSplit(text, '\n')) {
      ++number;
      if (absl::EndsWith(raw, "\r")) raw.remove_suffix(1);
      Line line(raw, number);
      line.SkipBlanks();
      if (line.AtEnd()) continue;
      absl::Status s = line.Peek() == '#' ? Comment(line) : SampleLine(line);
      if (!s.ok()) return s;
    }
    return std::move(exposition_);
  }

 private:
  Family& FamilyNamed(absl::string_view name) {
    auto [it, inserted] = index_.try_emplace(std::string(name), exposition_.families.size());
    if (inserted) {
      exposition_.families.emplace_back();
      exposition_.families.back().name = std::string(name);
    }
    return exposition_.families[it->second];
  }

  absl::Status Comment(Line& line) {
    line.Consume('#');
    line.SkipBlanks();
    const absl::string_view keyword = line.Token();
    if (keyword != "HELP" && keyword != "TYPE") return absl::OkStatus();  // a plain comment
    line.SkipBlanks();
    const absl::string_view name = line.Name(/*colon_ok=*/true);
    if (name.empty()) return line.Error(absl::StrCat("expected a metric name after # ", keyword));
    if (!line.AtEnd() && line.Peek() != ' ' && line.Peek() != '\t') {
      return line.Error("invalid character in metric name");
    }
    line.SkipBlanks();
    if (keyword == "HELP") {
      Family& f = FamilyNamed(name);
      f.help = UnescapeHelp(line.Rest());
      return absl::OkStatus();
    }
    const absl::string_view type_name = line.Token();
    line.SkipBlanks();
    const absl::optional<MetricType> type = ParseType(type_name);
    if (!type.has_value() || !line.AtEnd()) {
      return line.Error(absl::StrCat("unknown metric type \"", type_name, line.Rest(),
                                     "\" (counter, gauge, histogram, summary, untyped)"));
    }
    Family& f = FamilyNamed(name);
    if (typed_.contains(f.name)) return line.Error(absl::StrCat("second TYPE line for ", name));
    if (!f.samples.empty())
      return line.Error(absl::StrCat("TYPE line for ", name, " after its samples"));
    typed_.insert({f.name, true});
    f.type = *type;
    return absl::OkStatus();
  }

  // The family a sample belongs to: x for x_bucket/x_sum/x_count of a
  // declared histogram x (and x_sum/x_count of a summary).
  Family& FamilyOf(absl::string_view sample_name) {
    for (absl::string_view suffix : {"_bucket", "_sum", "_count"}) {
      if (!absl::EndsWith(sample_name, suffix)) continue;
      absl::string_view base = sample_name.substr(0, sample_name.size() - suffix.size());
      auto it = index_.find(base);
      if (it == index_.end()) continue;
      Family& f = exposition_.families[it->second];
      if (f.type == MetricType::kHistogram ||
          (f.type == MetricType::kSummary && suffix != "_bucket")) {
        return f;
      }
    }
    return FamilyNamed(sample_name);
  }

  absl::Status SampleLine(Line& line) {
    Sample sample;
    const absl::string_view name = line.Name(/*colon_ok=*/true);
    if (name.empty()) return line.Error("expected a metric name");
    sample.name = std::string(name);
    if (!line.AtEnd() && line.Peek() != ' ' && line.Peek() != '\t' && line.Peek() != '{') {
      return line.Error("invalid character after metric name");
    }
    line.SkipBlanks();
    if (line.Consume('{')) {
      while (true) {
        line.SkipBlanks();
        if (line.Consume('}')) break;
        const absl::string_view label = line.Name(/*colon_ok=*/false);
        if (label.empty()) return line.Error("expected a label name or '}'");
        line.SkipBlanks();
        if (!line.Consume('=')) return line.Error(absl::StrCat("expected '=' after label ", label));
        line.SkipBlanks();
        if (!line.Consume('"'))
          return line.Error(absl::StrCat("expected '\"' to open the value of label ", label));
        absl::StatusOr<std::string> value = line.QuotedValue();
        if (!value.ok()) return value.status();
        for (const auto& [k, v] : sample.labels) {
          if (k == label) return line.Error(absl::StrCat("duplicate label ", label));
        }
        sample.labels.emplace_back(std::string(label), *std::move(value));
        line.SkipBlanks();
        if (line.Consume(',')) continue;
        if (line.Consume('}')) break;
        return line.Error("expected ',' or '}' in label set");
      }
    }
    line.SkipBlanks();
    const absl::string_view value_text = line.Token();
    const absl::optional<double> value = ParseValue(value_text);
    if (!value.has_value()) {
      return line.Error(value_text.empty()
                            ? std::string("expected a sample value")
                            : absl::StrCat("invalid sample value \"", value_text, "\""));
    }
    sample.value = *value;
    line.SkipBlanks();
    if (!line.AtEnd()) {
      const absl::string_view ts = line.Token();
      int64_t t;
      if (!absl::SimpleAtoi(ts, &t))
        return line.Error(absl::StrCat("invalid timestamp \"", ts, "\""));
      sample.timestamp_ms = t;
      line.SkipBlanks();
      if (!line.AtEnd()) return line.Error("unexpected text after the timestamp");
    }
    Family& family = FamilyOf(sample.name);
    if (family.type == MetricType::kHistogram && absl::EndsWith(sample.name, "_bucket")) {
      if (!sample.HasLabel("le"))
        return line.Error(absl::StrCat("histogram bucket ", name, " without le label"));
      if (!ParseValue(sample.Label("le")).has_value()) {
        return line.Error(absl::StrCat("histogram bucket ", name, " with invalid le \"",
                                       sample.Label("le"), "\""));
      }
    }
    family.samples.push_back(std::move(sample));
    return absl::OkStatus();
  }

  Exposition exposition_;
  absl::flat_hash_map<std::string, size_t> index_;
  absl::flat_hash_map<std::string, bool> typed_;
};

}  // namespace

absl::string_view MetricTypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
    case MetricType::kSummary:
      return "summary";
    case MetricType::kUntyped:
      break;
  }
  return "untyped";
}

absl::string_view Sample::Label(absl::string_view key) const {
  for (const auto& [k, v] : labels) {
    if (k == key) return v;
  }
  return {};
}

bool Sample::HasLabel(absl::string_view key) const {
  for (const auto& [k, v] : labels) {
    if (k == key) return true;
  }
  return false;
}

const Family* Exposition::Find(absl::string_view name) const {
  for (const Family& f : families) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

absl::StatusOr<Exposition> ParseExposition(absl::string_view text) { return Parser().Run(text); }

}  // namespace hopbudget::inspect
