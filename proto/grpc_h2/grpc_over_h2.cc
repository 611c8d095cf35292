// Copyright hopbudget authors.
#include "grpc_h2/grpc_over_h2.h"

#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace hopbudget::grpc_h2 {

std::string FormatGrpcTimeout(absl::Duration remaining) {
  if (remaining == absl::InfiniteDuration()) return "99999999H";
  constexpr int64_t kMaxValue = 99999999;
  struct Unit {
    absl::Duration length;
    char name;
  };
  static constexpr Unit kUnits[] = {{absl::Microseconds(1), 'u'},
                                    {absl::Milliseconds(1), 'm'},
                                    {absl::Seconds(1), 'S'},
                                    {absl::Minutes(1), 'M'},
                                    {absl::Hours(1), 'H'}};
  if (remaining < absl::Microseconds(1)) return "1u";
  for (const Unit& unit : kUnits) {
    // Rounded up: a whole number of units no shorter than `remaining`.
    absl::Duration rest;
    int64_t value = absl::IDivDuration(remaining, unit.length, &rest);
    if (rest > absl::ZeroDuration()) ++value;
    if (value <= kMaxValue) return absl::StrCat(value, std::string(1, unit.name));
  }
  return "99999999H";
}

absl::StatusOr<absl::Duration> ParseGrpcTimeout(absl::string_view value) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("grpc-timeout \"",
                                                   absl::CHexEscape(value.substr(0, 32)),
                                                   value.size() > 32 ? "..." : "", "\": ", why));
  };
  if (value.size() < 2) return bad("needs 1 to 8 digits and a unit");
  const absl::string_view digits = value.substr(0, value.size() - 1);
  if (digits.size() > 8) return bad("more than 8 digits");
  int64_t n = 0;
  for (char c : digits) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return bad("not a decimal number");
    n = n * 10 + (c - '0');
  }
  switch (value.back()) {
    case 'H':
      return absl::Hours(n);
    case 'M':
      return absl::Minutes(n);
    case 'S':
      return absl::Seconds(n);
    case 'm':
      return absl::Milliseconds(n);
    case 'u':
      return absl::Microseconds(n);
    case 'n':
      return absl::Nanoseconds(n);
    default:
      return bad("unknown unit (H, M, S, m, u or n)");
  }
}

std::string PercentEncodeGrpcMessage(absl::string_view message) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(message.size());
  for (char ch : message) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c <= 0x7e && c != '%') {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xf]);
    }
  }
  return out;
}

std::string FrameGrpcMessage(absl::string_view message) {
  const uint32_t n = static_cast<uint32_t>(message.size());
  std::string out;
  out.reserve(5 + message.size());
  out.push_back('\0');
  out.push_back(static_cast<char>((n >> 24) & 0xff));
  out.push_back(static_cast<char>((n >> 16) & 0xff));
  out.push_back(static_cast<char>((n >> 8) & 0xff));
  out.push_back(static_cast<char>(n & 0xff));
  out.append(message.data(), message.size());
  return out;
}

absl::StatusCode StatusOfStreamEnd(const StreamEnd& end) {
  if (end.grpc_status >= 0) {
    return end.grpc_status <= 16 ? static_cast<absl::StatusCode>(end.grpc_status)
                                 : absl::StatusCode::kUnknown;
  }
  if (end.h2_error != 0) {
    switch (end.h2_error) {
      case 0x7:  // REFUSED_STREAM: the server never started it
        return absl::StatusCode::kUnavailable;
      case 0x8:  // CANCEL
        return absl::StatusCode::kCancelled;
      case 0xb:  // ENHANCE_YOUR_CALM
        return absl::StatusCode::kResourceExhausted;
      case 0xc:  // INADEQUATE_SECURITY
        return absl::StatusCode::kPermissionDenied;
      default:
        return absl::StatusCode::kInternal;
    }
  }
  if (end.http_status != 0 && end.http_status != 200) {
    switch (end.http_status) {
      case 400:
        return absl::StatusCode::kInternal;
      case 401:
        return absl::StatusCode::kUnauthenticated;
      case 403:
        return absl::StatusCode::kPermissionDenied;
      case 404:
        return absl::StatusCode::kUnimplemented;
      case 429:
      case 502:
      case 503:
      case 504:
        return absl::StatusCode::kUnavailable;
      default:
        return absl::StatusCode::kUnknown;
    }
  }
  return absl::StatusCode::kInternal;
}

}  // namespace hopbudget::grpc_h2
