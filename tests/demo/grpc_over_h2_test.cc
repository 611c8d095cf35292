// Copyright hopbudget authors.
#include "grpc_h2/grpc_over_h2.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace hopbudget::grpc_h2 {
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

TEST(ParseGrpcTimeoutTest, EveryUnitAndTheLongestValue) {
  struct Case {
    const char* value;
    absl::Duration budget;
  };
  const Case cases[] = {
      {"500m", absl::Milliseconds(500)},
      {"1H", absl::Hours(1)},
      {"2M", absl::Minutes(2)},
      {"3S", absl::Seconds(3)},
      {"250000u", absl::Milliseconds(250)},
      {"7n", absl::Nanoseconds(7)},
      {"0n", absl::ZeroDuration()},
      {"99999999H", absl::Hours(99999999)},
      {"00000001m", absl::Milliseconds(1)},
  };
  for (const Case& c : cases) {
    absl::StatusOr<absl::Duration> got = ParseGrpcTimeout(c.value);
    ASSERT_TRUE(got.ok()) << c.value << ": " << got.status();
    EXPECT_EQ(*got, c.budget) << c.value;
  }
}

TEST(ParseGrpcTimeoutTest, RefusesWhatGrpcDoesNotWriteAndSaysWhy) {
  struct Case {
    std::string value;
    const char* why;
  };
  const Case cases[] = {
      {"", "needs 1 to 8 digits and a unit"},
      {"m", "needs 1 to 8 digits and a unit"},
      {"123456789m", "more than 8 digits"},
      {"-5m", "not a decimal number"},
      {"+5m", "not a decimal number"},
      {" 5m", "not a decimal number"},
      {"5.0S", "not a decimal number"},
      {"5s", "unknown unit"},
      {"5", "needs 1 to 8 digits and a unit"},
      {"55", "unknown unit"},
      {std::string("5\0m", 3), "not a decimal number"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<absl::Duration> got = ParseGrpcTimeout(c.value);
    ASSERT_FALSE(got.ok()) << c.value;
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(got.status().message()), testing::HasSubstr(c.why)) << c.value;
    EXPECT_THAT(std::string(got.status().message()), testing::HasSubstr("grpc-timeout"));
  }
  // A long value is quoted only in part.
  absl::StatusOr<absl::Duration> got = ParseGrpcTimeout(std::string(1000, 'x'));
  ASSERT_FALSE(got.ok());
  EXPECT_LT(got.status().message().size(), 120u);
}

TEST(PercentEncodeGrpcMessageTest, PrintableAsciiStaysAndTheRestIsEscaped) {
  EXPECT_EQ(PercentEncodeGrpcMessage("shed at edge (queue_full)"), "shed at edge (queue_full)");
  EXPECT_EQ(PercentEncodeGrpcMessage("100%"), "100%25");
  EXPECT_EQ(PercentEncodeGrpcMessage("a\nb\t"), "a%0Ab%09");
  EXPECT_EQ(PercentEncodeGrpcMessage("\xc3\xa9"), "%C3%A9");
  EXPECT_EQ(PercentEncodeGrpcMessage(""), "");
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
}  // namespace hopbudget::grpc_h2
