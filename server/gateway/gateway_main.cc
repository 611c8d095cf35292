// Copyright hopbudget authors.
//
// gateway: the demo chain's client-facing edge. Takes the client's budget,
// caps it by its own per-request budget (--request-cap), and calls orders
// (PlaceOrder -> CreateOrder, GetOrder -> GetOrder, WatchOrder ->
// WatchOrder). In hopbudget mode the relayed watch has a stream idle budget
// (--stream-idle, 500 ms), longer than orders' (300 ms): a silent ledger is
// cut at orders, the hop that sees the silence, and the gateway passes that
// attribution on; the gateway's own budget cuts only a silent orders.
//
//   gateway --port=0 --orders=127.0.0.1:PORT [--mode=baseline --baseline-timeout=1s]
#include <atomic>
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/cli/cli_flags.h"
#include "demo/demo.grpc.pb.h"
#include "hopbudget/client.h"
#include "server/common/callback_call.h"
#include "server/common/demo_server.h"
#include "server/common/service_flag_defs.h"

HOPBUDGET_DEMO_DEFINE_COMMON_FLAGS("gateway", absl::Seconds(2), absl::ZeroDuration());
ABSL_FLAG(std::string, orders, "", "orders service HOST:PORT (required)");
ABSL_FLAG(absl::Duration, stream_idle, absl::Milliseconds(500),
          "hopbudget mode: most silence allowed on orders' WatchOrder stream before the "
          "gateway cuts it (DEADLINE_EXCEEDED, source idle); longer than orders' "
          "--stream-idle, as budgets nest (0 = no idle budget)");

namespace hopbudget::demo {
namespace {

class GatewayService final : public Gateway::Service {
 public:
  GatewayService(DemoProcess& process, std::unique_ptr<Orders::Stub> orders)
      : process_(process), orders_(std::move(orders)) {
    if (process_.mode() == Mode::kHopbudget) {
      // PlaceOrder, the hot path, on the callback API: no thread waits for
      // orders on a call's behalf (callback_call.h). The baseline stays a
      // sync service, as naive services are.
      MarkMethodCallback(DemoMethodIndex("Gateway", "PlaceOrder"),
                         NewDemoCallHandler<PlaceOrderCall, Order, OrderResult>(*this));
    }
  }

  grpc::Status PlaceOrder(grpc::ServerContext* ctx, const Order* request,
                          OrderResult* reply) override {
    CallStart call = process_.Begin(*ctx);
    if (call.done) return call.status;
    Order order = WithKey(*request);
    std::unique_ptr<grpc::ClientContext> out = process_.outgoing().NewContext(*ctx);
    // Passed on unchanged: a DEADLINE_EXCEEDED keeps the attribution of the
    // hop where the budget fired.
    grpc::Status status = orders_->CreateOrder(out.get(), order, reply);
    Log(order, status);
    return status;
  }

  // A read of a committed order, through orders (which hedges it across
  // the ledger's replicas in hopbudget mode).
  grpc::Status GetOrder(grpc::ServerContext* ctx, const OrderKey* request,
                        OrderResult* reply) override {
    CallStart call = process_.Begin(*ctx);
    if (call.done) return call.status;
    std::unique_ptr<grpc::ClientContext> out = process_.outgoing().NewContext(*ctx);
    return orders_->GetOrder(out.get(), *request, reply);
  }

  // The watch of an order, through orders (hopbudget mode: under the
  // orders channel's stream idle budget).
  grpc::Status WatchOrder(grpc::ServerContext* ctx, const OrderKey* request,
                          grpc::ServerWriter<OrderStatus>* writer) override {
    CallStart call = process_.Begin(*ctx);
    if (call.done) return call.status;
    return process_.RelayWatchOrder(*ctx, *request, *writer, [&](grpc::ClientContext* out) {
      return orders_->WatchOrder(out, *request);
    });
  }

 private:
  // PlaceOrder in hopbudget mode: as the sync handler above, waiting on
  // nothing but gRPC.
  class PlaceOrderCall final : public DemoServiceCall<GatewayService, Order, OrderResult> {
   public:
    PlaceOrderCall(GatewayService& service, grpc::CallbackServerContext* ctx, const Order* request,
                   OrderResult* reply)
        : DemoServiceCall(service, service.process_, ctx, request, reply) {}

   private:
    void Work() override {
      order_ = service_.WithKey(*request_);
      out_ = process().outgoing().NewContext(*ctx());
      service_.orders_->async()->CreateOrder(out_.get(), &order_, reply_,
                                             [this](grpc::Status status) {
                                               service_.Log(order_, status);
                                               Answer(std::move(status));
                                             });
    }

    Order order_;
    std::unique_ptr<grpc::ClientContext> out_;
  };

  // An order without a key gets one here, so retries below are idempotent.
  Order WithKey(const Order& request) {
    Order order = request;
    if (order.key().empty()) {
      order.set_key(absl::StrCat("gw-", absl::ToUnixMicros(absl::Now()), "-", ++next_key_));
    }
    return order;
  }

  void Log(const Order& order, const grpc::Status& status) const {
    if (process_.flags().verbose) {
      std::cerr << "gateway: " << order.key() << " -> " << status.error_code() << " "
                << status.error_message() << "\n";
    }
  }

  DemoProcess& process_;
  std::unique_ptr<Orders::Stub> orders_;
  std::atomic<int64_t> next_key_{0};
};

int Main(int argc, char** argv) {
  BlockShutdownSignals();
  cli::ParseOrExit(argc, argv, "gateway",
                   "gateway: the demo chain's client-facing edge; caps each client's "
                   "budget by --request-cap and calls orders.\n\n"
                   "  gateway --orders=HOST:PORT [--port=0] [--mode=hopbudget|baseline]");
  const std::string orders_target = absl::GetFlag(FLAGS_orders);
  const absl::Duration stream_idle = absl::GetFlag(FLAGS_stream_idle);
  CommonFlags common = CommonFlagsFromCommandLine();
  FaultConfig faults;
  cli::ExitIfBad("gateway", cli::FirstError({cli::Required("orders", orders_target),
                                             cli::NonNegative("stream-idle", stream_idle)}));
  if (absl::Status t = ValidateTarget(orders_target); !t.ok()) {
    cli::ExitIfBad("gateway", absl::InvalidArgumentError(
                                  absl::StrCat("--orders=", orders_target, ": ", t.message())));
  }
  cli::ExitIfBad("gateway", FinishCommonFlags(&common, &faults));
  cli::ExitIfBad("gateway", CheckFaultsSupported(faults, FaultSupport(), common.name));
  std::shared_ptr<grpc::Channel> channel;
  if (common.mode == Mode::kHopbudget) {
    ClientOptions options;
    options.hop = common.name;
    if (common.fail_fast_without_backend) options.backend_wait = BackendWait::kFailFast;
    if (stream_idle > absl::ZeroDuration()) options.stream_idle_budget = stream_idle;
    auto c = CreateChannel(orders_target, grpc::InsecureChannelCredentials(), options,
                           DownstreamChannelArguments());
    if (!c.ok()) {
      std::cerr << "gateway: " << c.status().message() << "\n";
      return 2;
    }
    channel = *std::move(c);
  } else {
    channel = grpc::CreateCustomChannel(orders_target, grpc::InsecureChannelCredentials(),
                                        DownstreamChannelArguments());
  }
  DemoProcess process(common, faults);
  GatewayService service(process, Orders::NewStub(channel));
  return process.Serve({&service}, nullptr);
}

}  // namespace
}  // namespace hopbudget::demo

int main(int argc, char** argv) { return hopbudget::demo::Main(argc, argv); }
