// Copyright hopbudget authors.
#include "hopbudget/advanced/attribution.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "hopbudget/status.pb.h"

namespace hopbudget {
namespace {

Attribution Sample() {
  return {DeadlineSource::kAttempt, "orders", absl::Milliseconds(300), absl::Milliseconds(301)};
}

// A detail as a foreign peer (a grpc-go or Python service) puts it in its
// own google.rpc.Status.
google::protobuf::Any ForeignErrorInfo(const std::string& domain, const std::string& reason) {
  rpc::ErrorInfo info;
  info.set_domain(domain);
  info.set_reason(reason);
  (*info.mutable_metadata())["table"] = "ledger_entries";
  google::protobuf::Any any;
  any.set_type_url(kErrorInfoTypeUrl);
  info.SerializeToString(any.mutable_value());
  return any;
}

google::protobuf::Any OpaqueDetail(const std::string& type, size_t bytes) {
  google::protobuf::Any any;
  any.set_type_url("type.googleapis.com/" + type);
  any.set_value(std::string(bytes, 'd'));
  return any;
}

std::string StatusBytes(const std::vector<google::protobuf::Any>& details,
                        const std::string& message = "go ledger: database timed out") {
  rpc::Status status;
  status.set_code(4);
  status.set_message(message);
  for (const auto& d : details) *status.add_details() = d;
  return status.SerializeAsString();
}

bool SameDetail(const google::protobuf::Any& a, const google::protobuf::Any& b) {
  return a.type_url() == b.type_url() && a.value() == b.value();
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

// What a relaying hop keeps of the callee's details: everything but
// hopbudget's own ErrorInfos, which the new attribution replaces, within
// kMaxDetailsBytes.
// EncodeStatusDetails writes the wire format by hand: its bytes must be
// those protobuf itself writes for the same messages (map in key order).
TEST(StatusDetailsTest, BytesAreProtobufsOwnDeterministicSerialization) {
  const Attribution with_hop = Sample();
  const Attribution without_hop{DeadlineSource::kDownstream, "", absl::Milliseconds(1234567),
                                absl::ZeroDuration()};
  const std::string long_message(300, 'x');  // a 2-byte length varint
  for (const Attribution& a : {with_hop, without_hop}) {
    for (const std::string& message : {std::string(), std::string("msg"), long_message}) {
      rpc::ErrorInfo info;
      info.set_reason(std::string(DeadlineSourceReason(a.source)));
      info.set_domain(kErrorDomain);
      auto& md = *info.mutable_metadata();
      md["source"] = std::string(DeadlineSourceName(a.source));
      if (!a.hop.empty()) md["hop"] = a.hop;
      md["budget_ms"] = std::to_string(absl::ToInt64Milliseconds(a.budget));
      md["elapsed_ms"] = std::to_string(absl::ToInt64Milliseconds(a.elapsed));
      rpc::Status status;
      status.set_code(4);
      status.set_message(message);
      google::protobuf::Any* any = status.add_details();
      any->set_type_url(kErrorInfoTypeUrl);
      {
        google::protobuf::io::StringOutputStream s(any->mutable_value());
        google::protobuf::io::CodedOutputStream out(&s);
        out.SetSerializationDeterministic(true);
        info.SerializeToCodedStream(&out);
      }
      std::string expected;
      {
        google::protobuf::io::StringOutputStream s(&expected);
        google::protobuf::io::CodedOutputStream out(&s);
        out.SetSerializationDeterministic(true);
        status.SerializeToCodedStream(&out);
      }
      EXPECT_EQ(EncodeStatusDetails(a, message), expected)
          << a.hop << " message of " << message.size() << " bytes";
    }
  }
}

TEST(StatusDetailsTest, KeepsTheCalleesOwnDetails) {
  const google::protobuf::Any ledger = ForeignErrorInfo("ledger.example.com", "DB_TIMEOUT");
  const google::protobuf::Any debug = OpaqueDetail("google.rpc.DebugInfo", 40);
  const google::protobuf::Any small = OpaqueDetail("example.Small", 10);
  // As large as it can be while the callee's status is still read (its
  // length varints are 2 bytes at 200 bytes already): ours, with its
  // ErrorInfo, has no room for it.
  const size_t frame = StatusBytes({small, OpaqueDetail("example.Huge", 200), ledger}, "").size();
  const google::protobuf::Any huge = OpaqueDetail("example.Huge", 200 + kMaxDetailsBytes - frame);
  const std::string too_large_to_fit = StatusBytes({small, huge, ledger}, "");
  ASSERT_EQ(too_large_to_fit.size(), kMaxDetailsBytes);
  const Attribution earlier{DeadlineSource::kRequest, "ledger", absl::Milliseconds(50),
                            absl::Milliseconds(51)};
  rpc::Status bad_ours;
  *bad_ours.add_details() = ForeignErrorInfo(kErrorDomain, "NOT_A_REASON");
  *bad_ours.add_details() = ledger;
  struct Case {
    const char* name;
    std::string relayed;
    std::vector<google::protobuf::Any> kept;
  };
  const Case cases[] = {
      {"no details", "", {}},
      {"garbage", "\xff\x01garbage", {}},
      {"a foreign status without details", StatusBytes({}), {}},
      {"a foreign ErrorInfo", StatusBytes({ledger}), {ledger}},
      {"a foreign ErrorInfo and another type, in order",
       StatusBytes({debug, ledger}),
       {debug, ledger}},
      {"a hop's attribution beside a foreign ErrorInfo",
       EncodeStatusDetails(earlier, "m", StatusBytes({ledger})),
       {ledger}},
      {"a malformed hopbudget ErrorInfo", bad_ours.SerializeAsString(), {ledger}},
      {"a detail too large to fit", too_large_to_fit, {small, ledger}},
      {"details too large to read", StatusBytes({OpaqueDetail("x", kMaxDetailsBytes)}), {}},
  };
  for (const Case& c : cases) {
    const std::string bin = EncodeStatusDetails(Sample(), "msg", c.relayed);
    EXPECT_LE(bin.size(), kMaxDetailsBytes) << c.name;
    EXPECT_EQ(DecodeStatusDetails(bin), Sample()) << c.name;
    rpc::Status out;
    ASSERT_TRUE(out.ParseFromString(bin)) << c.name;
    EXPECT_EQ(out.code(), 4) << c.name;
    EXPECT_EQ(out.message(), "msg") << c.name;
    ASSERT_EQ(out.details_size(), static_cast<int>(c.kept.size()) + 1) << c.name;
    for (size_t i = 0; i < c.kept.size(); ++i) {
      EXPECT_TRUE(SameDetail(out.details(static_cast<int>(i) + 1), c.kept[i]))
          << c.name << ": detail " << i + 1 << " is "
          << out.details(static_cast<int>(i) + 1).type_url();
    }
  }
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

// The callee's own text that a relaying hop keeps (the note of its message).
TEST(KeptNoteTest, KeepsWhatTheCalleeSaid) {
  const std::string fields = "hopbudget/1: source=downstream budget_ms=0 elapsed_ms=0";
  struct Case {
    const char* name;
    std::string message;
    std::string want;
  };
  const Case cases[] = {
      {"empty", "", ""},
      {"whitespace only", "  \t ", ""},
      {"a foreign peer's message", "go ledger: database timed out",
       "go ledger: database timed out"},
      {"gRPC's own message", "Deadline Exceeded", "Deadline Exceeded"},
      {"a foreign message in parentheses", "(slow)", "(slow)"},
      {"a foreign message with spaces around", "  slow ledger\n", "slow ledger"},
      {"hopbudget's other messages", "hopbudget: shield: commit ended unobserved",
       "hopbudget: shield: commit ended unobserved"},
      {"an attribution message without note", fields, ""},
      {"an attribution message with a note", fields + " (go ledger: database timed out)",
       "go ledger: database timed out"},
      {"an attribution message with a bare note", fields + " slow ledger", "slow ledger"},
      {"an attribution message with a parenthesised note", fields + " ((no slot free))",
       "(no slot free)"},
      {"an attribution message with empty parentheses", fields + " ()", ""},
      {"an attribution message with spaces around its note", fields + "   (slow)  ", "slow"},
      {"the unversioned form of hopbudget 0.1",
       "hopbudget: source=attempt hop=orders budget_ms=300 elapsed_ms=301 (slow)", "slow"},
      {"a malformed attribution message, kept whole",
       "hopbudget/2: source=attempt budget_ms=1 elapsed_ms=1 (slow)",
       "hopbudget/2: source=attempt budget_ms=1 elapsed_ms=1 (slow)"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(KeptNote(c.message), c.want) << c.name;
    const std::string message = FormatAttributionMessage(Sample(), c.message);
    EXPECT_EQ(message, c.want.empty() ? FormatAttributionMessage(Sample())
                                      : FormatAttributionMessage(Sample()) + " (" + c.want + ")")
        << c.name;
    EXPECT_EQ(ParseAttributionMessage(message), Sample()) << c.name;
  }
}

// A long text is cut to kMaxNoteBytes, marker included, where a UTF-8
// character starts.
TEST(KeptNoteTest, BoundsTheTextOnAUtf8Boundary) {
  const std::string marker = kNoteTruncatedMarker;
  const size_t room = kMaxNoteBytes - marker.size();  // text bytes a cut note keeps, at most
  auto repeat = [](const std::string& s, size_t n) {
    std::string out;
    for (size_t i = 0; i < n; ++i) out += s;
    return out;
  };
  const std::string e_acute = "\xc3\xa9";           // 2 bytes
  const std::string grinning = "\xf0\x9f\x98\x80";  // 4 bytes
  struct Case {
    const char* name;
    std::string message;
    std::string want;
  };
  const Case cases[] = {
      {"at the bound", std::string(kMaxNoteBytes, 'a'), std::string(kMaxNoteBytes, 'a')},
      {"one byte over", std::string(kMaxNoteBytes + 1, 'a'), std::string(room, 'a') + marker},
      {"a 2-byte character across the cut", "a" + repeat(e_acute, 200),
       "a" + repeat(e_acute, (room - 1) / 2) + marker},
      {"a 4-byte character across the cut", "ab" + repeat(grinning, 100),
       "ab" + repeat(grinning, (room - 2) / 4) + marker},
      {"not UTF-8: continuation bytes alone", "a" + std::string(400, '\x9e'),
       "a" + std::string(room - 1, '\x9e') + marker},
      {"the note of an attribution message",
       "hopbudget/1: source=downstream budget_ms=0 elapsed_ms=0 (" + std::string(1000, 'n') + ")",
       std::string(room, 'n') + marker},
  };
  for (const Case& c : cases) {
    const std::string kept = KeptNote(c.message);
    EXPECT_EQ(kept, c.want) << c.name;
    EXPECT_LE(kept.size(), kMaxNoteBytes) << c.name;
    // Relayed again, a kept note is not cut again.
    EXPECT_EQ(KeptNote(FormatAttributionMessage(Sample(), c.message)), kept) << c.name;
  }
}

// gateway -> orders -> ... -> a foreign ledger: each hop replaces the
// fields, the ledger's text stays once, in one pair of parentheses.
TEST(KeptNoteTest, RelayedThroughManyHopsTheCalleeTextAppearsOnce) {
  struct Case {
    const char* name;
    std::string callee;
    std::string kept;
  };
  const Case cases[] = {
      {"a foreign message", "go ledger: database timed out", "go ledger: database timed out"},
      {"a message in parentheses", "(timed out)", "(timed out)"},
      {"a long message", std::string(600, 'x'),
       std::string(kMaxNoteBytes - sizeof(kNoteTruncatedMarker) + 1, 'x') + kNoteTruncatedMarker},
      {"no message", "", ""},
  };
  const Attribution hops[] = {
      {DeadlineSource::kDownstream, "", absl::ZeroDuration(), absl::ZeroDuration()},
      {DeadlineSource::kAttempt, "orders", absl::Milliseconds(300), absl::Milliseconds(301)},
      {DeadlineSource::kRequest, "gateway", absl::Milliseconds(900), absl::Milliseconds(901)},
      {DeadlineSource::kClient, "edge", absl::Seconds(1), absl::Seconds(1)},
  };
  for (const Case& c : cases) {
    std::string message = c.callee;
    for (const Attribution& a : hops) {
      message = FormatAttributionMessage(a, message);
      EXPECT_EQ(message, c.kept.empty() ? FormatAttributionMessage(a)
                                        : FormatAttributionMessage(a) + " (" + c.kept + ")")
          << c.name << " at " << a.hop;
      EXPECT_EQ(ParseAttributionMessage(message), a) << c.name;
    }
  }
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

// Only hopbudget's own ErrorInfo can be malformed: a foreign peer's
// well-formed google.rpc.Status carries no attribution and is never counted.
TEST(ReadStatusDetailsTest, TellsForeignDetailsFromMalformed) {
  const google::protobuf::Any ledger = ForeignErrorInfo("ledger.example.com", "DB_TIMEOUT");
  const google::protobuf::Any debug = OpaqueDetail("google.rpc.DebugInfo", 40);
  const std::string ours = EncodeStatusDetails(Sample(), "m");
  rpc::Status ours_status;
  ASSERT_TRUE(ours_status.ParseFromString(ours));
  const google::protobuf::Any our_info = ours_status.details(0);
  google::protobuf::Any undecodable;
  undecodable.set_type_url(kErrorInfoTypeUrl);
  undecodable.set_value("\xff\x01");
  struct Case {
    const char* name;
    std::string bytes;
    AttributionParse want;
  };
  const Case cases[] = {
      {"empty", "", AttributionParse::kAbsent},
      {"a foreign status without details", StatusBytes({}), AttributionParse::kAbsent},
      {"a foreign ErrorInfo", StatusBytes({ledger}), AttributionParse::kAbsent},
      {"a foreign detail of another type", StatusBytes({debug}), AttributionParse::kAbsent},
      {"ours", ours, AttributionParse::kOk},
      {"ours, then a foreign ErrorInfo", StatusBytes({our_info, ledger}), AttributionParse::kOk},
      {"a foreign ErrorInfo, then ours", StatusBytes({ledger, our_info}), AttributionParse::kOk},
      {"ours with an unknown reason",
       StatusBytes({ForeignErrorInfo(kErrorDomain, "NOT_A_REASON"), ledger}),
       AttributionParse::kMalformed},
      {"not a google.rpc.Status", "\xff\x01garbage", AttributionParse::kMalformed},
      {"an ErrorInfo that does not decode", StatusBytes({undecodable, ledger}),
       AttributionParse::kMalformed},
      {"too large to read", StatusBytes({OpaqueDetail("x", kMaxDetailsBytes)}),
       AttributionParse::kMalformed},
  };
  for (const Case& c : cases) {
    const ParsedAttribution p = ReadStatusDetails(c.bytes);
    EXPECT_EQ(p.result, c.want) << c.name;
    if (c.want == AttributionParse::kOk) {
      EXPECT_EQ(p.value, Sample()) << c.name;
    }
    EXPECT_EQ(DecodeStatusDetails(c.bytes).has_value(), c.want == AttributionParse::kOk) << c.name;
  }
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
