// Copyright hopbudget authors.
#include "hopbudget/attribution.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace hopbudget {
namespace {

Attribution Sample() {
  return {DeadlineSource::kAttempt, "orders", absl::Milliseconds(300), absl::Milliseconds(301)};
}

TEST(StatusDetailsTest, RoundTrips) {
  const std::string bin = EncodeStatusDetails(Sample(), "deadline exceeded");
  absl::optional<Attribution> a = DecodeStatusDetails(bin);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(*a, Sample());
}

TEST(StatusDetailsTest, UnknownHopRoundTripsAsEmpty) {
  Attribution in{DeadlineSource::kDownstream, "", absl::ZeroDuration(), absl::ZeroDuration()};
  EXPECT_EQ(DecodeStatusDetails(EncodeStatusDetails(in, "")), in);
}

TEST(StatusDetailsTest, EveryOriginSourceRoundTrips) {
  for (DeadlineSource s : {DeadlineSource::kClient, DeadlineSource::kRequest,
                           DeadlineSource::kAttempt, DeadlineSource::kIdle,
                           DeadlineSource::kExhaustedBeforeCall, DeadlineSource::kArrivedExpired}) {
    Attribution in{s, "h", absl::Milliseconds(1), absl::Milliseconds(2)};
    EXPECT_EQ(DecodeStatusDetails(EncodeStatusDetails(in, "m")), in) << DeadlineSourceName(s);
  }
}

TEST(StatusDetailsTest, InfiniteAndNegativeDurationsAreWrittenAsZero) {
  Attribution in{DeadlineSource::kClient, "h", absl::InfiniteDuration(), absl::Seconds(-1)};
  absl::optional<Attribution> out = DecodeStatusDetails(EncodeStatusDetails(in, ""));
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->budget, absl::ZeroDuration());
  EXPECT_EQ(out->elapsed, absl::ZeroDuration());
}

TEST(StatusDetailsTest, RefusesGarbage) {
  EXPECT_FALSE(DecodeStatusDetails("").has_value());
  EXPECT_FALSE(DecodeStatusDetails("\xff\xff\xff").has_value());
  EXPECT_FALSE(DecodeStatusDetails(std::string(kMaxDetailsBytes + 1, '\0')).has_value());
}

TEST(StatusDetailsTest, RefusesForeignDomainAndUnknownReason) {
  std::string bin = EncodeStatusDetails(Sample(), "");
  // Same length substitution keeps the protobuf framing valid.
  std::string foreign = bin;
  foreign.replace(foreign.find("hopbudget"), 9, "otherdoma");
  EXPECT_FALSE(DecodeStatusDetails(foreign).has_value());
  std::string unknown = bin;
  unknown.replace(unknown.find("ATTEMPT_BUDGET_EXHAUSTED"), 7, "UNKNOWN");
  EXPECT_FALSE(DecodeStatusDetails(unknown).has_value());
}

TEST(StatusDetailsTest, RefusesHopWithIllegalCharacters) {
  std::string bin = EncodeStatusDetails(Sample(), "");
  bin.replace(bin.find("orders"), 6, "ord rs");
  EXPECT_FALSE(DecodeStatusDetails(bin).has_value());
}

TEST(StatusDetailsTest, RefusesMalformedNumbers) {
  std::string bin = EncodeStatusDetails(Sample(), "");
  bin.replace(bin.find("300"), 3, "-30");
  EXPECT_FALSE(DecodeStatusDetails(bin).has_value());
}

TEST(AttributionMessageTest, FormatsAllFields) {
  EXPECT_EQ(FormatAttributionMessage(Sample()),
            "hopbudget/1: source=attempt hop=orders budget_ms=300 elapsed_ms=301");
}

TEST(AttributionMessageTest, OmitsUnknownHop) {
  EXPECT_EQ(FormatAttributionMessage(
                {DeadlineSource::kDownstream, "", absl::ZeroDuration(), absl::ZeroDuration()}),
            "hopbudget/1: source=downstream budget_ms=0 elapsed_ms=0");
}

TEST(AttributionMessageTest, ReadsTheUnversionedFormOfHopbudget01) {
  EXPECT_EQ(
      ParseAttributionMessage("hopbudget: source=attempt hop=orders budget_ms=300 elapsed_ms=301"),
      Sample());
}

TEST(AttributionMessageTest, RoundTripsAndIgnoresTrailingText) {
  EXPECT_EQ(ParseAttributionMessage(FormatAttributionMessage(Sample())), Sample());
  EXPECT_EQ(ParseAttributionMessage(FormatAttributionMessage(Sample()) + " (ledger slow)"),
            Sample());
}

TEST(AttributionMessageTest, RefusesAnythingElse) {
  for (const char* bad : {
           "",
           "Deadline Exceeded",
           "hopbudget:",
           "hopbudget: source=attempt",
           "hopbudget: source=bogus budget_ms=1 elapsed_ms=1",
           "hopbudget: source=none budget_ms=1 elapsed_ms=1",
           "hopbudget: source=attempt budget_ms=-1 elapsed_ms=1",
           "hopbudget: source=attempt hop=a|b budget_ms=1 elapsed_ms=1",
           "hopbudget: budget_ms=1 source=attempt elapsed_ms=1",
           "hopbudget: source=attempt budget_ms=1 budget_ms=2 elapsed_ms=1",
           "hopbudget:  source=attempt budget_ms=1 elapsed_ms=1",
           "hopbudget/1: source=attempt budget_ms=1",
           "hopbudget/1:source=attempt budget_ms=1 elapsed_ms=1",
           "hopbudget/2: source=attempt budget_ms=1 elapsed_ms=1",
           "hopbudget/1: source=attempt budget_ms=1 elapsed_ms=abc",
           "hopbudget/1: source=evil budget_ms=-1 elapsed_ms=abc",
           "hopbudget/1: source=attempt budget_ms=99999999999999 elapsed_ms=1",
       }) {
    EXPECT_FALSE(ParseAttributionMessage(bad).has_value()) << bad;
  }
}

// A table of messages and how each reads: absent (not an attribution
// message at all, never counted), ok, or malformed (ignored and counted).
TEST(ReadAttributionMessageTest, TellsAbsentFromMalformed) {
  struct Case {
    const char* message;
    AttributionParse want;
  };
  const Case cases[] = {
      {"", AttributionParse::kAbsent},
      {"Deadline Exceeded", AttributionParse::kAbsent},
      {"hopbudget: shield: commit ended unobserved", AttributionParse::kAbsent},
      {"hopbudget/1: source=attempt hop=orders budget_ms=300 elapsed_ms=301",
       AttributionParse::kOk},
      {"hopbudget: source=attempt hop=orders budget_ms=300 elapsed_ms=301", AttributionParse::kOk},
      {"hopbudget/1: source=attempt hop=orders budget_ms=300 elapsed_ms=301 (slow ledger)",
       AttributionParse::kOk},
      {"hopbudget: source=evil budget_ms=-1 elapsed_ms=abc", AttributionParse::kMalformed},
      {"hopbudget/1: source=request budget_ms=1e9 elapsed_ms=1", AttributionParse::kMalformed},
      {"hopbudget/7: anything", AttributionParse::kMalformed},
      {"hopbudget/", AttributionParse::kMalformed},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ReadAttributionMessage(c.message).result, c.want) << c.message;
  }
  EXPECT_EQ(ReadAttributionMessage(FormatAttributionMessage(Sample())).value, Sample());
}

TEST(ReadStatusDetailsTest, EmptyIsAbsentGarbageIsMalformed) {
  EXPECT_EQ(ReadStatusDetails("").result, AttributionParse::kAbsent);
  EXPECT_EQ(ReadStatusDetails("\xff\xff").result, AttributionParse::kMalformed);
  ParsedAttribution ok = ReadStatusDetails(EncodeStatusDetails(Sample(), "m"));
  EXPECT_EQ(ok.result, AttributionParse::kOk);
  EXPECT_EQ(ok.value, Sample());
}

// The plain trailers: each value untrusted, every combination decided.
TEST(ReadAttributionTrailersTest, EveryValueIsChecked) {
  const std::string long_hop(300, 'h');
  struct Case {
    const char* name;
    AttributionTrailers trailers;
    AttributionParse want;
  };
  const Case cases[] = {
      {"none", {}, AttributionParse::kAbsent},
      {"complete", {"attempt", "orders", "300", "301"}, AttributionParse::kOk},
      {"no hop", {"downstream", absl::nullopt, "0", "0"}, AttributionParse::kOk},
      {"negative budget", {"attempt", "orders", "-1", "301"}, AttributionParse::kMalformed},
      {"exponent elapsed", {"attempt", "orders", "300", "1e9"}, AttributionParse::kMalformed},
      {"300-character hop", {"attempt", long_hop, "300", "301"}, AttributionParse::kMalformed},
      {"unknown source", {"evil", "orders", "300", "301"}, AttributionParse::kMalformed},
      {"source none", {"none", "orders", "300", "301"}, AttributionParse::kMalformed},
      {"budget alone",
       {absl::nullopt, absl::nullopt, "300", absl::nullopt},
       AttributionParse::kMalformed},
      {"no elapsed", {"attempt", "orders", "300", absl::nullopt}, AttributionParse::kMalformed},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ReadAttributionTrailers(c.trailers).result, c.want) << c.name;
  }
  EXPECT_EQ(ReadAttributionTrailers({"attempt", "orders", "300", "301"}).value, Sample());
}

TEST(AttributionParseTest, PrintsItsName) {
  EXPECT_EQ(::testing::PrintToString(AttributionParse::kMalformed), "malformed");
  EXPECT_EQ(AttributionParseName(AttributionParse::kAbsent), "absent");
}

TEST(ValidateHopNameTest, AcceptsAndRefuses) {
  EXPECT_TRUE(ValidateHopName("orders-v2.eu_1").ok());
  EXPECT_FALSE(ValidateHopName("").ok());
  EXPECT_FALSE(ValidateHopName("has space").ok());
  EXPECT_FALSE(ValidateHopName(std::string(65, 'a')).ok());
  EXPECT_THAT(std::string(ValidateHopName("a=b").message()), ::testing::HasSubstr("a=b"));
}

}  // namespace
}  // namespace hopbudget
