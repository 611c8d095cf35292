// Copyright hopbudget authors.
//
// edge_rules.h: what the demo's edge (edge.h) decides about a gRPC call from
// its HTTP/2 headers, as pure functions of values and time: whether the
// request is a gRPC call at all, its deadline, the headers it is forwarded
// with, and the Trailers-Only answer that refuses it. The edge's event loop
// only moves bytes between libnghttp2 and these.
//
//   absl::StatusOr<InboundCall> in = ReadInboundCall(headers, now);
//   if (!in.ok()) answer(TrailersOnly(BadRequest(in.status())));
//   std::vector<Header> up = ForwardedHeaders(headers, in->deadline, now, id, steady);
//
// Thread safety: pure functions.
#ifndef HOPBUDGET_SERVER_EDGE_EDGE_RULES_H_
#define HOPBUDGET_SERVER_EDGE_EDGE_RULES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "hopbudget/advanced/admission.h"

namespace hopbudget::edge {

struct Header {
  std::string name;
  std::string value;

  friend bool operator==(const Header& a, const Header& b) {
    return a.name == b.name && a.value == b.value;
  }
};

// What the edge reads of a request's headers.
struct InboundCall {
  std::string path;  // :path, "/package.Service/Method"
  // The earliest of arrival + grpc-timeout and arrival + hopbudget-budget-us
  // (the header can only shrink a budget); InfiniteFuture() with neither.
  absl::Time deadline = absl::InfiniteFuture();
};

// The call `headers` open, read at `arrival`, or InvalidArgument naming what
// makes it no gRPC call the edge can forward: a :method other than POST, no
// :path or one that does not start with '/', a content-type that is not
// application/grpc[+...|;...], a grpc-timeout that does not parse
// (ParseGrpcTimeout), or a hopbudget-budget-us that does not (wire.h).
absl::StatusOr<InboundCall> ReadInboundCall(const std::vector<Header>& headers, absl::Time arrival);

// The headers the call goes upstream with, in order: the inbound headers
// without grpc-timeout, hopbudget-budget-us and hopbudget-sent-us (pseudo
// headers first, as they came); then, for a finite deadline, grpc-timeout
// and hopbudget-budget-us for what is left at `now`, and hopbudget-sent-us
// stamped `steady_now` on clock `clock_id` (so the next hop learns how long
// the call waited on its way from here). A deadline already passed is sent
// as a budget of zero ("1u": the header cannot say zero).
std::vector<Header> ForwardedHeaders(const std::vector<Header>& headers, absl::Time deadline,
                                     absl::Time now, uint64_t clock_id, absl::Time steady_now);

// An answer the edge gives itself, without the upstream.
struct Refusal {
  absl::StatusCode code = absl::StatusCode::kOk;
  std::string message;           // not yet percent-encoded
  std::vector<Header> trailers;  // beside grpc-status and grpc-message
};

// What the edge knows when admission turns a call away.
struct RefusalFacts {
  std::string hop;  // the edge's hop name
  int limit = 0;    // admission's limit of calls in progress, then
  absl::Duration pushback = absl::ZeroDuration();
  absl::Duration budget_on_arrival = absl::InfiniteDuration();
  absl::Duration waited = absl::ZeroDuration();  // arrival to the decision
};

// The answer for an admission `decision` other than kAdmit and kQueue, as
// hopbudget's server interceptor gives it (server.h): a call that cannot
// finish (kShedCannotFinish) or whose budget ran out in the queue
// (kShedQueueExpired) is DEADLINE_EXCEEDED attributed to this hop
// (source cannot-finish or queue-wait: attribution.h's message, trailers
// and grpc-status-details-bin); every other shed is RESOURCE_EXHAUSTED with
// `hopbudget-shed`, `hopbudget-hop` and, when `pushback` > 0,
// `grpc-retry-pushback-ms`.
Refusal RefusalFor(ArrivalDecision decision, const RefusalFacts& facts);

// A call that arrived with less than `min_attempt_budget` left
// (`budget_on_arrival`): DEADLINE_EXCEEDED, source arrived-expired.
Refusal ArrivedExpired(absl::string_view hop, absl::Duration budget_on_arrival);

// A request that is no gRPC call (ReadInboundCall's error): INVALID_ARGUMENT
// with that error's text.
Refusal BadRequest(absl::string_view hop, const absl::Status& why);

// No upstream to send the call to: UNAVAILABLE naming it and why.
Refusal UpstreamUnavailable(absl::string_view hop, absl::string_view upstream,
                            absl::string_view why);

// The response headers of a Trailers-Only answer (one HEADERS frame with
// END_STREAM): :status 200, content-type application/grpc, grpc-status,
// grpc-message (percent-encoded; omitted when empty), then the trailers.
std::vector<Header> TrailersOnly(const Refusal& refusal);

}  // namespace hopbudget::edge

#endif  // HOPBUDGET_SERVER_EDGE_EDGE_RULES_H_
