// Copyright hopbudget authors.
#include "flags.h"

#include <cmath>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace hopbudget::demo {

absl::StatusOr<absl::Duration> ParseDuration(absl::string_view text) {
  const std::string quoted = absl::StrCat("\"", text, "\"");
  if (text.empty()) return absl::InvalidArgumentError("empty duration");
  if (text == "0") return absl::ZeroDuration();
  if (absl::ascii_isdigit(static_cast<unsigned char>(text.back())) || text.back() == '.') {
    return absl::InvalidArgumentError(
        absl::StrCat("duration ", quoted, " has no unit (use e.g. 800ms, 2s, 250us)"));
  }
  if (text.front() == '-') {
    return absl::InvalidArgumentError(absl::StrCat("duration ", quoted, " is negative"));
  }
  absl::Duration d;
  if (!absl::ParseDuration(text, &d)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad duration ", quoted, " (use e.g. 800ms, 1.5s, 250us)"));
  }
  if (d == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("duration ", quoted, " is infinite"));
  }
  return d;
}

std::string DurationText(absl::Duration d) {
  if (d == absl::InfiniteDuration()) return "inf";
  return absl::FormatDuration(d);
}

absl::StatusOr<double> ParseProbability(absl::string_view text) {
  double v = 0;
  if (!absl::SimpleAtod(text, &v) || std::isnan(v) || v < 0 || v > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad probability \"", text, "\" (a number in [0, 1])"));
  }
  return v;
}

void FlagSet::Add(const std::string& name, Flag flag) {
  if (flags_.count(name) == 0) order_.push_back(name);
  flags_[name] = std::move(flag);
}

void FlagSet::String(const std::string& name, std::string* out, std::string help) {
  Add(name, {[out](absl::string_view v) {
               *out = std::string(v);
               return absl::OkStatus();
             },
             std::move(help), *out});
}

void FlagSet::Int(const std::string& name, int* out, std::string help, int min, int max) {
  Add(name, {[out, min, max](absl::string_view v) {
               int x = 0;
               if (!absl::SimpleAtoi(v, &x) || x < min || x > max) {
                 return absl::InvalidArgumentError(absl::StrCat(
                     "bad value \"", v, "\": an integer in [", min, ", ", max, "]"));
               }
               *out = x;
               return absl::OkStatus();
             },
             std::move(help), absl::StrCat(*out)});
}

void FlagSet::Int64(const std::string& name, int64_t* out, std::string help, int64_t min,
                    int64_t max) {
  Add(name, {[out, min, max](absl::string_view v) {
               int64_t x = 0;
               if (!absl::SimpleAtoi(v, &x) || x < min || x > max) {
                 return absl::InvalidArgumentError(absl::StrCat(
                     "bad value \"", v, "\": an integer in [", min, ", ", max, "]"));
               }
               *out = x;
               return absl::OkStatus();
             },
             std::move(help), absl::StrCat(*out)});
}

void FlagSet::Probability(const std::string& name, double* out, std::string help) {
  Add(name, {[out](absl::string_view v) {
               absl::StatusOr<double> p = ParseProbability(v);
               if (!p.ok()) return p.status();
               *out = *p;
               return absl::OkStatus();
             },
             std::move(help), absl::StrCat(*out)});
}

void FlagSet::Double(const std::string& name, double* out, std::string help, double min,
                     double max) {
  Add(name, {[out, min, max](absl::string_view v) {
               double x = 0;
               if (!absl::SimpleAtod(v, &x) || std::isnan(x) || x < min || x > max) {
                 return absl::InvalidArgumentError(
                     absl::StrCat("bad value \"", v, "\": a number in [", min, ", ", max, "]"));
               }
               *out = x;
               return absl::OkStatus();
             },
             std::move(help), absl::StrCat(*out)});
}

void FlagSet::Duration(const std::string& name, absl::Duration* out, std::string help) {
  Add(name, {[out](absl::string_view v) {
               absl::StatusOr<absl::Duration> d = ParseDuration(v);
               if (!d.ok()) return d.status();
               *out = *d;
               return absl::OkStatus();
             },
             std::move(help), DurationText(*out)});
}

void FlagSet::Bool(const std::string& name, bool* out, std::string help) {
  Flag f{[out](absl::string_view v) {
           if (v == "true" || v == "1") {
             *out = true;
           } else if (v == "false" || v == "0") {
             *out = false;
           } else {
             return absl::InvalidArgumentError(
                 absl::StrCat("bad value \"", v, "\": true or false"));
           }
           return absl::OkStatus();
         },
         std::move(help), *out ? "true" : "false", true};
  Add(name, std::move(f));
}

absl::Status FlagSet::Parse(int argc, const char* const* argv, int first,
                            std::vector<std::string>* positional) {
  std::vector<std::string> args;
  for (int i = first; i < argc; ++i) args.emplace_back(argv[i]);
  return Parse(args, positional);
}

absl::Status FlagSet::Parse(const std::vector<std::string>& args,
                            std::vector<std::string>* positional) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (!absl::StartsWith(arg, "--") || arg == "--") {
      if (positional == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("unexpected argument \"", arg, "\""));
      }
      positional->push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::string value;
    bool has_value = false;
    const size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    auto it = flags_.find(name);
    if (it == flags_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
    if (!has_value) {
      if (it->second.is_bool) {
        value = "true";
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return absl::InvalidArgumentError(absl::StrCat("flag --", name, " needs a value"));
      }
    }
    if (++seen_[name] > 1) {
      return absl::InvalidArgumentError(absl::StrCat("flag --", name, " given twice"));
    }
    absl::Status s = it->second.set(value);
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("--", name, ": ", s.message()));
  }
  return absl::OkStatus();
}

bool FlagSet::WasSet(const std::string& name) const { return seen_.count(name) > 0; }

std::string FlagSet::Usage() const {
  std::string out = absl::StrCat("usage: ", program_, " [flags]\n");
  for (const std::string& name : order_) {
    const Flag& f = flags_.at(name);
    absl::StrAppend(&out, "  --", name, f.is_bool ? "" : "=VALUE", "  ", f.help,
                    " (default ", f.default_value.empty() ? "\"\"" : f.default_value, ")\n");
  }
  return out;
}

}  // namespace hopbudget::demo
