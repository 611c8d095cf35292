// Copyright hopbudget authors.
//
// stats_delta.h: what a load did to one demo service, from the service's
// Admin GetStats read before and after the load. Shared by the load
// generators (`chainctl load`, client/h2load), so that both report a hop's
// calls, refusals, CPU and late work the same way.
//
//   demo::Stats before = ..., after = ...;   // Admin GetStats
//   builder.AddService(hopbudget::chainctl::StatsDelta(before, after));
//
// StatsAfterRun reads the "after": a sync server whose every thread is still
// busy with calls whose callers left (the baseline's, after a flood)
// answers RESOURCE_EXHAUSTED ("Server Threadpool Exhausted") until a thread
// frees, so it asks again, `pause` apart, for at most `within`. Any other
// error, or the last RESOURCE_EXHAUSTED, is returned as it came.
//
// Thread safety: StatsDelta is a pure function; StatsAfterRun calls `get`
// on the caller's thread and sleeps between calls.
#ifndef HOPBUDGET_CHAINCTL_STATS_DELTA_H_
#define HOPBUDGET_CHAINCTL_STATS_DELTA_H_

#include <functional>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "demo/demo.pb.h"
#include "summary.h"

namespace hopbudget::chainctl {

// after - before, field by field; the hop is after's.
ServiceDelta StatsDelta(const demo::Stats& before, const demo::Stats& after);

absl::StatusOr<demo::Stats> StatsAfterRun(const std::function<absl::StatusOr<demo::Stats>()>& get,
                                          absl::Duration within = absl::Seconds(30),
                                          absl::Duration pause = absl::Milliseconds(200));

}  // namespace hopbudget::chainctl

#endif  // HOPBUDGET_CHAINCTL_STATS_DELTA_H_
