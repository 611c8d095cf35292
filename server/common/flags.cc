// Copyright hopbudget authors.
#include "flags.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

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

namespace {

absl::Status BadTarget(absl::string_view target, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("bad target \"", target, "\": ", why,
                   " (want HOST:PORT, e.g. 127.0.0.1:50051, dns:///HOST:PORT or unix:PATH)"));
}

bool IsHostName(absl::string_view host) {
  if (host.empty() || host.size() > 253) return false;
  for (absl::string_view label : absl::StrSplit(host, '.')) {
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') {
      return false;
    }
    for (char c : label) {
      if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-') return false;
    }
  }
  return true;
}

// HOST:PORT with HOST a name, an IPv4 address or [IPv6]. Empty when fine,
// else what is wrong.
std::string HostPortProblem(absl::string_view hp, bool want_ip) {
  absl::string_view host, port;
  if (absl::StartsWith(hp, "[")) {
    const size_t close = hp.find(']');
    if (close == absl::string_view::npos) return "unclosed [ in an IPv6 address";
    host = hp.substr(1, close - 1);
    absl::string_view rest = hp.substr(close + 1);
    if (!absl::StartsWith(rest, ":")) return "no :PORT after the IPv6 address";
    port = rest.substr(1);
    in6_addr a6;
    if (inet_pton(AF_INET6, std::string(host).c_str(), &a6) != 1) {
      return absl::StrCat("\"", host, "\" is not an IPv6 address");
    }
  } else {
    const size_t colon = hp.rfind(':');
    if (colon == absl::string_view::npos) return "no :PORT";
    host = hp.substr(0, colon);
    port = hp.substr(colon + 1);
    if (host.empty()) return "no host before :PORT";
    in_addr a4;
    const bool ipv4 = inet_pton(AF_INET, std::string(host).c_str(), &a4) == 1;
    if (want_ip ? !ipv4 : !ipv4 && !IsHostName(host)) {
      return absl::StrCat("\"", host, "\" is not ", want_ip ? "an IPv4 address" : "a host name");
    }
  }
  int n = 0;
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(),
                   [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); }) ||
      !absl::SimpleAtoi(port, &n) || n < 1 || n > 65535) {
    return absl::StrCat("port \"", port, "\" is not in 1..65535");
  }
  return "";
}

}  // namespace

absl::Status ValidateTarget(absl::string_view target) {
  if (target.empty()) return BadTarget(target, "empty");
  for (char c : target) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c)) ||
        !absl::ascii_isprint(static_cast<unsigned char>(c))) {
      return BadTarget(target, "contains a space or a control character");
    }
  }
  for (absl::string_view scheme : {"unix:", "unix-abstract:"}) {
    if (absl::StartsWith(target, scheme)) {
      if (target.size() == scheme.size()) return BadTarget(target, "no path after the scheme");
      return absl::OkStatus();
    }
  }
  absl::string_view rest = target;
  bool want_ip = false, list = false;
  if (absl::ConsumePrefix(&rest, "dns:")) {
    absl::ConsumePrefix(&rest, "///");
  } else if (absl::ConsumePrefix(&rest, "ipv4:")) {
    want_ip = list = true;
  } else if (absl::StartsWith(rest, "ipv6:")) {
    rest.remove_prefix(5);
    list = true;  // [ADDR]:PORT, checked as IPv6 by the bracket
    for (absl::string_view hp : absl::StrSplit(rest, ',')) {
      if (!absl::StartsWith(hp, "[")) return BadTarget(target, "ipv6: wants [ADDR]:PORT");
    }
  }
  std::vector<absl::string_view> parts =
      list ? absl::StrSplit(rest, ',') : std::vector<absl::string_view>{rest};
  for (absl::string_view hp : parts) {
    if (std::string problem = HostPortProblem(hp, want_ip); !problem.empty()) {
      return BadTarget(target, problem);
    }
  }
  return absl::OkStatus();
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
