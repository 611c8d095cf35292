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

}  // namespace hopbudget::demo
