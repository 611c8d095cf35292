// Copyright hopbudget authors.
//
// grpc_over_h2.h: the pieces of gRPC's HTTP/2 protocol that h2_load writes
// and reads itself (gRPC's doc/PROTOCOL-HTTP2.md and
// doc/http-grpc-status-mapping.md): the grpc-timeout header, the
// length-prefixed message, and the status a gRPC client reports for a
// stream that ended. Pure functions, no I/O.
//
//   std::string timeout = FormatGrpcTimeout(absl::Milliseconds(500));  // "500000u"
//   std::string body = FrameGrpcMessage(order.SerializeAsString());
//   StreamEnd end;  // filled from the response's headers, trailers and close
//   absl::StatusCode code = StatusOfStreamEnd(end);
#ifndef HOPBUDGET_CLIENT_H2LOAD_GRPC_OVER_H2_H_
#define HOPBUDGET_CLIENT_H2LOAD_GRPC_OVER_H2_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace hopbudget::h2load {

// grpc-timeout for `remaining`: at most 8 digits, in the finest unit that
// holds it (u, m, S, M, H), rounded up as gRPC's encoder rounds (by less
// than one unit: at most 1 us below 100 s). Zero, negative and
// sub-microsecond budgets are "1u" (the header cannot say zero; h2_load
// sends no call with nothing left); an infinite one is "99999999H".
std::string FormatGrpcTimeout(absl::Duration remaining);

// A gRPC message on the wire: one byte 0 (not compressed), the length as 4
// bytes big-endian, the message.
std::string FrameGrpcMessage(absl::string_view message);

// What a client saw of a stream by the time it closed.
struct StreamEnd {
  int http_status = 0;   // the :status header, 0 when none came
  int grpc_status = -1;  // the grpc-status header or trailer, -1 when none came
  // The HTTP/2 error code the stream closed with (RST_STREAM, or a GOAWAY
  // for streams above its last stream id); 0 (NO_ERROR) for a clean close.
  uint32_t h2_error = 0;
};

// The status a gRPC client reports: grpc-status when the server sent one
// (UNKNOWN for a value outside 0..16); else the code for the HTTP/2 error
// the stream was reset with (REFUSED_STREAM: UNAVAILABLE, CANCEL:
// CANCELLED, ENHANCE_YOUR_CALM: RESOURCE_EXHAUSTED, INADEQUATE_SECURITY:
// PERMISSION_DENIED, any other: INTERNAL); else the code for a :status that
// is not 200 (400 INTERNAL, 401 UNAUTHENTICATED, 403 PERMISSION_DENIED, 404
// UNIMPLEMENTED, 429, 502, 503, 504 UNAVAILABLE, other UNKNOWN); else, a
// stream that ended cleanly with no status, INTERNAL.
absl::StatusCode StatusOfStreamEnd(const StreamEnd& end);

}  // namespace hopbudget::h2load

#endif  // HOPBUDGET_CLIENT_H2LOAD_GRPC_OVER_H2_H_
