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
#include <deque>
#include <memory>
#include <thread>
#include <utility>

#include "bench_modes.h"
#include "bench_util.h"
#include "echo/relay.grpc.pb.h"

ABSL_FLAG(std::string, api, "callback", "sync or callback: the gRPC server API");
ABSL_FLAG(std::string, mode, "plain", "what the server installs (bench_modes.h)");
ABSL_FLAG(int, port, 0, "port, 0..65535 (0 = any free port)");
ABSL_FLAG(std::string, answer, "echo",
          "echo (serve), error (the handler answers RESOURCE_EXHAUSTED at once), refuse "
          "(hopbudget refuses every call on arrival as cannot-finish; hopbudget modes only) or "
          "expired (serve; load_gen --answer=expired sends calls whose budget is spent, which "
          "hopbudget refuses on arrival; hopbudget modes only) or shed (hopbudget's admission, "
          "a limit of 1 call and no queue, holds each admitted call 200 ms and sheds the rest "
          "RESOURCE_EXHAUSTED; hopbudget modes only)");
HOPBUDGET_BENCH_DEADLOCK_DETECTION_FLAG();

namespace hopbudget {
namespace bench {
namespace {

// What a handler answers: OK with the echo, or an error of its own, or (a
// call hopbudget refused) nothing but returning.
grpc::Status Answer(const grpc::ServerContextBase& ctx, bool error, const echo::RelayRequest& req,
                    echo::RelayReply& reply) {
  const InboundBudget* budget = InboundBudget::Of(ctx);
  if (budget != nullptr && budget->refused()) return grpc::Status::CANCELLED;
  if (error) return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "echo: no room");
  reply.set_payload(req.payload());
  return grpc::Status::OK;
}

// --answer=shed: how long an admitted call holds admission's one place, so
// that nearly every call is shed (at most 5 a second are not).
constexpr absl::Duration kShedHold = absl::Milliseconds(200);

bool Admitted(const grpc::ServerContextBase& ctx) {
  const InboundBudget* budget = InboundBudget::Of(ctx);
  return budget == nullptr || !budget->refused();
}

class SyncEcho final : public echo::Relay::Service {
 public:
  SyncEcho(bool error, bool hold) : error_(error), hold_(hold) {}
  grpc::Status Call(grpc::ServerContext* ctx, const echo::RelayRequest* req,
                    echo::RelayReply* reply) override {
    if (hold_ && Admitted(*ctx)) absl::SleepFor(kShedHold);
    return Answer(*ctx, error_, *req, *reply);
  }

 private:
  const bool error_;
  const bool hold_;
};

// Finishes held calls kShedHold after they started, on one thread.
class Holder {
 public:
  Holder() : thread_([this] { Run(); }) {}
  ~Holder() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    thread_.join();
  }
  void Hold(grpc::ServerUnaryReactor* reactor, grpc::Status status) {
    absl::MutexLock lock(&mu_);
    held_.push_back({absl::Now() + kShedHold, reactor, std::move(status)});
  }

 private:
  struct Held {
    absl::Time until;
    grpc::ServerUnaryReactor* reactor;
    grpc::Status status;
  };
  void Run() {
    absl::MutexLock lock(&mu_);
    while (!stop_) {
      const absl::Time now = absl::Now();
      while (!held_.empty() && held_.front().until <= now) {
        held_.front().reactor->Finish(held_.front().status);
        held_.pop_front();
      }
      const absl::Time wake = held_.empty() ? now + absl::Milliseconds(50) : held_.front().until;
      mu_.AwaitWithDeadline(absl::Condition(&stop_), wake);
    }
    for (Held& h : held_) h.reactor->Finish(h.status);
  }
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<Held> held_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

class CallbackEcho final : public echo::Relay::CallbackService {
 public:
  CallbackEcho(bool error, Holder* holder) : error_(error), holder_(holder) {}
  grpc::ServerUnaryReactor* Call(grpc::CallbackServerContext* ctx, const echo::RelayRequest* req,
                                 echo::RelayReply* reply) override {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    grpc::Status status = Answer(*ctx, error_, *req, *reply);
    if (holder_ != nullptr && Admitted(*ctx)) {
      holder_->Hold(reactor, std::move(status));
    } else {
      reactor->Finish(status);
    }
    return reactor;
  }

 private:
  const bool error_;
  Holder* const holder_;  // not owned; nullptr: answer at once
};

int Main(int argc, char** argv) {
  cli::ParseOrExit(argc, argv, "echo_server",
                   "echo_server: the benchmark's server; prints \"listening on PORT\".\n\n"
                   "  echo_server [--api=sync|callback] [--mode=MODE] [--port=0]");
  const std::string api = absl::GetFlag(FLAGS_api);
  const std::string mode = absl::GetFlag(FLAGS_mode);
  const int port_flag = absl::GetFlag(FLAGS_port);
  const std::string answer = absl::GetFlag(FLAGS_answer);
  cli::ExitIfBad(
      "echo_server",
      cli::FirstError(
          {ApplyDeadlockDetectionFlag(absl::GetFlag(FLAGS_deadlock_detection)),
           cli::OneOf("api", api, {"sync", "callback"}), CheckMode(mode),
           cli::InRange("port", port_flag, 0, 65535),
           cli::OneOf("answer", answer, {"echo", "error", "refuse", "expired", "shed"})}));
  if ((answer == "refuse" || answer == "expired" || answer == "shed") &&
      !ServerHasHopbudget(mode)) {
    cli::ExitIfBad("echo_server",
                   absl::InvalidArgumentError(
                       absl::StrCat("--answer=", answer, " needs a hopbudget --mode, not ", mode)));
  }

  // Block the stop signals before gRPC starts threads, so that they inherit
  // the mask and only sigwait() below receives them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  const bool shed = answer == "shed";
  std::unique_ptr<Holder> holder;
  std::unique_ptr<grpc::Service> service;
  if (api == "sync") {
    service = std::make_unique<SyncEcho>(answer == "error", shed);
  } else {
    if (shed) holder = std::make_unique<Holder>();
    service = std::make_unique<CallbackEcho>(answer == "error", holder.get());
  }
  grpc::ServerBuilder builder;
  // A --port another process holds is refused, not shared (SO_REUSEPORT
  // would split the load between two servers).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  int port = 0;
  builder.AddListeningPort(absl::StrCat("127.0.0.1:", port_flag), grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(service.get());
  BudgetPolicy policy = BenchServerPolicy();
  // Above any client deadline (load_gen's is 1 s): every call is refused on
  // arrival as one that cannot finish.
  if (answer == "refuse") policy.min_attempt_budget = absl::Seconds(2);
  AdmissionOptions admission;
  if (shed) {
    admission.enabled = true;
    admission.policy.max_in_flight = 1;
    admission.policy.max_queue = 0;
    admission.policy.predict = false;
    admission.handlers = api == "sync" ? HandlerThreads::kBlocking : HandlerThreads::kNonBlocking;
  }
  InstallServerMode(mode, builder, "echo", policy, nullptr, admission);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) Die("could not start the server");
  std::printf("PORT %d\n", port);
  std::fflush(stdout);

  int sig = 0;
  sigwait(&stop, &sig);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  holder.reset();  // Shutdown waited for what it held: its thread finished them
  server->Wait();
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace hopbudget

int main(int argc, char** argv) { return hopbudget::bench::Main(argc, argv); }
