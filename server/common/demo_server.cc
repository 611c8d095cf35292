// Copyright hopbudget authors.
#include "demo_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/resource_quota.h>
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <iostream>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "hopbudget/attribution.h"
#include "hopbudget/server.h"
#include "hopbudget/shield_grpc.h"

#include "hopbudget/http_exporter.h"

namespace hopbudget::demo {

absl::string_view ModeName(Mode mode) {
  return mode == Mode::kHopbudget ? "hopbudget" : "baseline";
}

absl::StatusOr<Mode> ParseMode(absl::string_view text) {
  if (text == "hopbudget") return Mode::kHopbudget;
  if (text == "baseline") return Mode::kBaseline;
  return absl::InvalidArgumentError(
      absl::StrCat("bad mode \"", text, "\" (hopbudget or baseline)"));
}

void RegisterCommonFlags(FlagSet& flags, CommonFlags* c) {
  flags.String("name", &c->name, "hop name in metrics, attribution and the ready line");
  flags.String("host", &c->host, "address to listen on (gRPC and HTTP)");
  flags.Int("port", &c->port, "gRPC port (0 = any free port)", 0, 65535);
  flags.Int("metrics-port", &c->metrics_port, "HTTP port of /metrics and /deadlinez (0 = any)",
            0, 65535);
  flags.String("mode", &c->mode_text,
               "hopbudget (interceptors, derived deadlines) or baseline (constant timeouts)");
  flags.Int64("seed", &c->seed, "seed of the fault injector (same seed, same faults)");
  flags.String("latency", &c->latency,
               "added latency: none, fixed:100ms, uniform:50ms-200ms, exp:100ms");
  flags.Probability("error-rate", &c->error_rate, "probability of answering UNAVAILABLE");
  flags.Probability("hang-rate", &c->hang_rate,
                    "probability of never answering (until the call is cancelled)");
  flags.Int("hang-next", &c->hang_next, "the next N calls hang");
  flags.Duration("slow-commit", &c->slow_commit, "ledger: each commit takes this long first");
  flags.Duration("request-cap", &c->request_cap, "hopbudget mode: most time per request");
  flags.Duration("attempt-cap", &c->attempt_cap,
                 "hopbudget mode: most time per downstream attempt (0 = none)");
  flags.Duration("hop-reserve", &c->hop_reserve,
                 "hopbudget mode: time kept back from each downstream call");
  flags.Duration("min-budget", &c->min_budget,
                 "hopbudget mode: below this a call is refused / not started");
  flags.Duration("baseline-timeout", &c->baseline_timeout,
                 "baseline mode: constant timeout of every outgoing call (per attempt)");
  flags.Duration("lame-duck", &c->lame_duck,
                 "on SIGTERM: how long to report NOT_SERVING, still serving, before shutting "
                 "down (0 = shut down at once)");
  flags.Duration("shutdown-grace", &c->shutdown_grace,
                 "on SIGTERM: how long running calls and shielded commits may finish");
  flags.Int("max-threads", &c->max_threads,
            "most gRPC server threads; a call beyond them is answered RESOURCE_EXHAUSTED", 4,
            100000);
  flags.Bool("verbose", &c->verbose, "log every call's outcome to stderr");
}

absl::Status FinishCommonFlags(CommonFlags* c, FaultConfig* faults) {
  if (absl::Status s = ValidateHopName(c->name); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--name: ", s.message()));
  }
  absl::StatusOr<Mode> mode = ParseMode(c->mode_text);
  if (!mode.ok()) return absl::InvalidArgumentError(absl::StrCat("--mode: ", mode.status().message()));
  c->mode = *mode;
  absl::StatusOr<LatencySpec> latency = ParseLatencySpec(c->latency);
  if (!latency.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--latency: ", latency.status().message()));
  }
  faults->latency = *latency;
  faults->error_rate = c->error_rate;
  faults->hang_rate = c->hang_rate;
  faults->hang_next = c->hang_next;
  faults->slow_commit = c->slow_commit;
  if (absl::Status s = ValidateFaultConfig(*faults); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("faults: ", s.message()));
  }
  if (c->request_cap <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--request-cap must be > 0");
  }
  if (c->baseline_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--baseline-timeout must be > 0");
  }
  if (c->mode == Mode::kHopbudget) {
    if (absl::Status s = ValidatePolicy(PolicyOf(*c)); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("policy flags: ", s.message()));
    }
  }
  return absl::OkStatus();
}

BudgetPolicy PolicyOf(const CommonFlags& c) {
  BudgetPolicy p;
  p.request_cap = c.request_cap;
  p.attempt_cap = c.attempt_cap > absl::ZeroDuration() ? c.attempt_cap : absl::InfiniteDuration();
  p.hop_reserve = c.hop_reserve;
  p.min_attempt_budget = c.min_budget;
  return p;
}

void BlockShutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

Faults FaultsToProto(const FaultConfig& c) {
  Faults f;
  f.set_latency(FormatLatencySpec(c.latency));
  f.set_error_rate(c.error_rate);
  f.set_hang_rate(c.hang_rate);
  f.set_hang_next(c.hang_next);
  f.set_slow_commit_ms(absl::ToInt64Milliseconds(c.slow_commit));
  return f;
}

absl::StatusOr<FaultConfig> FaultsFromProto(const Faults& f) {
  FaultConfig c;
  absl::StatusOr<LatencySpec> latency = ParseLatencySpec(f.latency());
  if (!latency.ok()) return latency.status();
  c.latency = *latency;
  c.error_rate = f.error_rate();
  c.hang_rate = f.hang_rate();
  c.hang_next = f.hang_next();
  if (f.slow_commit_ms() < 0) return absl::InvalidArgumentError("slow_commit_ms < 0");
  c.slow_commit = absl::Milliseconds(f.slow_commit_ms());
  if (absl::Status s = ValidateFaultConfig(c); !s.ok()) return s;
  return c;
}

class DemoProcess::AdminImpl final : public Admin::Service {
 public:
  explicit AdminImpl(DemoProcess& p) : p_(p) {}
  grpc::Status SetFaults(grpc::ServerContext*, const SetFaultsRequest* req, Faults* resp) override {
    absl::StatusOr<FaultConfig> c = FaultsFromProto(req->faults());
    if (!c.ok()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(c.status().message()));
    if (absl::Status s = p_.faults_.Set(*c); !s.ok()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(s.message()));
    }
    *resp = FaultsToProto(p_.faults_.config());
    if (p_.common_.verbose) std::cerr << p_.common_.name << ": faults " << resp->ShortDebugString() << "\n";
    return grpc::Status::OK;
  }
  grpc::Status GetFaults(grpc::ServerContext*, const GetStatsRequest*, Faults* resp) override {
    *resp = FaultsToProto(p_.faults_.config());
    return grpc::Status::OK;
  }
  grpc::Status GetStats(grpc::ServerContext*, const GetStatsRequest*, Stats* resp) override {
    *resp = p_.StatsProto();
    return grpc::Status::OK;
  }
  grpc::Status ResetStats(grpc::ServerContext*, const GetStatsRequest*, Stats* resp) override {
    p_.ResetStats();
    *resp = p_.StatsProto();
    return grpc::Status::OK;
  }

 private:
  DemoProcess& p_;
};

DemoProcess::DemoProcess(CommonFlags common, const FaultConfig& faults)
    : common_(std::move(common)),
      faults_(static_cast<uint64_t>(common_.seed), faults),
      admin_(std::make_unique<AdminImpl>(*this)) {}

DemoProcess::~DemoProcess() = default;

namespace {

// The baseline's retry loop marks its retries with this (demo only).
constexpr char kBaselineAttemptHeader[] = "x-demo-previous-attempts";

std::string MetadataValue(const grpc::ServerContext& ctx, const char* key) {
  auto it = ctx.client_metadata().find(key);
  if (it == ctx.client_metadata().end()) return "";
  return std::string(it->second.data(), it->second.size());
}

// Past the gRPC deadline of the call (the sync API may tell IsCancelled()
// a little later).
bool PastDeadline(const grpc::ServerContext& ctx) {
  return std::chrono::system_clock::now() > ctx.deadline();
}

// What a handler answers when it stopped because its call ended: never sent
// to a caller that left, but DEADLINE_EXCEEDED lets hopbudget's interceptor
// attribute and count an expiry as one.
grpc::Status StoppedStatus(const grpc::ServerContext& ctx) {
  const InboundBudget* budget = InboundBudget::Of(ctx);
  const bool expired = (budget != nullptr && budget->remaining() <= absl::ZeroDuration()) ||
                       PastDeadline(ctx);
  return expired ? grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "expired during work")
                 : grpc::Status(grpc::StatusCode::CANCELLED, "cancelled during work");
}

}  // namespace

bool DemoProcess::SleepUnlessCancelled(const grpc::ServerContext& ctx, absl::Duration d) {
  const absl::Time end = absl::Now() + d;
  // Stop when gRPC cancels the call (its deadline, or the caller's cancel),
  // not at our own reading of the deadline: answering first would race the
  // caller's timer, and the caller should see its own budget fire. The
  // grace only guards against a cancel that never comes.
  const absl::Time give_up = absl::FromChrono(ctx.deadline()) + absl::Milliseconds(250);
  while (true) {
    if (ctx.IsCancelled() || absl::Now() > give_up) return false;
    const absl::Duration left = end - absl::Now();
    if (left <= absl::ZeroDuration()) return true;
    // The sync API has no cancel callback: poll, at the granularity of the
    // shield's own wait (shield_grpc.h).
    absl::SleepFor(std::min(left, absl::Milliseconds(2)));
  }
}

CallStart DemoProcess::Begin(grpc::ServerContext& ctx) {
  CallStart start;
  const InboundBudget* budget = InboundBudget::Of(ctx);
  if (budget != nullptr && budget->refused()) {
    // hopbudget already answered DEADLINE_EXCEEDED (arrived-expired): no work.
    start.done = true;
    start.status = grpc::Status::CANCELLED;
    return start;
  }
  start.work = accounting_.Begin(ParseClientDeadline(MetadataValue(ctx, kClientDeadlineHeader)));
  // Checked after Begin(): once Serve() saw no work in flight while
  // draining, no call does any (see Serve).
  if (draining_.load()) {
    start.done = true;
    start.status = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                absl::StrCat(common_.name, " is shutting down"));
    return start;
  }
  if (!MetadataValue(ctx, "grpc-previous-rpc-attempts").empty() ||
      !MetadataValue(ctx, kBaselineAttemptHeader).empty()) {
    retries_received_.fetch_add(1);
  }

  const FaultDecision d = faults_.Decide();
  if (d.latency > absl::ZeroDuration() && !SleepUnlessCancelled(ctx, d.latency)) {
    start.done = true;
    start.status = StoppedStatus(ctx);
    return start;
  }
  if (d.action == FaultAction::kError) {
    faults_injected_.fetch_add(1);
    start.done = true;
    start.status = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                absl::StrCat("injected fault at ", common_.name));
    return start;
  }
  if (d.action == FaultAction::kHang) {
    faults_injected_.fetch_add(1);
    if (common_.verbose) std::cerr << common_.name << ": call hangs until cancelled\n";
    SleepUnlessCancelled(ctx, absl::InfiniteDuration());
    start.done = true;
    start.status = StoppedStatus(ctx);
    return start;
  }
  return start;
}

std::unique_ptr<grpc::ClientContext> DemoProcess::NewOutgoingContext(
    const grpc::ServerContext& inbound) {
  if (common_.mode == Mode::kBaseline) return NewBaselineContext(inbound, 0);
  std::unique_ptr<grpc::ClientContext> out = NewDownstreamContext(inbound);
  ForwardDemoHeader(inbound, *out);
  return out;
}

void DemoProcess::ForwardDemoHeader(const grpc::ServerContext& inbound,
                                    grpc::ClientContext& out) const {
  const std::string deadline = MetadataValue(inbound, kClientDeadlineHeader);
  if (!deadline.empty()) out.AddMetadata(kClientDeadlineHeader, deadline);
}

std::unique_ptr<grpc::ClientContext> DemoProcess::NewBaselineContext(
    const grpc::ServerContext& inbound, int previous_attempts) {
  auto out = std::make_unique<grpc::ClientContext>();
  out->set_deadline(absl::ToChronoTime(absl::Now() + common_.baseline_timeout));
  const std::string deadline = MetadataValue(inbound, kClientDeadlineHeader);
  if (!deadline.empty()) out->AddMetadata(kClientDeadlineHeader, deadline);
  if (previous_attempts > 0) {
    // grpc-* keys are reserved to gRPC itself: the baseline says it here.
    out->AddMetadata(kBaselineAttemptHeader, absl::StrCat(previous_attempts));
  }
  return out;
}

Stats DemoProcess::StatsProto() const {
  const AccountingSnapshot a = accounting_.Snapshot();
  Stats s;
  s.set_hop(common_.name);
  s.set_mode(std::string(ModeName(common_.mode)));
  s.set_calls(a.calls);
  s.set_calls_started_after_deadline(a.started_after_deadline);
  s.set_work_after_deadline_ms(absl::ToDoubleMilliseconds(a.work_after_deadline));
  s.set_retries_received(retries_received_.load());
  s.set_commits(commits_.load());
  s.set_replays(replays_.load());
  s.set_in_flight(a.in_flight);
  s.set_last_end_unix_us(a.last_end == absl::InfinitePast() ? 0 : absl::ToUnixMicros(a.last_end));
  s.set_commits_stopped(commits_stopped_.load());
  s.set_faults_injected(faults_injected_.load());
  *s.mutable_faults() = FaultsToProto(faults_.config());
  return s;
}

void DemoProcess::ResetStats() {
  accounting_.Reset();
  retries_received_ = 0;
  commits_ = 0;
  replays_ = 0;
  commits_stopped_ = 0;
  faults_injected_ = 0;
}

std::string DemoProcess::ExtraMetrics() const {
  const AccountingSnapshot a = accounting_.Snapshot();
  const std::string labels =
      absl::StrCat("{hop=\"", common_.name, "\",mode=\"", ModeName(common_.mode), "\"}");
  std::string out;
  absl::StrAppend(&out,
                  "# HELP demo_calls_started_after_deadline_total Calls whose work started after "
                  "the client deadline (x-demo-client-deadline-us) had passed.\n"
                  "# TYPE demo_calls_started_after_deadline_total counter\n"
                  "demo_calls_started_after_deadline_total",
                  labels, " ", a.started_after_deadline, "\n");
  absl::StrAppend(&out,
                  "# HELP demo_work_after_deadline_seconds_total Handler work done after the "
                  "client deadline had passed.\n"
                  "# TYPE demo_work_after_deadline_seconds_total counter\n"
                  "demo_work_after_deadline_seconds_total",
                  labels, " ",
                  absl::StrFormat("%.6f", absl::ToDoubleSeconds(a.work_after_deadline)), "\n");
  absl::StrAppend(&out,
                  "# HELP demo_retries_received_total Calls that arrived as a retry "
                  "(grpc-previous-rpc-attempts).\n"
                  "# TYPE demo_retries_received_total counter\n"
                  "demo_retries_received_total",
                  labels, " ", retries_received_.load(), "\n");
  return out;
}

grpc::ChannelArguments DownstreamChannelArguments() {
  grpc::ChannelArguments args;
  args.SetServiceConfigJSON(
      R"({"loadBalancingConfig":[{"round_robin":{}}],"healthCheckConfig":{"serviceName":""}})");
  return args;
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

int DemoProcess::Serve(const std::vector<grpc::Service*>& services, Shield* shield) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  ApplyServerTransportPolicy(builder);
  // The sync API runs each call on a thread of its own: without a bound a
  // stalled downstream (a partition, a hang) grows threads without limit.
  grpc::ResourceQuota quota(absl::StrCat(common_.name, "-threads"));
  quota.SetMaxThreads(common_.max_threads);
  builder.SetResourceQuota(quota);
  int port = 0;
  const std::string address = absl::StrCat(common_.host, ":", common_.port);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  for (grpc::Service* s : services) builder.RegisterService(s);
  builder.RegisterService(admin_.get());
  if (common_.mode == Mode::kHopbudget) {
    ServerOptions options;
    options.hop = common_.name;
    options.policy = PolicyOf(common_);
    auto factory = MakeServerInterceptorFactory(options);
    if (!factory.ok()) {
      std::cerr << common_.name << ": " << factory.status().message() << "\n";
      return 2;
    }
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
    creators.push_back(*std::move(factory));
    builder.experimental().SetInterceptorCreators(std::move(creators));
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::cerr << common_.name << ": cannot listen on " << address << ": "
              << ListenProblem(common_.host, common_.port) << "\n";
    return 1;
  }
  int http_port = 0;
  HttpExporterOptions http;
  http.host = common_.host;
  http.port = common_.metrics_port;
  http.hop = common_.name;
  http.extra_metrics = [this] { return ExtraMetrics(); };
  absl::StatusOr<std::unique_ptr<HttpExporter>> exporter = HttpExporter::Start(http);
  if (!exporter.ok()) {
    std::cerr << common_.name << ": metrics: " << exporter.status().message() << "\n";
    server->Shutdown();
    return 1;
  }
  http_port = (*exporter)->port();
  std::cout << common_.name << " listening on " << port << " metrics on " << http_port
            << std::endl;
  std::cerr << common_.name << ": mode " << ModeName(common_.mode) << "\n";

  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  int sig = 0;
  sigwait(&set, &sig);
  std::cerr << common_.name << ": signal " << sig << ", shutting down\n";
  if (common_.lame_duck > absl::ZeroDuration()) {
    // Shutdown() answers every call that arrives after it began with
    // CANCELLED (gRPC 1.51 zombifies it; grpc/grpc#41785), and callers keep
    // sending until its GOAWAY reaches them. So first say NOT_SERVING and
    // keep serving: callers that watch health (DownstreamChannelArguments)
    // stop sending within a round trip and fail fast with UNAVAILABLE; a
    // call that still arrives is served as usual.
    server->GetHealthCheckService()->SetServingStatus(false);
    absl::SleepFor(common_.lame_duck);
  }
  // From here on a call that reaches a handler is answered UNAVAILABLE
  // (Begin()); calls already in handlers have the grace to finish. The
  // callers' health Watch streams never end on their own (gRPC 1.51's health
  // service keeps them open through its Shutdown()) and would hold
  // Shutdown() for the whole grace: once no handler is left, they are all
  // that is left, and they are cancelled. (With no call in flight the
  // cancel may come a moment before Shutdown() begins: it then only drops
  // connections whose callers were told NOT_SERVING and do not send.)
  draining_.store(true);
  std::thread closer([this, &server] {
    if (accounting_.AwaitIdle(common_.shutdown_grace)) {
      grpc_server_cancel_all_calls(server->c_server());
    }
  });
  if (shield != nullptr) {
    DrainReport r = ShutdownAndDrain(*server, *shield, common_.shutdown_grace);
    std::cerr << common_.name << ": drained shield in " << absl::FormatDuration(r.waited)
              << ": completed " << r.completed << ", failed " << r.failed << ", exceeded bound "
              << r.exceeded_bound << ", still running " << r.still_running.size() << "\n";
  } else {
    server->Shutdown(absl::ToChronoTime(absl::Now() + common_.shutdown_grace));
  }
  closer.join();
  server->Wait();
  exporter->reset();
  return 0;
}

}  // namespace hopbudget::demo
