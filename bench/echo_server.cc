// Copyright hopbudget authors.
//
// echo_server: the server process of the overhead benchmark. Serves
// hopbudget.echo.Relay/Call as a plain echo (no work, no relay) with the sync
// or the callback API, in one of the modes of bench_modes.h, on 127.0.0.1.
// Prints "PORT <n>" once it listens, then serves until SIGTERM or SIGINT.
//
//   echo_server --api=callback --mode=hopbudget [--port=0]
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <cstdio>
#include <memory>

#include "bench_modes.h"
#include "bench_util.h"
#include "echo/relay.grpc.pb.h"

ABSL_FLAG(std::string, api, "callback", "sync or callback: the gRPC server API");
ABSL_FLAG(std::string, mode, "plain", "what the server installs (bench_modes.h)");
ABSL_FLAG(int, port, 0, "port, 0..65535 (0 = any free port)");
HOPBUDGET_BENCH_DEADLOCK_DETECTION_FLAG();

namespace hopbudget {
namespace bench {
namespace {

class SyncEcho final : public echo::Relay::Service {
  grpc::Status Call(grpc::ServerContext* /*ctx*/, const echo::RelayRequest* req,
                    echo::RelayReply* reply) override {
    reply->set_payload(req->payload());
    return grpc::Status::OK;
  }
};

class CallbackEcho final : public echo::Relay::CallbackService {
  grpc::ServerUnaryReactor* Call(grpc::CallbackServerContext* ctx, const echo::RelayRequest* req,
                                 echo::RelayReply* reply) override {
    reply->set_payload(req->payload());
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

int Main(int argc, char** argv) {
  cli::ParseOrExit(argc, argv, "echo_server",
                   "echo_server: the benchmark's server; prints \"listening on PORT\".\n\n"
                   "  echo_server [--api=sync|callback] [--mode=MODE] [--port=0]");
  const std::string api = absl::GetFlag(FLAGS_api);
  const std::string mode = absl::GetFlag(FLAGS_mode);
  const int port_flag = absl::GetFlag(FLAGS_port);
  cli::ExitIfBad(
      "echo_server",
      cli::FirstError({ApplyDeadlockDetectionFlag(absl::GetFlag(FLAGS_deadlock_detection)),
                       cli::OneOf("api", api, {"sync", "callback"}), CheckMode(mode),
                       cli::InRange("port", port_flag, 0, 65535)}));

  // Block the stop signals before gRPC starts threads, so that they inherit
  // the mask and only sigwait() below receives them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  std::unique_ptr<grpc::Service> service;
  if (api == "sync") {
    service = std::make_unique<SyncEcho>();
  } else {
    service = std::make_unique<CallbackEcho>();
  }
  grpc::ServerBuilder builder;
  // A --port another process holds is refused, not shared (SO_REUSEPORT
  // would split the load between two servers).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  int port = 0;
  builder.AddListeningPort(absl::StrCat("127.0.0.1:", port_flag), grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(service.get());
  InstallServerMode(mode, builder, "echo", BenchServerPolicy());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) Die("could not start the server");
  std::printf("PORT %d\n", port);
  std::fflush(stdout);

  int sig = 0;
  sigwait(&stop, &sig);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server->Wait();
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace hopbudget

int main(int argc, char** argv) { return hopbudget::bench::Main(argc, argv); }
