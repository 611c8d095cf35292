// Copyright hopbudget authors.
//
// reload_bench: a Hop's policy table replaced while calls arrive (issue 30).
// One process holds a callback server on 127.0.0.1 whose interceptor is
// made from a Hop, and an open loop of unary calls at --rps from a plain
// gRPC client, each with a 1 s deadline. Rounds alternate two modes, their
// order swapped every round: `reload`, where another thread swaps the
// Hop's service config between two tables every --every, and `steady`,
// where it is never swapped.
//
// The two tables give Relay/Call different request caps and reserves (A:
// 20 s and 5 ms, B: 30 s and 7 ms), both far above the calls' deadline, so
// neither cuts a call. The handler checks the budget the interceptor
// derived for its call (InboundBudget::policy()): its request cap and
// reserve must be one table's pair, never one table's cap with the other's
// reserve ("mixed"), and the deadline of the downstream context it makes
// (NewDownstreamContext) must be the request deadline less that same
// reserve. Measured per round: calls made, failed (any status but OK),
// mixed, p50 and p99 of the OK calls, reloads done, and how far behind its
// schedule the generator made its calls.
//
//   reload_bench [--rps=2000] [--duration=3s] [--rounds=5] [--every=50ms]
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bench_util.h"
#include "echo/relay.grpc.pb.h"
#include "hopbudget/hop.h"
#include "hopbudget/server.h"

ABSL_FLAG(double, rps, 2000, "calls made per second (open loop), 1..20000");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(3), "how long each round's calls are made");
ABSL_FLAG(int, rounds, 5, "rounds of both modes, 1..100");
ABSL_FLAG(absl::Duration, every, absl::Milliseconds(50),
          "mode reload: the service config is swapped this often, 1ms..10s");

namespace hopbudget {
namespace bench {
namespace {

// The two tables: Relay/Call's request cap and reserve.
struct Table {
  absl::Duration cap;
  absl::Duration reserve;
};
constexpr Table kTables[2] = {{absl::Seconds(20), absl::Milliseconds(5)},
                              {absl::Seconds(30), absl::Milliseconds(7)}};

std::string ConfigOf(const Table& t) {
  return absl::StrCat(R"({"methodConfig": [
      {"name": [{"service": "hopbudget.echo.Relay", "method": "Call"}], "timeout": ")",
                      absl::ToInt64Seconds(t.cap), R"(s"}],
    "hopbudget": {"methodPolicy": [
      {"name": [{"service": "hopbudget.echo.Relay", "method": "Call"}], "hopReserve": ")",
                      absl::ToDoubleSeconds(t.reserve), R"(s"}]}})");
}

// Answers at once; counts each call whose budget mixes the two tables.
class CheckingEcho final : public echo::Relay::CallbackService {
 public:
  grpc::ServerUnaryReactor* Call(grpc::CallbackServerContext* ctx, const echo::RelayRequest*,
                                 echo::RelayReply*) override {
    auto* reactor = ctx->DefaultReactor();
    const InboundBudget* budget = InboundBudget::Of(*ctx);
    bool consistent = false;
    if (budget != nullptr) {
      const BudgetPolicy& p = budget->policy();
      for (const Table& t : kTables) {
        if (p.request_cap == t.cap && p.hop_reserve == t.reserve) consistent = true;
      }
      // The downstream context is derived from the same entry.
      const std::unique_ptr<grpc::ClientContext> downstream = NewDownstreamContext(*ctx);
      const absl::Time derived = absl::FromChrono(downstream->deadline());
      if (absl::AbsDuration(derived - (budget->deadline() - p.hop_reserve)) >
          absl::Microseconds(1)) {
        consistent = false;
      }
    }
    if (!consistent) mixed_.fetch_add(1, std::memory_order_relaxed);
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  int64_t TakeMixed() { return mixed_.exchange(0); }

 private:
  std::atomic<int64_t> mixed_{0};
};

struct RoundResult {
  int64_t calls = 0, failed = 0, mixed = 0, reloads = 0;
  double p50_us = 0, p99_us = 0, lag_max_ms = 0;
};

// One round: --rps calls a second for `duration` from this thread (open
// loop), each answered on gRPC's callback threads; waits for every answer.
RoundResult RunRound(echo::Relay::Stub& stub, CheckingEcho& service, Hop& hop, bool reload,
                     double rps, absl::Duration duration, absl::Duration every) {
  struct Shared {
    absl::Mutex mu;
    std::vector<double> ok_us ABSL_GUARDED_BY(mu);
    int64_t failed ABSL_GUARDED_BY(mu) = 0;
    int64_t answered ABSL_GUARDED_BY(mu) = 0;
    int64_t expected ABSL_GUARDED_BY(mu) = -1;
  } shared;
  const int64_t n = static_cast<int64_t>(rps * absl::ToDoubleSeconds(duration));
  std::atomic<bool> done{false};
  std::atomic<int64_t> reloads{0};
  std::thread reloader([&] {
    int next = 1;
    while (reload && !done.load()) {
      absl::SleepFor(every);
      if (!hop.ReloadServiceConfig(ConfigOf(kTables[next])).ok()) Die("a table was refused");
      next = 1 - next;
      reloads.fetch_add(1);
    }
  });
  const echo::RelayRequest request;
  double lag_max = 0;
  const absl::Time start = absl::Now();
  for (int64_t i = 0; i < n; ++i) {
    const absl::Time due = start + absl::Seconds(static_cast<double>(i) / rps);
    const absl::Time now = absl::Now();
    if (due > now) absl::SleepFor(due - now);
    lag_max = std::max(lag_max, absl::ToDoubleMilliseconds(absl::Now() - due));
    struct Call {
      grpc::ClientContext ctx;
      echo::RelayReply reply;
      absl::Time sent;
    };
    auto* call = new Call;
    call->sent = absl::Now();
    call->ctx.set_deadline(absl::ToChronoTime(call->sent + absl::Seconds(1)));
    stub.async()->Call(&call->ctx, &request, &call->reply, [call, &shared](grpc::Status s) {
      const double us = absl::ToDoubleMicroseconds(absl::Now() - call->sent);
      {
        absl::MutexLock lock(&shared.mu);
        if (s.ok()) {
          shared.ok_us.push_back(us);
        } else {
          ++shared.failed;
        }
        ++shared.answered;
      }
      delete call;
    });
  }
  done.store(true);
  reloader.join();
  absl::MutexLock lock(&shared.mu);
  shared.expected = n;
  const auto all_answered =
      +[](Shared* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) { return s->answered == s->expected; };
  if (!shared.mu.AwaitWithTimeout(absl::Condition(all_answered, &shared), absl::Seconds(30))) {
    std::fprintf(stderr, "error: %lld of %lld calls never answered\n",
                 static_cast<long long>(n - shared.answered), static_cast<long long>(n));
    std::fflush(stdout);
    std::_Exit(1);  // their callbacks may still run: tear nothing down under them
  }
  RoundResult r;
  r.calls = n;
  r.failed = shared.failed;
  r.mixed = service.TakeMixed();
  r.reloads = reloads.load();
  r.lag_max_ms = lag_max;
  const Stats s = Summarize(shared.ok_us);
  r.p50_us = s.p50;
  r.p99_us = s.p99;
  return r;
}

int Main(int argc, char** argv) {
  cli::ParseOrExit(argc, argv, "reload_bench",
                   "reload_bench: a Hop's service config swapped under an open loop of calls: "
                   "failed calls, calls whose budget mixes two tables, p99 against no swap.\n\n"
                   "  reload_bench [--rps=2000] [--duration=3s] [--rounds=5] [--every=50ms]");
  const double rps = absl::GetFlag(FLAGS_rps);
  const absl::Duration duration = absl::GetFlag(FLAGS_duration);
  const int rounds = absl::GetFlag(FLAGS_rounds);
  const absl::Duration every = absl::GetFlag(FLAGS_every);
  cli::ExitIfBad(
      "reload_bench",
      cli::FirstError(
          {cli::InRange("rps", rps, 1.0, 20000.0), cli::Positive("duration", duration),
           cli::InRange("rounds", rounds, 1, 100),
           every >= absl::Milliseconds(1) && every <= absl::Seconds(10)
               ? absl::OkStatus()
               : absl::InvalidArgumentError(absl::StrCat("--every=", absl::FormatDuration(every),
                                                         ": must be in [1ms, 10s]"))}));

  Metrics metrics;
  HopOptions options;
  options.name = "echo";
  options.metrics = &metrics;
  options.service_config = ConfigOf(kTables[0]);
  auto hop = Hop::Create(options);
  if (!hop.ok()) Die(hop.status().ToString());
  CheckingEcho service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  if (absl::Status s = InstallServerInterceptor(**hop, builder); !s.ok()) Die(s.ToString());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) Die("the server did not start");
  auto stub = echo::Relay::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  // Warm-up: connections, threads, the first resolution of the method.
  RunRound(*stub, service, **hop, false, rps, absl::Milliseconds(500), every);

  std::printf("Reload: %.0f calls/s for %s per round, %d rounds, the table swapped every %s\n", rps,
              absl::FormatDuration(duration).c_str(), rounds, absl::FormatDuration(every).c_str());
  std::printf(
      "| round | mode | calls | failed | mixed | reloads | p50 (us) | p99 (us) | behind schedule, "
      "max (ms) |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (int round = 1; round <= rounds; ++round) {
    for (int k = 0; k < 2; ++k) {
      const bool reload = (round % 2 == 1) == (k == 0);
      const RoundResult r = RunRound(*stub, service, **hop, reload, rps, duration, every);
      const char* mode = reload ? "reload" : "steady";
      std::printf("| %d | %s | %lld | %lld | %lld | %lld | %.1f | %.1f | %.1f |\n", round, mode,
                  static_cast<long long>(r.calls), static_cast<long long>(r.failed),
                  static_cast<long long>(r.mixed), static_cast<long long>(r.reloads), r.p50_us,
                  r.p99_us, r.lag_max_ms);
      std::printf(
          "RESULT bench=reload mode=%s round=%d rps=%.0f calls=%lld failed=%lld mixed=%lld "
          "reloads=%lld p50_us=%.1f p99_us=%.1f lag_max_ms=%.1f\n",
          mode, round, rps, static_cast<long long>(r.calls), static_cast<long long>(r.failed),
          static_cast<long long>(r.mixed), static_cast<long long>(r.reloads), r.p50_us, r.p99_us,
          r.lag_max_ms);
      std::fflush(stdout);
    }
  }
  server->Shutdown();
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace hopbudget

int main(int argc, char** argv) { return hopbudget::bench::Main(argc, argv); }
