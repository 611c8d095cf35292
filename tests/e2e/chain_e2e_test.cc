// Copyright hopbudget authors.
//
// The demo chain end to end: the real gateway, orders and ledger processes on
// free ports, a real client, and the ledger's SQLite file read back.
// Margins are wide on purpose: this runs under ctest -j2 on a loaded 2-core
// machine, and under ASan.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "accounting.h"
#include "chain_process.h"
#include "chain_support.h"
#include "demo/demo.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hopbudget/client.h"
#include "ledger_rows.h"
#include "summary.h"
#include "topology.h"

namespace hopbudget::e2e {
namespace {

using demo::Faults;
using demo::Gateway;
using demo::Order;
using demo::OrderResult;
using demo::Stats;

using chainctl::AuditResult;
using chainctl::Hop;
using chainctl::LedgerRow;
using chainctl::RequestRecord;

struct ChainOptions {
  std::string mode = "hopbudget";
  std::vector<std::string> gateway, orders, ledger;  // extra flags
};

struct PlaceOptions {
  // Cancel the call (TryCancel) this long after it started.
  absl::optional<absl::Duration> cancel_after;
  // What the demo header x-demo-client-deadline-us claims (default: the
  // real deadline, start + budget).
  absl::optional<absl::Time> claimed_client_deadline;
};

class Chain {
 public:
  explicit Chain(const ChainOptions& o) {
    chainctl::ChainSpec spec;
    spec.mode = o.mode;
    spec.db = db_ = processes_.dir() + "/ledger.db";
    spec.seed = 7;
    // A shield bound wide enough for a loaded machine, unless the test
    // gives its own (an extra replaces the one before it).
    spec.extra[Hop::kLedger] = {"--shield-bound=5s"};
    spec.extra[Hop::kLedger].insert(spec.extra[Hop::kLedger].end(), o.ledger.begin(),
                                    o.ledger.end());
    spec.extra[Hop::kOrders] = o.orders;
    spec.extra[Hop::kGateway] = o.gateway;
    std::map<Hop, ChainProcess*> hops = processes_.StartChain(spec);
    if (hops.empty()) return;
    ledger_ = hops[Hop::kLedger];
    orders_ = hops[Hop::kOrders];
    gateway_ = hops[Hop::kGateway];
    gateway_stub_ = GatewayStub(*gateway_);
  }

  bool ok() const { return gateway_ != nullptr; }
  const std::string& error() const { return processes_.error(); }

  struct Result {
    grpc::Status status;
    OrderResult reply;
    absl::Duration latency;
    absl::Time start;
    absl::Time end;                           // when the client saw the status
    absl::optional<absl::Time> cancelled_at;  // when TryCancel was called
  };

  // Places order `key`: sku-1 x2 plus an item naming the order (ref-<key>),
  // so that its row can be found by content as well as by key. Every call is
  // recorded for Audit().
  Result Place(const std::string& key, absl::Duration budget, const PlaceOptions& o = {}) {
    const std::vector<chainctl::ItemSpec> items = chainctl::WithOrderReference({{"sku-1", 2}}, key);
    Order order;
    order.set_key(key);
    for (const chainctl::ItemSpec& i : items) {
      demo::Item* item = order.add_items();
      item->set_sku(i.sku);
      item->set_quantity(i.quantity);
    }
    Result r;
    grpc::ClientContext ctx;
    r.start = absl::Now();
    ctx.set_deadline(absl::ToChronoTime(r.start + budget));
    ctx.AddMetadata(
        demo::kClientDeadlineHeader,
        demo::FormatClientDeadline(o.claimed_client_deadline.value_or(r.start + budget)));
    absl::Notification done;
    gateway_stub_->async()->PlaceOrder(&ctx, &order, &r.reply, [&](grpc::Status s) {
      r.status = std::move(s);
      r.end = absl::Now();
      r.latency = r.end - r.start;
      done.Notify();
    });
    if (o.cancel_after.has_value() && !done.WaitForNotificationWithTimeout(*o.cancel_after)) {
      r.cancelled_at = absl::Now();
      ctx.TryCancel();
    }
    done.WaitForNotification();  // the call's deadline bounds this
    requests_.push_back({key, items, static_cast<absl::StatusCode>(r.status.error_code()),
                         r.status.ok() ? r.reply.order_id() : 0});
    return r;
  }

  // The ledger's rows, read from its SQLite file.
  std::vector<LedgerRow> LedgerRows() {
    absl::StatusOr<std::vector<LedgerRow>> rows = chainctl::ReadLedgerRows(db_);
    EXPECT_TRUE(rows.ok()) << rows.status();
    return rows.ok() ? *rows : std::vector<LedgerRow>{};
  }

  // Exactly once for every order placed on this chain so far: at most one
  // row has its content, that row is under its key, and an acknowledged
  // order has it with the order_id it was answered. Call when no commit is
  // in flight (WaitIdle).
  AuditResult Audit() {
    absl::StatusOr<AuditResult> a = chainctl::AuditExactlyOnce(requests_, LedgerRows());
    EXPECT_TRUE(a.ok()) << a.status();
    if (!a.ok()) return {};
    EXPECT_THAT(a->violations, ::testing::IsEmpty()) << chainctl::FormatAudit(*a, 100);
    EXPECT_EQ(a->other_rows, 0) << "rows of orders this test did not place";
    return *a;
  }

  int64_t Rows() { return static_cast<int64_t>(LedgerRows().size()); }

  // Waits until no handler (and no shielded commit) runs at any hop, front
  // to back: once gateway and orders are idle nothing new can be sent on.
  bool WaitIdle() {
    return Eventually([&] {
      return StatsOf(*gateway_).in_flight() == 0 && StatsOf(*orders_).in_flight() == 0 &&
             StatsOf(*ledger_).in_flight() == 0;
    });
  }

  // A zero from the deadline accounting means something only if the client
  // deadline header reaches the hop: places one order whose header says the
  // deadline passed 1 s ago (its gRPC deadline is `budget`), and expects
  // every hop to count a call started after the client deadline.
  void ExpectClientDeadlineReachesEveryHop(absl::Duration budget = absl::Seconds(10)) {
    std::vector<int64_t> before;
    for (ChainProcess* p : {gateway_, orders_, ledger_}) {
      before.push_back(StatsOf(*p).calls_started_after_deadline());
    }
    PlaceOptions late;
    late.claimed_client_deadline = absl::Now() - absl::Seconds(1);
    Place(absl::StrCat("probe-", probes_++), budget, late);
    int k = 0;
    for (ChainProcess* p : {gateway_, orders_, ledger_}) {
      Stats s = StatsOf(*p);
      EXPECT_GE(s.calls_started_after_deadline() - before[k++], 1)
          << s.hop() << " (" << s.mode() << ") did not see the client deadline header";
    }
  }

  // Sum over the three hops.
  double WorkAfterDeadlineMs() {
    return StatsOf(*gateway_).work_after_deadline_ms() +
           StatsOf(*orders_).work_after_deadline_ms() + StatsOf(*ledger_).work_after_deadline_ms();
  }

  ChainProcess& gateway() { return *gateway_; }
  ChainProcess& orders() { return *orders_; }
  ChainProcess& ledger() { return *ledger_; }

 private:
  ChainProcesses processes_;
  std::string db_;
  std::vector<RequestRecord> requests_;
  int probes_ = 0;
  ChainProcess *ledger_ = nullptr, *orders_ = nullptr, *gateway_ = nullptr;
  std::unique_ptr<Gateway::Stub> gateway_stub_;
};

#define START_CHAIN(chain, options) \
  Chain chain{options};             \
  ASSERT_TRUE(chain.ok()) << chain.error()

TEST(ChainE2eTest, NormalOrderCommitsOneRow) {
  START_CHAIN(chain, ChainOptions());
  Chain::Result r = chain.Place("order-1", absl::Seconds(10));
  ASSERT_TRUE(r.status.ok()) << r.status.error_code() << " " << r.status.error_message();
  EXPECT_GT(r.reply.order_id(), 0);
  EXPECT_FALSE(r.reply.replayed());
  ASSERT_TRUE(chain.WaitIdle());
  // The row as the ledger wrote it: this pins the items format the audit
  // finds orders by (chainctl::LedgerItemsText) to the ledger's.
  const std::vector<LedgerRow> rows = chain.LedgerRows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].order_id, r.reply.order_id());
  EXPECT_EQ(rows[0].key, "order-1");
  EXPECT_EQ(rows[0].items, "sku-1 x2, ref-order-1 x1");
  const AuditResult a = chain.Audit();
  EXPECT_EQ(a.acknowledged, 1);
  EXPECT_EQ(a.committed, 1);
  EXPECT_EQ(StatsOf(chain.ledger()).commits(), 1);
}

// A call whose budget is below the gateway's minimum (--min-budget, 300 ms
// here) is refused on arrival: counted as refused (Admin Stats), not as a
// call that did work; the process's CPU reading grows (the overload
// benchmark prices served and refused calls from these). A plain gRPC
// client, so that nothing but the gateway judges the budget.
TEST(ChainE2eTest, ARefusedCallIsCountedAsRefusedNotAsWork) {
  ChainOptions options;
  options.gateway = {"--min-budget=300ms"};
  START_CHAIN(chain, options);
  ASSERT_TRUE(chain.Place("warm", absl::Seconds(10)).status.ok());
  ASSERT_TRUE(chain.WaitIdle());
  const Stats before = StatsOf(chain.gateway());
  auto plain = Gateway::NewStub(
      grpc::CreateChannel(chain.gateway().address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Milliseconds(200)));
  Order order;
  order.set_key("too-late");
  demo::Item* item = order.add_items();
  item->set_sku("sku-1");
  item->set_quantity(1);
  demo::OrderResult reply;
  const grpc::Status s = plain->PlaceOrder(&ctx, order, &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
  EXPECT_TRUE(Eventually([&] {
    return StatsOf(chain.gateway()).refused() == before.refused() + 1;
  })) << s.error_message();
  const Stats after = StatsOf(chain.gateway());
  EXPECT_EQ(after.calls(), before.calls());
  EXPECT_GE(after.cpu_us(), before.cpu_us());
  EXPECT_GT(after.cpu_us(), 0);
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
  ASSERT_TRUE(chain.WaitIdle());
  // Two requests, one order: one row, found by key and by content, with the
  // order_id both replies gave.
  const AuditResult a = chain.Audit();
  EXPECT_EQ(a.requests, 2);
  EXPECT_EQ(a.orders, 1);
  EXPECT_EQ(a.committed, 1);
  EXPECT_EQ(chain.Rows(), 1);
  const Stats ledger = StatsOf(chain.ledger());
  EXPECT_EQ(ledger.commits(), 1);
  EXPECT_EQ(ledger.replays(), 1);
}

// The answer comes when the third 300 ms attempt budget fires, not at the
// client's 2.5 s deadline (nor the gateway's 2 s cap). Measured on a 2-core
// machine: 914-933 ms idle (10 runs), 928-994 ms with two instances at once
// plus two busy loops (20 runs); the bound allows 6x the worst overhead seen.
constexpr absl::Duration kThreeAttemptsAtLeast = absl::Milliseconds(3 * 300);
constexpr absl::Duration kThreeAttemptsAtMost = absl::Milliseconds(1500);

TEST(ChainE2eTest, HangingLedgerIsAttributedToOrdersWithinTheBudget) {
  ChainOptions o;
  o.ledger = {"--hang-rate=1"};
  o.orders = {"--attempt-cap=300ms", "--max-attempts=3"};
  START_CHAIN(chain, o);
  const absl::Duration budget = absl::Milliseconds(2500);
  Chain::Result r = chain.Place("order-h", budget);
  ASSERT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << r.status.error_message();
  // Three attempts of 300 ms each ran, and their end (not the client's
  // deadline) is what answered.
  EXPECT_GE(r.latency, kThreeAttemptsAtLeast);
  EXPECT_LT(r.latency, kThreeAttemptsAtMost);
  absl::optional<Attribution> a = AttributionOf(r.status);
  ASSERT_TRUE(a.has_value()) << r.status.error_message();
  EXPECT_EQ(a->hop, "orders") << r.status.error_message();
  EXPECT_THAT(a->source,
              ::testing::AnyOf(DeadlineSource::kAttempt, DeadlineSource::kExhaustedBeforeCall))
      << r.status.error_message();
  // Everything the order started has ended: nothing more can start.
  ASSERT_TRUE(chain.WaitIdle());
  const Stats ledger = StatsOf(chain.ledger());
  EXPECT_EQ(ledger.calls(), 3);
  EXPECT_EQ(ledger.retries_received(), 2);
  // No hop started work after the client's deadline...
  for (ChainProcess* p : {&chain.gateway(), &chain.orders(), &chain.ledger()}) {
    Stats s = StatsOf(*p);
    EXPECT_EQ(s.calls_started_after_deadline(), 0) << s.hop();
  }
  // ...and that zero was measured: the deadline reaches every hop.
  chain.ExpectClientDeadlineReachesEveryHop();
  ASSERT_TRUE(chain.WaitIdle());
  EXPECT_EQ(chain.Rows(), 0);
  chain.Audit();
}

// How long after the client's TryCancel the client has its status, and a hop
// (its handler, not a shielded commit) has stopped. Measured on a 2-core
// machine: at most 3.3 ms idle (10 runs), at most 35 ms with two instances at
// once plus two busy loops (20 runs, median 2-4 ms). A hop that missed the
// cancel would go on for seconds (the ledger hangs, attempts may last 5 s).
constexpr absl::Duration kCancelReachesTheClient = absl::Milliseconds(250);
constexpr absl::Duration kCancelStopsAHop = absl::Milliseconds(250);

absl::Time LastEnd(const Stats& s) { return absl::FromUnixMicros(s.last_end_unix_us()); }

TEST(ChainE2eTest, ClientCancelStopsEveryHopPromptly) {
  ChainOptions o;
  o.ledger = {"--hang-rate=1"};
  // Nothing but the cancel can end the call for seconds.
  o.orders = {"--attempt-cap=5s", "--request-cap=10s", "--max-attempts=1"};
  o.gateway = {"--request-cap=10s"};
  START_CHAIN(chain, o);
  PlaceOptions cancel;
  cancel.cancel_after = absl::Milliseconds(300);
  Chain::Result r = chain.Place("order-x", absl::Seconds(10), cancel);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::CANCELLED) << r.status.error_message();
  ASSERT_TRUE(r.cancelled_at.has_value());
  EXPECT_LT(r.end - *r.cancelled_at, kCancelReachesTheClient);
  ASSERT_TRUE(chain.WaitIdle());
  for (ChainProcess* p : {&chain.gateway(), &chain.orders(), &chain.ledger()}) {
    const Stats s = StatsOf(*p);
    ASSERT_EQ(s.calls(), 1) << s.hop();
    EXPECT_LT(LastEnd(s) - *r.cancelled_at, kCancelStopsAHop) << s.hop();
  }
  EXPECT_EQ(chain.Rows(), 0);
  chain.Audit();
}

// The gateway's PlaceOrder runs on the callback API in hopbudget mode
// (server/common/callback_call.h): its injected latency waits on an alarm
// and a hang on the call's cancel, neither on a thread. Either ends at the
// client's cancel, and no call reaches orders.
TEST(ChainE2eTest, GatewayLatencyAndHangWithoutAThreadEndAtTheClientsCancel) {
  for (const char* fault : {"--latency=fixed:5s", "--hang-rate=1"}) {
    SCOPED_TRACE(fault);
    ChainOptions o;
    o.gateway = {fault, "--request-cap=10s"};
    START_CHAIN(chain, o);
    PlaceOptions cancel;
    cancel.cancel_after = absl::Milliseconds(300);
    Chain::Result r = chain.Place("order-g", absl::Seconds(10), cancel);
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::CANCELLED) << r.status.error_message();
    ASSERT_TRUE(r.cancelled_at.has_value());
    EXPECT_LT(r.end - *r.cancelled_at, kCancelReachesTheClient);
    ASSERT_TRUE(chain.WaitIdle());
    const Stats gateway = StatsOf(chain.gateway());
    ASSERT_EQ(gateway.calls(), 1);
    EXPECT_LT(LastEnd(gateway) - *r.cancelled_at, kCancelStopsAHop);
    EXPECT_EQ(StatsOf(chain.orders()).calls(), 0);
  }
}

TEST(ChainE2eTest, GatewayLatencyThenTheOrderOnTheCallbackPath) {
  ChainOptions o;
  o.gateway = {"--latency=fixed:200ms"};
  START_CHAIN(chain, o);
  Chain::Result r = chain.Place("order-l", absl::Seconds(5));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_GE(r.latency, absl::Milliseconds(200));
  EXPECT_EQ(chain.Rows(), 1);
  // A budget that runs out while the gateway waits ends the wait: that
  // order never reaches orders.
  Chain::Result late = chain.Place("order-m", absl::Milliseconds(100));
  EXPECT_EQ(late.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
      << late.status.error_message();
  ASSERT_TRUE(chain.WaitIdle());
  EXPECT_EQ(StatsOf(chain.orders()).calls(), 1);
  chain.Audit();
}

TEST(ChainE2eTest, GatewayErrorFaultAnswersUnavailableOnTheCallbackPath) {
  ChainOptions o;
  o.gateway = {"--error-rate=1"};
  START_CHAIN(chain, o);
  Chain::Result r = chain.Place("order-e", absl::Seconds(2));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE) << r.status.error_message();
  EXPECT_THAT(r.status.error_message(), ::testing::HasSubstr("injected fault at gateway"));
  ASSERT_TRUE(chain.WaitIdle());
  EXPECT_EQ(StatsOf(chain.gateway()).faults_injected(), 1);
  EXPECT_EQ(StatsOf(chain.orders()).calls(), 0);
}

// The ledger's Commit runs on the callback API in hopbudget mode: the
// shield's end answers the call. A commit held past its bound is stopped
// there, and the answer names the shield at the ledger with the bound as
// its budget. The bound is --shield-bound, or, with --service-config, the
// file's shieldBound for Ledger/Commit (the ledger's Shield is made from
// its Hop), over a --shield-bound longer than the 3 s slow commit.
TEST(ChainE2eTest, CommitPastItsShieldBoundIsAnsweredByTheShieldOnTheCallbackPath) {
  const std::string config = absl::StrCat(::testing::TempDir(), "/ledger_shield_config.json");
  {
    std::FILE* f = std::fopen(config.c_str(), "w");
    ASSERT_NE(f, nullptr) << config;
    std::fputs(R"({"hopbudget": {"methodPolicy": [
        {"name": [{"service": "hopbudget.demo.Ledger", "method": "Commit"}],
         "shieldBound": "0.4s"}]}})",
               f);
    std::fclose(f);
  }
  const std::vector<std::vector<std::string>> rows = {
      {"--shield-bound=400ms"},
      {"--shield-bound=5s", "--service-config=" + config},
  };
  for (const std::vector<std::string>& bound : rows) {
    SCOPED_TRACE(absl::StrJoin(bound, " "));
    ChainOptions o;
    o.ledger = {"--slow-commit=3s"};
    o.ledger.insert(o.ledger.end(), bound.begin(), bound.end());
    o.orders = {"--attempt-cap=4s", "--request-cap=5s", "--max-attempts=1"};
    o.gateway = {"--request-cap=6s"};
    START_CHAIN(chain, o);
    Chain::Result r = chain.Place("order-s", absl::Seconds(5));
    ASSERT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
        << r.status.error_message();
    EXPECT_GE(r.latency, absl::Milliseconds(400));
    EXPECT_LT(r.latency, absl::Milliseconds(2500));  // well before the slow commit's 3 s
    absl::optional<Attribution> a = AttributionOf(r.status);
    ASSERT_TRUE(a.has_value()) << r.status.error_message();
    EXPECT_EQ(a->source, DeadlineSource::kShield) << r.status.error_message();
    EXPECT_EQ(a->hop, "ledger") << r.status.error_message();
    EXPECT_EQ(a->budget, absl::Milliseconds(400)) << r.status.error_message();
    ASSERT_TRUE(chain.WaitIdle());
    EXPECT_EQ(StatsOf(chain.ledger()).commits_stopped(), 1);
    EXPECT_EQ(chain.Rows(), 0);
  }
  std::remove(config.c_str());
}

TEST(ChainE2eTest, ClientCancelDuringCommitLeavesExactlyOneRow) {
  ChainOptions o;
  o.ledger = {"--slow-commit=1500ms"};
  // No attempt budget shorter than the commit: the caller's cancel is what
  // ends the call (an attempt cut at orders would be retried instead).
  o.orders = {"--attempt-cap=5s", "--request-cap=10s"};
  START_CHAIN(chain, o);
  PlaceOptions cancel;
  cancel.cancel_after = absl::Milliseconds(400);
  Chain::Result r = chain.Place("order-c", absl::Seconds(20), cancel);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::CANCELLED) << r.status.error_message();
  ASSERT_TRUE(r.cancelled_at.has_value());
  EXPECT_LT(r.end - *r.cancelled_at, kCancelReachesTheClient);
  // Gateway and orders stop at once; the shielded commit goes on after the
  // caller left, and lands once.
  ASSERT_TRUE(chain.WaitIdle());
  for (ChainProcess* p : {&chain.gateway(), &chain.orders()}) {
    const Stats s = StatsOf(*p);
    EXPECT_LT(LastEnd(s) - *r.cancelled_at, kCancelStopsAHop) << s.hop();
  }
  const Stats ledger = StatsOf(chain.ledger());
  EXPECT_EQ(ledger.commits(), 1);
  EXPECT_GE(LastEnd(ledger) - r.start, absl::Milliseconds(1500));
  // The client saw CANCELLED; the order is in the ledger once (by key and
  // by content), not acknowledged.
  AuditResult a = chain.Audit();
  EXPECT_EQ(a.committed, 1);
  EXPECT_EQ(a.committed_unacknowledged, 1);
  // The client retries the same order: the original result, no new row.
  Faults none;
  none.set_latency("none");
  SetFaults(chain.ledger(), none);
  Chain::Result again = chain.Place("order-c", absl::Seconds(10));
  ASSERT_TRUE(again.status.ok()) << again.status.error_message();
  EXPECT_TRUE(again.reply.replayed());
  ASSERT_TRUE(chain.WaitIdle());
  a = chain.Audit();
  EXPECT_EQ(a.requests, 2);
  EXPECT_EQ(a.acknowledged, 1);
  EXPECT_EQ(a.committed, 1);
  EXPECT_EQ(chain.Rows(), 1);
}

TEST(ChainE2eTest, RetriesUnderFaultsCommitEveryOrderExactlyOnce) {
  ChainOptions o;
  o.ledger = {"--error-rate=0.3", "--hang-rate=0.1"};
  o.orders = {"--attempt-cap=400ms", "--max-attempts=4"};
  START_CHAIN(chain, o);
  const int kOrders = 30;
  int acked = 0;
  for (int i = 0; i < kOrders; ++i) {
    if (chain.Place(absl::StrCat("order-f-", i), absl::Seconds(4)).status.ok()) ++acked;
  }
  EXPECT_GE(StatsOf(chain.ledger()).retries_received(), 1);
  EXPECT_GE(acked, kOrders / 2);  // retries rescue most of them
  ASSERT_TRUE(chain.WaitIdle());
  AuditResult a = chain.Audit();
  EXPECT_EQ(a.acknowledged, acked);
  // The client sends every order again, faults gone: each is answered, the
  // ones already committed with their original row, and still one row each.
  Faults none;
  none.set_latency("none");
  SetFaults(chain.ledger(), none);
  for (int i = 0; i < kOrders; ++i) {
    Chain::Result r = chain.Place(absl::StrCat("order-f-", i), absl::Seconds(10));
    EXPECT_TRUE(r.status.ok()) << i << ": " << r.status.error_message();
  }
  ASSERT_TRUE(chain.WaitIdle());
  a = chain.Audit();
  EXPECT_EQ(a.orders, kOrders);
  EXPECT_EQ(a.acknowledged, kOrders);
  EXPECT_EQ(a.committed, kOrders);
  EXPECT_EQ(chain.Rows(), kOrders);
}

// With --service-config, orders retries its commits as the file's
// Ledger/Commit says (its RetryLoop is made from the Hop): four attempts
// under a retryPolicy of four, one attempt without a retryPolicy, whatever
// --max-attempts says.
TEST(ChainE2eTest, OrdersRetriesItsCommitsAsItsServiceConfigSays) {
  const std::string orders_method =
      R"({"name": [{"service": "hopbudget.demo.Orders", "method": "CreateOrder"}], "timeout": "5s"})";
  const std::string with_retries = absl::StrCat(R"({"methodConfig": [)", orders_method, R"(,
      {"name": [{"service": "hopbudget.demo.Ledger", "method": "Commit"}], "timeout": "4s",
       "retryPolicy": {"maxAttempts": 4, "initialBackoff": "0.01s", "maxBackoff": "0.01s",
                       "backoffMultiplier": 1, "retryableStatusCodes": ["UNAVAILABLE"],
                       "perAttemptRecvTimeout": "1s"}}],
    "retryThrottling": {"maxTokens": 100, "tokenRatio": 0.5}})");
  const std::string without_retries = absl::StrCat(R"({"methodConfig": [)", orders_method, "]}");
  for (const auto& [config, retries] :
       std::vector<std::pair<std::string, int>>{{with_retries, 3}, {without_retries, 0}}) {
    SCOPED_TRACE(config);
    const std::string path =
        absl::StrCat(::testing::TempDir(), "/orders_service_config_", retries, ".json");
    {
      std::FILE* f = std::fopen(path.c_str(), "w");
      ASSERT_NE(f, nullptr) << path;
      std::fputs(config.c_str(), f);
      std::fclose(f);
    }
    ChainOptions o;
    o.ledger = {"--error-rate=1"};  // every commit answers UNAVAILABLE
    o.orders = {"--max-attempts=2", "--service-config=" + path};
    START_CHAIN(chain, o);
    const Chain::Result r = chain.Place(absl::StrCat("order-config-", retries), absl::Seconds(4));
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE) << r.status.error_message();
    ASSERT_TRUE(chain.WaitIdle());
    EXPECT_EQ(StatsOf(chain.ledger()).retries_received(), retries);
    std::remove(path.c_str());
  }
}

// x-demo-client-deadline-us is what every "work after the client deadline"
// figure is measured by: it must reach orders and the ledger in both modes.
TEST(ChainE2eTest, ClientDeadlineHeaderReachesEveryHopInBothModes) {
  for (const char* mode : {"hopbudget", "baseline"}) {
    SCOPED_TRACE(mode);
    ChainOptions o;
    o.mode = mode;
    START_CHAIN(chain, o);
    // An order on time is not counted late anywhere...
    ASSERT_TRUE(chain.Place(absl::StrCat("order-on-time-", mode), absl::Seconds(10)).status.ok());
    ASSERT_TRUE(chain.WaitIdle());
    for (ChainProcess* p : {&chain.gateway(), &chain.orders(), &chain.ledger()}) {
      const Stats s = StatsOf(*p);
      EXPECT_EQ(s.calls_started_after_deadline(), 0) << s.hop();
      EXPECT_EQ(s.work_after_deadline_ms(), 0) << s.hop();
    }
    // ...one whose header says its deadline has passed is, at every hop, and
    // all of its work counts as work after the deadline.
    chain.ExpectClientDeadlineReachesEveryHop();
    ASSERT_TRUE(chain.WaitIdle());
    for (ChainProcess* p : {&chain.gateway(), &chain.orders(), &chain.ledger()}) {
      const Stats s = StatsOf(*p);
      EXPECT_EQ(s.calls_started_after_deadline(), 1) << s.hop();
      EXPECT_GT(s.work_after_deadline_ms(), 0) << s.hop();
    }
    chain.Audit();
  }
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
      return StatsOf(chain.gateway()).in_flight() == 0 &&
             StatsOf(chain.orders()).in_flight() == 0 && StatsOf(chain.ledger()).in_flight() == 0;
    }));
    work[k++] = chain.WorkAfterDeadlineMs();
    // Measured at every hop, not only at the gateway the client talks to.
    chain.ExpectClientDeadlineReachesEveryHop();
  }
  // Baseline: each hop holds on ~900 ms past the 600 ms budget, three orders.
  EXPECT_GT(work[0], work[1] + 1000)
      << "baseline " << work[0] << " ms, hopbudget " << work[1] << " ms";
}

TEST(ChainE2eTest, EveryHopServesMetricsAndDeadlinez) {
  START_CHAIN(chain, ChainOptions());
  ASSERT_TRUE(chain.Place("order-m", absl::Seconds(10)).status.ok());
  // One order counted late at every hop, so the counter below is a live one.
  chain.ExpectClientDeadlineReachesEveryHop();
  ASSERT_TRUE(chain.WaitIdle());
  for (auto [p, hop] : {std::pair<ChainProcess*, std::string>{&chain.gateway(), "gateway"},
                        {&chain.orders(), "orders"},
                        {&chain.ledger(), "ledger"}}) {
    ASSERT_GT(p->metrics_port(), 0) << hop;
    absl::StatusOr<std::string> metrics = HttpGet(p->metrics_port(), "/metrics");
    ASSERT_TRUE(metrics.ok()) << metrics.status();
    EXPECT_THAT(*metrics,
                ::testing::HasSubstr(absl::StrCat("hopbudget_info{hop=\"", hop, "\"} 1")));
    EXPECT_THAT(*metrics,
                ::testing::HasSubstr(absl::StrCat("demo_calls_started_after_deadline_total{hop=\"",
                                                  hop, "\",mode=\"hopbudget\"} 1")));
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
  for (const grpc::Slice& s : slices)
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
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
  for (const grpc::Slice& s : slices)
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
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
      {HOPBUDGET_DEMO_GATEWAY, "--orders=127.0.0.1:1 --request-cap=800",
       "--request-cap=800: not a duration"},
      {HOPBUDGET_DEMO_GATEWAY, "--port=0", "--orders is required"},
      {HOPBUDGET_DEMO_GATEWAY, "--orders=127.0.0.1:1 --bogus=1", "unknown flag --bogus"},
      // A fault only the ledger can inject, refused at start.
      {HOPBUDGET_DEMO_GATEWAY, "--orders=127.0.0.1:1 --slow-commit=1s",
       "gateway cannot inject slow-commit (1s): only the ledger commits"},
      {HOPBUDGET_DEMO_ORDERS, "--ledger=127.0.0.1:1 --slow-commit=1s",
       "orders cannot inject slow-commit"},
  };
  for (const Case& c : cases) {
    auto [status, out] = RunCommand(absl::StrCat(c.binary, " ", c.args));
    EXPECT_EQ(status, 2) << c.args << ": " << out;
    EXPECT_THAT(out, ::testing::HasSubstr(c.message)) << c.args;
  }
}

// chainctl load against a chain where every commit fails: --json - puts the
// summary on stdout and nothing else, and the exit status says the load
// failed, by --max-error-rate and without it.
TEST(ChainE2eTest, ChainctlLoadReportsAFailingChainAsFailed) {
  ChainOptions o;
  o.ledger = {"--error-rate=1"};
  Chain chain(o);
  ASSERT_TRUE(chain.ok()) << chain.error();
  const std::string load =
      absl::StrCat(HOPBUDGET_CHAINCTL, " load --gateway ", chain.gateway().address(),
                   " --rps 20 --duration 1s --budget 800ms --quiet");
  {
    std::string out;
    FILE* f = popen((load + " --json - --max-error-rate 0.5 2>/dev/null").c_str(), "r");
    ASSERT_NE(f, nullptr);
    char buf[512];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
    const int status = pclose(f);
    EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 1) << out;
    // One JSON object, nothing else on stdout.
    ASSERT_FALSE(out.empty());
    EXPECT_EQ(out.front(), '{') << out;
    EXPECT_EQ(out.substr(out.size() - 2), "}\n") << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
    EXPECT_THAT(out, ::testing::HasSubstr("\"ok\":0,"));
    EXPECT_THAT(out, ::testing::HasSubstr("\"error_rate\":1.000"));
  }
  auto [status, out] = RunCommand(load);
  EXPECT_EQ(status, 1) << "every call failed: " << out;
  EXPECT_THAT(out, ::testing::HasSubstr("calls failed (100.0 %)"));
  // An output path that cannot be written is refused before the load.
  auto [bad_status, bad_out] = RunCommand(load + " --json /nonexistent-dir/summary.json");
  EXPECT_EQ(bad_status, 2) << bad_out;
  EXPECT_THAT(bad_out, ::testing::HasSubstr("--json=/nonexistent-dir/summary.json: cannot write"));
}

}  // namespace
}  // namespace hopbudget::e2e
