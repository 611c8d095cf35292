// Copyright hopbudget authors.
//
// Micro-benchmarks of what hopbudget does on every call: budget derivation,
// the budget header, attribution encoding, metric increments. Compare them
// with the tens of microseconds a loopback gRPC call costs.
#include <benchmark/benchmark.h>

#include <string>

#include "hopbudget/attribution.h"
#include "hopbudget/budget.h"
#include "hopbudget/clock.h"
#include "hopbudget/metrics.h"
#include "hopbudget/wire.h"

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

void BM_MetricIncrement(benchmark::State& state) {
  static Metrics metrics;
  for (auto _ : state) metrics.CountCallEnd(Side::kClient, MethodId{}, absl::StatusCode::kOk);
}
BENCHMARK(BM_MetricIncrement)->Threads(1)->Threads(2);

}  // namespace
}  // namespace hopbudget
