// Copyright hopbudget authors.
//
// slots_bench: 10 000 calls waiting for 100 slots (DownstreamSlots,
// hopbudget/advanced/slots_grpc.h): no thread growth, waits expire on time, and no
// waiting call reaches the server. One process holds a callback server on
// 127.0.0.1 whose handler parks every call until it is cancelled (and counts
// the calls it sees), and a callback-API client on one hopbudget channel.
//
//   1. `--slots` calls with a 10 min budget take every slot and park at the
//      server (the holders).
//   2. Warm-up: a few callers wait and expire, so that what the library
//      starts once (the shared timer thread) exists before the count.
//   3. Each round: `--calls` callers start through Start() (callback form,
//      no thread each) with budgets spread evenly over
//      [--first, --first + --spread), so that each one's give-up time,
//      deadline - min_attempt_budget, is known; then the bench waits for
//      every answer.
//
// Measured: threads (entries of /proc/self/task) before the callers start,
// once they all wait, and after they were all answered; heap in use (glibc
// mallinfo2) and RSS per waiting call (delta / calls); for each caller how
// late its answer came after its give-up time (answer time on absl::Now(),
// in `on_done`, minus deadline + min_attempt_budget: the caller's own view)
// as p50, p99 and max; the calls the server saw while the callers waited.
// A caller answered with anything but DEADLINE_EXCEEDED from source
// slot-wait ("wrong"), or not answered at all ("lost"), counts as infinitely
// late in p99_all_ms, the figure the report judges.
//
//   slots_bench [--calls=10000] [--slots=100] [--rounds=1] [--first=1s] [--spread=1s]
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench_util.h"
#include "echo/relay.grpc.pb.h"
#include "hopbudget/advanced/slots_grpc.h"
#include "hopbudget/client.h"
#include "park_service.h"

ABSL_FLAG(int, calls, 10000, "callers waiting for a slot per round, 1..100000");
ABSL_FLAG(int, slots, 100, "slots (max_in_flight), all held while the callers wait, 1..10000");
ABSL_FLAG(int, rounds, 1, "rounds of --calls callers, 1..100");
ABSL_FLAG(absl::Duration, first, absl::Seconds(1),
          "the shortest caller budget (long enough for every caller to start waiting), 100ms..60s");
ABSL_FLAG(absl::Duration, spread, absl::Seconds(1),
          "budgets spread evenly over [first, first + spread), 0..60s");

namespace hopbudget {
namespace bench {
namespace {

constexpr absl::Duration kMinAttemptBudget = absl::Milliseconds(20);

// One caller's answer; written once by its on_done.
struct Answer {
  absl::Time give_up;
  absl::Time at;
  bool slot_wait = false;  // DEADLINE_EXCEEDED with source slot-wait
};

class Bench {
 public:
  Bench(int slots, Metrics* metrics) {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service_);
    builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, 1 << 20);
    // hopbudget's channel sends keepalive pings (client.h): permit them.
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10000);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    server_ = builder.BuildAndStart();
    if (server_ == nullptr) Die("could not start the server");
    ClientOptions client;
    client.hop = "slots-bench";
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_MAX_CONCURRENT_STREAMS, 1 << 20);
    auto channel = CreateChannel(absl::StrCat("127.0.0.1:", port),
                                 grpc::InsecureChannelCredentials(), client, args);
    if (!channel.ok()) Die(channel.status().ToString());
    stub_ = echo::Relay::NewStub(*channel);
    DownstreamSlotsOptions o;
    o.hop = "slots-bench";
    o.max_in_flight = slots;
    o.max_waiters = 1 << 20;
    o.budget.min_attempt_budget = kMinAttemptBudget;
    o.metrics = metrics;
    auto s = DownstreamSlots::Create(o);
    if (!s.ok()) Die(s.status().ToString());
    slots_ = *std::move(s);
  }
  ~Bench() {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server_->Wait();
  }

  // One call through the slots with `deadline`; `done` runs with its status.
  std::shared_ptr<SlotCall> Start(absl::Time deadline,
                                  absl::AnyInvocable<void(grpc::Status)> done) {
    return slots_->Start(
        LogicalCall::WithDeadline(deadline),
        [this](grpc::ClientContext* ctx, std::function<void(grpc::Status)> attempt_done) {
          // Only holders get here: the reply lives until the attempt ends.
          auto reply = std::make_shared<echo::RelayReply>();
          stub_->async()->Call(ctx, &request_, reply.get(),
                               [reply, attempt_done = std::move(attempt_done)](grpc::Status s) {
                                 attempt_done(std::move(s));
                               });
        },
        std::move(done));
  }

  DownstreamSlots& slots() { return *slots_; }
  ParkService& service() { return service_; }
  Gauge& parked() { return parked_; }

 private:
  Gauge parked_;
  ParkService service_{&parked_};
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<echo::Relay::Stub> stub_;
  const echo::RelayRequest request_;
  std::unique_ptr<DownstreamSlots> slots_;
};

bool IsSlotWait(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED &&
         absl::StrContains(s.error_message(), "source=slot-wait");
}

struct Round {
  int waiting = 0;  // slots().waiting() once every caller had started
  bool all_waited = false;
  // All threads, and those outside gRPC's own pools (UnnamedThreadCount):
  // before, the most seen while callers waited (sampled once they had all
  // started, then every 50 ms until the last answer), after.
  int threads_before = 0, threads_waiting = 0, threads_after = 0;
  int own_before = 0, own_waiting = 0, own_after = 0;
  double heap_per_call = 0, rss_per_call = 0;
  double enqueue_ms = 0;
  uint64_t server_calls = 0;  // the server saw these while the callers waited
  int answered = 0;
};

Round RunRound(Bench& bench, int n, absl::Duration first, absl::Duration spread,
               std::vector<Answer>* answers, std::vector<double>* late_ms, int* wrong) {
  Round r;
  answers->assign(n, Answer{});  // before the heap count: the bench's own memory
  Gauge answered;
  const uint64_t calls0 = bench.service().calls();
  const int64_t rss0 = ProcStatus("VmRSS");
  const int64_t heap0 = HeapInUse();
  r.threads_before = ThreadCount();
  r.own_before = UnnamedThreadCount();
  const absl::Time start = absl::Now();
  for (int i = 0; i < n; ++i) {
    const absl::Time deadline = absl::Now() + first + spread * i / n;
    Answer* a = &(*answers)[i];
    a->give_up = deadline - kMinAttemptBudget;
    bench.Start(deadline, [a, &answered](grpc::Status s) {
      a->at = absl::Now();
      a->slot_wait = IsSlotWait(s);
      answered.Add(1);
    });
  }
  r.enqueue_ms = absl::ToDoubleMilliseconds(absl::Now() - start);
  r.waiting = static_cast<int>(bench.slots().waiting());
  r.all_waited = r.waiting == n && answered.WaitFor(0, absl::ZeroDuration()) == 0;
  const int64_t rss1 = ProcStatus("VmRSS");
  const int64_t heap1 = HeapInUse();
  r.threads_waiting = ThreadCount();
  r.own_waiting = UnnamedThreadCount();
  // Until the last answer: sample the threads while the waits expire.
  const absl::Time give_up = absl::Now() + first + spread + absl::Seconds(60);
  while ((r.answered = answered.WaitFor(n, absl::Milliseconds(50))) < n && absl::Now() < give_up) {
    r.threads_waiting = std::max(r.threads_waiting, ThreadCount());
    r.own_waiting = std::max(r.own_waiting, UnnamedThreadCount());
  }
  r.threads_after = ThreadCount();
  r.own_after = UnnamedThreadCount();
  r.server_calls = bench.service().calls() - calls0;
  r.heap_per_call = static_cast<double>(heap1 - heap0) / n;
  r.rss_per_call = static_cast<double>(rss1 - rss0) * 1024.0 / n;
  for (const Answer& a : *answers) {
    if (a.at == absl::Time()) continue;  // lost: counted by the caller
    if (!a.slot_wait) {
      ++*wrong;
      continue;
    }
    late_ms->push_back(absl::ToDoubleMilliseconds(a.at - a.give_up));
  }
  return r;
}

int Main(int argc, char** argv) {
  cli::ParseOrExit(argc, argv, "slots_bench",
                   "slots_bench: calls waiting for a slot of DownstreamSlots: threads, memory, "
                   "how late each wait expires, and that none reaches the server.\n\n"
                   "  slots_bench [--calls=10000] [--slots=100] [--rounds=1] [--first=1s] "
                   "[--spread=1s]");
  const int n = absl::GetFlag(FLAGS_calls);
  const int slots = absl::GetFlag(FLAGS_slots);
  const int rounds = absl::GetFlag(FLAGS_rounds);
  const absl::Duration first = absl::GetFlag(FLAGS_first);
  const absl::Duration spread = absl::GetFlag(FLAGS_spread);
  cli::ExitIfBad(
      "slots_bench",
      cli::FirstError(
          {cli::InRange("calls", n, 1, 100000), cli::InRange("slots", slots, 1, 10000),
           cli::InRange("rounds", rounds, 1, 100), cli::Positive("first", first),
           first >= absl::Milliseconds(100) && first <= absl::Seconds(60)
               ? absl::OkStatus()
               : absl::InvalidArgumentError(absl::StrCat("--first=", absl::FormatDuration(first),
                                                         ": must be in [100ms, 60s]")),
           cli::NonNegative("spread", spread),
           spread <= absl::Seconds(60)
               ? absl::OkStatus()
               : absl::InvalidArgumentError(
                     absl::StrCat("--spread=", absl::FormatDuration(spread), ": at most 60s"))}));

  Metrics metrics;
  Bench bench(slots, &metrics);
  // 1. The holders: every slot, parked at the server.
  Gauge holders_done;
  std::vector<std::shared_ptr<SlotCall>> holders;
  for (int i = 0; i < slots; ++i) {
    holders.push_back(bench.Start(absl::Now() + absl::Minutes(10),
                                  [&holders_done](grpc::Status) { holders_done.Add(1); }));
  }
  if (bench.parked().WaitFor(slots, absl::Seconds(60)) != slots) {
    Die("the holders did not all reach the server");
  }
  // 2. Warm-up: a few waits that expire (the shared timer thread starts).
  {
    std::vector<Answer> answers;
    std::vector<double> late;
    int wrong = 0;
    if (RunRound(bench, 10, absl::Milliseconds(40), absl::Milliseconds(10), &answers, &late, &wrong)
            .answered != 10) {
      Die("the warm-up waits were not all answered");
    }
  }
  // 3. The rounds.
  std::vector<Answer> answers;
  answers.reserve(n);
  std::vector<double> late_ms;
  late_ms.reserve(static_cast<size_t>(n) * rounds);
  int wrong = 0, lost = 0, min_waiting = n;
  // The round whose threads grew most while its callers waited (outside
  // gRPC's pools first): its counts are the ones reported.
  Round worst;
  auto growth = [](const Round& r) {
    return std::make_pair(r.own_waiting - r.own_before, r.threads_waiting - r.threads_before);
  };
  bool all_waited = true;
  uint64_t server_calls = 0;
  std::vector<double> heap, rss;
  std::printf(
      "Slots: %d callers x %d rounds for %d held slots, budgets %s..%s, give-up %s earlier\n", n,
      rounds, slots, absl::FormatDuration(first).c_str(),
      absl::FormatDuration(first + spread).c_str(),
      absl::FormatDuration(kMinAttemptBudget).c_str());
  std::printf(
      "| round | waiting | threads before/waiting/after | outside gRPC's pools | heap B/call | "
      "RSS B/call | enqueue (ms) | answered | server calls |\n"
      "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (int round = 0; round < rounds; ++round) {
    const Round r = RunRound(bench, n, first, spread, &answers, &late_ms, &wrong);
    lost += n - r.answered;
    min_waiting = std::min(min_waiting, r.waiting);
    all_waited = all_waited && r.all_waited;
    if (round == 0 || growth(r) > growth(worst)) worst = r;
    server_calls += r.server_calls;
    heap.push_back(r.heap_per_call);
    rss.push_back(r.rss_per_call);
    std::printf("| %d | %d | %d/%d/%d | %d/%d/%d | %.0f | %.0f | %.1f | %d | %llu |\n", round,
                r.waiting, r.threads_before, r.threads_waiting, r.threads_after, r.own_before,
                r.own_waiting, r.own_after, r.heap_per_call, r.rss_per_call, r.enqueue_ms,
                r.answered, static_cast<unsigned long long>(r.server_calls));
    // A caller never answered may still be: its answer slot must not be reused.
    if (lost > 0) break;
  }
  const double p99_all = QuantileCountingFailures(late_ms, wrong + lost, 0.99);
  const Stats late = Summarize(late_ms);
  const double min_late = late_ms.empty() ? 0 : late_ms.front();  // sorted by Summarize
  std::printf(
      "expiry lateness after deadline - min_attempt_budget: p50 %.3f ms, p99 %.3f ms, max %.3f "
      "ms, min %.3f ms; %d wrong, %d lost\n",
      late.p50, late.p99, late.max, min_late, wrong, lost);
  std::printf(
      "RESULT bench=slots calls=%d slots=%d rounds=%d waiting=%d all_waited=%d threads_before=%d "
      "threads_waiting=%d threads_after=%d own_threads_before=%d own_threads_waiting=%d "
      "own_threads_after=%d heap_bytes_per_call=%.0f rss_bytes_per_call=%.0f "
      "expired=%zu wrong=%d lost=%d late_p50_ms=%.3f late_p99_ms=%.3f late_max_ms=%.3f "
      "late_min_ms=%.3f p99_all_ms=%s server_calls=%llu\n",
      n, slots, rounds, min_waiting, all_waited ? 1 : 0, worst.threads_before,
      worst.threads_waiting, worst.threads_after, worst.own_before, worst.own_waiting,
      worst.own_after, Median(heap), Median(rss), late.n, wrong, lost, late.p50, late.p99, late.max,
      min_late, std::isinf(p99_all) ? "inf" : Fixed(p99_all, 3).c_str(),
      static_cast<unsigned long long>(server_calls));
  if (lost > 0) {
    std::fprintf(stderr, "error: %d callers were never answered\n", lost);
    std::fflush(stdout);
    std::_Exit(1);  // their on_done may still run: tear nothing down under it
  }
  for (auto& h : holders) h->TryCancel();
  if (holders_done.WaitFor(slots, absl::Seconds(30)) != slots) Die("the holders did not end");
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace hopbudget

int main(int argc, char** argv) { return hopbudget::bench::Main(argc, argv); }
