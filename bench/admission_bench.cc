// Copyright hopbudget authors.
//
// admission_bench: what a queued call costs, and what admission costs a call
// that finds room. One process holds a server on 127.0.0.1 (hopbudget's
// server interceptor on every arm) and a callback-API client on one channel
// (no thread per call). Run once per arm (scripts/bench.sh does):
//
//   --mode=queued  admission on, limit 1, a queue for every call: one call
//                  parks in its handler, then --calls calls queue behind it
//                  (counted by the admission's own stats). Callback or sync
//                  server (--api).
//   --mode=parked  admission off, callback server: --calls calls park inside
//                  their handlers (a reactor that does not finish). This is
//                  gRPC's own cost of an accepted call that waits: the same
//                  call state, request and interceptor, no admission.
//   --mode=common  the common path: a closed loop of --calls calls (16 in
//                  flight, no work) with admission on and room to spare
//                  (limit 1024), and with admission off, alternating rounds;
//                  reports microseconds per call and the ratio.
//
// Memory: RSS (/proc/self/status VmRSS) and heap in use (glibc mallinfo2:
// precise, RSS moves in pages and keeps freed memory) before the calls are
// issued and once all of them wait; per call = delta / calls. A queued
// call's cost beyond gRPC's own = per call (queued) - per call (parked):
// both arms hold the same calls from the same client, so the client's own
// cost cancels too. Threads: entries of /proc/self/task, before and while
// all wait (a thread per queued call would show +calls).
//
//   admission_bench --mode=queued --api=sync --calls=10000
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "bench_util.h"
#include "echo/relay.grpc.pb.h"
#include "hopbudget/server.h"

ABSL_FLAG(std::string, mode, "queued", "queued, parked or common");
ABSL_FLAG(std::string, api, "callback", "callback or sync (the server's API; parked: callback)");
ABSL_FLAG(int, calls, 10000, "calls queued or parked (common: calls per round), 1..100000");
ABSL_FLAG(int, rounds, 5, "common: rounds per setting, 1..1000");

namespace hopbudget {
namespace bench {
namespace {

// Requests with payload "park" wait in their handler until Release(); the
// others answer at once.
class Parking {
 public:
  void Park(grpc::ServerUnaryReactor* reactor) {
    {
      absl::MutexLock lock(&mu_);
      if (!released_) {
        reactors_.push_back(reactor);
        parked_.Add(1);
        return;
      }
    }
    reactor->Finish(grpc::Status::OK);
  }
  // Sync handlers block here (the sync API has no other way to wait).
  void ParkThread() {
    parked_.Add(1);
    release_.WaitForNotification();
  }
  void Release() {
    std::vector<grpc::ServerUnaryReactor*> reactors;
    {
      absl::MutexLock lock(&mu_);
      released_ = true;
      reactors.swap(reactors_);
    }
    release_.Notify();
    for (auto* r : reactors) r->Finish(grpc::Status::OK);
  }
  Gauge& parked() { return parked_; }

 private:
  absl::Mutex mu_;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<grpc::ServerUnaryReactor*> reactors_ ABSL_GUARDED_BY(mu_);
  absl::Notification release_;
  Gauge parked_;
};

class CallbackPark final : public echo::Relay::CallbackService {
 public:
  explicit CallbackPark(Parking* p) : p_(*p) {}
  grpc::ServerUnaryReactor* Call(grpc::CallbackServerContext* ctx, const echo::RelayRequest* req,
                                 echo::RelayReply* /*reply*/) override {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    if (req->payload() == "park") {
      p_.Park(reactor);
    } else {
      reactor->Finish(grpc::Status::OK);
    }
    return reactor;
  }

 private:
  Parking& p_;
};

class SyncPark final : public echo::Relay::Service {
 public:
  explicit SyncPark(Parking* p) : p_(*p) {}
  grpc::Status Call(grpc::ServerContext* /*ctx*/, const echo::RelayRequest* req,
                    echo::RelayReply* /*reply*/) override {
    if (req->payload() == "park") p_.ParkThread();
    return grpc::Status::OK;
  }

 private:
  Parking& p_;
};

struct Server {
  std::unique_ptr<grpc::Service> service;
  grpc::experimental::ServerInterceptorFactoryInterface* factory = nullptr;
  std::unique_ptr<grpc::Server> server;
  std::string target;
};

Server StartServer(const std::string& api, Parking* parking, bool admission, int limit, int queue) {
  Server s;
  if (api == "sync") {
    s.service = std::make_unique<SyncPark>(parking);
  } else {
    s.service = std::make_unique<CallbackPark>(parking);
  }
  ServerOptions options;
  options.hop = "admission-bench";
  options.admission.enabled = admission;
  options.admission.policy.max_in_flight = limit;
  options.admission.policy.max_queue = queue;
  options.admission.policy.queue_per_limit = std::numeric_limits<double>::infinity();
  options.admission.policy.max_wait = absl::Hours(1);
  // The queue stays full for the whole measurement: overload_wait would
  // turn every waiter away 100 ms in (sustained overload), and the bench
  // measures what a waiting call costs.
  options.admission.policy.overload_wait = absl::InfiniteDuration();
  options.admission.policy.predict = false;
  options.admission.handlers =
      api == "sync" ? HandlerThreads::kBlocking : HandlerThreads::kNonBlocking;
  auto factory = MakeServerInterceptorFactory(options);
  if (!factory.ok()) Die(factory.status().ToString());
  s.factory = factory->get();
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
  creators.push_back(*std::move(factory));
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(s.service.get());
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, 1 << 20);
  builder.experimental().SetInterceptorCreators(std::move(creators));
  s.server = builder.BuildAndStart();
  if (s.server == nullptr) Die("could not start the server");
  s.target = absl::StrCat("127.0.0.1:", port);
  return s;
}

struct PendingCall {
  grpc::ClientContext ctx;
  echo::RelayRequest req;
  echo::RelayReply reply;
};

class Client {
 public:
  explicit Client(const std::string& target) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_MAX_CONCURRENT_STREAMS, 1 << 20);
    stub_ = echo::Relay::NewStub(
        grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args));
  }
  // Issues one call; `done` runs when it ends.
  void Issue(const char* payload, std::function<void(const grpc::Status&)> done) {
    auto* call = new PendingCall;
    call->req.set_payload(payload);
    call->ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Minutes(10)));
    outstanding_.Add(1);
    stub_->async()->Call(&call->ctx, &call->req, &call->reply,
                         [this, call, done = std::move(done)](grpc::Status s) {
                           done(s);
                           delete call;
                           outstanding_.Add(-1);
                         });
  }
  bool Drain(absl::Duration timeout) { return outstanding_.WaitFor(0, timeout) == 0; }

 private:
  std::unique_ptr<echo::Relay::Stub> stub_;
  Gauge outstanding_;
};

// --mode=queued and --mode=parked.
int Hold(const std::string& mode, const std::string& api, int n) {
  Parking parking;
  const bool queued = mode == "queued";
  Server server = StartServer(api, &parking, /*admission=*/queued, /*limit=*/1, /*queue=*/n + 16);
  Client client(server.target);
  std::atomic<int> failed{0};
  auto count = [&failed](const grpc::Status& s) {
    if (!s.ok()) failed.fetch_add(1);
  };
  // Warm-up: connect, run calls through every path. One at a time: calls
  // at once would grow the sync server's threads, which it reaps later,
  // and the thread count before the queue would be that growth.
  for (int i = 0; i < 50; ++i) {
    client.Issue("warm", count);
    if (!client.Drain(absl::Seconds(30))) Die("warm-up calls did not end");
  }
  auto queued_now = [&server] { return AdmissionStatsOf(*server.factory)->queued; };

  const int64_t rss0 = ProcStatus("VmRSS");
  const int64_t heap0 = HeapInUse();
  const int threads0 = ThreadCount();
  bool reached = false;
  if (queued) {
    client.Issue("park", count);  // the call that holds the only place
    if (parking.parked().WaitFor(1, absl::Seconds(30)) != 1) Die("the blocker did not start");
    for (int i = 0; i < n; ++i) client.Issue("queue", count);
    // Admission's own count: wait until every call is queued (bounded).
    const absl::Time give_up = absl::Now() + absl::Seconds(120);
    while (!(reached = queued_now() == n) && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(20));  // a bench waiting for gRPC to deliver
    }
  } else {
    for (int i = 0; i < n; ++i) client.Issue("park", count);
    reached = parking.parked().WaitFor(n, absl::Seconds(120)) == n;
  }
  const int64_t rss1 = ProcStatus("VmRSS");
  const int64_t heap1 = HeapInUse();
  const int threads1 = ThreadCount();
  const int waiting = queued ? queued_now() : n;
  parking.Release();
  const bool drained = client.Drain(absl::Seconds(120));
  const int threads2 = ThreadCount();
  std::printf(
      "Admission %s: api=%s calls=%d waiting=%d threads %d/%d/%d RSS +%lld kB heap +%lld kB\n",
      mode.c_str(), api.c_str(), n, waiting, threads0, threads1, threads2,
      static_cast<long long>(rss1 - rss0), static_cast<long long>((heap1 - heap0) / 1024));
  std::printf(
      "RESULT bench=admission mode=%s api=%s calls=%d waiting=%d reached=%d drained=%d failed=%d "
      "rss_bytes_per_call=%.0f heap_bytes_per_call=%.0f threads_before=%d threads_waiting=%d "
      "threads_after=%d\n",
      mode.c_str(), api.c_str(), n, waiting, reached ? 1 : 0, drained ? 1 : 0, failed.load(),
      static_cast<double>(rss1 - rss0) * 1024.0 / n, static_cast<double>(heap1 - heap0) / n,
      threads0, threads1, threads2);
  server.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server.server->Wait();
  return 0;
}

// One round of the common path: `n` calls, `inflight` at a time; seconds.
double Round(Client& client, int n, int inflight, std::atomic<int>* failed) {
  std::atomic<int> issued{0};
  Gauge done;
  std::function<void()> issue = [&] {
    if (issued.fetch_add(1) >= n) return;
    client.Issue("x", [&](const grpc::Status& s) {
      if (!s.ok()) failed->fetch_add(1);
      done.Add(1);
      issue();
    });
  };
  const double start = MonoSeconds();
  for (int i = 0; i < inflight; ++i) issue();
  if (done.WaitFor(n, absl::Seconds(300)) != n) Die("a round did not end");
  const double took = MonoSeconds() - start;
  client.Drain(absl::Seconds(30));
  return took;
}

// --mode=common.
int Common(const std::string& api, int n, int rounds) {
  Parking parking;
  Server on = StartServer(api, &parking, /*admission=*/true, /*limit=*/1024, /*queue=*/1024);
  Server off = StartServer(api, &parking, /*admission=*/false, 1024, 1024);
  Client client_on(on.target), client_off(off.target);
  std::atomic<int> failed{0};
  constexpr int kInflight = 16;
  Round(client_on, 1000, kInflight, &failed);  // warm-up
  Round(client_off, 1000, kInflight, &failed);
  std::vector<double> us_on, us_off, ratio;
  for (int r = 0; r < rounds; ++r) {
    const double a = Round(client_on, n, kInflight, &failed) * 1e6 / n;
    const double b = Round(client_off, n, kInflight, &failed) * 1e6 / n;
    us_on.push_back(a);
    us_off.push_back(b);
    ratio.push_back(a / b);
  }
  const AdmissionStats stats = *AdmissionStatsOf(*on.factory);
  const double on_us = Median(us_on), off_us = Median(us_off);
  std::vector<double> r = ratio;
  const Stats rs = Summarize(r);
  std::printf(
      "Admission common path: api=%s %d calls x %d rounds, %d in flight: on %.2f us/call, off "
      "%.2f us/call, ratio median %.3f (min %.3f, max %.3f); queued %llu times\n",
      api.c_str(), n, rounds, kInflight, on_us, off_us, Median(ratio), r.front(), rs.max,
      static_cast<unsigned long long>(stats.admitted_after_wait));
  std::printf(
      "RESULT bench=admission mode=common api=%s calls=%d rounds=%d inflight=%d on_us=%.2f "
      "off_us=%.2f ratio=%.4f ratio_min=%.4f ratio_max=%.4f failed=%d queued=%llu\n",
      api.c_str(), n, rounds, kInflight, on_us, off_us, Median(ratio), r.front(), rs.max,
      failed.load(), static_cast<unsigned long long>(stats.admitted_after_wait));
  for (Server* s : {&on, &off}) {
    s->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    s->server->Wait();
  }
  return 0;
}

int Main(int argc, char** argv) {
  cli::ParseOrExit(argc, argv, "admission_bench",
                   "admission_bench: what a queued call costs (memory, threads), and what "
                   "admission costs a call that finds room.\n\n"
                   "  admission_bench --mode=queued|parked|common [--api=callback|sync] "
                   "[--calls=10000] [--rounds=5]");
  const std::string mode = absl::GetFlag(FLAGS_mode);
  const std::string api = absl::GetFlag(FLAGS_api);
  const int n = absl::GetFlag(FLAGS_calls);
  const int rounds = absl::GetFlag(FLAGS_rounds);
  cli::ExitIfBad("admission_bench",
                 cli::FirstError({cli::OneOf("mode", mode, {"queued", "parked", "common"}),
                                  cli::OneOf("api", api, {"callback", "sync"}),
                                  cli::InRange("calls", n, 1, 100000),
                                  cli::InRange("rounds", rounds, 1, 1000)}));
  if (mode == "parked" && api == "sync") {
    cli::ExitIfBad("admission_bench",
                   absl::InvalidArgumentError(
                       "--mode=parked: callback only (a parked sync handler holds a thread)"));
  }
  if (mode == "common") return Common(api, n, rounds);
  return Hold(mode, api, n);
}

}  // namespace
}  // namespace bench
}  // namespace hopbudget

int main(int argc, char** argv) { return hopbudget::bench::Main(argc, argv); }
