// Copyright hopbudget authors.
//
// attribution.h: which budget fired, at which hop, encoded for the wire.
//
// A DEADLINE_EXCEEDED produced or relayed by hopbudget carries its origin in
// three forms, all describing the same `Attribution`:
//   - `grpc-status-details-bin`: a google.rpc.Status (code 4) whose details
//     hold one google.rpc.ErrorInfo with domain "hopbudget", reason
//     DeadlineSourceReason(source) and metadata {hop, source, budget_ms,
//     elapsed_ms}, first; then the callee's own details, when it sent any
//     (see EncodeStatusDetails). Decodable by any google.rpc tooling.
//   - the `hopbudget-*` trailers listed in wire.h, for humans and proxies;
//   - the status message, "hopbudget/1: source=attempt hop=orders
//     budget_ms=300 elapsed_ms=301", which is the only form that survives
//     when a server has to cancel a call (grpc_call_cancel_with_status sends
//     no custom trailers; see docs/wire.md for which answers carry
//     which forms).
//
// The status message grammar, version 1 (ABNF, RFC 5234; SP is one space):
//   message  = "hopbudget/1: " fields [ SP note ]
//   fields   = "source=" source [ SP "hop=" hop ]
//              SP "budget_ms=" millis SP "elapsed_ms=" millis
//   source   = "client" / "request" / "attempt" / "idle" /
//              "exhausted-before-call" / "arrived-expired" / "shield" /
//              "slot-wait" / "queue-wait" / "cannot-finish" /
//              "downstream"
//   hop      = 1*64( ALPHA / DIGIT / "." / "_" / "-" )
//   millis   = 1*13DIGIT   ; whole milliseconds, at most 100 years
//   note     = *OCTET      ; free text, ignored by parsers; hopbudget
//                          ; writes "(" kept ")", kept = KeptNote() below
// Parsers read at most the first 256 bytes. A message that starts with
// "hopbudget/" but does not match (another version, a bad field) is
// malformed: ignored and counted. The unversioned "hopbudget: source=..."
// form of hopbudget 0.1 is read as version 1.
//
// What the callee said is kept. A hop that turns an answer into an
// attributed one keeps the answer's own text as the note: a message that is
// not an attribution message (a foreign peer's "ledger: database timed
// out", a malformed attribution message too) whole, and of an attribution
// message only its note, so that relayed through any number of hops the
// callee's text appears once, in one pair of parentheses:
//   "hopbudget/1: source=downstream budget_ms=0 elapsed_ms=0 (ledger: database timed out)"
// The kept text is at most kMaxNoteBytes: a longer one is cut at the start
// of a UTF-8 character and ends in kNoteTruncatedMarker.
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
#ifndef HOPBUDGET_ADVANCED_ATTRIBUTION_H_
#define HOPBUDGET_ADVANCED_ATTRIBUTION_H_

#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "hopbudget/advanced/deadline_source.h"

namespace hopbudget {

inline constexpr char kErrorDomain[] = "hopbudget";
inline constexpr char kErrorInfoTypeUrl[] = "type.googleapis.com/google.rpc.ErrorInfo";
// Details larger than this are not parsed, and EncodeStatusDetails never
// writes more.
inline constexpr size_t kMaxDetailsBytes = 4096;
inline constexpr size_t kMaxHopNameBytes = 64;
// The most of a callee's own text a status message keeps after the fields,
// marker included: enough for a peer's one-line reason, and the whole
// message stays far below what gRPC allows a status.
inline constexpr size_t kMaxNoteBytes = 256;
inline constexpr char kNoteTruncatedMarker[] = " [truncated]";

struct Attribution {
  DeadlineSource source = DeadlineSource::kNone;  // the origin source
  std::string hop;                                // "" when unknown
  absl::Duration budget = absl::ZeroDuration();   // length of the budget that fired
  absl::Duration elapsed = absl::ZeroDuration();  // from that budget's start to firing

  friend bool operator==(const Attribution& a, const Attribution& b) {
    return a.source == b.source && a.hop == b.hop && a.budget == b.budget && a.elapsed == b.elapsed;
  }
};

// A hop name is 1..64 bytes of [A-Za-z0-9._-]. Returns InvalidArgument
// naming the offending input otherwise.
absl::Status ValidateHopName(absl::string_view hop);

// Serialized google.rpc.Status{code: 4, message, details: [ErrorInfo, ...]}.
// Budgets and elapsed times are written in whole milliseconds, rounded down;
// infinite or negative values are written as 0.
//
// `relayed` is the `grpc-status-details-bin` of the answer this one
// replaces (a callee's, often a peer without hopbudget). Its details are
// kept after our ErrorInfo, in their order, as opaque Any values, except
// ErrorInfos of domain "hopbudget" (valid or not), which ours replaces. Each
// is kept only if the whole still fits in kMaxDetailsBytes, so that the next
// hop reads it; one that does not fit is dropped, later smaller ones may
// still be kept. A `relayed` that is empty, larger than kMaxDetailsBytes or
// not a google.rpc.Status adds nothing.
std::string EncodeStatusDetails(const Attribution& a, absl::string_view message,
                                absl::string_view relayed = {});

// Inverse of EncodeStatusDetails: the attribution of ReadStatusDetails when
// it is kOk, nullopt otherwise.
absl::optional<Attribution> DecodeStatusDetails(absl::string_view bytes);

// "hopbudget/1: source=attempt hop=orders budget_ms=300 elapsed_ms=301"
// (hop= is omitted when unknown), then " (" KeptNote(note) ")" unless that
// is empty. `note` is typically the message of the answer this one
// replaces.
std::string FormatAttributionMessage(const Attribution& a, absl::string_view note = {});

// The callee's own text that a message relaying `message` keeps (see the
// grammar above): `message` with ASCII whitespace trimmed when it is not a
// valid attribution message (absent or malformed alike), else the note
// after its fields, trimmed and without one pair of enclosing parentheses;
// "" when that leaves nothing. At most kMaxNoteBytes: a longer text is cut
// at the start of a UTF-8 character (the last one that fits whole with the
// marker; text that is not UTF-8 there is cut at the byte) and ends in
// kNoteTruncatedMarker. KeptNote of a message carrying a kept note gives
// that note back, so relaying never cuts or wraps it again.
std::string KeptNote(absl::string_view message);

// Inverse of FormatAttributionMessage, from the start of a status message;
// anything after the four fields is ignored. nullopt unless the message
// matches the grammar above.
absl::optional<Attribution> ParseAttributionMessage(absl::string_view message);

// How one form of attribution read off an answer turned out.
enum class AttributionParse {
  kAbsent,     // the answer does not carry this form
  kOk,         // `value` holds it
  kMalformed,  // present but not valid: ignore it, count it
};

// "absent", "ok", "malformed".
absl::string_view AttributionParseName(AttributionParse p);

// For absl::StrCat and absl::StrFormat("%v") (Abseil releases that read
// AbslStringify), and for GoogleTest and streams.
template <typename Sink>
void AbslStringify(Sink& sink, AttributionParse p) {
  sink.Append(AttributionParseName(p));
}
std::ostream& operator<<(std::ostream& os, AttributionParse p);

struct ParsedAttribution {
  AttributionParse result = AttributionParse::kAbsent;
  Attribution value;  // meaningful when result == kOk
};

// Reads the status message form: kAbsent when the message is not an
// attribution message at all (does not start with "hopbudget/" or the 0.1
// prefix "hopbudget: source="), kMalformed when it claims to be one but does
// not parse.
ParsedAttribution ReadAttributionMessage(absl::string_view message);

// Reads `grpc-status-details-bin`. The first ErrorInfo of domain
// "hopbudget" decides: kOk when its reason and metadata are valid,
// kMalformed otherwise. Without one: kAbsent when `bytes` is empty or a
// well-formed google.rpc.Status of a peer's own (its details are not ours
// to judge, and never counted), kMalformed when it is larger than
// kMaxDetailsBytes, not a google.rpc.Status, or holds an ErrorInfo that does
// not decode (whose it is cannot be told).
ParsedAttribution ReadStatusDetails(absl::string_view bytes);

// The plain `hopbudget-*` trailers of one answer; nullopt for a trailer the
// answer did not carry. Each value is untrusted.
struct AttributionTrailers {
  absl::optional<absl::string_view> source;
  absl::optional<absl::string_view> hop;
  absl::optional<absl::string_view> budget_ms;
  absl::optional<absl::string_view> elapsed_ms;
};

// kAbsent when none of the four is present; kOk when `source`, `budget_ms`
// and `elapsed_ms` are present and every present value is valid (a known
// origin source, a valid hop name, whole milliseconds in range); kMalformed
// otherwise.
ParsedAttribution ReadAttributionTrailers(const AttributionTrailers& trailers);

}  // namespace hopbudget

#endif  // HOPBUDGET_ADVANCED_ATTRIBUTION_H_
