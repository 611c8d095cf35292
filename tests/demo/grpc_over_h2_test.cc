// Copyright hopbudget authors.
#include "grpc_over_h2.h"

#include <gtest/gtest.h>

#include <string>

namespace hopbudget::h2load {
namespace {

TEST(FormatGrpcTimeoutTest, FinestUnitThatHoldsItRoundedUp) {
  struct Case {
    absl::Duration remaining;
    const char* header;
  };
  const Case cases[] = {
      {absl::Milliseconds(500), "500000u"},
      {absl::Microseconds(1), "1u"},
      {absl::Nanoseconds(1500), "2u"},  // rounded up, never down
      {absl::Microseconds(99999999), "99999999u"},
      {absl::Microseconds(100000000), "100000m"},
      {absl::Microseconds(100000001), "100001m"},
      {absl::Hours(30), "108000S"},
      {absl::Hours(100000), "6000000M"},
      {absl::Hours(99999999), "99999999H"},
      {absl::Hours(200000000), "99999999H"},
      // Nothing left: the header cannot say zero.
      {absl::ZeroDuration(), "1u"},
      {absl::Nanoseconds(1), "1u"},
      {-absl::Seconds(3), "1u"},
      {absl::InfiniteDuration(), "99999999H"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(FormatGrpcTimeout(c.remaining), c.header) << c.remaining;
  }
}

TEST(FrameGrpcMessageTest, UncompressedFlagAndBigEndianLength) {
  EXPECT_EQ(FrameGrpcMessage(""), std::string("\0\0\0\0\0", 5));
  EXPECT_EQ(FrameGrpcMessage("abc"), std::string("\0\0\0\0\3abc", 8));
  const std::string big(0x010203, 'x');
  const std::string framed = FrameGrpcMessage(big);
  EXPECT_EQ(framed.substr(0, 5), std::string("\0\0\x01\x02\x03", 5));
  EXPECT_EQ(framed.size(), big.size() + 5);
}

TEST(StatusOfStreamEndTest, AsAGrpcClientReportsIt) {
  struct Case {
    StreamEnd end;
    absl::StatusCode code;
  };
  using C = absl::StatusCode;
  const Case cases[] = {
      {{200, 0, 0}, C::kOk},
      {{200, 4, 0}, C::kDeadlineExceeded},
      {{200, 8, 0}, C::kResourceExhausted},
      {{200, 16, 0}, C::kUnauthenticated},
      {{200, 17, 0}, C::kUnknown},
      // grpc-status wins over the close: a status then a reset is the status.
      {{200, 14, 0x8}, C::kUnavailable},
      // Reset before any status.
      {{0, -1, 0x7}, C::kUnavailable},  // REFUSED_STREAM
      {{200, -1, 0x8}, C::kCancelled},
      {{0, -1, 0xb}, C::kResourceExhausted},
      {{0, -1, 0xc}, C::kPermissionDenied},
      {{0, -1, 0x1}, C::kInternal},
      {{0, -1, 0x2}, C::kInternal},
      // An HTTP answer that is not gRPC's.
      {{400, -1, 0}, C::kInternal},
      {{401, -1, 0}, C::kUnauthenticated},
      {{403, -1, 0}, C::kPermissionDenied},
      {{404, -1, 0}, C::kUnimplemented},
      {{429, -1, 0}, C::kUnavailable},
      {{502, -1, 0}, C::kUnavailable},
      {{503, -1, 0}, C::kUnavailable},
      {{504, -1, 0}, C::kUnavailable},
      {{500, -1, 0}, C::kUnknown},
      // A clean close without a status.
      {{200, -1, 0}, C::kInternal},
      {{0, -1, 0}, C::kInternal},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(StatusOfStreamEnd(c.end), c.code)
        << ":status " << c.end.http_status << " grpc-status " << c.end.grpc_status << " h2 error "
        << c.end.h2_error;
  }
}

}  // namespace
}  // namespace hopbudget::h2load
