// Copyright hopbudget authors.
//
// grpc_over_h2.h: the pieces of gRPC's HTTP/2 protocol that h2_load and the
// demo's edge write and read themselves, without gRPC (gRPC's
// doc/PROTOCOL-HTTP2.md and doc/http-grpc-status-mapping.md): the
// grpc-timeout header, the grpc-message encoding, the length-prefixed
// message, and the status a gRPC client reports for a stream that ended.
// Pure functions, no I/O.
//
//   std::string timeout = FormatGrpcTimeout(absl::Milliseconds(500));  // "500000u"
//   absl::StatusOr<absl::Duration> budget = ParseGrpcTimeout("500m");  // 500 ms
//   std::string body = FrameGrpcMessage(order.SerializeAsString());
//   StreamEnd end;  // filled from the response's headers, trailers and close
//   absl::StatusCode code = StatusOfStreamEnd(end);
#ifndef HOPBUDGET_PROTO_GRPC_H2_GRPC_OVER_H2_H_
#define HOPBUDGET_PROTO_GRPC_H2_GRPC_OVER_H2_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace hopbudget::grpc_h2 {

// grpc-timeout for `remaining`: at most 8 digits, in the finest unit that
// holds it (u, m, S, M, H), rounded up as gRPC's encoder rounds (by less
// than one unit: at most 1 us below 100 s). Zero, negative and
// sub-microsecond budgets are "1u" (the header cannot say zero; h2_load
// sends no call with nothing left); an infinite one is "99999999H".
std::string FormatGrpcTimeout(absl::Duration remaining);

// The budget a grpc-timeout value gives: 1 to 8 ASCII digits and one unit
// (H, M, S, m, u, n), as gRPC's PROTOCOL-HTTP2.md writes it. Anything else
// (empty, a sign, nine digits, an unknown unit, a space) is InvalidArgument
// quoting the value (at most its first 32 bytes). "0n" is a zero budget.
absl::StatusOr<absl::Duration> ParseGrpcTimeout(absl::string_view value);

// A status message as the grpc-message header carries it: percent-encoded
// (upper-case hex) every byte outside 0x20..0x7e, and '%' itself.
std::string PercentEncodeGrpcMessage(absl::string_view message);

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

}  // namespace hopbudget::grpc_h2

#endif  // HOPBUDGET_PROTO_GRPC_H2_GRPC_OVER_H2_H_
