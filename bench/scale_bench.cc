// Copyright hopbudget authors.
//
// scale_bench: N concurrent in-flight calls with distinct deadlines, in one
// process (a callback server on 127.0.0.1 whose reactor parks each call until
// it is cancelled, and a callback-API client on one channel that carries
// every stream). Run once per mode and N (scripts/bench.sh does):
//   plain      no interceptors; each call ends when its client deadline fires
//              (deadline_i = issue_i + hold + i * 10us: all distinct).
//   noop       the no-op client + server interceptor pair of bench_util.h,
//              ending like plain: what any interceptor costs.
//   hopbudget  hopbudget's server and client interceptors; the server's
//              request_cap (= hold) is tighter than the client deadline
//              (1 s later), so every call arms hopbudget's shared timer and
//              ends when it fires: the worst case, one timer per call.
// `hold` grows with N so that all N calls are parked at once.
// Reports, per round: RSS, heap in use (glibc mallinfo2), bytes live from
// C++ operator new, and thread count (/proc/self/task) before, with all N
// parked, and after; the deltas per parked call; process CPU time (user +
// sys, getrusage) per call from the first call issued to the last one ended
// (at small N this includes gRPC's idle wake-ups during `hold`, the same in
// both modes). Memory per call attributable to hopbudget = delta per call
// (hopbudget) - delta per call (plain); timer cost per call likewise with CPU.
//
//   scale_bench --mode=hopbudget --concurrency=10000 [--rounds=1]
#include <grpcpp/grpcpp.h>
#include <malloc.h>
#include <sys/resource.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bench_modes.h"
#include "bench_util.h"
#include "echo/relay.grpc.pb.h"
#include "hopbudget/client.h"
#include "park_service.h"

// Live bytes allocated with C++ operator new (replaced below). gRPC core
// allocates call state with malloc (arenas); the C++ layer, interceptors
// (hopbudget's and the no-op ones) and protobuf messages use new. The
// difference in new-bytes per parked call between the modes is hopbudget's
// own per-call state, without the noise of gRPC's arenas.
std::atomic<int64_t> g_new_bytes{0};

ABSL_FLAG(std::string, mode, "plain", "plain, noop or hopbudget");
ABSL_FLAG(int, concurrency, 1000, "calls in flight, 1..100000");
ABSL_FLAG(int, rounds, 1, "rounds, 1..100000");

namespace hopbudget {
namespace bench {
namespace {

double CpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

struct PendingCall {
  grpc::ClientContext ctx;
  echo::RelayRequest req;
  echo::RelayReply reply;
};

int Main(int argc, char** argv) {
  cli::ParseOrExit(argc, argv, "scale_bench",
                   "scale_bench: memory and threads with many calls in flight.\n\n"
                   "  scale_bench [--mode=plain|noop|hopbudget] [--concurrency=1000] [--rounds=1]");
  const std::string mode = absl::GetFlag(FLAGS_mode);
  const int n = absl::GetFlag(FLAGS_concurrency);
  const int rounds = absl::GetFlag(FLAGS_rounds);
  cli::ExitIfBad("scale_bench",
                 cli::FirstError({cli::OneOf("mode", mode, {"plain", "noop", "hopbudget"}),
                                  cli::InRange("concurrency", n, 1, 100000),
                                  cli::InRange("rounds", rounds, 1, 100000)}));
  const bool hb = mode == "hopbudget";
  const absl::Duration hold = absl::Milliseconds(10) + absl::Microseconds(500) * n;

  Gauge parked;
  Gauge client_outstanding;
  ParkService service(&parked);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, 1 << 20);
  BudgetPolicy policy;
  policy.request_cap = hold;
  policy.max_inbound_budget = absl::Hours(1);
  InstallServerMode(mode, builder, "scale", policy);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) Die("could not start the server");
  const std::string target = absl::StrCat("127.0.0.1:", port);

  std::shared_ptr<grpc::Channel> channel;
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_MAX_CONCURRENT_STREAMS, 1 << 20);
  if (hb) {
    ClientOptions options;
    options.hop = "scale-client";
    auto c = CreateChannel(target, grpc::InsecureChannelCredentials(), options, args);
    if (!c.ok()) Die(c.status().ToString());
    channel = *c;
  } else {
    channel = MakeClientChannel(mode, target, args);  // plain or noop
  }
  auto stub = echo::Relay::NewStub(channel);

  auto issue = [&](int i, absl::Time now) {
    auto* call = new PendingCall;
    call->req.set_payload("x");
    absl::Time deadline = now + hold + absl::Microseconds(10) * i;
    if (hb) deadline += absl::Seconds(1);  // the server's request cap fires first
    call->ctx.set_deadline(absl::ToChronoTime(deadline));
    client_outstanding.Add(1);
    stub->async()->Call(&call->ctx, &call->req, &call->reply,
                        [call, &client_outstanding](grpc::Status) {
                          delete call;
                          client_outstanding.Add(-1);
                        });
  };
  // Warm-up: connect, run a few calls through every path.
  for (int i = 0; i < 10; ++i) issue(i, absl::Now());
  client_outstanding.WaitFor(0, absl::Seconds(30));

  std::printf("Scale: mode=%s concurrency=%d rounds=%d hold=%s\n", mode.c_str(), n, rounds,
              absl::FormatDuration(hold).c_str());
  std::printf(
      "| round | parked (max) | threads before/parked/after | RSS delta (kB) | "
      "RSS bytes/call | heap bytes/call | new bytes/call | CPU us/call |\n"
      "| --- | --- | --- | --- | --- | --- | --- | --- |\n");
  std::vector<double> bytes_per_call, heap_per_call, new_per_call, cpu_per_call;
  int threads_before = 0, threads_parked_max = 0, threads_after = 0, min_parked = n;
  for (int r = 0; r < rounds; ++r) {
    parked.TakeMax();
    const int64_t rss0 = ProcStatus("VmRSS");
    const int64_t heap0 = HeapInUse();
    const int64_t new0 = g_new_bytes.load();
    const int t0 = ThreadCount();
    const double cpu0 = CpuSeconds();
    const absl::Time start = absl::Now();
    for (int i = 0; i < n; ++i) issue(i, start);
    const int reached = parked.WaitFor(n, hold);
    const int64_t rss1 = ProcStatus("VmRSS");
    const int64_t heap1 = HeapInUse();
    const int64_t new1 = g_new_bytes.load();
    const int t1 = ThreadCount();
    client_outstanding.WaitFor(0, hold + absl::Seconds(30));
    parked.WaitFor(0, absl::Seconds(30));
    const double cpu = CpuSeconds() - cpu0;
    const int t2 = ThreadCount();
    const int max_parked = parked.TakeMax();
    const double bpc = static_cast<double>(rss1 - rss0) * 1024.0 / n;
    const double hpc = static_cast<double>(heap1 - heap0) / n;
    const double cpc = cpu * 1e6 / n;
    bytes_per_call.push_back(bpc);
    heap_per_call.push_back(hpc);
    const double npc = static_cast<double>(new1 - new0) / n;
    new_per_call.push_back(npc);
    cpu_per_call.push_back(cpc);
    if (r == 0) threads_before = t0;
    threads_parked_max = std::max(threads_parked_max, t1);
    threads_after = t2;
    min_parked = std::min(min_parked, std::max(reached, max_parked));
    if (rounds <= 10 || r == rounds - 1) {
      std::printf("| %d | %d | %d/%d/%d | %lld | %.0f | %.0f | %.0f | %.1f |\n", r, max_parked, t0,
                  t1, t2, static_cast<long long>(rss1 - rss0), bpc, hpc, npc, cpc);
    }
  }
  // Memory and CPU: medians over rounds (the first round also pays for the
  // allocator's and gRPC's one-time growth).
  const double bpc = Summarize(bytes_per_call).p50;
  const double hpc = Summarize(heap_per_call).p50;
  const double npc = Summarize(new_per_call).p50;
  const Stats cpu = Summarize(cpu_per_call);
  std::printf(
      "RESULT bench=scale mode=%s concurrency=%d rounds=%d min_parked=%d "
      "rss_bytes_per_call=%.0f heap_bytes_per_call=%.0f new_bytes_per_call=%.0f "
      "cpu_us_per_call=%.2f threads_before=%d threads_parked=%d threads_after=%d\n",
      mode.c_str(), n, rounds, min_parked, bpc, hpc, npc, cpu.p50, threads_before,
      threads_parked_max, threads_after);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server->Wait();
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace hopbudget

void* operator new(std::size_t size) {
  void* p = std::malloc(size == 0 ? 1 : size);
  if (p == nullptr) throw std::bad_alloc();
  g_new_bytes.fetch_add(static_cast<int64_t>(malloc_usable_size(p)), std::memory_order_relaxed);
  return p;
}
void operator delete(void* p) noexcept {
  if (p == nullptr) return;
  g_new_bytes.fetch_sub(static_cast<int64_t>(malloc_usable_size(p)), std::memory_order_relaxed);
  std::free(p);
}
void operator delete(void* p, std::size_t /*size*/) noexcept { operator delete(p); }

int main(int argc, char** argv) { return hopbudget::bench::Main(argc, argv); }
