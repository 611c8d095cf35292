// Copyright hopbudget authors.
//
// attributed_status.h (internal): the one place where an Attribution becomes
// a gRPC answer (status, details and plain trailers) and where an answer's
// plain trailers are read back. The interceptors and the shield's gRPC side
// all answer through these, so the three forms never drift apart.
#ifndef HOPBUDGET_INTERNAL_ATTRIBUTED_STATUS_H_
#define HOPBUDGET_INTERNAL_ATTRIBUTED_STATUS_H_

#include <grpcpp/support/status.h>
#include <grpcpp/support/string_ref.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "hopbudget/advanced/attribution.h"

namespace hopbudget {
namespace internal {

// DEADLINE_EXCEEDED carrying `a` in its message (attribution.h grammar) and
// in `grpc-status-details-bin`. When it replaces an answer, `note` is that
// answer's message and `relayed_details` its `grpc-status-details-bin`, so
// that what the callee said survives the relay:
//   - the message keeps KeptNote(note) after the fields, in parentheses: a
//     plain message whole, an attribution message's own note (its fields
//     are replaced by `a`'s), so the callee's text appears once however
//     many hops relay it; at most kMaxNoteBytes, cut on a UTF-8 boundary
//     and marked (kNoteTruncatedMarker);
//   - the details hold `a`'s ErrorInfo first, then the callee's own details
//     other than hopbudget ErrorInfos, as long as they fit in
//     kMaxDetailsBytes (EncodeStatusDetails).
// Empty `note` and `relayed_details` (an answer of this hop's own) add
// nothing.
grpc::Status AttributedStatus(const Attribution& a, absl::string_view note = {},
                              absl::string_view relayed_details = {});

// The plain `hopbudget-*` trailers of `a`, in wire.h order; `hop` is left
// out when unknown. Values are clamped to what the parsers accept.
struct TrailerPair {
  const char* key;
  std::string value;
};
std::vector<TrailerPair> AttributionTrailerPairs(const Attribution& a);

// Adds AttributionTrailerPairs(a) to a server's trailing metadata, replacing
// any value the handler set under those names.
void AddAttributionTrailers(const Attribution& a,
                            std::multimap<std::string, std::string>* trailers);

// The plain trailers of a received answer; the views point into `trailers`.
AttributionTrailers AttributionTrailersOf(
    const std::multimap<grpc::string_ref, grpc::string_ref>& trailers);

}  // namespace internal
}  // namespace hopbudget

#endif  // HOPBUDGET_INTERNAL_ATTRIBUTED_STATUS_H_
