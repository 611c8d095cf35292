// Copyright hopbudget authors.
#include "server_runner.h"

#include <grpcpp/ext/channelz_service_plugin.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/resource_quota.h>
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <memory>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "hopbudget/advanced/http_exporter.h"
#include "hopbudget/advanced/shield_grpc.h"
#include "hopbudget/server.h"

namespace hopbudget::demo {

void BlockShutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void ApplyServerTransportPolicy(grpc::ServerBuilder& builder) {
  // gRPC sets SO_REUSEPORT on Linux by default: a second server started on
  // a port in use would share it, and the kernel would split new
  // connections between the two (a ledger on another database: split brain).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Permit the keepalive pings of hopbudget's channels (every 10 s, also
  // without calls: interceptors/grpc/channel_defaults.h). gRPC's default policy
  // answers pings more often than every 5 min (2 h without calls) with GOAWAY
  // too_many_pings. Half the client's interval, so a ping that arrives early
  // (timers, scheduling) is never a strike.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             kMinPingIntervalMs);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // The server's own keepalive (gRPC: every 2 h): a caller behind a dead
  // link is found within ~13 s and its calls are cancelled, which frees the
  // handler threads they hold.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, kServerKeepaliveTimeMs);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kServerKeepaliveTimeoutMs);
}

std::string ListenProblem(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string service = absl::StrCat(port);
  if (int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return absl::StrCat("cannot resolve ", host, ": ", gai_strerror(rc));
  }
  std::string problem = "gRPC could not bind it";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));  // as gRPC does
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0) {
      problem = errno == EADDRINUSE
                    ? "address already in use (another server listens there; this one will "
                      "not share the port)"
                    : std::strerror(errno);
      close(fd);
      break;
    }
    close(fd);
  }
  freeaddrinfo(found);
  return problem;
}

int RunServer(const ServerRunOptions& options, const std::vector<grpc::Service*>& services,
              Shield* shield) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  // grpc.channelz.v1.Channelz: the server's and its channels' live state
  // (calls started, succeeded, failed; sockets; last call time), for grpcdebug
  // or any channelz client. Channelz data is collected by gRPC core anyway
  // (GRPC_ARG_ENABLE_CHANNELZ defaults on); this only serves it.
  grpc::channelz::experimental::InitChannelzService();
  grpc::ServerBuilder builder;
  ApplyServerTransportPolicy(builder);
  // The sync API runs each call on a thread of its own: without a bound a
  // stalled downstream (a partition, a hang) grows threads without limit.
  grpc::ResourceQuota quota(absl::StrCat(options.name, "-threads"));
  quota.SetMaxThreads(options.max_threads);
  builder.SetResourceQuota(quota);
  // gRPC's sync server keeps at most MAX_POLLERS (default 2) threads waiting
  // for calls: a thread that finishes a call while two others wait exits, and
  // the next call that finds no waiting thread creates one. Under load that
  // is a thread created and destroyed per call per hop (1 100 a second at
  // 800 calls/s through the chain, measured with perf's sched_process_fork),
  // more CPU than the calls themselves. Threads that finish a call stay and
  // wait for the next instead; the quota above still bounds them.
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS,
                              options.max_threads);
  if (options.max_concurrent_streams > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_concurrent_streams);
  }
  int port = 0;
  const std::string address = absl::StrCat(options.host, ":", options.port);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  for (grpc::Service* s : services) builder.RegisterService(s);
  if (options.interceptor_policy.has_value()) {
    ServerOptions interceptor;
    interceptor.hop = options.name;
    interceptor.policy = *options.interceptor_policy;
    interceptor.admission = options.admission;
    auto factory = options.hop != nullptr
                       ? MakeServerInterceptorFactory(*options.hop, options.admission)
                       : MakeServerInterceptorFactory(interceptor);
    if (!factory.ok()) {
      std::cerr << options.name << ": " << factory.status().message() << "\n";
      return 2;
    }
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
    creators.push_back(*std::move(factory));
    builder.experimental().SetInterceptorCreators(std::move(creators));
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::cerr << options.name << ": cannot listen on " << address << ": "
              << ListenProblem(options.host, options.port) << "\n";
    return 1;
  }
  int http_port = 0;
  HttpExporterOptions http;
  http.host = options.host;
  http.port = options.metrics_port;
  http.hop = options.name;
  if (options.extra_metrics) http.extra_metrics = options.extra_metrics;
  http.policy = options.interceptor_policy;
  http.retry_policy = options.retry_policy;
  for (const auto& [name, url] : options.peers) http.peers.push_back({name, url});
  absl::StatusOr<std::unique_ptr<HttpExporter>> exporter = HttpExporter::Start(http);
  if (!exporter.ok()) {
    std::cerr << options.name << ": metrics: " << exporter.status().message() << "\n";
    server->Shutdown();
    return 1;
  }
  http_port = (*exporter)->port();
  std::cout << options.name << " listening on " << port << " metrics on " << http_port << std::endl;
  std::cerr << options.name << ": mode " << options.mode_name << "\n";

  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  int sig = 0;
  while (sigwait(&set, &sig) == 0 && sig == SIGHUP) {
    if (options.reload) {
      options.reload();
    } else {
      std::cerr << options.name << ": SIGHUP: no service config to re-read\n";
    }
  }
  std::cerr << options.name << ": signal " << sig << ", shutting down\n";
  if (options.lame_duck > absl::ZeroDuration()) {
    // Shutdown() answers every call that arrives after it began with
    // CANCELLED (gRPC 1.51 zombifies it; grpc/grpc#41785), and callers keep
    // sending until its GOAWAY reaches them. So first say NOT_SERVING and
    // keep serving: callers that watch health (DownstreamChannelArguments)
    // stop sending within a round trip and fail fast with UNAVAILABLE; a
    // call that still arrives is served as usual.
    server->GetHealthCheckService()->SetServingStatus(false);
    absl::SleepFor(options.lame_duck);
  }
  // From here on a call that reaches a handler is answered UNAVAILABLE
  // (Begin()); calls already in handlers have the grace to finish. The
  // callers' health Watch streams never end on their own (gRPC 1.51's health
  // service keeps them open through its Shutdown()) and would hold
  // Shutdown() for the whole grace: once no handler is left, they are all
  // that is left, and they are cancelled. (With no call in flight the
  // cancel may come a moment before Shutdown() begins: it then only drops
  // connections whose callers were told NOT_SERVING and do not send.)
  options.begin_draining();
  std::thread closer([&options, &server] {
    if (options.await_idle(options.shutdown_grace)) {
      grpc_server_cancel_all_calls(server->c_server());
    }
  });
  if (shield != nullptr) {
    DrainReport r = ShutdownAndDrain(*server, *shield, options.shutdown_grace);
    std::cerr << options.name << ": drained shield in " << absl::FormatDuration(r.waited)
              << ": completed " << r.completed << ", failed " << r.failed << ", exceeded bound "
              << r.exceeded_bound << ", still running " << r.still_running.size() << "\n";
  } else {
    server->Shutdown(absl::ToChronoTime(absl::Now() + options.shutdown_grace));
  }
  closer.join();
  server->Wait();
  exporter->reset();
  return 0;
}

}  // namespace hopbudget::demo
