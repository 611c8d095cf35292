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
// Thread safety: a pure function.
#ifndef HOPBUDGET_CHAINCTL_STATS_DELTA_H_
#define HOPBUDGET_CHAINCTL_STATS_DELTA_H_

#include "demo/demo.pb.h"
#include "summary.h"

namespace hopbudget::chainctl {

// after - before, field by field; the hop is after's.
ServiceDelta StatsDelta(const demo::Stats& before, const demo::Stats& after);

}  // namespace hopbudget::chainctl

#endif  // HOPBUDGET_CHAINCTL_STATS_DELTA_H_
