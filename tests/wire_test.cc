// Copyright hopbudget authors.
#include "hopbudget/advanced/wire.h"

#include <gtest/gtest.h>

#include <string>

namespace hopbudget {
namespace {

// The interceptors find their keys with one search for kKeyPrefix, and
// static_assert it on the keys they read (the array overload: a constant
// expression under -fsanitize=address too).
static_assert(HasKeyPrefix(kBudgetHeader) && !HasKeyPrefix("grpc-timeout"));

TEST(KeyPrefixTest, EveryKeyOfOursHasItAndGrpcsDoNot) {
  for (const char* key : {kBudgetHeader, kSentHeader, kSourceTrailer, kHopTrailer, kBudgetTrailer,
                          kElapsedTrailer, kShedTrailer}) {
    EXPECT_TRUE(HasKeyPrefix(key)) << key;
  }
  for (const char* key : {"grpc-timeout", "hopbudget", "hop-budget-us", ""}) {
    EXPECT_FALSE(HasKeyPrefix(key)) << key;
  }
}

TEST(ParseBudgetHeaderTest, AcceptsCanonicalMicroseconds) {
  ParsedBudget p = ParseBudgetHeader("1500000");
  EXPECT_EQ(p.result, HeaderParse::kOk);
  EXPECT_EQ(p.budget, absl::Milliseconds(1500));
}

TEST(ParseBudgetHeaderTest, AcceptsZero) {
  ParsedBudget p = ParseBudgetHeader("0");
  EXPECT_EQ(p.result, HeaderParse::kOk);
  EXPECT_EQ(p.budget, absl::ZeroDuration());
}

TEST(ParseBudgetHeaderTest, AcceptsLeadingZeros) {
  EXPECT_EQ(ParseBudgetHeader("000042").budget, absl::Microseconds(42));
}

TEST(ParseBudgetHeaderTest, RefusesEmpty) {
  EXPECT_EQ(ParseBudgetHeader("").result, HeaderParse::kEmpty);
}

TEST(ParseBudgetHeaderTest, RefusesNegative) {
  EXPECT_EQ(ParseBudgetHeader("-5").result, HeaderParse::kNegative);
  EXPECT_EQ(ParseBudgetHeader("-").result, HeaderParse::kMalformed);
}

TEST(ParseBudgetHeaderTest, RefusesSignsSpacesUnitsAndExponents) {
  for (const char* bad : {"+5", " 5", "5 ", "5s", "1e6", "0x10", "1.5", "5\n", "٣"}) {
    EXPECT_EQ(ParseBudgetHeader(bad).result, HeaderParse::kMalformed) << bad;
  }
}

TEST(ParseBudgetHeaderTest, RefusesEmbeddedNul) {
  EXPECT_EQ(ParseBudgetHeader(absl::string_view("12\0"
                                                "3",
                                                4))
                .result,
            HeaderParse::kMalformed);
}

TEST(ParseBudgetHeaderTest, RefusesMoreThanOneHundredYears) {
  const int64_t limit = absl::ToInt64Microseconds(kMaxHeaderBudget);
  EXPECT_EQ(ParseBudgetHeader(std::to_string(limit)).result, HeaderParse::kOk);
  EXPECT_EQ(ParseBudgetHeader(std::to_string(limit + 1)).result, HeaderParse::kTooLarge);
  EXPECT_EQ(ParseBudgetHeader("99999999999999999999").result, HeaderParse::kTooLarge);
}

// Values of up to 18 digits are read without an overflow check per digit,
// longer ones with it: the answer is the same on both sides of that line.
TEST(ParseBudgetHeaderTest, ShortAndLongValuesAreJudgedAlike) {
  struct Case {
    std::string value;
    HeaderParse result;
    absl::Duration budget;
  };
  const Case cases[] = {
      {std::string(17, '0') + "7", HeaderParse::kOk, absl::Microseconds(7)},        // 18
      {std::string(18, '0') + "7", HeaderParse::kOk, absl::Microseconds(7)},        // 19
      {std::string(18, '9'), HeaderParse::kTooLarge, absl::ZeroDuration()},         // 18
      {std::string(19, '9'), HeaderParse::kTooLarge, absl::ZeroDuration()},         // 19
      {std::string(17, '9') + "x", HeaderParse::kMalformed, absl::ZeroDuration()},  // 18
      {std::string(18, '9') + "x", HeaderParse::kMalformed, absl::ZeroDuration()},  // 19
      {"x" + std::string(17, '9'), HeaderParse::kMalformed, absl::ZeroDuration()},  // 18
      {std::string(1, '/'), HeaderParse::kMalformed, absl::ZeroDuration()},         // below '0'
      {std::string(1, ':'), HeaderParse::kMalformed, absl::ZeroDuration()},         // above '9'
  };
  for (const Case& c : cases) {
    const ParsedBudget p = ParseBudgetHeader(c.value);
    EXPECT_EQ(p.result, c.result) << c.value;
    if (c.result == HeaderParse::kOk) {
      EXPECT_EQ(p.budget, c.budget) << c.value;
    }
  }
}

TEST(ParseBudgetHeaderTest, RefusesOversizedValueBeforeReadingIt) {
  EXPECT_EQ(ParseBudgetHeader(std::string(21, '1')).result, HeaderParse::kTooLong);
  EXPECT_EQ(ParseBudgetHeader(std::string(1 << 16, 'x')).result, HeaderParse::kTooLong);
}

TEST(FormatBudgetHeaderTest, RoundsDownToWholeMicroseconds) {
  EXPECT_EQ(FormatBudgetHeader(absl::Nanoseconds(1999)), "1");
  EXPECT_EQ(FormatBudgetHeader(absl::Milliseconds(250)), "250000");
}

TEST(FormatBudgetHeaderTest, ZeroAndNegativeAreZero) {
  EXPECT_EQ(FormatBudgetHeader(absl::ZeroDuration()), "0");
  EXPECT_EQ(FormatBudgetHeader(absl::Seconds(-3)), "0");
  EXPECT_EQ(FormatBudgetHeader(-absl::InfiniteDuration()), "0");
}

TEST(FormatBudgetHeaderTest, InfiniteAndHugeAreNotSent) {
  EXPECT_EQ(FormatBudgetHeader(absl::InfiniteDuration()), "");
  EXPECT_EQ(FormatBudgetHeader(kMaxHeaderBudget + absl::Seconds(1)), "");
}

TEST(FormatBudgetHeaderTest, RoundTripsThroughTheParser) {
  for (absl::Duration d : {absl::Microseconds(1), absl::Seconds(65), kMaxHeaderBudget}) {
    ParsedBudget p = ParseBudgetHeader(FormatBudgetHeader(d));
    EXPECT_EQ(p.result, HeaderParse::kOk);
    EXPECT_EQ(p.budget, d);
  }
}

TEST(ParseMillisTrailerTest, AcceptsAndRefusesLikeTheBudgetHeader) {
  EXPECT_EQ(ParseMillisTrailer("300").value, absl::Milliseconds(300));
  EXPECT_EQ(ParseMillisTrailer("-1").result, HeaderParse::kNegative);
  EXPECT_EQ(ParseMillisTrailer("3ms").result, HeaderParse::kMalformed);
}

TEST(ParseSentHeaderTest, AcceptsMicrosecondsAndAClockId) {
  ParsedSentStamp p = ParseSentHeader("1500000:00000000000000ff");
  ASSERT_EQ(p.result, HeaderParse::kOk);
  EXPECT_EQ(p.stamp.sent, absl::UnixEpoch() + absl::Milliseconds(1500));
  EXPECT_EQ(p.stamp.clock_id, 0xffu);
  p = ParseSentHeader("9223372036854775807:ffffffffffffffff");
  ASSERT_EQ(p.result, HeaderParse::kOk);
  EXPECT_EQ(p.stamp.clock_id, ~uint64_t{0});
}

TEST(ParseSentHeaderTest, RefusesEveryOtherFormWithItsReason) {
  const struct {
    const char* value;
    HeaderParse want;
  } rows[] = {
      {"", HeaderParse::kEmpty},
      {"-5:00000000000000ff", HeaderParse::kNegative},
      {"-", HeaderParse::kMalformed},
      {"9223372036854775808:00000000000000ff", HeaderParse::kTooLarge},
      {"12345678901234567890:00000000000000ff", HeaderParse::kTooLong},
      {"15", HeaderParse::kMalformed},                    // no clock id
      {":00000000000000ff", HeaderParse::kMalformed},     // no time
      {"15:ff", HeaderParse::kMalformed},                 // a short id
      {"15:00000000000000FF", HeaderParse::kMalformed},   // upper case
      {"15:00000000000000fg", HeaderParse::kMalformed},   // not hex
      {"1 5:00000000000000ff", HeaderParse::kMalformed},  // a space
      {"15:000000000000000ff", HeaderParse::kMalformed},  // 17 digits
      {"1e3:00000000000000ff", HeaderParse::kMalformed},  // an exponent
      {"15:0000000000000:ff", HeaderParse::kMalformed},   // two colons
      {"15;00000000000000ff", HeaderParse::kMalformed},
      {"015:00000000000000ff", HeaderParse::kMalformed},  // a leading zero   // another separator
  };
  for (const auto& row : rows) {
    EXPECT_EQ(ParseSentHeader(row.value).result, row.want) << "'" << row.value << "'";
  }
  EXPECT_EQ(ParseSentHeader(std::string(1 << 16, '1')).result, HeaderParse::kTooLong);
}

TEST(FormatSentHeaderTest, RoundTripsThroughTheParserInWholeMicroseconds) {
  const absl::Time t = absl::UnixEpoch() + absl::Seconds(86400) + absl::Nanoseconds(1999);
  EXPECT_EQ(FormatSentHeader(0xabc, t), "86400000001:0000000000000abc");
  ParsedSentStamp p = ParseSentHeader(FormatSentHeader(0xabc, t));
  ASSERT_EQ(p.result, HeaderParse::kOk);
  EXPECT_EQ(p.stamp.sent, absl::UnixEpoch() + absl::Seconds(86400) + absl::Microseconds(1));
  EXPECT_EQ(p.stamp.clock_id, 0xabcu);
  // Before the epoch (a clock that says so) goes out as 0.
  EXPECT_EQ(FormatSentHeader(1, absl::UnixEpoch() - absl::Seconds(1)), "0:0000000000000001");
}

TEST(HeaderParseNameTest, NamesEveryResult) {
  EXPECT_EQ(HeaderParseName(HeaderParse::kOk), "ok");
  EXPECT_EQ(HeaderParseName(HeaderParse::kTooLarge), "too_large");
  EXPECT_EQ(HeaderParseName(HeaderParse::kTooLong), "too_long");
  EXPECT_EQ(HeaderParseName(HeaderParse::kNegative), "negative");
}

}  // namespace
}  // namespace hopbudget
