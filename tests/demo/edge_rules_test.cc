// Copyright hopbudget authors.
#include "edge/edge_rules.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "hopbudget/advanced/attribution.h"

namespace hopbudget::edge {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);

std::vector<Header> Request(std::vector<Header> extra = {}) {
  std::vector<Header> h = {{":method", "POST"},
                           {":scheme", "http"},
                           {":path", "/hopbudget.demo.Gateway/PlaceOrder"},
                           {":authority", "gw"},
                           {"content-type", "application/grpc"},
                           {"te", "trailers"}};
  h.insert(h.end(), extra.begin(), extra.end());
  return h;
}

TEST(ReadInboundCallTest, TheDeadlineIsTheEarliestBudgetFromArrival) {
  struct Case {
    std::vector<Header> extra;
    absl::Time deadline;
  };
  const Case cases[] = {
      {{}, absl::InfiniteFuture()},
      {{{"grpc-timeout", "500m"}}, kT0 + absl::Milliseconds(500)},
      {{{"hopbudget-budget-us", "250000"}}, kT0 + absl::Milliseconds(250)},
      // The budget header can only shrink a budget.
      {{{"grpc-timeout", "500m"}, {"hopbudget-budget-us", "900000"}},
       kT0 + absl::Milliseconds(500)},
      {{{"grpc-timeout", "500m"}, {"hopbudget-budget-us", "100000"}},
       kT0 + absl::Milliseconds(100)},
      {{{"grpc-timeout", "0n"}}, kT0},
  };
  for (const Case& c : cases) {
    absl::StatusOr<InboundCall> in = ReadInboundCall(Request(c.extra), kT0);
    ASSERT_TRUE(in.ok()) << in.status();
    EXPECT_EQ(in->deadline, c.deadline);
    EXPECT_EQ(in->path, "/hopbudget.demo.Gateway/PlaceOrder");
  }
}

TEST(ReadInboundCallTest, ContentTypesGrpcAccepts) {
  for (const char* type :
       {"application/grpc", "application/grpc+proto", "application/grpc;q=1", "Application/GRPC"}) {
    std::vector<Header> h = Request();
    h[4].value = type;
    EXPECT_TRUE(ReadInboundCall(h, kT0).ok()) << type;
  }
}

TEST(ReadInboundCallTest, WhatIsNoGrpcCallIsRefusedSayingWhy) {
  struct Case {
    std::vector<Header> headers;
    const char* why;
  };
  auto with = [](size_t i, std::string value) {
    std::vector<Header> h = Request();
    h[i].value = std::move(value);
    return h;
  };
  auto without = [](const std::string& name) {
    std::vector<Header> h;
    for (const Header& x : Request())
      if (x.name != name) h.push_back(x);
    return h;
  };
  const Case cases[] = {
      {with(0, "GET"), ":method is \"GET\", not POST"},
      {without(":method"), "no :method POST"},
      {without(":path"), ":path \"\" is not /service/method"},
      {with(2, "relative"), ":path \"relative\""},
      {with(4, "application/json"), "content-type \"application/json\""},
      {with(4, "application/grpcx"), "content-type \"application/grpcx\""},
      {without("content-type"), "no content-type"},
      {Request({{"grpc-timeout", "5s"}}), "grpc-timeout \"5s\": unknown unit"},
      {Request({{"grpc-timeout", "123456789m"}}), "more than 8 digits"},
      {Request({{"hopbudget-budget-us", "-1"}}), "hopbudget-budget-us \"-1\": negative"},
      {Request({{"hopbudget-budget-us", "12x"}}), "hopbudget-budget-us \"12x\": malformed"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<InboundCall> in = ReadInboundCall(c.headers, kT0);
    ASSERT_FALSE(in.ok()) << c.why;
    EXPECT_EQ(in.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(in.status().message()), HasSubstr(c.why));
  }
}

TEST(ForwardedHeadersTest, WhatIsLeftReplacesTheInboundBudgets) {
  const std::vector<Header> in = Request({{"grpc-timeout", "500m"},
                                          {"hopbudget-budget-us", "500000"},
                                          {"hopbudget-sent-us", "1:00000000000000aa"},
                                          {"x-user", "kept"}});
  const std::vector<Header> out =
      ForwardedHeaders(in, kT0 + absl::Milliseconds(500), kT0 + absl::Milliseconds(120), 0xab,
                       absl::UnixEpoch() + absl::Microseconds(77));
  EXPECT_THAT(
      out, ElementsAre(Header{":method", "POST"}, Header{":scheme", "http"},
                       Header{":path", "/hopbudget.demo.Gateway/PlaceOrder"},
                       Header{":authority", "gw"}, Header{"content-type", "application/grpc"},
                       Header{"te", "trailers"}, Header{"x-user", "kept"},
                       Header{"grpc-timeout", "380000u"}, Header{"hopbudget-budget-us", "380000"},
                       Header{"hopbudget-sent-us", "77:00000000000000ab"}));
}

TEST(ForwardedHeadersTest, NoDeadlineSendsNoBudgetAndAPassedOneSendsTheLeast) {
  std::vector<Header> out = ForwardedHeaders(Request(), absl::InfiniteFuture(), kT0, 1, kT0);
  EXPECT_EQ(out, Request());
  out = ForwardedHeaders(Request(), kT0, kT0 + absl::Seconds(1), 1, kT0);
  EXPECT_EQ(out[out.size() - 3], (Header{"grpc-timeout", "1u"}));
  EXPECT_EQ(out[out.size() - 2], (Header{"hopbudget-budget-us", "0"}));
}

TEST(RefusalForTest, ShedsAreResourceExhaustedWithPushbackAndReason) {
  RefusalFacts f;
  f.hop = "edge";
  f.limit = 64;
  f.pushback = absl::Milliseconds(100);
  for (ArrivalDecision d :
       {ArrivalDecision::kShedQueueFull, ArrivalDecision::kShedOverLimit,
        ArrivalDecision::kShedQueueTimeout, ArrivalDecision::kShedOverloadWait}) {
    const Refusal r = RefusalFor(d, f);
    EXPECT_EQ(r.code, absl::StatusCode::kResourceExhausted) << d;
    EXPECT_THAT(r.message, HasSubstr(absl::StrCat("shed at edge (", ArrivalDecisionName(d),
                                                  "): over its limit of 64")));
    EXPECT_THAT(
        r.trailers,
        ElementsAre(Header{"hopbudget-shed", std::string(ArrivalDecisionName(d))},
                    Header{"hopbudget-hop", "edge"}, Header{"grpc-retry-pushback-ms", "100"}));
  }
  f.pushback = absl::ZeroDuration();
  EXPECT_EQ(RefusalFor(ArrivalDecision::kShedQueueFull, f).trailers.size(), 2u);
}

TEST(RefusalForTest, CannotFinishAndQueueExpiryAreAttributedDeadlines) {
  RefusalFacts f;
  f.hop = "edge";
  f.budget_on_arrival = absl::Milliseconds(500);
  f.waited = absl::Milliseconds(460);
  struct Case {
    ArrivalDecision decision;
    DeadlineSource source;
  };
  for (const Case& c : {Case{ArrivalDecision::kShedCannotFinish, DeadlineSource::kCannotFinish},
                        Case{ArrivalDecision::kShedQueueExpired, DeadlineSource::kQueueWait}}) {
    const Refusal r = RefusalFor(c.decision, f);
    EXPECT_EQ(r.code, absl::StatusCode::kDeadlineExceeded);
    EXPECT_EQ(r.message, absl::StrCat("hopbudget/1: source=", DeadlineSourceName(c.source),
                                      " hop=edge budget_ms=500 elapsed_ms=460"));
    ASSERT_EQ(r.trailers.size(), 5u);
    EXPECT_EQ(r.trailers[0],
              (Header{"hopbudget-source", std::string(DeadlineSourceName(c.source))}));
    EXPECT_EQ(r.trailers[4].name, "grpc-status-details-bin");
    std::string details;
    ASSERT_TRUE(absl::Base64Unescape(r.trailers[4].value, &details));
    absl::optional<Attribution> a = DecodeStatusDetails(details);
    ASSERT_TRUE(a.has_value());
    EXPECT_EQ(a->hop, "edge");
    EXPECT_EQ(a->source, c.source);
  }
}

TEST(RefusalForTest, AnInfiniteBudgetIsWrittenAsZero) {
  RefusalFacts f;
  f.hop = "edge";
  const Refusal r = RefusalFor(ArrivalDecision::kShedQueueExpired, f);
  EXPECT_THAT(r.message, HasSubstr("budget_ms=0"));
}

TEST(TrailersOnlyTest, StatusAndPercentEncodedMessageFirst) {
  Refusal r = ArrivedExpired("edge", absl::Milliseconds(3));
  std::vector<Header> h = TrailersOnly(r);
  ASSERT_GE(h.size(), 4u);
  EXPECT_EQ(h[0], (Header{":status", "200"}));
  EXPECT_EQ(h[1], (Header{"content-type", "application/grpc"}));
  EXPECT_EQ(h[2], (Header{"grpc-status", "4"}));
  EXPECT_EQ(h[3],
            (Header{"grpc-message",
                    "hopbudget/1: source=arrived-expired hop=edge budget_ms=3 elapsed_ms=0"}));

  h = TrailersOnly(BadRequest("edge", absl::InvalidArgumentError("100% \"bad\"\n")));
  EXPECT_EQ(h[2], (Header{"grpc-status", "3"}));
  EXPECT_EQ(h[3], (Header{"grpc-message", "edge: 100%25 \"bad\"%0A"}));
  EXPECT_EQ(h.size(), 4u);

  Refusal silent;
  silent.code = absl::StatusCode::kUnavailable;
  EXPECT_EQ(TrailersOnly(silent).size(), 3u);  // no empty grpc-message
}

TEST(UpstreamUnavailableTest, NamesTheUpstreamAndWhy) {
  const Refusal r = UpstreamUnavailable("edge", "127.0.0.1:9", "connect: Connection refused");
  EXPECT_EQ(r.code, absl::StatusCode::kUnavailable);
  EXPECT_EQ(r.message, "edge: upstream 127.0.0.1:9 unavailable: connect: Connection refused");
}

}  // namespace
}  // namespace hopbudget::edge
