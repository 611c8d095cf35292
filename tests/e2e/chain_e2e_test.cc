// Copyright hopbudget authors.
//
// The demo chain end to end: the real gateway, orders and ledger processes on
// free ports, a real client, and the ledger's SQLite file read back.
// Margins are wide on purpose: this runs under ctest -j2 on a loaded 2-core
// machine, and under ASan.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <sys/wait.h>

#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "chain_process.h"
#include "demo/demo.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hopbudget/client.h"
#include "ledger_store.h"
#include "accounting.h"

namespace hopbudget::e2e {
namespace {

using demo::Admin;
using demo::Faults;
using demo::Gateway;
using demo::Order;
using demo::OrderResult;
using demo::Stats;

struct ChainOptions {
  std::string mode = "hopbudget";
  std::vector<std::string> gateway, orders, ledger;  // extra flags
};

class Chain {
 public:
  explicit Chain(const ChainOptions& o) {
    dir_ = MakeTempDir();
    db_ = dir_ + "/ledger.db";
    const std::string mode = "--mode=" + o.mode;
    std::vector<std::string> args = {"--port=0", "--metrics-port=0", mode, "--db=" + db_,
                                     "--seed=7", "--shield-bound=5s"};
    args.insert(args.end(), o.ledger.begin(), o.ledger.end());
    Start(ledger_, HOPBUDGET_DEMO_LEDGER, args);
    if (!ledger_) return;
    args = {"--port=0", "--metrics-port=0", mode, "--ledger=" + ledger_->address(), "--seed=7"};
    args.insert(args.end(), o.orders.begin(), o.orders.end());
    Start(orders_, HOPBUDGET_DEMO_ORDERS, args);
    if (!orders_) return;
    args = {"--port=0", "--metrics-port=0", mode, "--orders=" + orders_->address(), "--seed=7"};
    args.insert(args.end(), o.gateway.begin(), o.gateway.end());
    Start(gateway_, HOPBUDGET_DEMO_GATEWAY, args);
    if (!gateway_) return;
    ClientOptions client;
    client.hop = "e2e";
    gateway_stub_ = Gateway::NewStub(*CreateChannel(gateway_->address(),
                                                    grpc::InsecureChannelCredentials(), client));
  }

  ~Chain() {
    gateway_.reset();  // front to back
    orders_.reset();
    ledger_.reset();
    std::system(absl::StrCat("rm -rf '", dir_, "'").c_str());
  }

  bool ok() const { return gateway_ != nullptr; }
  const std::string& error() const { return error_; }

  struct Result {
    grpc::Status status;
    OrderResult reply;
    absl::Duration latency;
  };

  Result Place(const std::string& key, absl::Duration budget,
               absl::optional<absl::Duration> cancel_after = absl::nullopt) {
    Order order;
    order.set_key(key);
    demo::Item* item = order.add_items();
    item->set_sku("sku-1");
    item->set_quantity(2);
    Result r;
    grpc::ClientContext ctx;
    const absl::Time start = absl::Now();
    ctx.set_deadline(absl::ToChronoTime(start + budget));
    ctx.AddMetadata(demo::kClientDeadlineHeader, demo::FormatClientDeadline(start + budget));
    absl::Notification done;
    gateway_stub_->async()->PlaceOrder(&ctx, &order, &r.reply, [&](grpc::Status s) {
      r.status = std::move(s);
      r.latency = absl::Now() - start;
      done.Notify();
    });
    if (cancel_after.has_value() && !done.WaitForNotificationWithTimeout(*cancel_after)) {
      ctx.TryCancel();
    }
    done.WaitForNotification();
    return r;
  }

  Stats StatsOf(const ChainProcess& p) {
    auto stub = Admin::NewStub(grpc::CreateChannel(p.address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
    Stats s;
    grpc::Status st = stub->GetStats(&ctx, demo::GetStatsRequest(), &s);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return s;
  }

  void SetFaultsOf(const ChainProcess& p, const Faults& f) {
    auto stub = Admin::NewStub(grpc::CreateChannel(p.address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
    Faults out;
    grpc::Status st = stub->SetFaults(&ctx, demo::SetFaultsRequest(), &out);
    demo::SetFaultsRequest req;
    *req.mutable_faults() = f;
    grpc::ClientContext ctx2;
    ctx2.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
    st = stub->SetFaults(&ctx2, req, &out);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }

  int64_t Rows(const std::string& key = "") {
    absl::StatusOr<std::unique_ptr<demo::LedgerStore>> store = demo::LedgerStore::Open(db_);
    EXPECT_TRUE(store.ok()) << store.status();
    if (!store.ok()) return -1;
    absl::StatusOr<int64_t> n = key.empty() ? (*store)->CountRows() : (*store)->CountKey(key);
    EXPECT_TRUE(n.ok()) << n.status();
    return n.ok() ? *n : -1;
  }

  // Sum over the three hops.
  double WorkAfterDeadlineMs() {
    return StatsOf(*gateway_).work_after_deadline_ms() + StatsOf(*orders_).work_after_deadline_ms() +
           StatsOf(*ledger_).work_after_deadline_ms();
  }

  ChainProcess& gateway() { return *gateway_; }
  ChainProcess& orders() { return *orders_; }
  ChainProcess& ledger() { return *ledger_; }

 private:
  void Start(std::unique_ptr<ChainProcess>& into, const char* binary,
             const std::vector<std::string>& args) {
    absl::StatusOr<std::unique_ptr<ChainProcess>> p = ChainProcess::Start(binary, args);
    if (!p.ok()) {
      error_ = p.status().ToString();
      return;
    }
    into = *std::move(p);
  }

  std::string dir_, db_, error_;
  std::unique_ptr<ChainProcess> ledger_, orders_, gateway_;
  std::unique_ptr<Gateway::Stub> gateway_stub_;
};

#define START_CHAIN(chain, options)   \
  Chain chain{options};               \
  ASSERT_TRUE(chain.ok()) << chain.error()

// Waits (really, but bounded and without a tolerance window) for `pred`.
template <typename Pred>
bool Eventually(Pred pred, absl::Duration max = absl::Seconds(20)) {
  const absl::Time end = absl::Now() + max;
  while (absl::Now() < end) {
    if (pred()) return true;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return pred();
}

TEST(ChainE2eTest, NormalOrderCommitsOneRow) {
  START_CHAIN(chain, ChainOptions());
  Chain::Result r = chain.Place("order-1", absl::Seconds(10));
  ASSERT_TRUE(r.status.ok()) << r.status.error_code() << " " << r.status.error_message();
  EXPECT_GT(r.reply.order_id(), 0);
  EXPECT_FALSE(r.reply.replayed());
  EXPECT_EQ(chain.Rows("order-1"), 1);
  EXPECT_EQ(chain.Rows(), 1);
  EXPECT_EQ(chain.StatsOf(chain.ledger()).commits(), 1);
}

TEST(ChainE2eTest, RepeatedKeyDoesNotAddARowAndAnswersTheOriginal) {
  START_CHAIN(chain, ChainOptions());
  Chain::Result first = chain.Place("order-r", absl::Seconds(10));
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  Chain::Result second = chain.Place("order-r", absl::Seconds(10));
  ASSERT_TRUE(second.status.ok()) << second.status.error_message();
  EXPECT_TRUE(second.reply.replayed());
  EXPECT_EQ(second.reply.order_id(), first.reply.order_id());
  EXPECT_EQ(second.reply.committed_unix_us(), first.reply.committed_unix_us());
  EXPECT_EQ(chain.Rows(), 1);
}

TEST(ChainE2eTest, HangingLedgerIsAttributedToOrdersWithinTheBudget) {
  ChainOptions o;
  o.ledger = {"--hang-rate=1"};
  o.orders = {"--attempt-cap=300ms", "--max-attempts=3"};
  START_CHAIN(chain, o);
  const absl::Duration budget = absl::Milliseconds(2500);
  Chain::Result r = chain.Place("order-h", budget);
  ASSERT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << r.status.error_message();
  // The client's own deadline bounds it; the attribution arrives before it.
  EXPECT_LT(r.latency, budget + absl::Seconds(1));
  absl::optional<Attribution> a = AttributionOf(r.status);
  ASSERT_TRUE(a.has_value()) << r.status.error_message();
  EXPECT_EQ(a->hop, "orders") << r.status.error_message();
  EXPECT_THAT(a->source, ::testing::AnyOf(DeadlineSource::kAttempt,
                                          DeadlineSource::kExhaustedBeforeCall))
      << r.status.error_message();
  EXPECT_GE(chain.StatsOf(chain.ledger()).retries_received(), 1);
  // No hop starts work after the client's deadline.
  absl::SleepFor(absl::Milliseconds(500));
  for (ChainProcess* p : {&chain.gateway(), &chain.orders(), &chain.ledger()}) {
    Stats s = chain.StatsOf(*p);
    EXPECT_EQ(s.calls_started_after_deadline(), 0) << s.hop();
  }
  EXPECT_EQ(chain.Rows(), 0);
}

TEST(ChainE2eTest, ClientCancelDuringCommitLeavesExactlyOneRow) {
  ChainOptions o;
  o.ledger = {"--slow-commit=1500ms"};
  // No attempt budget shorter than the commit: the caller's cancel is what
  // ends the call (an attempt cut at orders would be retried instead).
  o.orders = {"--attempt-cap=5s", "--request-cap=10s"};
  START_CHAIN(chain, o);
  Chain::Result r = chain.Place("order-c", absl::Seconds(20), absl::Milliseconds(400));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::CANCELLED) << r.status.error_message();
  // The shielded commit goes on after the caller left, and lands once.
  EXPECT_TRUE(Eventually([&] { return chain.StatsOf(chain.ledger()).commits() == 1; }));
  EXPECT_EQ(chain.Rows("order-c"), 1);
  // The client retries the same order: the original result, no new row.
  Faults none;
  none.set_latency("none");
  chain.SetFaultsOf(chain.ledger(), none);
  Chain::Result again = chain.Place("order-c", absl::Seconds(10));
  ASSERT_TRUE(again.status.ok()) << again.status.error_message();
  EXPECT_TRUE(again.reply.replayed());
  EXPECT_EQ(chain.Rows(), 1);
}

TEST(ChainE2eTest, RetriesUnderFaultsCommitEveryAcknowledgedOrderExactlyOnce) {
  ChainOptions o;
  o.ledger = {"--error-rate=0.3", "--hang-rate=0.1"};
  o.orders = {"--attempt-cap=400ms", "--max-attempts=4"};
  START_CHAIN(chain, o);
  std::vector<std::string> acked;
  const int kOrders = 30;
  for (int i = 0; i < kOrders; ++i) {
    const std::string key = absl::StrCat("order-f-", i);
    Chain::Result r = chain.Place(key, absl::Seconds(4));
    if (r.status.ok()) acked.push_back(key);
  }
  EXPECT_GE(chain.StatsOf(chain.ledger()).retries_received(), 1);
  EXPECT_GE(acked.size(), kOrders / 2u);  // retries rescue most of them
  absl::SleepFor(absl::Milliseconds(500));
  for (const std::string& key : acked) EXPECT_EQ(chain.Rows(key), 1) << key;
  EXPECT_LE(chain.Rows(), kOrders);
}

TEST(ChainE2eTest, BaselineWorksLongerAfterTheDeadlineThanHopbudget) {
  ChainOptions base;
  base.mode = "baseline";
  base.ledger = {"--hang-rate=1"};
  base.orders = {"--baseline-timeout=1500ms"};
  base.gateway = {"--baseline-timeout=1500ms"};
  ChainOptions hop;
  hop.ledger = {"--hang-rate=1"};
  const absl::Duration budget = absl::Milliseconds(600);
  double work[2] = {0, 0};
  int k = 0;
  for (const ChainOptions* o : {&base, &hop}) {
    START_CHAIN(chain, *o);
    for (int i = 0; i < 3; ++i) {
      Chain::Result r = chain.Place(absl::StrCat("order-b-", i), budget);
      EXPECT_FALSE(r.status.ok());
    }
    // Let everything the client left behind end (baseline: its 1.5 s timeouts).
    EXPECT_TRUE(Eventually([&] {
      return chain.StatsOf(chain.gateway()).in_flight() == 0 &&
             chain.StatsOf(chain.orders()).in_flight() == 0 &&
             chain.StatsOf(chain.ledger()).in_flight() == 0;
    }));
    work[k++] = chain.WorkAfterDeadlineMs();
  }
  // Baseline: each hop holds on ~900 ms past the 600 ms budget, three orders.
  EXPECT_GT(work[0], work[1] + 1000) << "baseline " << work[0] << " ms, hopbudget " << work[1] << " ms";
}

TEST(ChainE2eTest, EveryHopServesMetricsAndDeadlinez) {
  START_CHAIN(chain, ChainOptions());
  ASSERT_TRUE(chain.Place("order-m", absl::Seconds(10)).status.ok());
  for (auto [p, hop] : {std::pair<ChainProcess*, std::string>{&chain.gateway(), "gateway"},
                        {&chain.orders(), "orders"},
                        {&chain.ledger(), "ledger"}}) {
    ASSERT_GT(p->metrics_port(), 0) << hop;
    absl::StatusOr<std::string> metrics = HttpGet(p->metrics_port(), "/metrics");
    ASSERT_TRUE(metrics.ok()) << metrics.status();
    EXPECT_THAT(*metrics, ::testing::HasSubstr(absl::StrCat("hopbudget_info{hop=\"", hop, "\"} 1")));
    EXPECT_THAT(*metrics, ::testing::HasSubstr(absl::StrCat(
                              "demo_calls_started_after_deadline_total{hop=\"", hop,
                              "\",mode=\"hopbudget\"} 0")));
    EXPECT_THAT(*metrics, ::testing::HasSubstr("demo_work_after_deadline_seconds_total{"));
    absl::StatusOr<std::string> deadlinez = HttpGet(p->metrics_port(), "/deadlinez.json");
    ASSERT_TRUE(deadlinez.ok()) << deadlinez.status();
    EXPECT_THAT(*deadlinez, ::testing::HasSubstr(absl::StrCat("\"hop\":\"", hop, "\"")));
  }
}

// The bytes of a unary call to `method` with a serialized `request`, through
// the generic stub (no generated code needed for gRPC's own services).
absl::StatusOr<std::string> GenericUnary(const std::string& address, const std::string& method,
                                         const std::string& request) {
  grpc::GenericStub stub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
  grpc::Slice slice(request);
  grpc::ByteBuffer in(&slice, 1), out;
  absl::Notification done;
  grpc::Status status;
  stub.UnaryCall(&ctx, method, grpc::StubOptions(), &in, &out, [&](grpc::Status s) {
    status = std::move(s);
    done.Notify();
  });
  done.WaitForNotification();
  if (!status.ok()) return absl::UnknownError(status.error_message());
  std::vector<grpc::Slice> slices;
  if (!out.Dump(&slices).ok()) return absl::InternalError("cannot read the response");
  std::string bytes;
  for (const grpc::Slice& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return bytes;
}

// One request on a bidi stream, the first response's bytes (async generic
// API: gRPC's reflection service is a bidi stream).
absl::StatusOr<std::string> GenericFirstResponse(const std::string& address,
                                                 const std::string& method,
                                                 const std::string& request) {
  grpc::GenericStub stub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
  auto call = stub.PrepareCall(&ctx, method, &cq);
  auto step = [&cq](auto start) {
    start();
    void* tag = nullptr;
    bool ok = false;
    return cq.Next(&tag, &ok) && ok;
  };
  grpc::Slice slice(request);
  grpc::ByteBuffer in(&slice, 1), out;
  bool ok = step([&] { call->StartCall(reinterpret_cast<void*>(1)); }) &&
            step([&] { call->Write(in, reinterpret_cast<void*>(2)); }) &&
            step([&] { call->WritesDone(reinterpret_cast<void*>(3)); }) &&
            step([&] { call->Read(&out, reinterpret_cast<void*>(4)); });
  ctx.TryCancel();
  grpc::Status status;
  step([&] { call->Finish(&status, reinterpret_cast<void*>(5)); });
  cq.Shutdown();
  void* tag;
  bool drained_ok;
  while (cq.Next(&tag, &drained_ok)) {
  }
  if (!ok) return absl::UnavailableError("the stream failed: " + status.error_message());
  std::vector<grpc::Slice> slices;
  if (!out.Dump(&slices).ok()) return absl::InternalError("cannot read the response");
  std::string bytes;
  for (const grpc::Slice& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return bytes;
}

TEST(ChainE2eTest, EveryHopAnswersHealthChecksAndReflection) {
  START_CHAIN(chain, ChainOptions());
  for (auto [p, service] :
       {std::pair<ChainProcess*, std::string>{&chain.gateway(), "hopbudget.demo.Gateway"},
        {&chain.orders(), "hopbudget.demo.Orders"},
        {&chain.ledger(), "hopbudget.demo.Ledger"}}) {
    // grpc.health.v1.HealthCheckRequest{} is empty; the answer
    // HealthCheckResponse{status: SERVING} is field 1 = 1.
    absl::StatusOr<std::string> health =
        GenericUnary(p->address(), "/grpc.health.v1.Health/Check", "");
    ASSERT_TRUE(health.ok()) << service << ": " << health.status();
    EXPECT_EQ(*health, std::string("\x08\x01", 2)) << service;
    // ServerReflectionRequest{list_services: ""} (field 7); the answer lists
    // the service names as strings.
    absl::StatusOr<std::string> listed = GenericFirstResponse(
        p->address(), "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        std::string("\x3a\x00", 2));
    ASSERT_TRUE(listed.ok()) << service << ": " << listed.status();
    EXPECT_THAT(*listed, ::testing::HasSubstr(service));
    EXPECT_THAT(*listed, ::testing::HasSubstr("hopbudget.demo.Admin"));
  }
}

// Runs `command` (stderr merged into stdout); returns exit status and output.
std::pair<int, std::string> RunCommand(const std::string& command) {
  std::string out;
  FILE* f = popen((command + " 2>&1").c_str(), "r");
  if (f == nullptr) return {-1, ""};
  char buf[512];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  const int status = pclose(f);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(ChainE2eTest, BadFlagsExitWithAClearError) {
  struct Case {
    const char* binary;
    const char* args;
    const char* message;
  };
  const Case cases[] = {
      {HOPBUDGET_DEMO_LEDGER, "--port=0", "--db is required"},
      {HOPBUDGET_DEMO_LEDGER, "--db=/tmp/x.db --latency=gauss:1ms", "--latency"},
      {HOPBUDGET_DEMO_ORDERS, "--ledger=127.0.0.1:1 --attempt-cap=10s", "budgets must nest"},
      {HOPBUDGET_DEMO_ORDERS, "--ledger=127.0.0.1:1 --error-rate=0.8 --hang-rate=0.5", "> 1"},
      {HOPBUDGET_DEMO_GATEWAY, "--orders=127.0.0.1:1 --mode=fast", "--mode"},
      {HOPBUDGET_DEMO_GATEWAY, "--orders=127.0.0.1:1 --request-cap=800", "no unit"},
      {HOPBUDGET_DEMO_GATEWAY, "--port=0", "--orders is required"},
      {HOPBUDGET_DEMO_GATEWAY, "--orders=127.0.0.1:1 --bogus=1", "unknown flag --bogus"},
  };
  for (const Case& c : cases) {
    auto [status, out] = RunCommand(absl::StrCat(c.binary, " ", c.args));
    EXPECT_EQ(status, 2) << c.args << ": " << out;
    EXPECT_THAT(out, ::testing::HasSubstr(c.message)) << c.args;
  }
}

}  // namespace
}  // namespace hopbudget::e2e
