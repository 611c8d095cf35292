// Copyright hopbudget authors.
#include "stats_delta.h"

#include "absl/time/clock.h"

namespace hopbudget::chainctl {

ServiceDelta StatsDelta(const demo::Stats& before, const demo::Stats& after) {
  ServiceDelta d;
  d.hop = after.hop();
  d.calls = after.calls() - before.calls();
  d.refused = after.refused() - before.refused();
  d.cpu_ms = static_cast<double>(after.cpu_us() - before.cpu_us()) / 1000;
  d.calls_started_after_deadline =
      after.calls_started_after_deadline() - before.calls_started_after_deadline();
  d.work_after_deadline_ms = after.work_after_deadline_ms() - before.work_after_deadline_ms();
  d.retries = after.retries_received() - before.retries_received();
  d.reads = after.reads() - before.reads();
  d.read_hedges = after.read_hedges() - before.read_hedges();
  d.slot_refusals = after.slot_refusals() - before.slot_refusals();
  return d;
}

absl::StatusOr<demo::Stats> StatsAfterRun(const std::function<absl::StatusOr<demo::Stats>()>& get,
                                          absl::Duration within, absl::Duration pause) {
  const absl::Time until = absl::Now() + within;
  while (true) {
    absl::StatusOr<demo::Stats> stats = get();
    if (stats.ok() || !absl::IsResourceExhausted(stats.status()) || absl::Now() >= until) {
      return stats;
    }
    absl::SleepFor(pause);
  }
}

}  // namespace hopbudget::chainctl
