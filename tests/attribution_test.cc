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
  for (DeadlineSource s :
       {DeadlineSource::kClient, DeadlineSource::kRequest, DeadlineSource::kAttempt,
        DeadlineSource::kIdle, DeadlineSource::kExhaustedBeforeCall,
        DeadlineSource::kArrivedExpired}) {
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
            "hopbudget: source=attempt hop=orders budget_ms=300 elapsed_ms=301");
}

TEST(AttributionMessageTest, OmitsUnknownHop) {
  EXPECT_EQ(FormatAttributionMessage({DeadlineSource::kDownstream, "", absl::ZeroDuration(),
                                      absl::ZeroDuration()}),
            "hopbudget: source=downstream budget_ms=0 elapsed_ms=0");
}

TEST(AttributionMessageTest, RoundTripsAndIgnoresTrailingText) {
  EXPECT_EQ(ParseAttributionMessage(FormatAttributionMessage(Sample())), Sample());
  EXPECT_EQ(ParseAttributionMessage(FormatAttributionMessage(Sample()) + " (ledger slow)"),
            Sample());
}

TEST(AttributionMessageTest, RefusesAnythingElse) {
  for (const char* bad : {
           "", "Deadline Exceeded", "hopbudget:", "hopbudget: source=attempt",
           "hopbudget: source=bogus budget_ms=1 elapsed_ms=1",
           "hopbudget: source=none budget_ms=1 elapsed_ms=1",
           "hopbudget: source=attempt budget_ms=-1 elapsed_ms=1",
           "hopbudget: source=attempt hop=a|b budget_ms=1 elapsed_ms=1",
           "hopbudget: budget_ms=1 source=attempt elapsed_ms=1",
           "hopbudget: source=attempt budget_ms=1 budget_ms=2 elapsed_ms=1",
           "hopbudget:  source=attempt budget_ms=1 elapsed_ms=1",
       }) {
    EXPECT_FALSE(ParseAttributionMessage(bad).has_value()) << bad;
  }
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
