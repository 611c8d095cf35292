// Copyright hopbudget authors.
//
// Malformed attribution from a peer, in each of its forms (details, status
// message, plain trailers): ignored, counted in bad_attribution, and never
// changing the caller's result beyond "downstream, origin unknown". And what
// is not malformed: a foreign peer's own message and well-formed
// google.rpc.Status, kept beside the attribution and never counted.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hopbudget/advanced/metrics.h"
#include "hopbudget/client.h"
#include "hopbudget/status.pb.h"
#include "relay_fixture.h"

namespace hopbudget {
namespace {

using testing::HopConfig;
using testing::RelayHop;

struct Garbage {
  const char* name;
  echo::Step step;
};

echo::Step WithTrailer(const std::string& key, const std::string& value) {
  echo::Step s;
  (*s.mutable_raw_trailers())[key] = value;
  return s;
}

std::vector<Garbage> EveryForm() {
  std::vector<Garbage> out;
  echo::Step details;
  details.set_raw_details("\xff\x01garbage");
  out.push_back({"details", details});
  echo::Step message;
  message.set_raw_message("hopbudget: source=evil budget_ms=-1 elapsed_ms=abc");
  out.push_back({"message", message});
  echo::Step versioned;
  versioned.set_raw_message("hopbudget/1: source=request budget_ms=1e9 elapsed_ms=1");
  out.push_back({"versioned message", versioned});
  echo::Step budget = WithTrailer("hopbudget-budget-ms", "-1");
  (*budget.mutable_raw_trailers())["hopbudget-source"] = "request";
  (*budget.mutable_raw_trailers())["hopbudget-elapsed-ms"] = "1";
  out.push_back({"budget trailer", budget});
  echo::Step elapsed = WithTrailer("hopbudget-elapsed-ms", "1e9");
  (*elapsed.mutable_raw_trailers())["hopbudget-source"] = "request";
  (*elapsed.mutable_raw_trailers())["hopbudget-budget-ms"] = "1";
  out.push_back({"elapsed trailer", elapsed});
  echo::Step hop = WithTrailer("hopbudget-hop", std::string(300, 'h'));
  (*hop.mutable_raw_trailers())["hopbudget-source"] = "request";
  (*hop.mutable_raw_trailers())["hopbudget-budget-ms"] = "1";
  (*hop.mutable_raw_trailers())["hopbudget-elapsed-ms"] = "1";
  out.push_back({"hop trailer", hop});
  out.push_back({"lone trailer", WithTrailer("hopbudget-source", "request")});
  return out;
}

void ExpectOriginUnknown(const grpc::Status& s, const char* form) {
  ASSERT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << form;
  absl::optional<Attribution> a = AttributionOf(s);
  ASSERT_TRUE(a.has_value()) << form << ": " << s.error_message();
  EXPECT_EQ(a->source, DeadlineSource::kDownstream) << form;
  EXPECT_EQ(a->hop, "") << form;
  EXPECT_EQ(a->budget, absl::ZeroDuration()) << form;
}

// A peer without hopbudget answers DEADLINE_EXCEEDED with garbage: the
// client interceptor counts it and reports an unknown origin.
TEST(MalformedAttributionTest, FromAPlainPeerIsCountedAndOriginUnknown) {
  HopConfig plain;
  plain.install_interceptors = false;
  RelayHop peer(plain);
  for (const Garbage& g : EveryForm()) {
    Metrics metrics;
    auto stub = testing::NewStub(peer.address(), true, &metrics);
    grpc::ClientContext ctx;
    testing::SetBudget(ctx, absl::Seconds(10));
    echo::RelayReply reply;
    grpc::Status s = stub->Call(&ctx, testing::Request({g.step}), &reply);
    ExpectOriginUnknown(s, g.name);
    EXPECT_EQ(metrics.Snapshot().bad_attribution, 1u) << g.name;
  }
}

// The same garbage one hop further down: the hop that received it counts
// it; its caller gets a clean "origin unknown" in every form.
TEST(MalformedAttributionTest, RelayedByAHopIsCountedThereAndCleanAbove) {
  HopConfig plain;
  plain.install_interceptors = false;
  RelayHop peer(plain);
  HopConfig front_config;
  front_config.hop = "front";
  RelayHop front(front_config);
  front.SetNext(peer.address());
  for (const Garbage& g : EveryForm()) {
    const uint64_t before = front.metrics().Snapshot().bad_attribution;
    Metrics caller_metrics;
    auto stub = testing::NewStub(front.address(), true, &caller_metrics);
    grpc::ClientContext ctx;
    testing::SetBudget(ctx, absl::Seconds(10));
    echo::RelayReply reply;
    grpc::Status s = stub->Call(&ctx, testing::Request({echo::Step(), g.step}), &reply);
    ExpectOriginUnknown(s, g.name);
    EXPECT_EQ(front.metrics().Snapshot().bad_attribution, before + 1) << g.name;
    EXPECT_EQ(caller_metrics.Snapshot().bad_attribution, 0u) << g.name;
    const auto& trailers = ctx.GetServerTrailingMetadata();
    auto source = trailers.find(kSourceTrailer);
    ASSERT_NE(source, trailers.end()) << g.name;
    EXPECT_EQ(source->second, "downstream") << g.name;
    EXPECT_EQ(trailers.count(kHopTrailer), 0u) << g.name;
  }
}

// A handler behind hopbudget's server interceptor that answers with garbage
// itself: counted by that hop, replaced by a valid attribution on the wire.
TEST(MalformedAttributionTest, FromOwnHandlerIsCountedAndReplaced) {
  HopConfig config;
  config.hop = "front";
  RelayHop front(config);
  for (const Garbage& g : EveryForm()) {
    const uint64_t before = front.metrics().Snapshot().bad_attribution;
    auto stub = testing::NewStub(front.address());
    grpc::ClientContext ctx;
    testing::SetBudget(ctx, absl::Seconds(10));
    echo::RelayReply reply;
    grpc::Status s = stub->Call(&ctx, testing::Request({g.step}), &reply);
    ExpectOriginUnknown(s, g.name);
    // The trailers the handler set are replaced, not appended to.
    const auto& trailers = ctx.GetServerTrailingMetadata();
    EXPECT_EQ(trailers.count(kSourceTrailer), 1u) << g.name;
    EXPECT_EQ(trailers.count(kBudgetTrailer), 1u) << g.name;
    EXPECT_EQ(trailers.find(kSourceTrailer)->second, "downstream") << g.name;
    // Garbage in the message or details is read by the interceptor; in
    // trailers the handler set, it never reaches a reader.
    const bool read_by_interceptor = g.step.raw_trailers().empty();
    EXPECT_EQ(front.metrics().Snapshot().bad_attribution, before + (read_by_interceptor ? 1 : 0))
        << g.name;
  }
}

google::protobuf::Any Detail(const std::string& type_url, const std::string& value) {
  google::protobuf::Any any;
  any.set_type_url(type_url);
  any.set_value(value);
  return any;
}

google::protobuf::Any LedgerErrorInfo() {
  rpc::ErrorInfo info;
  info.set_domain("ledger.example.com");
  info.set_reason("DB_TIMEOUT");
  (*info.mutable_metadata())["table"] = "ledger_entries";
  return Detail(kErrorInfoTypeUrl, info.SerializeAsString());
}

struct ForeignAnswer {
  const char* name;
  std::string message;                         // what the peer said
  std::vector<google::protobuf::Any> details;  // its own google.rpc.Status details
  bool send_status = true;                     // whether it sends grpc-status-details-bin
  std::string kept;                            // the note the caller must see ("": none)
};

std::vector<ForeignAnswer> ForeignAnswers() {
  const google::protobuf::Any debug =
      Detail("type.googleapis.com/google.rpc.DebugInfo", std::string("\x12\x03"
                                                                     "db1",
                                                                     5));
  return {
      {"a message and an ErrorInfo",
       "go ledger: database timed out",
       {LedgerErrorInfo()},
       true,
       "go ledger: database timed out"},
      {"a message, an ErrorInfo and a DebugInfo",
       "go ledger: database timed out",
       {LedgerErrorInfo(), debug},
       true,
       "go ledger: database timed out"},
      {"a status without details", "ledger busy", {}, true, "ledger busy"},
      {"a message alone", "ledger busy", {}, false, "ledger busy"},
  };
}

echo::Step Answer(const ForeignAnswer& f) {
  echo::Step step;
  step.set_raw_message(f.message);
  if (f.send_status) {
    rpc::Status status;
    status.set_code(4);
    status.set_message(f.message);
    for (const auto& d : f.details) *status.add_details() = d;
    step.set_raw_details(status.SerializeAsString());
  }
  return step;
}

// A foreign peer (no hopbudget) times out with its own message and details,
// directly below the caller and below one and two hopbudget hops: the
// caller sees the peer's text once after the attribution, hopbudget's
// ErrorInfo then the peer's details, and nobody counts bad attribution.
TEST(ForeignAttributionTest, TheCalleesMessageAndDetailsAreKeptAndNotCounted) {
  HopConfig plain;
  plain.install_interceptors = false;
  RelayHop ledger(plain);
  HopConfig orders_config;
  orders_config.hop = "orders";
  RelayHop orders(orders_config);
  orders.SetNext(ledger.address());
  HopConfig gateway_config;
  gateway_config.hop = "gateway";
  RelayHop gateway(gateway_config);
  gateway.SetNext(orders.address());
  struct Path {
    const char* name;
    const std::string* target;
    int hops;  // hopbudget hops between the caller and the ledger
  };
  const Path paths[] = {{"direct", &ledger.address(), 0},
                        {"through orders", &orders.address(), 1},
                        {"through gateway and orders", &gateway.address(), 2}};
  for (const ForeignAnswer& f : ForeignAnswers()) {
    for (const Path& path : paths) {
      const std::string name = absl::StrCat(f.name, ", ", path.name);
      Metrics caller_metrics;
      const uint64_t orders_before = orders.metrics().Snapshot().bad_attribution;
      const uint64_t gateway_before = gateway.metrics().Snapshot().bad_attribution;
      auto stub = testing::NewStub(*path.target, true, &caller_metrics);
      grpc::ClientContext ctx;
      testing::SetBudget(ctx, absl::Seconds(10));
      std::vector<echo::Step> steps(static_cast<size_t>(path.hops));
      steps.push_back(Answer(f));
      echo::RelayReply reply;
      const grpc::Status s = stub->Call(&ctx, testing::Request(steps), &reply);
      ExpectOriginUnknown(s, name.c_str());
      EXPECT_EQ(s.error_message(),
                FormatAttributionMessage(
                    {DeadlineSource::kDownstream, "", absl::ZeroDuration(), absl::ZeroDuration()}) +
                    " (" + f.kept + ")")
          << name;
      rpc::Status details;
      ASSERT_TRUE(details.ParseFromString(s.error_details())) << name;
      EXPECT_EQ(details.message(), s.error_message()) << name;
      ASSERT_EQ(details.details_size(), static_cast<int>(f.details.size()) + 1) << name;
      for (size_t i = 0; i < f.details.size(); ++i) {
        const google::protobuf::Any& got = details.details(static_cast<int>(i) + 1);
        EXPECT_EQ(got.type_url(), f.details[i].type_url()) << name << ": detail " << i + 1;
        EXPECT_EQ(got.value(), f.details[i].value()) << name << ": detail " << i + 1;
      }
      EXPECT_EQ(caller_metrics.Snapshot().bad_attribution, 0u) << name;
      EXPECT_EQ(orders.metrics().Snapshot().bad_attribution, orders_before) << name;
      EXPECT_EQ(gateway.metrics().Snapshot().bad_attribution, gateway_before) << name;
    }
  }
}

}  // namespace
}  // namespace hopbudget
