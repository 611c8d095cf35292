// Copyright hopbudget authors.
//
// hedge_bench: the targets of races and hedges (docs/fan-out.md), on in-process callback servers on
// 127.0.0.1 behind hopbudget's server interceptor, clients on hopbudget channels.
//
// 1. Hedging. Two replicas; replica A answers after `--slow_ms` (1 s) for
//    `--slow_ratio` (5 %) of its calls, B is always fast. Primaries
//    alternate between them. Runs, `--calls` each with `--concurrency` in
//    flight: "healthy" (every call to B), "unhedged" (alternating, no hedge),
//    "hedged" (Hedger, delay = p95 of recent latencies, max_extra_load 5 %,
//    the hedge to the other replica). Target: hedged p99 <= 2 x healthy p99,
//    extra load <= 5 %.
//    The machine is shared and noisy, so healthy and hedged run side by side
//    in `--rounds` rounds, their order alternating, and the verdict is on the
//    median of the per-round ratios, printed with its spread. Every run
//    starts with `--warmup` calls that are not counted: a new Hedger hedges
//    with the fixed delay and an empty extra-load bucket until it has seen
//    enough calls (hedge.h), which is start-up, not the steady state the
//    target is about. The Hedger, its window and its bucket carry over from
//    round to round, as in a service.
//    `--service` gives every answer that is not slow a log-normal service
//    time (median `--service`, spread `--service-sigma`), as a replica that
//    does work has; 0 answers at once, so that latency is gRPC's alone.
//    Why both are run: with answers at once, the healthy p99 on 2 cores is
//    about 1 ms, below the hedge's least delay (1 ms) plus one more call
//    under the same load, so the ratio sits near 2 whatever the hedger does
//    (docs/fan-out.md).
// 2. Race of 3 where one target hangs: time from the winner's answer at the
//    caller to the hanging target's OnCancel. Target: <= 2 ms. `--races=0`
//    skips it.
//
//   hedge_bench [--calls=2000] [--rounds=3] [--warmup=400] [--concurrency=16]
//               [--slow-ratio-pct=5] [--slow=1s] [--races=300] [--min-delay=1ms]
//               [--service=0] [--service-sigma=0.5]
#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "bench_util.h"
#include "echo/relay.grpc.pb.h"
#include "hopbudget/advanced/hedge_grpc.h"
#include "hopbudget/advanced/race_grpc.h"
#include "hopbudget/client.h"
#include "hopbudget/server.h"

ABSL_FLAG(int, calls, 2000, "calls counted per run, 100..1000000");
ABSL_FLAG(int, rounds, 3, "rounds of (healthy, hedged), order alternating, 1..20");
ABSL_FLAG(int, warmup, 400, "calls before each run's counted ones, 0..100000");
ABSL_FLAG(int, concurrency, 16, "calls in flight, 1..1024");
ABSL_FLAG(int, slow_ratio_pct, 5, "percent of calls a replica answers slowly, 0..100");
ABSL_FLAG(absl::Duration, slow, absl::Seconds(1), "how slowly, 1ms..60s");
ABSL_FLAG(int, races, 300, "races per run, 0 (no race)..100000");
ABSL_FLAG(absl::Duration, min_delay, absl::Milliseconds(1), "the hedge's least delay, 0..1s");
ABSL_FLAG(absl::Duration, service, absl::ZeroDuration(),
          "median service time of every answer that is not slow, 0 (answer at once)..1s");
ABSL_FLAG(double, service_sigma, 0.5,
          "spread of the service time: sigma of its logarithm (log-normal), 0..2");

namespace hopbudget {
namespace bench {
namespace {

// What a replica does with one call.
enum class Behaviour { kFast, kSlow, kHang };

// How long a replica works on an answer that is not slow: a log-normal
// service time (median `median`, sigma of its log `sigma`), or none.
struct ServiceTime {
  absl::Duration median = absl::ZeroDuration();
  double sigma = 0;
};

class Replica final : public echo::Relay::CallbackService {
 public:
  Replica(std::string name, double slow_ratio, absl::Duration slow, bool hang, uint32_t seed,
          ServiceTime service = {})
      : slow_ratio_(slow_ratio),
        slow_(slow),
        hang_(hang),
        service_(service),
        rng_(seed),
        service_log_(0, service.sigma > 0 ? service.sigma : 1) {  // drawn only when > 0
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(this);
    ServerOptions options;
    options.hop = std::move(name);
    auto factory = MakeServerInterceptorFactory(options);
    if (!factory.ok()) Die(factory.status().ToString());
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
    creators.push_back(*std::move(factory));
    builder.experimental().SetInterceptorCreators(std::move(creators));
    server_ = builder.BuildAndStart();
    if (server_ == nullptr) Die("could not start a replica");
  }
  ~Replica() override {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server_->Wait();
  }
  std::string target() const { return absl::StrCat("127.0.0.1:", port_); }
  uint64_t calls() const { return calls_.load(); }
  // MonoSeconds() of the last OnCancel of a hanging call; 0 when none.
  double last_cancel() const { return last_cancel_.load(); }
  void ResetCancel() { last_cancel_.store(0); }

  grpc::ServerUnaryReactor* Call(grpc::CallbackServerContext*, const echo::RelayRequest*,
                                 echo::RelayReply*) override {
    calls_.fetch_add(1);
    Behaviour b = Behaviour::kFast;
    absl::Duration wait = absl::ZeroDuration();
    if (hang_) {
      b = Behaviour::kHang;
    } else {
      absl::MutexLock lock(&mu_);
      if (slow_ratio_ > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < slow_ratio_) {
        b = Behaviour::kSlow;
        wait = slow_;
      } else if (service_.median > absl::ZeroDuration()) {
        wait =
            service_.sigma > 0 ? service_.median * std::exp(service_log_(rng_)) : service_.median;
      }
    }
    auto* r = new Reactor(this, b, wait);
    r->Begin();
    return r;
  }

 private:
  class Reactor final : public grpc::ServerUnaryReactor {
   public:
    Reactor(Replica* replica, Behaviour b, absl::Duration wait)
        : replica_(replica), behaviour_(b), wait_(wait) {}
    void Begin() {
      if (behaviour_ == Behaviour::kHang) return;
      if (wait_ <= absl::ZeroDuration()) {
        Answer(grpc::Status::OK);
      } else {
        refs_.fetch_add(1);
        alarm_.Set(std::chrono::system_clock::now() + absl::ToChronoMicroseconds(wait_),
                   [this](bool fired) {
                     if (fired) Answer(grpc::Status::OK);
                     Unref();
                   });
      }
    }
    void OnCancel() override {
      if (behaviour_ == Behaviour::kHang) replica_->last_cancel_.store(MonoSeconds());
      alarm_.Cancel();
      Answer(grpc::Status::CANCELLED);
    }
    void OnDone() override { Unref(); }

   private:
    void Answer(grpc::Status s) {
      if (answered_.exchange(true)) return;
      Finish(std::move(s));
    }
    void Unref() {
      if (refs_.fetch_sub(1) == 1) delete this;
    }
    Replica* const replica_;
    const Behaviour behaviour_;
    const absl::Duration wait_;  // before answering; zero: at once
    grpc::Alarm alarm_;
    std::atomic<bool> answered_{false};
    std::atomic<int> refs_{1};
  };

  const double slow_ratio_;
  const absl::Duration slow_;
  const bool hang_;
  const ServiceTime service_;
  absl::Mutex mu_;
  std::mt19937 rng_ ABSL_GUARDED_BY(mu_);
  std::normal_distribution<double> service_log_ ABSL_GUARDED_BY(mu_);
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::atomic<uint64_t> calls_{0};
  std::atomic<double> last_cancel_{0};
};

std::string DescribeService(const ServiceTime& s) {
  if (s.median <= absl::ZeroDuration()) return "none (answers at once)";
  return absl::StrCat("log-normal, median ", FormatBudget(s.median), ", sigma ", s.sigma);
}

std::unique_ptr<echo::Relay::Stub> StubTo(const std::string& target) {
  ClientOptions options;
  options.hop = "orders";
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  auto channel = CreateChannel(target, grpc::InsecureChannelCredentials(), options, args);
  if (!channel.ok()) Die(channel.status().ToString());
  return echo::Relay::NewStub(*channel);
}

using StartCall = std::function<void(int, std::function<void(bool)>)>;

// Runs `calls` calls, `concurrency` in flight; `start(i, done)` starts call
// i and calls done(ok) once. Returns the latencies in ms of the OK calls.
// The loop's state is shared with the completions: the last one may still
// be on its way out when the caller, woken by it, has returned.
std::vector<double> ClosedLoop(int calls, int concurrency, const StartCall& start, int* failed) {
  struct Loop {
    absl::Mutex mu;
    std::vector<double> ms ABSL_GUARDED_BY(mu);
    int next ABSL_GUARDED_BY(mu) = 0;
    int ended ABSL_GUARDED_BY(mu) = 0;
    int failed ABSL_GUARDED_BY(mu) = 0;
    int calls = 0;
    StartCall start;
    // Starts the next call, if any is left.
    static void Launch(const std::shared_ptr<Loop>& loop) {
      int i;
      {
        absl::MutexLock lock(&loop->mu);
        if (loop->next >= loop->calls) return;
        i = loop->next++;
      }
      const double t0 = MonoSeconds();
      loop->start(i, [loop, t0](bool ok) {
        const double t = (MonoSeconds() - t0) * 1e3;
        Launch(loop);
        absl::MutexLock lock(&loop->mu);
        if (ok) {
          loop->ms.push_back(t);
        } else {
          ++loop->failed;
        }
        ++loop->ended;
      });
    }
  };
  auto loop = std::make_shared<Loop>();
  loop->calls = calls;
  loop->start = start;
  for (int c = 0; c < concurrency; ++c) Loop::Launch(loop);
  absl::MutexLock lock(&loop->mu);
  auto all = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return loop->ended == calls; };
  loop->mu.Await(absl::Condition(&all));
  *failed = loop->failed;
  return std::move(loop->ms);
}

// Prints one run's row and RESULT line; returns its p99 counting failed
// calls as infinitely late (what the target is judged on).
double PrintRow(const char* run, int round, std::vector<double> ms, int failed, double extra,
                double service_ms) {
  const double p99_all = QuantileCountingFailures(ms, failed, 0.99);
  const double p999 = QuantileCountingFailures(ms, failed, 0.999);
  const Stats s = Summarize(ms);
  std::printf("| %s | %d | %zu | %s | %s | %s | %s | %d | %s |\n", run, round, s.n,
              Fixed(s.p50).c_str(), Fixed(s.p99).c_str(), Fixed(p999).c_str(), Fixed(s.max).c_str(),
              failed, Fixed(extra * 100, 2).c_str());
  std::printf(
      "RESULT bench=hedge run=%s round=%d calls=%zu p50_ms=%.4f p99_ms=%.4f p999_ms=%.4f "
      "max_ms=%.4f failed=%d extra_load=%.4f service_ms=%.3f\n",
      run, round, s.n, s.p50, s.p99, p999, s.max, failed, extra, service_ms);
  return p99_all;
}

// Hedges sent over hedged calls between two snapshots.
double ExtraLoadBetween(const MetricsSnapshot& before, const MetricsSnapshot& after) {
  const uint64_t calls = after.hedged_calls - before.hedged_calls;
  return calls == 0 ? 0.0
                    : static_cast<double>(after.hedges_sent - before.hedges_sent) /
                          static_cast<double>(calls);
}

int Main(int argc, char** argv) {
  cli::ParseOrExit(
      argc, argv, "hedge_bench",
      "hedge_bench: tail latency with hedged calls and races against replicas "
      "that are sometimes slow.\n\n"
      "  hedge_bench [--calls=2000] [--rounds=3] [--warmup=400] [--concurrency=16]\n"
      "              [--slow-ratio-pct=5] [--slow=1s] [--races=300] [--min-delay=1ms]\n"
      "              [--service=0] [--service-sigma=0.5]");
  const int calls = absl::GetFlag(FLAGS_calls);
  const int rounds = absl::GetFlag(FLAGS_rounds);
  const int warmup = absl::GetFlag(FLAGS_warmup);
  const int concurrency = absl::GetFlag(FLAGS_concurrency);
  const int slow_pct = absl::GetFlag(FLAGS_slow_ratio_pct);
  const absl::Duration slow = absl::GetFlag(FLAGS_slow);
  const int races = absl::GetFlag(FLAGS_races);
  const absl::Duration min_delay = absl::GetFlag(FLAGS_min_delay);
  const ServiceTime service{absl::GetFlag(FLAGS_service), absl::GetFlag(FLAGS_service_sigma)};
  cli::ExitIfBad(
      "hedge_bench",
      cli::FirstError({
          cli::InRange("calls", calls, 100, 1000000),
          cli::InRange("rounds", rounds, 1, 20),
          cli::InRange("warmup", warmup, 0, 100000),
          cli::InRange("concurrency", concurrency, 1, 1024),
          cli::InRange("slow-ratio-pct", slow_pct, 0, 100),
          cli::Positive("slow", slow),
          slow <= absl::Seconds(60) ? absl::OkStatus()
                                    : absl::InvalidArgumentError(absl::StrCat(
                                          "--slow=", absl::FormatDuration(slow), ": at most 60s")),
          cli::InRange("races", races, 0, 100000),
          cli::NonNegative("min-delay", min_delay),
          min_delay <= absl::Seconds(1)
              ? absl::OkStatus()
              : absl::InvalidArgumentError(
                    absl::StrCat("--min-delay=", absl::FormatDuration(min_delay), ": at most 1s")),
          cli::NonNegative("service", service.median),
          service.median <= absl::Seconds(1)
              ? absl::OkStatus()
              : absl::InvalidArgumentError(absl::StrCat(
                    "--service=", absl::FormatDuration(service.median), ": at most 1s")),
          service.sigma >= 0 && service.sigma <= 2
              ? absl::OkStatus()
              : absl::InvalidArgumentError(
                    absl::StrCat("--service-sigma=", service.sigma, ": must be in [0, 2]")),
      }));
  const double slow_ratio = static_cast<double>(slow_pct) / 100;
  const double service_ms = absl::ToDoubleMilliseconds(service.median);
  const absl::Duration budget = absl::Seconds(10);

  // 1. Hedging.
  Replica a("replica-a", slow_ratio, slow, false, 7, service);
  Replica b("replica-b", 0, slow, false, 8, service);
  std::unique_ptr<echo::Relay::Stub> stubs[2] = {StubTo(a.target()), StubTo(b.target())};
  const echo::RelayRequest request;
  std::printf(
      "Hedging: replica A slow (%s) for %.0f %% of its calls, B healthy; service time %s; "
      "primaries alternate; %d calls counted per run after %d not counted\n\n"
      "| run | round | calls | p50 (ms) | p99 (ms) | p99.9 (ms) | max (ms) | failed | "
      "extra load (%%) |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
      FormatBudget(slow).c_str(), slow_ratio * 100, DescribeService(service).c_str(), calls,
      warmup);
  auto plain = [&](bool alternate) -> StartCall {
    return [&, alternate](int i, std::function<void(bool)> done) {
      auto ctx = std::make_shared<grpc::ClientContext>();
      ctx->set_deadline(absl::ToChronoTime(absl::Now() + budget));
      auto reply = std::make_shared<echo::RelayReply>();
      stubs[alternate ? i % 2 : 1]->async()->Call(
          ctx.get(), &request, reply.get(), [ctx, reply, done](grpc::Status s) { done(s.ok()); });
    };
  };
  // A warm-up, then the counted calls.
  auto run = [&](const StartCall& start, int* failed) {
    if (warmup > 0) ClosedLoop(warmup, concurrency, start, failed);
    return ClosedLoop(calls, concurrency, start, failed);
  };
  int failed = 0;
  {
    std::vector<double> unhedged = run(plain(true), &failed);
    PrintRow("unhedged", 0, unhedged, failed, 0, service_ms);
  }

  HedgerOptions options;
  options.hop = "orders";
  options.hedge.quantile = 0.95;
  options.hedge.max_extra_load = 0.05;
  options.hedge.delay = absl::Milliseconds(5);
  options.hedge.min_delay = min_delay;
  Metrics metrics;
  options.metrics = &metrics;
  auto hedger = Hedger::Create(options);
  if (!hedger.ok()) Die(hedger.status().ToString());
  const StartCall hedged_call = [&](int i, std::function<void(bool)> done) {
    auto replies = std::make_shared<std::array<echo::RelayReply, 3>>();
    (*hedger)->Start(
        LogicalCall::WithDeadline(absl::Now() + budget),
        [&, i, replies](int attempt, grpc::ClientContext* ctx,
                        std::function<void(grpc::Status)> d) {
          stubs[(i + attempt) % 2]->async()->Call(ctx, &request, &(*replies)[attempt],
                                                  std::move(d));
        },
        [replies, done](HedgeResult r) { done(r.status.ok()); });
  };
  std::vector<double> ratios, healthy_p99s, hedged_p99s;
  uint64_t counted_calls = 0, counted_hedges = 0;
  for (int round = 1; round <= rounds; ++round) {
    double healthy_p99 = 0, hedged_p99 = 0;
    auto healthy_run = [&] {
      std::vector<double> ms = run(plain(false), &failed);
      healthy_p99 = PrintRow("healthy", round, ms, failed, 0, service_ms);
    };
    auto hedged_run = [&] {
      if (warmup > 0) ClosedLoop(warmup, concurrency, hedged_call, &failed);
      const MetricsSnapshot before = metrics.Snapshot();
      std::vector<double> ms = ClosedLoop(calls, concurrency, hedged_call, &failed);
      const MetricsSnapshot after = metrics.Snapshot();
      counted_calls += after.hedged_calls - before.hedged_calls;
      counted_hedges += after.hedges_sent - before.hedges_sent;
      hedged_p99 =
          PrintRow("hedged", round, ms, failed, ExtraLoadBetween(before, after), service_ms);
    };
    if (round % 2 == 1) {
      healthy_run();
      hedged_run();
    } else {
      hedged_run();
      healthy_run();
    }
    const double ratio = healthy_p99 > 0 ? hedged_p99 / healthy_p99 : 0;
    ratios.push_back(ratio);
    healthy_p99s.push_back(healthy_p99);
    hedged_p99s.push_back(hedged_p99);
    std::printf(
        "RESULT bench=hedge_round round=%d hedged_p99_ms=%.4f healthy_p99_ms=%.4f "
        "ratio=%.3f service_ms=%.3f\n",
        round, hedged_p99, healthy_p99, ratio, service_ms);
  }
  const MetricsSnapshot ms = metrics.Snapshot();
  // Counted calls only; the whole run, warm-ups included, is what the
  // bucket bounds (<= max_extra_load * calls + 1) and is printed beside it.
  const double extra_load =
      counted_calls == 0 ? 0.0
                         : static_cast<double>(counted_hedges) / static_cast<double>(counted_calls);
  std::printf(
      "\nhedges sent %llu, won %llu, skipped for extra load %llu (all runs, warm-ups "
      "included: extra load %.2f %%); delay now %s\n",
      static_cast<unsigned long long>(ms.hedges_sent),
      static_cast<unsigned long long>(ms.hedges_won),
      static_cast<unsigned long long>(ms.hedge_skipped(HedgeOutcome::kExtraLoad)),
      ms.extra_load() * 100, FormatBudget((*hedger)->current_delay()).c_str());
  const double ratio = Median(ratios);  // sorts `ratios`: front and back are the spread
  const bool p99_met = ratio > 0 && ratio <= 2.0;
  const bool load_met = extra_load <= 0.05 + 1e-9;
  std::printf(
      "RESULT bench=hedge_target rounds=%d hedged_p99_ms=%.4f healthy_p99_ms=%.4f ratio=%.3f "
      "ratio_min=%.3f ratio_max=%.3f extra_load=%.4f extra_load_all=%.4f p99_met=%d "
      "load_met=%d service_ms=%.3f\n\n",
      rounds, Median(hedged_p99s), Median(healthy_p99s), ratio, ratios.front(), ratios.back(),
      extra_load, ms.extra_load(), p99_met ? 1 : 0, load_met ? 1 : 0, service_ms);
  if (races == 0) return 0;

  // 2. A race of 3 where one target hangs.
  Replica fast1("race-fast-1", 0, slow, false, 1);
  Replica fast2("race-fast-2", 0, slow, false, 2);
  Replica hung("race-hang", 0, slow, true, 3);
  std::unique_ptr<echo::Relay::Stub> race_stubs[3] = {
      StubTo(fast1.target()), StubTo(fast2.target()), StubTo(hung.target())};
  RaceOptions race_options;
  race_options.hop = "orders";
  auto race = Race::Create(race_options);
  if (!race.ok()) Die(race.status().ToString());
  std::vector<double> lag_ms;
  int lost = 0;
  int not_reached = 0;  // cancelled before the hanging callee's handler ran: nothing to cut
  for (int r = 0; r < races + 10; ++r) {
    hung.ResetCancel();
    const uint64_t hung_calls = hung.calls();
    std::atomic<double> won_at{0};
    echo::RelayReply replies[3];
    RaceResult result = (*race)->Call(
        LogicalCall::WithDeadline(absl::Now() + budget), 3,
        [&](int i, grpc::ClientContext* ctx, std::function<void(grpc::Status)> d) {
          race_stubs[i]->async()->Call(ctx, &request, &replies[i], [&won_at, d](grpc::Status s) {
            if (s.ok()) {
              double zero = 0;
              won_at.compare_exchange_strong(zero, MonoSeconds());
            }
            d(std::move(s));
          });
        });
    // The race answered once the hung loser's cancel completed at the caller;
    // its callee's OnCancel may still be on its way (the times compared are
    // taken where the events happen; this wait only collects them).
    const double deadline = MonoSeconds() + 1;
    while (hung.last_cancel() == 0 && MonoSeconds() < deadline) {
      absl::SleepFor(absl::Microseconds(50));
    }
    if (r < 10) continue;  // warm-up
    if (!result.status.ok()) {
      ++lost;
    } else if (hung.last_cancel() == 0) {
      // A loser whose handler never ran was cut before it cost the callee
      // anything; one whose handler ran and never saw the cancel is lost.
      if (hung.calls() == hung_calls) {
        ++not_reached;
      } else {
        ++lost;
      }
    } else {
      lag_ms.push_back((hung.last_cancel() - won_at.load()) * 1e3);
    }
    continue;
  }
  const double lag_p99_all = QuantileCountingFailures(lag_ms, lost, 0.99);
  const Stats ls = Summarize(lag_ms);
  std::printf(
      "Race of 3, one target hangs: winner's answer -> hung callee's OnCancel\n\n"
      "| races | p50 (ms) | p90 (ms) | p99 (ms) | max (ms) | lost | cut before the handler |\n"
      "| --- | --- | --- | --- | --- | --- | --- |\n| %zu | %s | %s | %s | %s | %d | %d |\n",
      ls.n, Fixed(ls.p50).c_str(), Fixed(ls.p90).c_str(), Fixed(ls.p99).c_str(),
      Fixed(ls.max).c_str(), lost, not_reached);
  std::printf(
      "RESULT bench=race_cancel races=%zu p50_ms=%.4f p90_ms=%.4f p99_ms=%.4f "
      "max_ms=%.4f lost=%d not_reached=%d p99_all_ms=%.4f target_met=%d\n",
      ls.n, ls.p50, ls.p90, ls.p99, ls.max, lost, not_reached, lag_p99_all,
      lag_p99_all <= 2.0 ? 1 : 0);
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace hopbudget

int main(int argc, char** argv) { return hopbudget::bench::Main(argc, argv); }
