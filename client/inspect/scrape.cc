// Copyright hopbudget authors.
#include "scrape.h"

#include <httplib.h>
#include <netdb.h>
#include <sys/socket.h>

#include <chrono>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace hopbudget::inspect {

std::string Target::Url() const {
  const bool v6 = absl::StrContains(host, ':');
  return absl::StrCat("http://", v6 ? "[" : "", host, v6 ? "]" : "", ":", port, path);
}

absl::StatusOr<Target> ParseTarget(absl::string_view text) {
  auto bad = [text](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("bad target \"", text, "\": ", why,
                                                   " (want host:port or http://host:port[/path])"));
  };
  if (text.empty()) return bad("empty");
  for (char c : text) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c)) ||
        absl::ascii_iscntrl(static_cast<unsigned char>(c))) {
      return bad("contains whitespace or control characters");
    }
  }
  absl::string_view rest = text;
  const size_t scheme_end = rest.find("://");
  if (scheme_end != absl::string_view::npos) {
    const std::string scheme = absl::AsciiStrToLower(rest.substr(0, scheme_end));
    if (scheme != "http")
      return bad(absl::StrCat("scheme \"", scheme, "\" is not supported, only http"));
    rest.remove_prefix(scheme_end + 3);
  }
  Target t;
  const size_t slash = rest.find('/');
  if (slash != absl::string_view::npos) {
    t.path = std::string(rest.substr(slash));
    rest = rest.substr(0, slash);
  }
  if (absl::StrContains(rest, '?') || absl::StrContains(rest, '#') ||
      absl::StrContains(rest, '@')) {
    return bad("unexpected '?', '#' or '@' before the path");
  }
  absl::string_view port_text;
  if (absl::StartsWith(rest, "[")) {
    const size_t close = rest.find(']');
    if (close == absl::string_view::npos) return bad("unterminated '[' in IPv6 address");
    t.host = std::string(rest.substr(1, close - 1));
    absl::string_view after = rest.substr(close + 1);
    if (!absl::StartsWith(after, ":")) return bad("missing port");
    port_text = after.substr(1);
  } else {
    const size_t colon = rest.rfind(':');
    if (colon == absl::string_view::npos) return bad("missing port");
    t.host = std::string(rest.substr(0, colon));
    if (absl::StrContains(t.host, ':')) return bad("IPv6 addresses need brackets, e.g. [::1]:9100");
    port_text = rest.substr(colon + 1);
  }
  if (t.host.empty()) return bad("empty host");
  int port = 0;
  if (port_text.empty() || !absl::SimpleAtoi(port_text, &port) ||
      !absl::ascii_isdigit(static_cast<unsigned char>(port_text[0])) || port < 1 || port > 65535) {
    return bad(absl::StrCat("port \"", port_text, "\" is not a number in 1..65535"));
  }
  t.port = port;
  return t;
}

namespace {

// Why `host` does not resolve ("" when it does). httplib reports a name
// that does not resolve and a port nobody listens on alike (Connection);
// the user needs to know which: a typo in the name, or a service down.
std::string ResolveProblem(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc == 0) {
    freeaddrinfo(found);
    return "";
  }
  return absl::StrCat("cannot resolve host \"", host, "\" (DNS: ", gai_strerror(rc), ")");
}

// httplib names its errors in one word ("Connection"); say what happened.
std::string Describe(const Target& target, httplib::Error error, absl::Duration timeout) {
  switch (error) {
    case httplib::Error::Connection:
      if (std::string dns = ResolveProblem(target.host); !dns.empty()) return dns;
      return "could not connect (refused or unreachable)";
    case httplib::Error::ConnectionTimeout:
      return absl::StrCat("no connection within ", absl::FormatDuration(timeout));
    case httplib::Error::Read:
      return absl::StrCat("no complete answer (closed, or silent for ",
                          absl::FormatDuration(timeout), ")");
    case httplib::Error::Write:
      return "could not send the request (connection closed)";
    case httplib::Error::BindIPAddress:
      return "could not bind a local address";
    default:
      return absl::StrCat("request failed: ", httplib::to_string(error));
  }
}

}  // namespace

absl::StatusOr<std::string> Scrape(const Target& target, absl::Duration timeout) {
  httplib::Client client(target.host, target.port);
  const auto limit = absl::ToChronoMicroseconds(timeout);
  client.set_connection_timeout(limit);
  client.set_read_timeout(limit);
  client.set_write_timeout(limit);
  client.set_keep_alive(false);
  std::string body;
  bool too_large = false;
  httplib::Result res =
      client.Get(target.path.c_str(), httplib::Headers{{"Accept", "text/plain; version=0.0.4"}},
                 [&](const char* data, size_t n) {
                   if (body.size() + n > kMaxScrapeBytes) {
                     too_large = true;
                     return false;
                   }
                   body.append(data, n);
                   return true;
                 });
  if (too_large) {
    return absl::ResourceExhaustedError(
        absl::StrCat(target.Url(), ": response larger than ", kMaxScrapeBytes, " bytes"));
  }
  if (!res) {
    return absl::UnavailableError(
        absl::StrCat(target.Url(), ": ", Describe(target, res.error(), timeout)));
  }
  if (res->status != 200) {
    return absl::UnavailableError(
        absl::StrCat(target.Url(), ": HTTP ", res->status,
                     body.empty() ? "" : absl::StrCat(" ", body.substr(0, 120))));
  }
  return body;
}

}  // namespace hopbudget::inspect
