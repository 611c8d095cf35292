// Copyright hopbudget authors.
//
// flags.h: the demo's value parsers for what a flag or a request carries
// (durations, probabilities, gRPC targets). Pure, no gRPC. The command line
// itself is absl flags, read by client/cli/cli_flags.h.
//
// Every bad input is an InvalidArgument saying what is wrong; the caller
// prefixes the flag's name.
//
// Thread safety: pure functions.
#ifndef HOPBUDGET_DEMO_FLAGS_H_
#define HOPBUDGET_DEMO_FLAGS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace hopbudget::demo {

// "800ms", "2s", "1.5s", "250us", "1m30s", and "0". Not negative, not
// infinite, and a unit is required for anything but 0 (is "800" ms or s?).
absl::StatusOr<absl::Duration> ParseDuration(absl::string_view text);

// "800ms", "1.5s", "inf": the shortest readable form.
std::string DurationText(absl::Duration d);

// A probability: a decimal number in [0, 1].
absl::StatusOr<double> ParseProbability(absl::string_view text);

// Checks a gRPC target given on the command line, so that a typo is refused
// at start (gRPC itself accepts any string and only fails each call later).
// Accepted: HOST:PORT (a DNS name, an IPv4 address or a [bracketed] IPv6
// address, and a port 1..65535: the port is required, gRPC's default of 443
// is never what a demo hop means), the same after dns:/// or dns:,
// ipv4:ADDR:PORT[,ADDR:PORT...], ipv6:[ADDR]:PORT[,...], and unix:PATH or
// unix-abstract:NAME (no spaces). InvalidArgument saying what is wrong and
// what is expected otherwise; the caller prefixes the flag's name.
absl::Status ValidateTarget(absl::string_view target);

}  // namespace hopbudget::demo

#endif  // HOPBUDGET_DEMO_FLAGS_H_
