// Copyright hopbudget authors.
//
// wire.h: what hopbudget puts on the wire, and the parsers for what it reads.
//
// Request headers (client -> server):
//   hopbudget-budget-us   Remaining budget of the call in whole microseconds,
//                         computed when the headers are sent. Exact, unlike
//                         grpc-timeout (which rounds up to 8 digits and may be
//                         reused from an earlier, larger value). The server
//                         takes min(grpc deadline, arrival + this): the header
//                         can only shrink a budget, never widen it.
//   hopbudget-sent-us     When the sender stamped the call, and on which clock:
//                         "<microseconds>:<clock id>", the sender's steady
//                         clock (Clock::Steady(): arbitrary epoch, never set
//                         back) in whole microseconds, then 16 lowercase hex
//                         digits naming that clock (random, one per sending
//                         process). Sent with hopbudget-budget-us and stamped
//                         at the same moment. A server learns from it how long
//                         the call waited on its way (transit.h): a queue in
//                         the sender's transport or in the server's socket
//                         spends the caller's budget, and gRPC's relative
//                         grpc-timeout cannot tell. Like the budget header it
//                         can only shrink a budget; a value that does not
//                         parse is ignored.
//   hopbudget-previous-attempts
//                         On every attempt of a logical call after its first:
//                         how many went before (1, 2, ...), the value of
//                         grpc-previous-rpc-attempts. gRPC core removes that
//                         header from every call while its retries are on
//                         (they are, for its transparent retries), so
//                         hopbudget sends it under its own name too, and a
//                         hopbudget server puts it back for its handlers.
//
// Response trailers (server -> client), on DEADLINE_EXCEEDED only:
//   hopbudget-source      Origin source name ("attempt", "request", ...).
//   hopbudget-hop         Hop whose budget fired (may be empty: unknown).
//   hopbudget-budget-ms   Length of the budget that fired, milliseconds.
//   hopbudget-elapsed-ms  Time from that budget's start to when it fired.
// plus `grpc-status-details-bin` (see attribution.h).
//
// Everything read from the wire is untrusted: parsers never throw, never
// crash, accept only canonical forms and report why they refused.
//
// Thread safety: pure functions.
#ifndef HOPBUDGET_ADVANCED_WIRE_H_
#define HOPBUDGET_ADVANCED_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace hopbudget {

// Every metadata key of ours starts with this, so that an interceptor finds
// all of its keys with one search of gRPC's sorted metadata map; the keys
// they search for are checked against it (HasKeyPrefix) where they are read.
inline constexpr char kKeyPrefix[] = "hopbudget-";
constexpr bool HasKeyPrefix(absl::string_view key) {
  // (pointer, length) views: string_view(const char*) tests the pointer for
  // null, which GCC does not fold to a constant under -fsanitize=address.
  return key.substr(0, sizeof(kKeyPrefix) - 1) ==
         absl::string_view(kKeyPrefix, sizeof(kKeyPrefix) - 1);
}
// For the static_asserts on our key constants, for the reason above.
template <std::size_t N>
constexpr bool HasKeyPrefix(const char (&key)[N]) {
  return HasKeyPrefix(absl::string_view(key, N - 1));
}

inline constexpr char kBudgetHeader[] = "hopbudget-budget-us";
inline constexpr char kSentHeader[] = "hopbudget-sent-us";
inline constexpr char kPreviousAttemptsHeader[] = "hopbudget-previous-attempts";
inline constexpr char kSourceTrailer[] = "hopbudget-source";
inline constexpr char kHopTrailer[] = "hopbudget-hop";
inline constexpr char kBudgetTrailer[] = "hopbudget-budget-ms";
inline constexpr char kElapsedTrailer[] = "hopbudget-elapsed-ms";
// On a RESOURCE_EXHAUSTED from admission: why the call was shed
// (ArrivalDecisionName, admission.h), beside `hopbudget-hop`.
inline constexpr char kShedTrailer[] = "hopbudget-shed";

// Largest budget the header may carry: 100 years. Larger values are refused
// (kTooLarge) rather than clamped, so that garbage cannot pose as "a lot".
inline constexpr absl::Duration kMaxHeaderBudget = absl::Hours(24 * 365 * 100);

enum class HeaderParse {
  kOk,
  kEmpty,      // present but empty
  kTooLong,    // more than 20 bytes: refused before looking at it
  kMalformed,  // anything but ASCII digits (no sign, space, or exponent)
  kNegative,   // a leading '-'
  kTooLarge,   // above kMaxHeaderBudget
};

absl::string_view HeaderParseName(HeaderParse result);
// For absl::StrCat and absl::StrFormat("%v") (Abseil releases that read
// AbslStringify), and for GoogleTest and streams: the name above.
template <typename Sink>
void AbslStringify(Sink& sink, HeaderParse value) {
  sink.Append(HeaderParseName(value));
}
inline std::ostream& operator<<(std::ostream& os, HeaderParse value) {
  return os << HeaderParseName(value);
}

struct ParsedBudget {
  HeaderParse result = HeaderParse::kEmpty;
  absl::Duration budget = absl::ZeroDuration();  // set only when kOk
};

// Parses a `hopbudget-budget-us` value.
ParsedBudget ParseBudgetHeader(absl::string_view value);

// Formats a budget for `hopbudget-budget-us`: whole microseconds, rounded
// down (so the receiver never sees more than was left), 0 when <= 0. Budgets
// above kMaxHeaderBudget, including infinite ones, are not sent: returns "".
std::string FormatBudgetHeader(absl::Duration budget);

// A `hopbudget-sent-us` value: when the sender stamped the call, on the
// clock `clock_id` names.
struct SentStamp {
  uint64_t clock_id = 0;
  absl::Time sent = absl::UnixEpoch();  // UnixEpoch() + the microseconds sent
};
struct ParsedSentStamp {
  HeaderParse result = HeaderParse::kEmpty;
  SentStamp stamp;  // set only when kOk
};

// Parses a `hopbudget-sent-us` value. Only the form FormatSentHeader writes
// is kOk: 1 to 19 decimal digits without leading zeros (kTooLarge past
// INT64_MAX microseconds), ':', exactly 16 lowercase hex digits; more than 36 bytes is kTooLong, a
// leading '-' kNegative, anything else kMalformed.
ParsedSentStamp ParseSentHeader(absl::string_view value);

// Formats a `hopbudget-sent-us` value for a stamp taken at `sent` (a reading
// of Clock::Steady(); whole microseconds since the Unix epoch, rounded down,
// 0 before it) on the clock `clock_id`.
std::string FormatSentHeader(uint64_t clock_id, absl::Time sent);

// Parses a non-negative decimal millisecond count as written in the
// attribution trailers; nullopt-like result kMalformed etc. as above.
struct ParsedMillis {
  HeaderParse result = HeaderParse::kEmpty;
  absl::Duration value = absl::ZeroDuration();
};
ParsedMillis ParseMillisTrailer(absl::string_view value);

}  // namespace hopbudget

#endif  // HOPBUDGET_ADVANCED_WIRE_H_
