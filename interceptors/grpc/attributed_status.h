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
#include "hopbudget/attribution.h"

namespace hopbudget {
namespace internal {

// DEADLINE_EXCEEDED carrying `a` in its message (attribution.h grammar) and
// in `grpc-status-details-bin`. A non-empty `note` that is not itself a
// valid attribution message (typically the original message) is kept after
// the fields, in parentheses.
grpc::Status AttributedStatus(const Attribution& a, absl::string_view note = {});

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
