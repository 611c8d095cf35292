// Copyright hopbudget authors.
//
// scrape.h: where a target's metrics are and how they are fetched.
//
// ParseTarget accepts "host:port", "[v6]:port", "http://host:port" and
// "http://host:port/path" (path defaults to /metrics). Rejected, with a
// message that names the target: an empty target, a scheme other than
// http://, a missing, non-numeric or out-of-range (1..65535) port, an empty
// host, whitespace or a query/fragment without a path.
//
// Scrape does one GET with cpp-httplib (Accept: text/plain; version=0.0.4);
// `timeout` bounds the connect and each read and write. Errors (Unavailable
// unless said), each starting with the URL: "cannot resolve host "h" (DNS:
// <why>)" for a name that does not resolve, "could not connect (refused or
// unreachable)" for an address that does, "no connection within 2s", "no complete answer (closed,
// or silent for 2s)", "HTTP 404 <start of the body>", and ResourceExhausted for a body over
// kMaxScrapeBytes (a runaway exporter must not eat the terminal's memory).
//
// Thread safety: pure function / independent calls.
#ifndef HOPBUDGET_CLIENT_INSPECT_SCRAPE_H_
#define HOPBUDGET_CLIENT_INSPECT_SCRAPE_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace hopbudget::inspect {

inline constexpr size_t kMaxScrapeBytes = 16 << 20;

struct Target {
  std::string host;  // without brackets for IPv6
  int port = 0;
  std::string path = "/metrics";
  std::string Url() const;  // "http://host:port/path"
};

absl::StatusOr<Target> ParseTarget(absl::string_view target);

// The body of GET target.path.
absl::StatusOr<std::string> Scrape(const Target& target, absl::Duration timeout);

}  // namespace hopbudget::inspect

#endif  // HOPBUDGET_CLIENT_INSPECT_SCRAPE_H_
