// Copyright hopbudget authors.
//
// /metrics serialization: hopbudget's own text exposition (exposition.cc)
// against prometheus-cpp's prometheus::TextSerializer over the same series
// (the families hopbudget::prometheus builds), for issue 15 item 5: should
// /metrics use prometheus-cpp's serializer? Nothing here is on the per-call
// path: both sides read one MetricsSnapshot at scrape time.
//
// Histograms have the default 128 exponential buckets. Run:
// build/.../bench/exposition_bench --benchmark_repetitions=5
#include <benchmark/benchmark.h>
#include <prometheus/text_serializer.h>

#include <string>
#include <vector>

#include "demo/demo.pb.h"
#include "hopbudget/advanced/clock.h"
#include "hopbudget/advanced/exposition.h"
#include "hopbudget/advanced/metrics.h"
#include "hopbudget/advanced/prometheus_collectable.h"
#include "metrics_recorder.h"

namespace hopbudget {
namespace {

constexpr const char* kMethods[] = {
    "/hopbudget.demo.Gateway/PlaceOrder", "/hopbudget.demo.Orders/CreateOrder",
    "/hopbudget.demo.Ledger/Commit",      "/hopbudget.demo.Admin/SetFaults",
    "/hopbudget.demo.Admin/GetFaults",    "/hopbudget.demo.Admin/GetStats",
    "/hopbudget.demo.Admin/ResetStats",
};
constexpr absl::StatusCode kCodes[] = {absl::StatusCode::kOk, absl::StatusCode::kDeadlineExceeded,
                                       absl::StatusCode::kUnavailable};

// Two data sets (the benchmark's argument):
//   0  the demo's orders hop after a mixed load: server CreateOrder and
//      client Commit (attempts and calls) under OK, DEADLINE_EXCEEDED and
//      UNAVAILABLE, one admin method, budgets of CreateOrder;
//   1  every family of every method populated: server and client
//      latencies and budgets of 7 methods under 3 codes (an upper bound).
Metrics& Populated(int set) {
  static Metrics* metrics[2] = {nullptr, nullptr};
  if (metrics[set] != nullptr) return *metrics[set];
  // Links the demo's descriptors, so that its methods are labels of their own.
  benchmark::DoNotOptimize(demo::Order::descriptor());
  auto* m = new Metrics(&Clock::Real());
  auto observe = [m](const char* name, bool server, bool client) {
    const MethodId id = m->Method(name);
    for (int i = 0; i < 2000; ++i) {
      const absl::Duration d = absl::Microseconds(200 + (i * 7919) % 900000);
      const absl::StatusCode code = kCodes[i % 3];
      if (server) {
        internal::Record(*m).EndServerCall(id, code, d);
        internal::Record(*m).ObserveBudgetAtArrival(id, absl::Milliseconds(800) - d / 4);
        internal::Record(*m).ObserveRequestBudget(id, absl::Milliseconds(700) - d / 4);
        internal::Record(*m).ObserveBudgetRemaining(id, absl::Milliseconds(500) - d / 2);
      }
      if (client) {
        internal::Record(*m).EndClientAttempt(id, code, d, ClientCallKind::kRetryAttempt);
        internal::Record(*m).EndRetryingCall(id, code, 1 + i % 3, d);
        if (code != absl::StatusCode::kOk) internal::Record(*m).CountRetry(id, code);
      }
    }
  };
  if (set == 0) {
    observe("/hopbudget.demo.Orders/CreateOrder", true, false);
    observe("/hopbudget.demo.Ledger/Commit", false, true);
    internal::Record(*m).EndServerCall(m->Method("/hopbudget.demo.Admin/GetStats"),
                                       absl::StatusCode::kOk, absl::Milliseconds(1));
  } else {
    for (const char* name : kMethods) observe(name, true, true);
  }
  for (int s = 1; s < kDeadlineSourceCount; ++s) {
    internal::Record(*m).CountDeadlineExceeded(Side::kServer, static_cast<DeadlineSource>(s),
                                               "ledger");
    internal::Record(*m).CountDeadlineExceeded(Side::kClient, static_cast<DeadlineSource>(s),
                                               "orders");
  }
  metrics[set] = m;
  return *m;
}

void Counters(benchmark::State& state, const std::string& text) {
  state.counters["bytes"] = static_cast<double>(text.size());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}

// hopbudget's /metrics body from a snapshot.
void BM_HopbudgetText(benchmark::State& state) {
  const MetricsSnapshot snapshot = Populated(static_cast<int>(state.range(0))).Snapshot();
  std::string text;
  for (auto _ : state) {
    text = FormatPrometheusText(snapshot, "orders");
    benchmark::DoNotOptimize(text);
  }
  Counters(state, text);
}
BENCHMARK(BM_HopbudgetText)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

// prometheus-cpp's serializer alone over the same families, already built:
// the cost /metrics would have if hopbudget produced MetricFamily objects
// directly instead of text.
void BM_PrometheusCppTextSerializer(benchmark::State& state) {
  const std::string ours =
      FormatPrometheusText(Populated(static_cast<int>(state.range(0))).Snapshot(), "orders");
  absl::StatusOr<std::vector<prometheus::MetricFamily>> families = ParseHopbudgetText(ours);
  if (!families.ok()) {
    state.SkipWithError(std::string(families.status().message()).c_str());
    return;
  }
  const prometheus::TextSerializer serializer;
  std::string text;
  for (auto _ : state) {
    text = serializer.Serialize(*families);
    benchmark::DoNotOptimize(text);
  }
  Counters(state, text);
}
BENCHMARK(BM_PrometheusCppTextSerializer)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

// The whole scrape through hopbudget::prometheus as it is built today:
// hopbudget's text, parsed into families, serialized by prometheus-cpp.
void BM_PrometheusCppAdapterScrape(benchmark::State& state) {
  const MetricsSnapshot snapshot = Populated(static_cast<int>(state.range(0))).Snapshot();
  const prometheus::TextSerializer serializer;
  std::string text;
  for (auto _ : state) {
    absl::StatusOr<std::vector<prometheus::MetricFamily>> families =
        ParseHopbudgetText(FormatPrometheusText(snapshot, "orders"));
    text = serializer.Serialize(*families);
    benchmark::DoNotOptimize(text);
  }
  Counters(state, text);
}
BENCHMARK(BM_PrometheusCppAdapterScrape)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

// What both start from, for scale.
void BM_Snapshot(benchmark::State& state) {
  Metrics& metrics = Populated(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(metrics.Snapshot());
}
BENCHMARK(BM_Snapshot)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace hopbudget
