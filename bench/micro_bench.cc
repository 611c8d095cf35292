// Copyright hopbudget authors.
//
// Micro-benchmarks of what hopbudget does on every call: budget derivation,
// the budget header, attribution encoding, trace encoding and append, metric
// increments, and the shared timer service (arm + cancel with N timers
// pending), and the admission gate's per-call method lookup. Compare them with the tens of
// microseconds a loopback gRPC call costs.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "admission_gate.h"  // internal: interceptors/grpc, added to the bench's includes
#include "call_mutex.h"      // internal
#include "echo/relay.pb.h"
#include "hopbudget/advanced/attribution.h"
#include "hopbudget/advanced/budget.h"
#include "hopbudget/advanced/clock.h"
#include "hopbudget/advanced/exposition.h"
#include "hopbudget/advanced/metrics.h"
#include "hopbudget/advanced/trace.h"
#include "hopbudget/advanced/wire.h"
#include "metrics_recorder.h"
#include "timer_service.h"  // internal: the bench target adds interceptors/ to its includes

namespace hopbudget {
namespace {

BudgetPolicy Policy() {
  BudgetPolicy p;
  p.request_cap = absl::Seconds(2);
  p.attempt_cap = absl::Milliseconds(300);
  return p;
}

void BM_DeriveRequestBudget(benchmark::State& state) {
  const BudgetPolicy policy = Policy();
  const absl::Time now = absl::Now();
  const absl::Time inbound = now + absl::Milliseconds(800);
  for (auto _ : state) {
    benchmark::DoNotOptimize(DeriveRequestBudget(policy, inbound, now));
  }
}
BENCHMARK(BM_DeriveRequestBudget);

void BM_DeriveCallDeadline(benchmark::State& state) {
  const BudgetPolicy policy = Policy();
  const absl::Time now = absl::Now();
  const absl::Time parent = now + absl::Milliseconds(800);
  for (auto _ : state) {
    benchmark::DoNotOptimize(DeriveCallDeadline(policy, parent, DeadlineSource::kClient, now));
  }
}
BENCHMARK(BM_DeriveCallDeadline);

void BM_RealClockNow(benchmark::State& state) {
  Clock& clock = Clock::Real();
  for (auto _ : state) benchmark::DoNotOptimize(clock.Now());
}
BENCHMARK(BM_RealClockNow);

void BM_FormatBudgetHeader(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(FormatBudgetHeader(absl::Microseconds(734512)));
}
BENCHMARK(BM_FormatBudgetHeader);

void BM_ParseBudgetHeader(benchmark::State& state) {
  const std::string value = "734512";
  for (auto _ : state) benchmark::DoNotOptimize(ParseBudgetHeader(value));
}
BENCHMARK(BM_ParseBudgetHeader);

void BM_ParseBudgetHeaderMalformed(benchmark::State& state) {
  const std::string value(4096, 'x');
  for (auto _ : state) benchmark::DoNotOptimize(ParseBudgetHeader(value));
}
BENCHMARK(BM_ParseBudgetHeaderMalformed);

// Only on DEADLINE_EXCEEDED: the error path.
void BM_EncodeStatusDetails(benchmark::State& state) {
  const Attribution a{DeadlineSource::kAttempt, "orders", absl::Milliseconds(300),
                      absl::Milliseconds(301)};
  for (auto _ : state) benchmark::DoNotOptimize(EncodeStatusDetails(a, "deadline exceeded"));
}
BENCHMARK(BM_EncodeStatusDetails);

void BM_DecodeStatusDetails(benchmark::State& state) {
  const std::string bin = EncodeStatusDetails(
      {DeadlineSource::kAttempt, "orders", absl::Milliseconds(300), absl::Milliseconds(301)},
      "deadline exceeded");
  for (auto _ : state) benchmark::DoNotOptimize(DecodeStatusDetails(bin));
}
BENCHMARK(BM_DecodeStatusDetails);

// The counters every call touches: one finished call on an interned method
// label, and (server side) the budget-at-arrival histogram.
void BM_MetricCallEnd(benchmark::State& state) {
  static Metrics metrics;
  static const MethodId method = metrics.Method("/hopbudget.echo.Relay/Call");
  for (auto _ : state)
    internal::Record(metrics).CountCallEnd(Side::kClient, method, absl::StatusCode::kOk);
}
BENCHMARK(BM_MetricCallEnd)->Threads(1)->Threads(2);

// A call's end with its latency, as the server interceptor records it: the
// counter plus one exponential-bucket observation (bucket computed with
// frexp and a search of 8 thresholds). Durations spread over 1 ms .. 60 s so
// that the branch predictor cannot learn one bucket.
void BM_MetricEndServerCall(benchmark::State& state) {
  static Metrics metrics;
  static const MethodId method = metrics.Method("/hopbudget.echo.Relay/Call");
  std::vector<absl::Duration> durations;
  for (int i = 0; i < 1024; ++i)
    durations.push_back(absl::Microseconds(1000 + (i * 58593) % 60000000));
  size_t i = 0;
  for (auto _ : state) {
    internal::Record(metrics).EndServerCall(method, absl::StatusCode::kOk, durations[i++ & 1023]);
  }
}
BENCHMARK(BM_MetricEndServerCall)->Threads(1)->Threads(2);

// What the computed bucket index saves: the same 128 default bounds searched
// by a linear scan, as the former 15 fixed buckets were (the index alone,
// no counting).
void BM_BucketLinearScan128(benchmark::State& state) {
  static Metrics metrics;
  const std::vector<double>& bounds = metrics.latency_bounds(LatencyKind::kServerCall);
  std::vector<double> seconds;
  for (int i = 0; i < 1024; ++i) seconds.push_back(0.001 + ((i * 58593) % 60000000) / 1e6);
  size_t i = 0;
  for (auto _ : state) {
    const double v = seconds[i++ & 1023];
    size_t b = 0;
    while (b < bounds.size() && v > bounds[b]) ++b;
    benchmark::DoNotOptimize(b);
  }
}
BENCHMARK(BM_BucketLinearScan128);

// Why per-call state uses internal::CallMutex: a mutex made and locked once
// per call. Debian's abseil runs absl::Mutex's debug deadlock detection,
// which registers every new mutex in a process-wide graph.
void BM_PerCallAbslMutex(benchmark::State& state) {
  for (auto _ : state) {
    absl::Mutex mu;
    absl::MutexLock lock(&mu);
    benchmark::DoNotOptimize(&mu);
  }
}
BENCHMARK(BM_PerCallAbslMutex)->Threads(1)->Threads(2);

void BM_PerCallCallMutex(benchmark::State& state) {
  for (auto _ : state) {
    internal::CallMutex mu;
    internal::CallMutexLock lock(&mu);
    benchmark::DoNotOptimize(&mu);
  }
}
BENCHMARK(BM_PerCallCallMutex)->Threads(1)->Threads(2);

void BM_MetricBudgetAtArrival(benchmark::State& state) {
  static Metrics metrics;
  static const MethodId method = metrics.Method("/hopbudget.echo.Relay/Call");
  for (auto _ : state)
    internal::Record(metrics).ObserveBudgetAtArrival(method, absl::Milliseconds(734));
}
BENCHMARK(BM_MetricBudgetAtArrival)->Threads(1)->Threads(2);

// Once per call in each interceptor: interning the method label, for a
// method of the generated code (linked in: the relay proto) ...
void BM_MetricMethodLookup(benchmark::State& state) {
  benchmark::DoNotOptimize(echo::RelayRequest::descriptor());  // links the relay descriptors
  static Metrics metrics;
  for (auto _ : state) benchmark::DoNotOptimize(metrics.Method("/hopbudget.echo.Relay/Call"));
}
BENCHMARK(BM_MetricMethodLookup);

// ... and for a method the descriptor pool does not know (a generic stub, a
// service whose generated code is not linked): labelled "other".
void BM_MetricMethodLookupUnknown(benchmark::State& state) {
  static Metrics metrics;
  for (auto _ : state) benchmark::DoNotOptimize(metrics.Method("/not.Linked/Method"));
}
BENCHMARK(BM_MetricMethodLookupUnknown);

// Only on DEADLINE_EXCEEDED.
void BM_MetricDeadlineExceeded(benchmark::State& state) {
  static Metrics metrics;
  for (auto _ : state) {
    internal::Record(metrics).CountDeadlineExceeded(Side::kServer, DeadlineSource::kAttempt,
                                                    "orders");
  }
}
BENCHMARK(BM_MetricDeadlineExceeded);

// A process-wide counter labelled by an enum (shield, retry, hedge and
// slot events are all counted this way).
void BM_MetricCountScalar(benchmark::State& state) {
  static Metrics metrics;
  for (auto _ : state) internal::Record(metrics).CountShield(ShieldEvent::kCompleted);
}
BENCHMARK(BM_MetricCountScalar)->Threads(1)->Threads(2);

// A scrape: the snapshot of a registry with 2 methods seen, and the snapshot
// as Prometheus text. Not on the call path; says what a scrape costs.
Metrics& ScrapedMetrics() {
  static Metrics* const metrics = [] {
    auto* m = new Metrics();
    const char* const methods[] = {"/hopbudget.echo.Relay/Call", "/grpc.health.v1.Health/Check"};
    for (const char* name : methods) {
      const MethodId id = m->Method(name);
      for (int i = 0; i < 100; ++i) {
        internal::Record(*m).EndServerCall(id, absl::StatusCode::kOk, absl::Milliseconds(i));
        internal::Record(*m).EndClientAttempt(id, absl::StatusCode::kUnavailable,
                                              absl::Milliseconds(i), ClientCallKind::kRetryAttempt);
        internal::Record(*m).ObserveBudgetAtArrival(id, absl::Milliseconds(10 * i));
      }
    }
    internal::Record(*m).CountShield(ShieldEvent::kStarted);
    internal::Record(*m).CountDeadlineExceeded(Side::kClient, DeadlineSource::kAttempt, "ledger");
    return m;
  }();
  return *metrics;
}
void BM_MetricSnapshot(benchmark::State& state) {
  Metrics& metrics = ScrapedMetrics();
  for (auto _ : state) benchmark::DoNotOptimize(metrics.Snapshot());
}
BENCHMARK(BM_MetricSnapshot);
void BM_MetricPrometheusText(benchmark::State& state) {
  const MetricsSnapshot snapshot = ScrapedMetrics().Snapshot();
  for (auto _ : state) benchmark::DoNotOptimize(FormatPrometheusText(snapshot, "orders"));
}
BENCHMARK(BM_MetricPrometheusText);

BudgetTrace TraceOfHops(int hops) {
  BudgetTrace t;
  for (int i = 0; i < hops; ++i) {
    HopTrace h;
    h.hop = "hop-" + std::to_string(i);
    h.budget_at_arrival = absl::Milliseconds(800 - 100 * i);
    h.spent = absl::Microseconds(12345);
    h.attempts = 1;
    h.source = DeadlineSource::kNone;
    t.hops.push_back(h);
  }
  return t;
}

// A hop's trailer: its own entry plus what came back from downstream.
void BM_TraceAppendEncode(benchmark::State& state) {
  const BudgetTrace downstream = TraceOfHops(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    BudgetTrace mine = TraceOfHops(1);
    AppendTrace(mine, downstream);
    benchmark::DoNotOptimize(EncodeTrace(mine));
  }
}
BENCHMARK(BM_TraceAppendEncode)->Arg(1)->Arg(3)->Arg(15);

void BM_TraceDecode(benchmark::State& state) {
  const std::string bytes = EncodeTrace(TraceOfHops(static_cast<int>(state.range(0))));
  for (auto _ : state) benchmark::DoNotOptimize(DecodeTrace(bytes));
}
BENCHMARK(BM_TraceDecode)->Arg(1)->Arg(3)->Arg(15);

// Arming and cancelling one timer on the shared timer service while
// `range(0)` other timers (distinct deadlines, far in the future) are
// pending: the cost hopbudget adds to a call that needs its own timer (a
// request cap tighter than the caller's deadline), as concurrency grows.
// Uses a private service without a thread so that nothing fires meanwhile.
void BM_TimerArmCancel(benchmark::State& state) {
  internal::TimerService timers(Clock::Real(), {/*start_thread=*/false});
  const absl::Time base = absl::Now() + absl::Hours(1);
  std::vector<internal::TimerService::TimerId> pending;
  for (int64_t i = 0; i < state.range(0); ++i) {
    pending.push_back(timers.Schedule(base + absl::Microseconds(i), [] {}));
  }
  int64_t i = 0;
  for (auto _ : state) {
    auto id = timers.Schedule(base + absl::Microseconds(7 * (i++ % 10007)), [] {});
    benchmark::DoNotOptimize(timers.Cancel(id));
  }
  for (auto id : pending) timers.Cancel(id);
}
BENCHMARK(BM_TimerArmCancel)->Arg(1)->Arg(100)->Arg(1000)->Arg(10000);

// AdmissionGate::For, which every call covered by admission makes: four
// known methods, looked up from 1 and 2 threads at once (contention).
void BM_AdmissionGateFor(benchmark::State& state) {
  static FakeClock clock;
  static internal::TimerService timers(clock, [] {
    internal::TimerService::Options o;
    o.start_thread = false;
    return o;
  }());
  static const std::unique_ptr<internal::AdmissionGate> gate = [] {
    AdmissionOptions o;
    o.enabled = true;
    return *internal::AdmissionGate::Create(o, absl::Milliseconds(5), &clock, &timers);
  }();
  const char* const methods[] = {"/echo.Relay/Call", "/echo.Relay/Watch", "/demo.Orders/Place",
                                 "/demo.Ledger/Commit"};
  size_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(&gate->For(methods[i++ & 3]));
}
BENCHMARK(BM_AdmissionGateFor)->Threads(1)->Threads(2);

}  // namespace
}  // namespace hopbudget
