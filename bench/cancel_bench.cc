// Copyright hopbudget authors.
//
// cancel_bench: time from the client's TryCancel() to the last hop's handler
// seeing the cancellation, across three hops: client -> A -> B -> C. All
// three are real gRPC servers in this process (callback API, on 127.0.0.1,
// hopbudget's server interceptor installed); A and B relay with a context from
// NewDownstreamContext() over a hopbudget channel, so the cancel travels as
// gRPC cancellation propagation (RST_STREAM hop by hop); C parks the call and
// notes the time in its reactor's OnCancel(). Calls are made one at a time:
// the client waits until C holds the call, cancels, and waits for OnCancel.
// Times are on the steady clock (both ends are in this process).
//
//   cancel_bench [--calls=500]
#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "bench_modes.h"
#include "bench_util.h"
#include "echo/relay.grpc.pb.h"
#include "hopbudget/client.h"
#include "hopbudget/server.h"

ABSL_FLAG(int, calls, 500, "calls per measurement, 1..1000000");

namespace hopbudget {
namespace bench {
namespace {

// What the last hop reports for the call in progress.
struct Probe {
  absl::Notification arrived;
  absl::Notification cancelled;
  double cancelled_at = 0;  // MonoSeconds(), written before `cancelled` is notified
};

class Sink {
 public:
  void Set(std::shared_ptr<Probe> p) {
    absl::MutexLock lock(&mu_);
    probe_ = std::move(p);
  }
  std::shared_ptr<Probe> Get() {
    absl::MutexLock lock(&mu_);
    return probe_;
  }

 private:
  absl::Mutex mu_;
  std::shared_ptr<Probe> probe_ ABSL_GUARDED_BY(mu_);
};

class LastHopReactor : public grpc::ServerUnaryReactor {
 public:
  explicit LastHopReactor(std::shared_ptr<Probe> probe) : probe_(std::move(probe)) {
    if (probe_ != nullptr) probe_->arrived.Notify();
  }
  void OnCancel() override {
    if (probe_ != nullptr) {
      probe_->cancelled_at = MonoSeconds();
      probe_->cancelled.Notify();
    }
    Finish(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
  }
  void OnDone() override { delete this; }

 private:
  std::shared_ptr<Probe> probe_;  // shared: a late OnCancel never writes into freed memory
};

class LastHop final : public echo::Relay::CallbackService {
 public:
  explicit LastHop(Sink* sink) : sink_(sink) {}
  grpc::ServerUnaryReactor* Call(grpc::CallbackServerContext* /*ctx*/,
                                 const echo::RelayRequest* /*req*/,
                                 echo::RelayReply* /*reply*/) override {
    return new LastHopReactor(sink_->Get());
  }

 private:
  Sink* sink_;
};

// Relays to the next hop without blocking a thread: the downstream call's
// completion finishes the inbound call.
class RelayHop final : public echo::Relay::CallbackService {
 public:
  void SetNext(std::shared_ptr<grpc::Channel> channel) { next_ = echo::Relay::NewStub(channel); }
  grpc::ServerUnaryReactor* Call(grpc::CallbackServerContext* ctx, const echo::RelayRequest* req,
                                 echo::RelayReply* reply) override {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    std::shared_ptr<grpc::ClientContext> down = NewDownstreamContext(*ctx);
    next_->async()->Call(down.get(), req, reply,
                         [reactor, down](grpc::Status s) { reactor->Finish(s); });
    return reactor;
  }

 private:
  std::unique_ptr<echo::Relay::Stub> next_;
};

struct Hop {
  Hop(grpc::Service* service, const std::string& name) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service);
    InstallServerMode("hopbudget", builder, name, BenchServerPolicy());
    server = builder.BuildAndStart();
    if (server == nullptr) Die("could not start a server");
  }
  ~Hop() {
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server->Wait();
  }
  std::string target() const { return absl::StrCat("127.0.0.1:", port); }
  int port = 0;
  std::unique_ptr<grpc::Server> server;
};

std::shared_ptr<grpc::Channel> HopbudgetChannel(const std::string& target, const std::string& hop) {
  ClientOptions options;
  options.hop = hop;
  auto channel = CreateChannel(target, grpc::InsecureChannelCredentials(), options);
  if (!channel.ok()) Die(channel.status().ToString());
  return *channel;
}

int Main(int argc, char** argv) {
  cli::ParseOrExit(argc, argv, "cancel_bench",
                   "cancel_bench: how fast a cancel reaches the callee, with and without "
                   "hopbudget.\n\n  cancel_bench [--calls=500]");
  const int calls = absl::GetFlag(FLAGS_calls);
  cli::ExitIfBad("cancel_bench", cli::InRange("calls", calls, 1, 1000000));

  Sink sink;
  LastHop c_service(&sink);
  RelayHop a_service, b_service;
  Hop c(&c_service, "C");
  Hop b(&b_service, "B");
  Hop a(&a_service, "A");
  b_service.SetNext(HopbudgetChannel(c.target(), "B"));
  a_service.SetNext(HopbudgetChannel(b.target(), "A"));
  auto stub = echo::Relay::NewStub(HopbudgetChannel(a.target(), "client"));

  std::vector<double> ms;
  int lost = 0;
  const int warmup = 20;
  for (int i = 0; i < warmup + calls; ++i) {
    auto probe_ptr = std::make_shared<Probe>();
    Probe& probe = *probe_ptr;
    sink.Set(probe_ptr);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    echo::RelayRequest req;
    req.set_payload("x");
    echo::RelayReply reply;
    absl::Notification done;
    stub->async()->Call(&ctx, &req, &reply, [&done](grpc::Status) { done.Notify(); });
    if (!probe.arrived.WaitForNotificationWithTimeout(absl::Seconds(10))) {
      ctx.TryCancel();
      done.WaitForNotification();
      sink.Set(nullptr);
      lost++;
      continue;
    }
    const double t0 = MonoSeconds();
    ctx.TryCancel();
    const bool seen = probe.cancelled.WaitForNotificationWithTimeout(absl::Seconds(10));
    done.WaitForNotification();
    sink.Set(nullptr);
    if (!seen) {
      lost++;
      continue;
    }
    if (i >= warmup) ms.push_back((probe.cancelled_at - t0) * 1e3);
  }
  // Lost calls count as infinitely late in the p99 the target is judged on.
  const double p99_all = QuantileCountingFailures(ms, lost, 0.99);
  const Stats s = Summarize(ms);
  std::printf(
      "Cancellation across three hops (client -> A -> B -> C, in-process servers, "
      "callback API)\n\n");
  std::printf("| calls | p50 (ms) | p90 (ms) | p99 (ms) | max (ms) | lost |\n");
  std::printf("| --- | --- | --- | --- | --- | --- |\n");
  std::printf("| %zu | %s | %s | %s | %s | %d |\n\n", s.n, Fixed(s.p50).c_str(),
              Fixed(s.p90).c_str(), Fixed(s.p99).c_str(), Fixed(s.max).c_str(), lost);
  std::printf(
      "RESULT bench=cancel hops=3 calls=%zu p50_ms=%.4f p90_ms=%.4f p99_ms=%.4f "
      "max_ms=%.4f lost=%d p99_all_ms=%.4f\n",
      s.n, s.p50, s.p90, s.p99, s.max, lost, p99_all);
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace hopbudget

int main(int argc, char** argv) { return hopbudget::bench::Main(argc, argv); }
