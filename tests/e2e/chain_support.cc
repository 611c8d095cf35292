// Copyright hopbudget authors.
#include "chain_support.h"

#include <grpcpp/grpcpp.h>

#include "gtest/gtest.h"
#include "hopbudget/client.h"

namespace hopbudget::e2e {
namespace {

std::unique_ptr<demo::Admin::Stub> AdminStub(const ChainProcess& p) {
  return demo::Admin::NewStub(grpc::CreateChannel(p.address(), grpc::InsecureChannelCredentials()));
}

constexpr absl::Duration kAdminDeadline = absl::Seconds(20);

}  // namespace

demo::Stats StatsOf(const ChainProcess& p) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + kAdminDeadline));
  demo::Stats s;
  grpc::Status st = AdminStub(p)->GetStats(&ctx, demo::GetStatsRequest(), &s);
  EXPECT_TRUE(st.ok()) << p.address() << ": GetStats: " << st.error_message();
  return st.ok() ? s : demo::Stats();
}

demo::Faults SetFaults(const ChainProcess& p, const demo::Faults& faults) {
  demo::SetFaultsRequest req;
  *req.mutable_faults() = faults;
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + kAdminDeadline));
  demo::Faults now;
  grpc::Status st = AdminStub(p)->SetFaults(&ctx, req, &now);
  EXPECT_TRUE(st.ok()) << p.address() << ": SetFaults: " << st.error_message();
  return st.ok() ? now : demo::Faults();
}

std::unique_ptr<demo::Gateway::Stub> GatewayStub(const ChainProcess& gateway, bool watch_health) {
  ClientOptions client;
  client.hop = "e2e";
  grpc::ChannelArguments args;
  if (watch_health) {
    args.SetServiceConfigJSON(
        R"({"loadBalancingConfig":[{"round_robin":{}}],"healthCheckConfig":{"serviceName":""}})");
  }
  return demo::Gateway::NewStub(
      *CreateChannel(gateway.address(), grpc::InsecureChannelCredentials(), client, args));
}

grpc::Status PlaceOneItem(demo::Gateway::Stub& gateway, const std::string& key,
                          absl::Duration budget, demo::OrderResult* reply, bool wait_for_ready) {
  demo::Order order;
  order.set_key(key);
  demo::Item* item = order.add_items();
  item->set_sku("sku-1");
  item->set_quantity(1);
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + budget));
  if (wait_for_ready) ctx.set_wait_for_ready(true);
  return gateway.PlaceOrder(&ctx, order, reply);
}

}  // namespace hopbudget::e2e
