// Copyright hopbudget authors.
#include "hopbudget/advanced/wire.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"

namespace hopbudget {
namespace {

constexpr size_t kMaxValueBytes = 20;

// Strict unsigned decimal: digits only, no sign, no whitespace. Values that do
// not fit the limit are reported as too large without overflowing.
HeaderParse ParseDigits(absl::string_view v, int64_t limit, int64_t* out) {
  if (v.empty()) return HeaderParse::kEmpty;
  if (v.size() > kMaxValueBytes) return HeaderParse::kTooLong;
  if (v[0] == '-') {
    return v.size() > 1 ? HeaderParse::kNegative : HeaderParse::kMalformed;
  }
  // Up to 18 digits cannot overflow an int64_t: the common value (a budget
  // in microseconds has 4 to 10) is read without a check per digit.
  if (v.size() <= 18) {
    int64_t n = 0;
    for (char c : v) {
      const unsigned d = static_cast<unsigned char>(c) - static_cast<unsigned>('0');
      if (d > 9) return HeaderParse::kMalformed;
      n = n * 10 + static_cast<int64_t>(d);
    }
    if (n > limit) return HeaderParse::kTooLarge;
    *out = n;
    return HeaderParse::kOk;
  }
  int64_t n = 0;
  bool too_large = false;
  for (char c : v) {
    if (c < '0' || c > '9') return HeaderParse::kMalformed;
    if (too_large) continue;
    const int d = c - '0';
    if (n > (limit - d) / 10) {
      too_large = true;
      continue;
    }
    n = n * 10 + d;
  }
  if (too_large) return HeaderParse::kTooLarge;
  *out = n;
  return HeaderParse::kOk;
}

}  // namespace

absl::string_view HeaderParseName(HeaderParse result) {
  switch (result) {
    case HeaderParse::kOk:
      return "ok";
    case HeaderParse::kEmpty:
      return "empty";
    case HeaderParse::kTooLong:
      return "too_long";
    case HeaderParse::kMalformed:
      return "malformed";
    case HeaderParse::kNegative:
      return "negative";
    case HeaderParse::kTooLarge:
      return "too_large";
  }
  return "malformed";
}

ParsedBudget ParseBudgetHeader(absl::string_view value) {
  ParsedBudget out;
  int64_t us = 0;
  static const int64_t max_us = absl::ToInt64Microseconds(kMaxHeaderBudget);
  out.result = ParseDigits(value, max_us, &us);
  if (out.result == HeaderParse::kOk) out.budget = absl::Microseconds(us);
  return out;
}

std::string FormatBudgetHeader(absl::Duration budget) {
  if (budget > kMaxHeaderBudget) return "";
  if (budget <= absl::ZeroDuration()) return "0";
  // ToInt64Microseconds truncates toward zero: never rounds a budget up.
  return absl::StrCat(absl::ToInt64Microseconds(budget));
}

ParsedSentStamp ParseSentHeader(absl::string_view value) {
  constexpr size_t kIdDigits = 16;
  constexpr size_t kMaxBytes = 19 + 1 + kIdDigits;
  ParsedSentStamp out;
  if (value.empty()) return out;  // kEmpty
  if (value.size() > kMaxBytes) {
    out.result = HeaderParse::kTooLong;
    return out;
  }
  const size_t colon = value.find(':');
  if (colon == absl::string_view::npos || value.size() - colon - 1 != kIdDigits) {
    out.result = HeaderParse::kMalformed;
    return out;
  }
  if (colon > 1 && value[0] == '0') {  // leading zeros: not the form we send
    out.result = HeaderParse::kMalformed;
    return out;
  }
  int64_t us = 0;
  out.result = ParseDigits(value.substr(0, colon), std::numeric_limits<int64_t>::max(), &us);
  if (out.result == HeaderParse::kEmpty) out.result = HeaderParse::kMalformed;  // ":<id>"
  if (out.result != HeaderParse::kOk) return out;
  uint64_t id = 0;
  for (char c : value.substr(colon + 1)) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else {
      out.result = HeaderParse::kMalformed;
      return out;
    }
    id = (id << 4) | static_cast<uint64_t>(d);
  }
  out.stamp.clock_id = id;
  out.stamp.sent = absl::UnixEpoch() + absl::Microseconds(us);
  return out;
}

std::string FormatSentHeader(uint64_t clock_id, absl::Time sent) {
  const int64_t us = std::max<int64_t>(0, absl::ToUnixMicros(sent));
  return absl::StrCat(us, ":", absl::Hex(clock_id, absl::kZeroPad16));
}

ParsedMillis ParseMillisTrailer(absl::string_view value) {
  ParsedMillis out;
  int64_t ms = 0;
  out.result = ParseDigits(value, absl::ToInt64Milliseconds(kMaxHeaderBudget), &ms);
  if (out.result == HeaderParse::kOk) out.value = absl::Milliseconds(ms);
  return out;
}

}  // namespace hopbudget
