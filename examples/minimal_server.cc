// Copyright hopbudget authors.
//
// minimal_server: one hop of a chain, hopbudget dropped into a sync gRPC
// service: a Hop, its server interceptor, and a handler that returns Refusal()
// first, then calls --next through NewDownstreamContext() on the Hop's
// channel or, at the last hop, sleeps --work within its budget. On loopback:
//
//   hopbudget_minimal_server --port=0 --hop=c --work=20ms          # listening on PC
//   hopbudget_minimal_server --port=0 --hop=b --next=localhost:PC  # listening on PB
//   hopbudget_minimal_server --port=0 --hop=a --next=localhost:PB  # listening on PA
//   hopbudget_minimal_client --target=localhost:PA --budget=500ms  # OK; 10ms: where it fired
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "echo/relay.grpc.pb.h"
#include "hopbudget/client.h"
#include "hopbudget/hop.h"
#include "hopbudget/server.h"

ABSL_FLAG(int, port, 50051, "port to listen on (0: any free port, printed)");
ABSL_FLAG(std::string, hop, "relay", "this hop's name, in attributions and metrics");
ABSL_FLAG(std::string, next, "", "the next hop, HOST:PORT (empty: this is the last hop)");
ABSL_FLAG(absl::Duration, cap, absl::Seconds(2), "most time one request may take at this hop");
ABSL_FLAG(absl::Duration, work, absl::Milliseconds(10), "the last hop's work per call");

using hopbudget::echo::Relay;

struct RelayHop final : Relay::Service {
  std::unique_ptr<Relay::Stub> next;  // null: this is the last hop
  grpc::Status Call(grpc::ServerContext* ctx, const hopbudget::echo::RelayRequest* request,
                    hopbudget::echo::RelayReply* reply) override {
    if (auto refusal = hopbudget::Refusal(*ctx)) return *refusal;  // arrived with too little left
    if (next != nullptr) {  // its deadline: what is left of ours, less a reserve
      std::unique_ptr<grpc::ClientContext> call = hopbudget::NewDownstreamContext(*ctx);
      return next->Call(call.get(), *request, reply);  // pass the status through as it is
    }
    const hopbudget::InboundBudget* budget = hopbudget::InboundBudget::Of(*ctx);
    absl::SleepFor(std::min(absl::GetFlag(FLAGS_work), budget->remaining()));  // the work
    if (budget->remaining() > absl::ZeroDuration()) return grpc::Status::OK;
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "out of budget");  // attributed here
  }
};

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  auto fail = [](const absl::Status& s) {  // names the bad flag value, or the address
    std::cerr << "hopbudget_minimal_server: " << s << std::endl;
    return 1;
  };
  hopbudget::HopOptions options;  // one Hop per process, kept as long as the server
  options.name = absl::GetFlag(FLAGS_hop);
  options.defaults.budget.request_cap = absl::GetFlag(FLAGS_cap);
  absl::StatusOr<std::unique_ptr<hopbudget::Hop>> hop = hopbudget::Hop::Create(options);
  if (!hop.ok()) return fail(hop.status());
  RelayHop service;
  if (!absl::GetFlag(FLAGS_next).empty()) {
    auto channel = hopbudget::CreateChannel(**hop, absl::GetFlag(FLAGS_next),
                                            grpc::InsecureChannelCredentials());
    if (!channel.ok()) return fail(channel.status());
    service.next = Relay::NewStub(*channel);
  }
  grpc::ServerBuilder builder;
  if (absl::Status s = hopbudget::InstallServerInterceptor(**hop, builder); !s.ok()) return fail(s);
  // Let a Hop's channels keep their connections alive (a ping every 10 s).
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);  // a port in use is an error
  const std::string address = "127.0.0.1:" + std::to_string(absl::GetFlag(FLAGS_port));
  int port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) return fail(absl::UnavailableError("cannot listen on " + address));
  std::cout << "listening on " << port << std::endl;
  server->Wait();
}
