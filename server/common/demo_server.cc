// Copyright hopbudget authors.
#include "demo_server.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "google/protobuf/descriptor.h"
#include "hopbudget/advanced/wire.h"
#include "hopbudget/server.h"

namespace hopbudget::demo {

DemoProcess::DemoProcess(CommonFlags common, const FaultConfig& faults, FaultSupport support)
    : common_(std::move(common)),
      faults_(static_cast<uint64_t>(common_.seed), faults),
      stats_(common_.name, common_.mode, &accounting_, &faults_),
      admin_(&stats_, &faults_, AdminOptions{common_.name, common_.verbose, support}),
      outgoing_(common_.mode, common_.baseline_timeout, !common_.fail_fast_without_backend) {}

namespace {

absl::StatusOr<std::string> ReadServiceConfigFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("--service-config=", path, ": cannot open it"));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

std::vector<std::string> AdmittedMethods() {
  std::vector<std::string> methods;
  const google::protobuf::FileDescriptor* file = Order::descriptor()->file();
  for (int s = 0; s < file->service_count(); ++s) {
    const google::protobuf::ServiceDescriptor* service = file->service(s);
    if (service->name() == "Admin") continue;
    for (int m = 0; m < service->method_count(); ++m) {
      const google::protobuf::MethodDescriptor* method = service->method(m);
      if (method->client_streaming() || method->server_streaming()) continue;
      methods.push_back(absl::StrCat("/", service->full_name(), "/", method->name()));
    }
  }
  return methods;
}

grpc::Status RelayWatch(grpc::ClientContext& down, grpc::ClientReader<OrderStatus>& below,
                        grpc::ServerWriter<OrderStatus>& caller) {
  OrderStatus message;
  while (below.Read(&message)) {
    if (!caller.Write(message)) {
      down.TryCancel();
      // Finish() needs every message read.
      while (below.Read(&message)) {
      }
      break;
    }
  }
  return below.Finish();
}

grpc::Status CheckOrderKey(const std::string& key) {
  if (key.empty() || key.size() > 128) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "order key must be 1..128 bytes");
  }
  return grpc::Status::OK;
}

grpc::Status DemoProcess::RelayWatchOrder(
    const grpc::ServerContext& ctx, const OrderKey& request,
    grpc::ServerWriter<OrderStatus>& caller,
    const std::function<std::unique_ptr<grpc::ClientReader<OrderStatus>>(grpc::ClientContext*)>&
        open) {
  std::unique_ptr<grpc::ClientContext> out = outgoing_.NewStreamContext(ctx);
  std::unique_ptr<grpc::ClientReader<OrderStatus>> below = open(out.get());
  grpc::Status status = RelayWatch(*out, *below, caller);
  if (common_.verbose) {
    std::cerr << common_.name << ": watch " << request.key() << " -> " << status.error_code() << " "
              << status.error_message() << "\n";
  }
  return status;
}

namespace {

// Past the gRPC deadline of the call (the sync API may tell IsCancelled()
// a little later).
bool PastDeadline(const grpc::ServerContextBase& ctx) {
  return std::chrono::system_clock::now() > ctx.deadline();
}

}  // namespace

// Never sent to a caller that left, but DEADLINE_EXCEEDED lets hopbudget's
// interceptor attribute and count an expiry as one.
grpc::Status DemoProcess::StoppedStatus(const grpc::ServerContextBase& ctx) {
  const InboundBudget* budget = InboundBudget::Of(ctx);
  const bool expired =
      (budget != nullptr && budget->remaining() <= absl::ZeroDuration()) || PastDeadline(ctx);
  return expired ? grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "expired during work")
                 : grpc::Status(grpc::StatusCode::CANCELLED, "cancelled during work");
}

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

CallStart DemoProcess::Start(const grpc::ServerContextBase& ctx) {
  CallStart start;
  const InboundBudget* budget = InboundBudget::Of(ctx);
  if (budget != nullptr && budget->refused()) {
    // hopbudget already answered (DEADLINE_EXCEEDED arrived-expired or
    // cannot-finish, or a shed): no work.
    stats_.CountRefused();
    start.done = true;
    start.status = grpc::Status::CANCELLED;
    return start;
  }
  start.work = accounting_.Begin(ParseClientDeadline(InboundMetadata(ctx, kClientDeadlineHeader)));
  // Checked after Begin(): once Serve() saw no work in flight while
  // draining, no call does any (see Serve).
  if (draining_.load()) {
    start.done = true;
    start.status = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                absl::StrCat(common_.name, " is shutting down"));
    return start;
  }
  // A hopbudget server has grpc-previous-rpc-attempts back in its metadata;
  // a baseline one sees only hopbudget's own copy (wire.h).
  if (!InboundMetadata(ctx, "grpc-previous-rpc-attempts").empty() ||
      !InboundMetadata(ctx, kPreviousAttemptsHeader).empty() ||
      !InboundMetadata(ctx, kBaselineAttemptHeader).empty()) {
    stats_.CountRetryReceived();
  }
  const FaultDecision d = faults_.Decide();
  start.latency = d.latency;
  start.fault = d.action;
  return start;
}

void DemoProcess::AfterLatency(CallStart& start) {
  if (start.fault == FaultAction::kError) {
    stats_.CountFaultInjected();
    start.done = true;
    start.status = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                absl::StrCat("injected fault at ", common_.name));
  } else if (start.fault == FaultAction::kHang) {
    stats_.CountFaultInjected();
    if (common_.verbose) std::cerr << common_.name << ": call hangs until cancelled\n";
  }
}

CallStart DemoProcess::Begin(grpc::ServerContext& ctx) {
  CallStart start = Start(ctx);
  if (start.done) return start;
  if (start.latency > absl::ZeroDuration() && !SleepUnlessCancelled(ctx, start.latency)) {
    start.done = true;
    start.status = StoppedStatus(ctx);
    return start;
  }
  AfterLatency(start);
  if (start.done) return start;
  if (start.fault == FaultAction::kHang) {
    SleepUnlessCancelled(ctx, absl::InfiniteDuration());
    start.done = true;
    start.status = StoppedStatus(ctx);
  }
  return start;
}

absl::StatusOr<const Hop*> DemoProcess::LoadHop() {
  if (hop_ != nullptr) return hop_.get();
  if (common_.mode != Mode::kHopbudget || common_.service_config.empty()) return nullptr;
  absl::StatusOr<std::string> json = ReadServiceConfigFile(common_.service_config);
  if (!json.ok()) return json.status();
  HopOptions options;
  options.name = common_.name;
  options.defaults.budget = PolicyOf(common_);
  options.service_config = *std::move(json);
  absl::StatusOr<std::unique_ptr<Hop>> hop = Hop::Create(std::move(options));
  if (!hop.ok()) {
    return absl::Status(
        hop.status().code(),
        absl::StrCat("--service-config=", common_.service_config, ": ", hop.status().message()));
  }
  hop_ = *std::move(hop);
  return hop_.get();
}

int DemoProcess::Serve(const std::vector<grpc::Service*>& services, Shield* shield) {
  // A process-wide switch, so here, where a service's main runs its server,
  // not in the constructor a test may use in process.
  if (!common_.mutex_deadlock_detection) {
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  }
  ServerRunOptions run;
  run.name = common_.name;
  run.mode_name = std::string(ModeName(common_.mode));
  run.host = common_.host;
  run.port = common_.port;
  run.metrics_port = common_.metrics_port;
  run.max_threads = common_.max_threads;
  run.max_concurrent_streams = common_.max_concurrent_streams;
  if (common_.mode == Mode::kHopbudget) {
    run.interceptor_policy = PolicyOf(common_);
    absl::StatusOr<const Hop*> hop = LoadHop();
    if (!hop.ok()) {
      std::cerr << common_.name << ": " << hop.status().message() << "\n";
      return 2;
    }
    if (*hop != nullptr) {
      run.hop = hop_.get();
      // The Hop logs a line and counts the result of each reload.
      run.reload = [this] { (void)hop_->ReloadServiceConfigFile(common_.service_config); };
    }
    // The demo's handlers block, but for those on the callback API (the
    // gateway's PlaceOrder): kBlocking starts admitted calls on hopbudget's
    // own pool, right for both kinds.
    run.admission.enabled = common_.admission;
    run.admission.policy = AdmissionPolicyOf(common_);
    run.admission.handlers = HandlerThreads::kBlocking;
    run.admission.methods = AdmittedMethods();  // streams left out: see AdmittedMethods()
  }
  run.retry_policy = retry_policy_;
  run.peers = common_.peers;
  run.lame_duck = common_.lame_duck;
  run.shutdown_grace = common_.shutdown_grace;
  run.extra_metrics = [this] { return stats_.ExtraMetrics(); };
  run.begin_draining = [this] { draining_.store(true); };
  run.await_idle = [this](absl::Duration d) { return accounting_.AwaitIdle(d); };
  std::vector<grpc::Service*> all = services;
  all.push_back(&admin_);
  return RunServer(run, all, shield);
}

}  // namespace hopbudget::demo
