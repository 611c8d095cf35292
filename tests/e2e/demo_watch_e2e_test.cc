// Copyright hopbudget authors.
//
// The demo's WatchOrder stream end to end (issue 13, item 7): a ledger
// that streams an order's state, orders and gateway relaying it, each with
// a stream idle budget in hopbudget mode (orders shorter than the gateway,
// as budgets nest), none in baseline mode. Real processes on loopback, real
// clients. Margins are wide on purpose (ctest -j2 on a loaded 2-core
// machine): a bound here catches a cut that came from the wrong budget (an
// outer hop's idle budget, the deadline), which is an order of magnitude
// away, not a few milliseconds of scheduling.
#include <grpcpp/grpcpp.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "chain_process.h"
#include "chain_support.h"
#include "demo/demo.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hopbudget/client.h"
#include "topology.h"

namespace hopbudget::e2e {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// The idle budgets the hopbudget chain runs with (the services' defaults,
// said explicitly so that the test reads on its own).
constexpr absl::Duration kOrdersIdle = absl::Milliseconds(300);
constexpr absl::Duration kGatewayIdle = absl::Milliseconds(500);

struct WatchChainOptions {
  std::string mode = "hopbudget";
  bool idle = true;  // false: --stream-idle=0 at orders and gateway (no idle budget)
  std::vector<std::string> ledger, orders, gateway;  // extra flags
};

// ledger <- orders <- gateway, one mode.
class WatchChain {
 public:
  explicit WatchChain(const WatchChainOptions& o) {
    using chainctl::Hop;
    chainctl::ChainSpec spec;
    spec.mode = o.mode;
    spec.db = processes_.dir() + "/ledger.db";
    spec.seed = 1;  // the services' default, which this test always ran with
    spec.extra[Hop::kLedger] = {"--watch-interval=50ms"};
    spec.extra[Hop::kOrders] = {
        absl::StrCat("--stream-idle=", o.idle ? absl::FormatDuration(kOrdersIdle) : "0")};
    spec.extra[Hop::kGateway] = {
        absl::StrCat("--stream-idle=", o.idle ? absl::FormatDuration(kGatewayIdle) : "0")};
    for (auto [hop, extra] :
         {std::pair{Hop::kLedger, &o.ledger}, std::pair{Hop::kOrders, &o.orders},
          std::pair{Hop::kGateway, &o.gateway}}) {
      spec.extra[hop].insert(spec.extra[hop].end(), extra->begin(), extra->end());
    }
    std::map<Hop, ChainProcess*> hops = processes_.StartChain(spec);
    if (hops.empty()) return;
    ledger_ = hops[Hop::kLedger];
    gateway_stub_ = GatewayStub(*hops[Hop::kGateway]);
  }

  bool ok() const { return gateway_stub_ != nullptr; }
  const std::string& error() const { return processes_.error(); }
  const ChainProcess& ledger() const { return *ledger_; }
  demo::Gateway::Stub& gateway() { return *gateway_stub_; }

  grpc::Status Place(const std::string& key, demo::OrderResult* reply) {
    return PlaceOneItem(*gateway_stub_, key, absl::Seconds(5), reply);
  }

  static void SetSilence(const ChainProcess& p, bool silence) {
    demo::Faults faults;
    faults.set_latency("none");
    faults.set_silence(silence);
    ASSERT_EQ(SetFaults(p, faults).silence(), silence);
  }

 private:
  ChainProcesses processes_;
  ChainProcess* ledger_ = nullptr;
  std::unique_ptr<demo::Gateway::Stub> gateway_stub_;
};

// One watch through the gateway, read to its end.
struct Watched {
  std::vector<demo::OrderStatus> messages;
  grpc::Status status;
  std::multimap<std::string, std::string> trailers;
  absl::Duration latency;  // start to status
  absl::Duration silence;  // last message (or start) to status
};

// `after_message(n)` runs after the n-th message (1-based) with the call's
// context, for a test to act mid-stream (a fault, a cancel).
Watched Watch(demo::Gateway::Stub& gateway, const std::string& key, absl::Duration budget,
              const std::function<void(int, grpc::ClientContext&)>& after_message = nullptr) {
  Watched w;
  grpc::ClientContext ctx;
  const absl::Time start = absl::Now();
  ctx.set_deadline(absl::ToChronoTime(start + budget));
  demo::OrderKey request;
  request.set_key(key);
  std::unique_ptr<grpc::ClientReader<demo::OrderStatus>> reader = gateway.WatchOrder(&ctx, request);
  absl::Time last = start;
  demo::OrderStatus m;
  while (reader->Read(&m)) {
    last = absl::Now();
    w.messages.push_back(m);
    if (after_message) after_message(static_cast<int>(w.messages.size()), ctx);
  }
  w.status = reader->Finish();
  const absl::Time end = absl::Now();
  w.latency = end - start;
  w.silence = end - last;
  for (const auto& [k, v] : ctx.GetServerTrailingMetadata()) {
    w.trailers.emplace(std::string(k.data(), k.size()), std::string(v.data(), v.size()));
  }
  return w;
}

std::string Trailer(const Watched& w, const std::string& key) {
  auto it = w.trailers.find(key);
  return it == w.trailers.end() ? "" : it->second;
}

TEST(DemoWatchE2eTest, MessagesFlowThroughThreeHops) {
  WatchChain chain({});
  ASSERT_TRUE(chain.ok()) << chain.error();
  demo::OrderResult placed;
  grpc::Status s = chain.Place("watch-1", &placed);
  ASSERT_TRUE(s.ok()) << s.error_message();

  // 1 s under the gateway's 2 s request cap: the client's own deadline ends it.
  Watched w = Watch(chain.gateway(), "watch-1", absl::Seconds(1));
  EXPECT_EQ(w.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << w.status.error_message();
  absl::optional<Attribution> a = AttributionOf(w.status);
  ASSERT_TRUE(a.has_value()) << w.status.error_message();
  EXPECT_EQ(a->source, DeadlineSource::kClient) << w.status.error_message();
  // A message every 50 ms for 1 s: ~20; a handful is enough to show the
  // stream flowed, however loaded the machine.
  ASSERT_GE(w.messages.size(), 5u);
  for (size_t i = 0; i < w.messages.size(); ++i) {
    const demo::OrderStatus& m = w.messages[i];
    EXPECT_EQ(m.seq(), static_cast<int64_t>(i));
    EXPECT_EQ(m.key(), "watch-1");
    EXPECT_EQ(m.state(), demo::OrderStatus::COMMITTED);
    EXPECT_EQ(m.result().order_id(), placed.order_id());
  }
  // The whole watch was one handler call at the ledger, now ended.
  EXPECT_TRUE(Eventually([&] { return StatsOf(chain.ledger()).in_flight() == 0; }));
}

TEST(DemoWatchE2eTest, AWatchSeesTheOrderCommittedWhileItRuns) {
  WatchChain chain({});
  ASSERT_TRUE(chain.ok()) << chain.error();
  int64_t order_id = 0;
  Watched w =
      Watch(chain.gateway(), "watch-later", absl::Seconds(1), [&](int n, grpc::ClientContext&) {
        if (n != 2) return;
        demo::OrderResult placed;
        grpc::Status s = chain.Place("watch-later", &placed);
        ASSERT_TRUE(s.ok()) << s.error_message();
        order_id = placed.order_id();
      });
  ASSERT_GE(w.messages.size(), 3u);
  EXPECT_EQ(w.messages[0].state(), demo::OrderStatus::PENDING);
  EXPECT_EQ(w.messages[1].state(), demo::OrderStatus::PENDING);
  EXPECT_EQ(w.messages.back().state(), demo::OrderStatus::COMMITTED);
  EXPECT_EQ(w.messages.back().result().order_id(), order_id);
}

TEST(DemoWatchE2eTest, ASilentLedgerIsCutAtOrdersIdleBudget) {
  WatchChain chain({});
  ASSERT_TRUE(chain.ok()) << chain.error();
  demo::OrderResult placed;
  ASSERT_TRUE(chain.Place("watch-silent", &placed).ok());
  // Two messages, then the ledger goes silent (the stream stays open).
  Watched w =
      Watch(chain.gateway(), "watch-silent", absl::Seconds(5), [&](int n, grpc::ClientContext&) {
        if (n == 2) WatchChain::SetSilence(chain.ledger(), true);
      });
  ASSERT_EQ(w.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << w.status.error_message();
  // Messages that were on their way when the fault was set may follow the
  // second one; none after the silence began.
  EXPECT_GE(w.messages.size(), 2u);
  // The status message, the details and the trailers, at the gateway's caller.
  EXPECT_THAT(w.status.error_message(),
              StartsWith("hopbudget/1: source=idle hop=orders budget_ms=300 "));
  absl::optional<Attribution> a = AttributionOf(w.status);
  ASSERT_TRUE(a.has_value()) << w.status.error_message();
  EXPECT_EQ(a->source, DeadlineSource::kIdle);
  EXPECT_EQ(a->hop, "orders");
  EXPECT_EQ(a->budget, kOrdersIdle);
  EXPECT_GE(a->elapsed, kOrdersIdle);
  EXPECT_FALSE(Trailer(w, "grpc-status-details-bin").empty());
  EXPECT_EQ(Trailer(w, "hopbudget-source"), "idle");
  EXPECT_EQ(Trailer(w, "hopbudget-hop"), "orders");
  EXPECT_EQ(Trailer(w, "hopbudget-budget-ms"), "300");
  // Cut at orders' 300 ms, not at the gateway's 500 ms (the attribution
  // says so) nor at the deadline (5 s, capped at 2 s by the gateway). The
  // caller's silence starts a little before orders' (the last message was
  // still travelling), hence the 20 ms below.
  EXPECT_GE(w.silence, kOrdersIdle - absl::Milliseconds(20));
  EXPECT_LT(w.latency, absl::Milliseconds(1900));
  std::cerr << "RESULT demo_watch idle_cut silence_seen_by_caller_ms="
            << absl::ToDoubleMilliseconds(w.silence)
            << " elapsed_at_orders_ms=" << absl::ToDoubleMilliseconds(a->elapsed) << "\n";
  // The cut cancelled the silent watch at the ledger too.
  EXPECT_TRUE(Eventually([&] { return StatsOf(chain.ledger()).in_flight() == 0; }));
}

TEST(DemoWatchE2eTest, BaselineIsNotCutBeforeTheDeadline) {
  WatchChainOptions o;
  o.mode = "baseline";
  WatchChain chain(o);
  ASSERT_TRUE(chain.ok()) << chain.error();
  demo::OrderResult placed;
  ASSERT_TRUE(chain.Place("watch-base", &placed).ok());
  WatchChain::SetSilence(chain.ledger(), true);
  // 800 ms, under the baseline's constant 1 s per-hop timeout: no hop has
  // an idle budget, so the silent stream is held until the client's own
  // deadline, far past orders' 300 ms.
  const absl::Duration budget = absl::Milliseconds(800);
  Watched w = Watch(chain.gateway(), "watch-base", budget);
  EXPECT_EQ(w.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << w.status.error_message();
  EXPECT_TRUE(w.messages.empty());
  EXPECT_GE(w.latency, budget - absl::Milliseconds(5));
  absl::optional<Attribution> a = AttributionOf(w.status);
  ASSERT_TRUE(a.has_value()) << w.status.error_message();
  EXPECT_EQ(a->source, DeadlineSource::kClient) << w.status.error_message();
  EXPECT_EQ(a->hop, "e2e");
  EXPECT_EQ(Trailer(w, "hopbudget-source"), "");  // no hop of the chain cut it
}

TEST(DemoWatchE2eTest, CancellingTheWatchAtTheClientCancelsItAtTheLedger) {
  // Every cap far away (30 s) and no idle budget, and the ledger silent
  // before the cancel (a relay that finds its caller gone on its next write
  // would stop the ledger too): only the cancel, propagated hop by hop, can
  // end the watch at the ledger within the bound below.
  WatchChainOptions o;
  o.ledger = {"--request-cap=30s"};
  o.idle = false;
  o.orders = {"--request-cap=30s"};
  o.gateway = {"--request-cap=30s"};
  WatchChain chain(o);
  ASSERT_TRUE(chain.ok()) << chain.error();
  demo::OrderResult placed;
  ASSERT_TRUE(chain.Place("watch-cancel", &placed).ok());
  absl::Time cancelled;
  Watched w = Watch(chain.gateway(), "watch-cancel", absl::Seconds(30),
                    [&](int n, grpc::ClientContext& ctx) {
                      if (n != 2) return;
                      WatchChain::SetSilence(chain.ledger(), true);
                      EXPECT_EQ(StatsOf(chain.ledger()).in_flight(), 1);
                      cancelled = absl::Now();
                      ctx.TryCancel();
                    });
  EXPECT_EQ(w.status.error_code(), grpc::StatusCode::CANCELLED) << w.status.error_message();
  ASSERT_TRUE(
      Eventually([&] { return StatsOf(chain.ledger()).in_flight() == 0; }, absl::Seconds(5)))
      << "the watch still runs at the ledger: the cancel did not reach it";
  std::cerr << "RESULT demo_watch cancel_reached_ledger_within_ms="
            << absl::ToDoubleMilliseconds(absl::Now() - cancelled) << "\n";
}

TEST(DemoWatchE2eTest, WatchesHoldNoAdmissionSlot) {
  // Admission at 2 calls in progress, fixed: 4 watches running would hold
  // every slot for their whole life if admission covered them, and the
  // order below would wait behind them until they end (or be shed).
  WatchChainOptions o;
  for (auto* flags : {&o.ledger, &o.orders, &o.gateway}) {
    *flags = {"--admission-limit=2", "--admission-adaptive=false"};
  }
  WatchChain chain(o);
  ASSERT_TRUE(chain.ok()) << chain.error();
  std::vector<std::thread> watches;
  std::vector<size_t> received(4);
  for (int i = 0; i < 4; ++i) {
    // 3 s, cut at the gateway's 2 s request cap: long enough to be running
    // when the order below arrives however slowly the watches start.
    watches.emplace_back([&, i] {
      received[i] = Watch(chain.gateway(), "watch-many", absl::Seconds(3)).messages.size();
    });
  }
  ASSERT_TRUE(Eventually([&] { return StatsOf(chain.ledger()).in_flight() == 4; }));
  const absl::Time start = absl::Now();
  demo::OrderResult placed;
  grpc::Status s = chain.Place("admitted-meanwhile", &placed);
  const absl::Duration took = absl::Now() - start;
  // Still running: the order was admitted beside them, not after them.
  const int64_t watching = StatsOf(chain.ledger()).in_flight();
  for (std::thread& t : watches) t.join();
  EXPECT_EQ(watching, 4);
  ASSERT_TRUE(s.ok()) << s.error_message();
  // The watches had over a second left: an order held behind them would
  // take that long (or be shed).
  EXPECT_LT(took, absl::Milliseconds(700));
  for (size_t n : received) EXPECT_GE(n, 3u);
}

}  // namespace
}  // namespace hopbudget::e2e
