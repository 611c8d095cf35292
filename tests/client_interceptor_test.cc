// Copyright hopbudget authors.
//
// The client interceptor against real gRPC on loopback: fail fast without
// the network, the exact budget header, own-cancel conversion (idle budget,
// leak enforcement) and foreign cancels left alone.
#include <gmock/gmock.h>
#include <grpc/support/log.h>
#include <grpcpp/generic/generic_stub.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "eventually.h"
#include "hopbudget/advanced/wire.h"
#include "hopbudget/client.h"
#include "hopbudget/server.h"
#include "relay_fixture.h"
#include "sync.h"

namespace hopbudget {
namespace {

using testing::Eventually;
using testing::HopConfig;
using testing::RelayHop;
using testing::Request;
using testing::SetBudget;
using testing::Work;

TEST(ClientInterceptorTest, BudgetBelowMinimumFailsFastWithoutConnecting) {
  Metrics metrics;
  ClientOptions options;
  options.hop = "gateway";
  options.metrics = &metrics;
  options.min_call_budget = absl::Milliseconds(50);
  // Nothing listens on port 1: any network attempt would end UNAVAILABLE.
  auto channel = CreateChannel("127.0.0.1:1", grpc::InsecureChannelCredentials(), options);
  ASSERT_TRUE(channel.ok());
  auto stub = echo::Relay::NewStub(*channel);
  grpc::ClientContext ctx;
  SetBudget(ctx, absl::Milliseconds(10));
  echo::RelayReply reply;
  grpc::Status s = stub->Call(&ctx, Request({Work(0)}), &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  absl::optional<Attribution> a = AttributionOf(s);
  ASSERT_TRUE(a.has_value()) << s.error_message();
  EXPECT_EQ(a->source, DeadlineSource::kExhaustedBeforeCall);
  EXPECT_EQ(a->hop, "gateway");
  EXPECT_EQ((*channel)->GetState(/*try_to_connect=*/false), GRPC_CHANNEL_IDLE);
  EXPECT_EQ(
      metrics.Snapshot().deadline_exceeded(Side::kClient, DeadlineSource::kExhaustedBeforeCall),
      1u);
  auto trailers = ctx.GetServerTrailingMetadata();
  auto it = trailers.find(kSourceTrailer);
  ASSERT_NE(it, trailers.end());
  EXPECT_EQ(std::string(it->second.data(), it->second.size()), "exhausted-before-call");
}

TEST(ClientInterceptorTest, ExpiredDeadlineFailsFastAndServerIsNeverCalled) {
  RelayHop hop(HopConfig{});
  auto stub = testing::NewStub(hop.address());
  grpc::ClientContext ctx;
  SetBudget(ctx, absl::Milliseconds(-5));
  echo::RelayReply reply;
  grpc::Status s = stub->Call(&ctx, Request({Work(0)}), &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  absl::optional<Attribution> a = AttributionOf(s);
  ASSERT_TRUE(a.has_value()) << s.error_message();
  EXPECT_EQ(a->source, DeadlineSource::kExhaustedBeforeCall);
  EXPECT_EQ(hop.calls(), 0);
}

TEST(ClientInterceptorTest, CallbackApiCallFailsFastToo) {
  RelayHop hop(HopConfig{});
  auto stub = testing::NewStub(hop.address());
  grpc::ClientContext ctx;
  SetBudget(ctx, absl::Microseconds(100));
  echo::RelayRequest req = Request({Work(0)});
  echo::RelayReply reply;
  hopbudget::internal::Notification done;
  grpc::Status status;
  stub->async()->Call(&ctx, &req, &reply, [&](grpc::Status s) {
    status = std::move(s);
    done.Notify();
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  absl::optional<Attribution> a = AttributionOf(status);
  ASSERT_TRUE(a.has_value()) << status.error_message();
  EXPECT_EQ(a->source, DeadlineSource::kExhaustedBeforeCall);
  EXPECT_EQ(hop.calls(), 0);
}

TEST(ClientInterceptorTest, ServerStreamingCallFailsFastToo) {
  RelayHop hop(HopConfig{});
  auto stub = testing::NewStub(hop.address());
  grpc::ClientContext ctx;
  SetBudget(ctx, absl::ZeroDuration());
  auto reader = stub->Watch(&ctx, Request({Work(0), Work(0)}));
  echo::RelayReply msg;
  EXPECT_FALSE(reader->Read(&msg));
  grpc::Status s = reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  absl::optional<Attribution> a = AttributionOf(s);
  ASSERT_TRUE(a.has_value()) << s.error_message();
  EXPECT_EQ(a->source, DeadlineSource::kExhaustedBeforeCall);
  EXPECT_EQ(hop.calls(), 0);
}

TEST(ClientInterceptorTest, SendsTheExactRemainingBudget) {
  RelayHop hop(HopConfig{});
  auto stub = testing::NewStub(hop.address());
  grpc::ClientContext ctx;
  SetBudget(ctx, absl::Seconds(30));
  echo::RelayReply reply;
  ASSERT_TRUE(stub->Call(&ctx, Request({Work(0)}), &reply).ok());
  ParsedBudget sent = ParseBudgetHeader(hop.last_budget_header());
  ASSERT_EQ(sent.result, HeaderParse::kOk) << hop.last_budget_header();
  EXPECT_LE(sent.budget, absl::Seconds(30));
  EXPECT_GT(sent.budget, absl::Seconds(29));
  // The server used it: no grpc-timeout rounding above the header.
  EXPECT_LE(reply.hops(0).budget_on_arrival_us(), absl::ToInt64Microseconds(sent.budget));
}

// The internal tag is a binary record our helpers put on a context for the
// interceptor; a value someone else puts under its key is not one, and the
// call is treated as untagged: the context's own deadline is the client's.
TEST(ClientInterceptorTest, ForeignValueUnderTheInternalTagKeyIsIgnored) {
  RelayHop hop(HopConfig{});
  auto stub = testing::ConnectedStub(hop.address());
  ASSERT_NE(stub, nullptr);
  for (const std::string& foreign :
       {std::string("attempt/100000"), std::string(59, '\xff'), std::string()}) {
    SCOPED_TRACE(foreign.size());
    grpc::ClientContext ctx;
    SetBudget(ctx, absl::Milliseconds(300));
    ctx.AddMetadata("hopbudget-internal-source-bin", foreign);
    echo::RelayReply reply;
    grpc::Status s = stub->Call(&ctx, Request({testing::Hang()}), &reply);
    ASSERT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
    absl::optional<Attribution> a = AttributionOf(s);
    ASSERT_TRUE(a.has_value()) << s.error_message();
    EXPECT_EQ(a->source, DeadlineSource::kClient);
    EXPECT_LE(a->budget, absl::Milliseconds(300));
    ParsedBudget sent = ParseBudgetHeader(hop.last_budget_header());
    ASSERT_EQ(sent.result, HeaderParse::kOk) << hop.last_budget_header();
    EXPECT_LE(sent.budget, absl::Milliseconds(300));
  }
}

// What the caller put under our keys: a budget header is replaced by the
// one the interceptor computes, the helpers' in-process keys never leave the
// process, and any other key under our prefix (the trace request, say, or
// one we do not know) goes through.
TEST(ClientInterceptorTest, CallersOwnKeysAreReplacedOrKeptNeverLeaked) {
  RelayHop hop(HopConfig{});
  auto stub = testing::ConnectedStub(hop.address());
  ASSERT_NE(stub, nullptr);
  grpc::ClientContext ctx;
  SetBudget(ctx, absl::Milliseconds(300));
  ctx.AddMetadata(kBudgetHeader, "999999999");
  ctx.AddMetadata(kBudgetHeader, "888888888");
  ctx.AddMetadata(kSentHeader, "1:0000000000000001");
  ctx.AddMetadata("hopbudget-internal-idle-us", "5000000");
  ctx.AddMetadata("hopbudget-zz-unknown", "kept");
  ctx.AddMetadata("hopbudget-a-unknown", "kept too");
  echo::RelayReply reply;
  ASSERT_TRUE(stub->Call(&ctx, Request({Work(0)}), &reply).ok());
  std::vector<std::string> own = hop.last_own_metadata();
  ASSERT_EQ(own.size(), 4u) << absl::StrJoin(own, ", ");
  EXPECT_EQ(own[0], "hopbudget-a-unknown=kept too");
  EXPECT_EQ(own[3], "hopbudget-zz-unknown=kept");
  ASSERT_TRUE(absl::StartsWith(own[1], std::string(kBudgetHeader) + "=")) << own[1];
  // The stamp is the interceptor's own, on this process's clock.
  ASSERT_TRUE(absl::StartsWith(own[2], std::string(kSentHeader) + "=")) << own[2];
  const ParsedSentStamp stamp =
      ParseSentHeader(absl::string_view(own[2]).substr(sizeof(kSentHeader)));
  ASSERT_EQ(stamp.result, HeaderParse::kOk) << own[2];
  EXPECT_NE(stamp.stamp.clock_id, 1u);
  ParsedBudget sent = ParseBudgetHeader(hop.last_budget_header());
  ASSERT_EQ(sent.result, HeaderParse::kOk) << hop.last_budget_header();
  EXPECT_LE(sent.budget, absl::Milliseconds(300));
}

// Without the header the server takes the budget from grpc-timeout, which
// gRPC rounds up: the call still carries its deadline, only less exactly.
TEST(ClientInterceptorTest, BudgetHeaderSwitchedOffLeavesTheDeadlineToGrpcTimeout) {
  RelayHop hop(HopConfig{});
  ClientOptions options;
  options.hop = "client";
  options.send_budget_header = false;
  auto channel = CreateChannel(hop.address(), grpc::InsecureChannelCredentials(), options);
  ASSERT_TRUE(channel.ok()) << channel.status();
  auto stub = echo::Relay::NewStub(*channel);
  grpc::ClientContext ctx;
  SetBudget(ctx, absl::Seconds(30));
  echo::RelayReply reply;
  ASSERT_TRUE(stub->Call(&ctx, Request({Work(0)}), &reply).ok());
  EXPECT_EQ(hop.last_budget_header(), "");
  ASSERT_EQ(reply.hops_size(), 1);
  EXPECT_GT(reply.hops(0).budget_on_arrival_us(), absl::ToInt64Microseconds(absl::Seconds(29)));
  EXPECT_LE(reply.hops(0).budget_on_arrival_us(), absl::ToInt64Microseconds(absl::Seconds(31)));
}

TEST(ClientInterceptorTest, NoDeadlineSendsNoBudgetHeader) {
  RelayHop hop(HopConfig{});
  auto stub = testing::NewStub(hop.address());
  grpc::ClientContext ctx;
  echo::RelayReply reply;
  ASSERT_TRUE(stub->Call(&ctx, Request({Work(0)}), &reply).ok());
  EXPECT_EQ(hop.last_budget_header(), "");
}

TEST(ClientInterceptorTest, CancelNotIssuedByHopbudgetStaysCancelled) {
  RelayHop hop(HopConfig{});
  auto stub = testing::NewStub(hop.address());
  grpc::ClientContext ctx;
  SetBudget(ctx, absl::Seconds(20));
  std::thread canceller([&ctx, &hop] {
    EXPECT_TRUE(
        Eventually([&hop] { return hop.calls() > 0; }, absl::Seconds(20), absl::Milliseconds(1)));
    ctx.TryCancel();
  });
  echo::RelayReply reply;
  grpc::Status s = stub->Call(&ctx, Request({testing::Hang()}), &reply);
  canceller.join();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_FALSE(AttributionOf(s).has_value());
}

TEST(ClientInterceptorTest, StreamIdleBudgetCancelsASilentStream) {
  RelayHop hop(HopConfig{});
  Metrics metrics;
  // Connected first, and 300 ms of idle budget: the first message must
  // arrive inside it, which under TSan, after the binary's other tests, took
  // more than 100 ms in one run of three on a fresh channel.
  auto stub = testing::ConnectedStub(hop.address(), true, &metrics);
  grpc::ClientContext ctx;
  SetBudget(ctx, absl::Seconds(20));
  SetStreamIdleBudget(ctx, absl::Milliseconds(300));
  auto reader = stub->Watch(&ctx, Request({testing::Hang()}));  // one message, then silence
  echo::RelayReply msg;
  EXPECT_TRUE(reader->Read(&msg));
  EXPECT_FALSE(reader->Read(&msg));
  grpc::Status s = reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
  absl::optional<Attribution> a = AttributionOf(s);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->source, DeadlineSource::kIdle);
  EXPECT_EQ(a->hop, "client");
  EXPECT_EQ(a->budget, absl::Milliseconds(300));
  // The cancel was ours: gRPC's "CANCELLED" is not a callee's text to keep.
  EXPECT_EQ(s.error_message(), FormatAttributionMessage(*a));
  EXPECT_EQ(metrics.Snapshot().deadline_exceeded(Side::kClient, DeadlineSource::kIdle), 1u);
  EXPECT_TRUE(hop.WaitForCancellations(1, absl::Seconds(10)));
}

TEST(ClientInterceptorTest, StreamThatKeepsTalkingIsNotIdle) {
  RelayHop hop(HopConfig{});
  auto stub = testing::NewStub(hop.address());
  grpc::ClientContext ctx;
  SetBudget(ctx, absl::Seconds(20));
  SetStreamIdleBudget(ctx, absl::Milliseconds(200));
  // Five messages 40 ms apart: 200 ms in all, never 200 ms of silence.
  auto reader = stub->Watch(&ctx, Request({Work(40), Work(40), Work(40), Work(40), Work(40)}));
  echo::RelayReply msg;
  int n = 0;
  while (reader->Read(&msg)) ++n;
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(n, 5);
}

TEST(ClientInterceptorTest, DeadlineLeakIsCountedAndStillBounded) {
  HopConfig leaky;
  leaky.hop = "orders";
  leaky.policy.hop_reserve = absl::Milliseconds(100);
  RelayHop orders(leaky);
  RelayHop ledger(HopConfig{});
  orders.SetNext(ledger.address());
  auto stub = testing::NewStub(orders.address());
  grpc::ClientContext ctx;
  SetBudget(ctx, absl::Milliseconds(600));
  echo::Step leak;
  leak.set_leak(true);
  echo::RelayReply reply;
  grpc::Status s = stub->Call(&ctx, Request({leak, testing::Hang()}), &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(orders.metrics().Snapshot().leaks(LeakKind::kNoDeadline), 1u);
  // orders' timer, not the client's deadline, ended the leaking call. On a
  // loaded machine the client's own deadline may answer it first (orders'
  // timer fires only 100 ms earlier): wait, bounded, for orders to count.
  auto orders_counted = [&] {
    return orders.metrics().Snapshot().deadline_exceeded(Side::kClient, DeadlineSource::kClient);
  };
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (orders_counted() == 0 && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(2));
  EXPECT_EQ(orders_counted(), 1u);
  // The leaking call still carried a budget the ledger could see.
  ParsedBudget sent = ParseBudgetHeader(ledger.last_budget_header());
  ASSERT_EQ(sent.result, HeaderParse::kOk);
  EXPECT_LT(sent.budget, absl::Milliseconds(600));
  EXPECT_TRUE(ledger.WaitForCancellations(1, absl::Seconds(10)));
}

// A Relay service whose handler calls downstream the legacy way: inside an
// InboundScope, with a plain ClientContext whose deadline is `downstream`
// from now, through a channel with hopbudget's client interceptor (hop
// "orders", counting into `metrics`). It makes `calls` such calls to
// `method` (a generic call; the callee need not implement it), or one Relay
// call that hangs at the callee when `method` is empty.
class LeakyOrders final : public echo::Relay::Service {
 public:
  struct Options {
    std::string next;
    Metrics* metrics = nullptr;
    absl::Duration downstream = absl::Hours(1);
    std::string method;  // "": a Relay call that hangs at `next`
    int calls = 1;
  };
  explicit LeakyOrders(Options options) : options_(std::move(options)) {
    ClientOptions client;
    client.hop = "orders";
    client.metrics = options_.metrics;
    auto channel = CreateChannel(options_.next, grpc::InsecureChannelCredentials(), client);
    EXPECT_TRUE(channel.ok()) << channel.status();
    if (channel.ok()) channel_ = *channel;
  }

  // Connects the downstream channel first, for a test whose short budget
  // must measure the leaking call, not the channel's first connection.
  bool WaitForConnected(absl::Duration timeout) {
    return channel_ != nullptr &&
           channel_->WaitForConnected(absl::ToChronoTime(absl::Now() + timeout));
  }

  grpc::Status Call(grpc::ServerContext* ctx, const echo::RelayRequest*,
                    echo::RelayReply*) override {
    if (channel_ == nullptr) return grpc::Status(grpc::StatusCode::INTERNAL, "no channel");
    InboundScope scope(*ctx);
    if (options_.method.empty()) {
      grpc::ClientContext call;
      call.set_deadline(absl::ToChronoTime(absl::Now() + options_.downstream));
      echo::RelayReply reply;
      return echo::Relay::NewStub(channel_)->Call(&call, Request({testing::Hang()}), &reply);
    }
    grpc::GenericStub generic(channel_);
    for (int i = 0; i < options_.calls; ++i) {
      grpc::ClientContext call;
      call.set_deadline(absl::ToChronoTime(absl::Now() + options_.downstream));
      grpc::Slice empty("");
      grpc::ByteBuffer request(&empty, 1), response;
      hopbudget::internal::Notification done;
      generic.UnaryCall(&call, options_.method, grpc::StubOptions(), &request, &response,
                        [&done](grpc::Status) { done.Notify(); });
      done.WaitForNotification();
    }
    return grpc::Status::OK;
  }

 private:
  const Options options_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST(ClientInterceptorTest, LaterDeadlineLeakIsCountedAndStillBounded) {
  RelayHop ledger(HopConfig{});
  Metrics metrics;
  // 30 s: far later than the inbound 600 ms, and short enough that a leak
  // left unbounded fails this test instead of hanging it.
  LeakyOrders service({ledger.address(), &metrics, absl::Seconds(30)});
  ServerOptions options;
  options.hop = "orders";
  options.metrics = &metrics;
  options.policy.hop_reserve = absl::Milliseconds(100);
  std::string address;
  std::unique_ptr<grpc::Server> orders = testing::ServeBehindHopbudget(&service, options, &address);
  ASSERT_NE(orders, nullptr);
  ASSERT_TRUE(service.WaitForConnected(absl::Seconds(20)));
  auto stub = testing::ConnectedStub(address, false);
  ASSERT_NE(stub, nullptr);
  grpc::ClientContext ctx;
  SetBudget(ctx, absl::Milliseconds(600));
  echo::RelayReply reply;
  grpc::Status s = stub->Call(&ctx, Request({Work(0)}), &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
  const MetricsSnapshot m = metrics.Snapshot();
  EXPECT_EQ(m.leaks(LeakKind::kLaterThanInbound), 1u);
  EXPECT_EQ(m.leaks(LeakKind::kNoDeadline), 0u);
  // orders' timer ended the leaking call at the derived deadline (600 ms less
  // the 100 ms reserve), attributed to the client budget: the ledger was told
  // (nothing else would cancel it before its 30 s are up).
  EXPECT_EQ(m.deadline_exceeded(Side::kClient, DeadlineSource::kClient), 1u);
  // The leaking call carried the derived budget, not the 30 s it was given.
  ParsedBudget sent = ParseBudgetHeader(ledger.last_budget_header());
  ASSERT_EQ(sent.result, HeaderParse::kOk);
  EXPECT_LT(sent.budget, absl::Milliseconds(600));
  EXPECT_TRUE(ledger.WaitForCancellations(1, absl::Seconds(10)));
  orders->Shutdown();
}

// gpr_log lines that mention a deadline leak, captured while a
// LeakLogCapture lives (gpr_set_log_function is process-wide; gRPC's
// default log function is not public API, so every line goes to stderr
// through ours, then and after).
class LeakLogCapture {
 public:
  LeakLogCapture() { gpr_set_log_function(&LeakLogCapture::Log); }
  ~LeakLogCapture() { gpr_set_log_function(&LeakLogCapture::ToStderr); }
  static std::vector<std::string> Lines() {
    hopbudget::internal::MutexLock lock(&mu_);
    return lines_;
  }

 private:
  static void Log(gpr_log_func_args* args) {
    if (absl::StrContains(args->message, "deadline leak")) {
      hopbudget::internal::MutexLock lock(&mu_);
      lines_.push_back(args->message);
    }
    ToStderr(args);
  }
  static void ToStderr(gpr_log_func_args* args) {
    std::fprintf(stderr, "%s %s:%d] %s\n", gpr_log_severity_string(args->severity), args->file,
                 args->line, args->message);
  }
  static hopbudget::internal::Mutex mu_;
  static std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
};
hopbudget::internal::Mutex LeakLogCapture::mu_(absl::kConstInit);
std::vector<std::string> LeakLogCapture::lines_;

TEST(ClientInterceptorTest, DeadlineLeakIsLoggedOncePerMethod) {
  // Methods no other test calls: the log remembers methods for the process.
  const std::string first = "/hopbudget.test.LeakLog/First";
  const std::string second = "/hopbudget.test.LeakLog/Second";
  RelayHop callee(HopConfig{});
  LeakLogCapture capture;
  for (const std::string& method : {first, second}) {
    Metrics metrics;
    LeakyOrders service({callee.address(), &metrics, absl::Hours(1), method, /*calls=*/3});
    ServerOptions options;
    options.hop = "orders";
    options.metrics = &metrics;
    std::string address;
    std::unique_ptr<grpc::Server> orders =
        testing::ServeBehindHopbudget(&service, options, &address);
    ASSERT_NE(orders, nullptr);
    auto stub = testing::NewStub(address, false);
    for (int i = 0; i < 2; ++i) {
      grpc::ClientContext ctx;
      SetBudget(ctx, absl::Seconds(10));
      echo::RelayReply reply;
      grpc::Status s = stub->Call(&ctx, Request({Work(0)}), &reply);
      EXPECT_TRUE(s.ok()) << s.error_message();
    }
    // Six leaking calls of the method, every one counted...
    EXPECT_EQ(metrics.Snapshot().leaks(LeakKind::kLaterThanInbound), 6u) << method;
    orders->Shutdown();
  }
  // ...and one line logged per method, naming it.
  const std::vector<std::string> lines = LeakLogCapture::Lines();
  ASSERT_EQ(lines.size(), 2u) << absl::StrJoin(lines, "\n");
  EXPECT_THAT(lines[0], ::testing::HasSubstr(first));
  EXPECT_THAT(lines[0], ::testing::HasSubstr("later than the inbound"));
  EXPECT_THAT(lines[1], ::testing::HasSubstr(second));
}

TEST(ClientInterceptorTest, CommonPathArmsNoTimer) {
  HopConfig config;
  config.hop = "orders";
  RelayHop orders(config);
  RelayHop ledger(HopConfig{});
  orders.SetNext(ledger.address());
  Metrics metrics;
  auto stub = testing::NewStub(orders.address(), true, &metrics);
  for (int i = 0; i < 20; ++i) {
    grpc::ClientContext ctx;
    SetBudget(ctx, absl::Seconds(5));
    echo::RelayReply reply;
    ASSERT_TRUE(stub->Call(&ctx, Request({Work(0), Work(0)}), &reply).ok());
  }
  EXPECT_EQ(metrics.Snapshot().timers_armed, 0u);
  EXPECT_EQ(orders.metrics().Snapshot().timers_armed, 0u);
}

TEST(ClientInterceptorTest, GarbageStatusDetailsAreCountedAndNotTrusted) {
  HopConfig plain;
  plain.install_interceptors = false;  // a peer that does not run hopbudget
  RelayHop peer(plain);
  Metrics metrics;
  auto stub = testing::NewStub(peer.address(), true, &metrics);
  grpc::ClientContext ctx;
  SetBudget(ctx, absl::Seconds(5));
  echo::Step garbage;
  garbage.set_raw_details(std::string("\x0a\xff\xff\xff\xff garbage", 11));
  echo::RelayReply reply;
  grpc::Status s = stub->Call(&ctx, Request({garbage}), &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(metrics.Snapshot().bad_attribution, 1u);
  // Our 5 s had not run out: it fired somewhere below, origin unknown.
  absl::optional<Attribution> a = AttributionOf(s);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->source, DeadlineSource::kDownstream);
  EXPECT_EQ(a->hop, "");
}

TEST(MakeClientInterceptorFactoryTest, RefusesBadOptions) {
  ClientOptions options;
  options.hop = "";
  EXPECT_FALSE(MakeClientInterceptorFactory(options).ok());
  options.hop = "ok";
  options.min_call_budget = absl::Milliseconds(-1);
  EXPECT_THAT(std::string(MakeClientInterceptorFactory(options).status().message()),
              ::testing::HasSubstr("min_call_budget"));
  options.min_call_budget = absl::Milliseconds(1);
  options.stream_idle_budget = absl::ZeroDuration();
  EXPECT_THAT(std::string(MakeClientInterceptorFactory(options).status().message()),
              ::testing::HasSubstr("stream_idle_budget"));
}

TEST(AttributionOfTest, IgnoresOtherStatuses) {
  EXPECT_FALSE(AttributionOf(grpc::Status::OK).has_value());
  EXPECT_FALSE(AttributionOf(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "x")).has_value());
  EXPECT_FALSE(AttributionOf(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                          "hopbudget: source=attempt budget_ms=1 elapsed_ms=1"))
                   .has_value());
}

}  // namespace
}  // namespace hopbudget
