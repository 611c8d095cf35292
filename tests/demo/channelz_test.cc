// Copyright hopbudget authors.
//
// channelz on the demo's services, read by a real grpc.channelz.v1 client
// (the stubs generated from Debian's grpc-proto). A binary of its own: the
// services link gRPC's channelz plugin, which registers the same protobuf
// messages, so a test that also linked the demo's server library would
// register them twice (a protobuf FATAL at start, seen under ASan).
#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "child_process.h"
#include "demo/demo.grpc.pb.h"
#include "grpc/channelz/v1/channelz.grpc.pb.h"
#include "gtest/gtest.h"

namespace hopbudget::demo {
namespace {

std::unique_ptr<ChildProcess> StartReady(const std::string& binary,
                                         const std::vector<std::string>& args) {
  auto p = ChildProcess::Spawn(binary, args);
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return nullptr;
  absl::Status ready = (*p)->WaitReady(absl::Seconds(60));  // only stops a hung start
  EXPECT_TRUE(ready.ok()) << binary << ": " << ready;
  if (!ready.ok()) return nullptr;
  return *std::move(p);
}

struct Chain {
  std::string dir = TempDir();
  std::unique_ptr<ChildProcess> ledger, orders, gateway;
  bool Start() {
    ledger = StartReady(HOPBUDGET_DEMO_LEDGER, {"--port=0", "--db=" + dir + "/ledger.db"});
    if (ledger == nullptr) return false;
    orders = StartReady(HOPBUDGET_DEMO_ORDERS, {"--port=0", "--ledger=" + ledger->address()});
    if (orders == nullptr) return false;
    gateway = StartReady(HOPBUDGET_DEMO_GATEWAY, {"--port=0", "--orders=" + orders->address()});
    return gateway != nullptr;
  }
};

Order MakeOrder(const std::string& key) {
  Order o;
  o.set_key(key);
  Item* item = o.add_items();
  item->set_sku("sku-1");
  item->set_quantity(1);
  return o;
}

// Every service serves grpc.channelz.v1.Channelz: its server's call counts,
// and the channels it calls downstream on, read by a real client.
TEST(ChannelzTest, EveryServiceServesItsServerAndDownstreamChannels) {
  Chain chain;
  ASSERT_TRUE(chain.Start());
  auto gateway = Gateway::NewStub(
      grpc::CreateChannel(chain.gateway->address(), grpc::InsecureChannelCredentials()));
  constexpr int kOrders = 3;
  for (int i = 0; i < kOrders; ++i) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    OrderResult r;
    grpc::Status s = gateway->PlaceOrder(&ctx, MakeOrder(absl::StrCat("channelz-", i)), &r);
    ASSERT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
  }
  for (ChildProcess* p : {chain.gateway.get(), chain.orders.get(), chain.ledger.get()}) {
    auto channelz = grpc::channelz::v1::Channelz::NewStub(
        grpc::CreateChannel(p->address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    grpc::channelz::v1::GetServersResponse servers;
    grpc::Status s = channelz->GetServers(&ctx, grpc::channelz::v1::GetServersRequest(), &servers);
    ASSERT_TRUE(s.ok()) << p->address() << ": " << s.error_code() << " " << s.error_message();
    ASSERT_EQ(servers.server_size(), 1) << servers.ShortDebugString();
    // Each hop served the orders (and the health watches of its callers).
    EXPECT_GE(servers.server(0).data().calls_succeeded(), kOrders) << servers.ShortDebugString();
    EXPECT_GT(servers.server(0).listen_socket_size(), 0);
  }
  // Orders' channel to the ledger carried the commits.
  auto channelz = grpc::channelz::v1::Channelz::NewStub(
      grpc::CreateChannel(chain.orders->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  grpc::channelz::v1::GetTopChannelsResponse channels;
  grpc::Status s =
      channelz->GetTopChannels(&ctx, grpc::channelz::v1::GetTopChannelsRequest(), &channels);
  ASSERT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
  int64_t to_ledger = 0;
  for (const auto& c : channels.channel()) {
    if (c.data().target() == chain.ledger->address()) to_ledger += c.data().calls_succeeded();
  }
  EXPECT_GE(to_ledger, kOrders) << channels.ShortDebugString();
}

}  // namespace
}  // namespace hopbudget::demo
