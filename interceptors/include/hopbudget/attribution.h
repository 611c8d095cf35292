// Copyright hopbudget authors.
//
// attribution.h: which budget fired, at which hop, encoded for the wire.
//
// A DEADLINE_EXCEEDED produced or relayed by hopbudget carries its origin in
// three forms, all describing the same `Attribution`:
//   - `grpc-status-details-bin`: a google.rpc.Status (code 4) whose details
//     hold one google.rpc.ErrorInfo with domain "hopbudget", reason
//     DeadlineSourceReason(source) and metadata {hop, source, budget_ms,
//     elapsed_ms}. Decodable by any google.rpc tooling.
//   - the `hopbudget-*` trailers listed in wire.h, for humans and proxies;
//   - the status message, "hopbudget: source=attempt hop=orders budget_ms=300
//     elapsed_ms=301", which is the only form that survives when a server has
//     to cancel a call (grpc_call_cancel_with_status sends no custom trailers).
//
// Decoding treats its input as untrusted: anything not exactly our shape
// (wrong domain, unknown reason, hop name with odd characters, oversized) is
// refused with nullopt, never trusted partially.
//
// Thread safety: pure functions.
//
// Example:
//   hopbudget::Attribution a{hopbudget::DeadlineSource::kAttempt, "orders",
//                            absl::Milliseconds(300), absl::Milliseconds(301)};
//   std::string bin = hopbudget::EncodeStatusDetails(a, "deadline exceeded");
//   assert(hopbudget::DecodeStatusDetails(bin)->hop == "orders");
#ifndef HOPBUDGET_ATTRIBUTION_H_
#define HOPBUDGET_ATTRIBUTION_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "hopbudget/deadline_source.h"

namespace hopbudget {

inline constexpr char kErrorDomain[] = "hopbudget";
inline constexpr char kErrorInfoTypeUrl[] = "type.googleapis.com/google.rpc.ErrorInfo";
// Details larger than this are not parsed.
inline constexpr size_t kMaxDetailsBytes = 4096;
inline constexpr size_t kMaxHopNameBytes = 64;

struct Attribution {
  DeadlineSource source = DeadlineSource::kNone;  // the origin source
  std::string hop;                                // "" when unknown
  absl::Duration budget = absl::ZeroDuration();   // length of the budget that fired
  absl::Duration elapsed = absl::ZeroDuration();  // from that budget's start to firing

  friend bool operator==(const Attribution& a, const Attribution& b) {
    return a.source == b.source && a.hop == b.hop && a.budget == b.budget &&
           a.elapsed == b.elapsed;
  }
};

// A hop name is 1..64 bytes of [A-Za-z0-9._-]. Returns InvalidArgument
// naming the offending input otherwise.
absl::Status ValidateHopName(absl::string_view hop);

// Serialized google.rpc.Status{code: 4, message, details: [ErrorInfo]}.
// Budgets and elapsed times are written in whole milliseconds, rounded down;
// infinite or negative values are written as 0.
std::string EncodeStatusDetails(const Attribution& a, absl::string_view message);

// Inverse of EncodeStatusDetails. nullopt unless `bytes` is a google.rpc.Status
// with an ErrorInfo of domain "hopbudget" whose reason and hop name are valid.
absl::optional<Attribution> DecodeStatusDetails(absl::string_view bytes);

// "hopbudget: source=attempt hop=orders budget_ms=300 elapsed_ms=301"
// (hop= is omitted when unknown).
std::string FormatAttributionMessage(const Attribution& a);

// Inverse of FormatAttributionMessage, from the start of a status message;
// anything after the four fields is ignored. nullopt unless the message
// starts with "hopbudget: " and every field is well formed.
absl::optional<Attribution> ParseAttributionMessage(absl::string_view message);

}  // namespace hopbudget

#endif  // HOPBUDGET_ATTRIBUTION_H_
