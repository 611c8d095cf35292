// Copyright hopbudget authors.
//
// sample_exposition.h: a fixed /metrics document of hop "orders", shaped like
// hopbudget::http's output, shared by the inspect unit tests.
//
// Budget on arrival: 10 observations, 4 in (0.05, 0.1], 6 in (0.1, 0.25]:
//   p50: rank 5 falls in (0.1, 0.25], 1 of 6 -> 0.1 + 0.15 * 1/6 = 0.125
//   p99: rank 9.9 -> 0.1 + 0.15 * 5.9/6 = 0.2475
#ifndef HOPBUDGET_TESTS_INSPECT_SAMPLE_EXPOSITION_H_
#define HOPBUDGET_TESTS_INSPECT_SAMPLE_EXPOSITION_H_

namespace hopbudget::inspect::testing {

inline constexpr char kOrdersExposition[] = R"(# HELP hopbudget_info The hop this process serves as.
# TYPE hopbudget_info gauge
hopbudget_info{hop="orders"} 1
# HELP hopbudget_calls_total Finished calls.
# TYPE hopbudget_calls_total counter
hopbudget_calls_total{side="server",method="/demo.Orders/Create",code="OK"} 7
hopbudget_calls_total{side="server",method="/demo.Orders/Create",code="DEADLINE_EXCEEDED"} 2
hopbudget_calls_total{side="server",method="other",code="UNAVAILABLE"} 1
hopbudget_calls_total{side="client",method="/demo.Ledger/Commit",code="OK"} 8
hopbudget_calls_total{side="client",method="/demo.Ledger/Commit",code="DEADLINE_EXCEEDED"} 3
# HELP hopbudget_deadline_exceeded_total DEADLINE_EXCEEDED by source and the hop where it fired.
# TYPE hopbudget_deadline_exceeded_total counter
hopbudget_deadline_exceeded_total{side="server",source="request",hop="orders"} 1
hopbudget_deadline_exceeded_total{side="server",source="downstream",hop="ledger"} 1
hopbudget_deadline_exceeded_total{side="client",source="attempt",hop="orders"} 2
hopbudget_deadline_exceeded_total{side="client",source="attempt",hop="ledger"} 0
hopbudget_deadline_exceeded_total{side="client",source="client",hop="ledger"} 1
# HELP hopbudget_budget_at_arrival_seconds Budget of inbound calls on arrival.
# TYPE hopbudget_budget_at_arrival_seconds histogram
hopbudget_budget_at_arrival_seconds_bucket{method="/demo.Orders/Create",le="0.001"} 0
hopbudget_budget_at_arrival_seconds_bucket{method="/demo.Orders/Create",le="0.05"} 0
hopbudget_budget_at_arrival_seconds_bucket{method="/demo.Orders/Create",le="0.1"} 3
hopbudget_budget_at_arrival_seconds_bucket{method="/demo.Orders/Create",le="0.25"} 8
hopbudget_budget_at_arrival_seconds_bucket{method="/demo.Orders/Create",le="+Inf"} 8
hopbudget_budget_at_arrival_seconds_sum{method="/demo.Orders/Create"} 1.1
hopbudget_budget_at_arrival_seconds_count{method="/demo.Orders/Create"} 8
hopbudget_budget_at_arrival_seconds_bucket{method="other",le="0.001"} 0
hopbudget_budget_at_arrival_seconds_bucket{method="other",le="0.05"} 0
hopbudget_budget_at_arrival_seconds_bucket{method="other",le="0.1"} 1
hopbudget_budget_at_arrival_seconds_bucket{method="other",le="0.25"} 2
hopbudget_budget_at_arrival_seconds_bucket{method="other",le="+Inf"} 2
hopbudget_budget_at_arrival_seconds_sum{method="other"} 0.3
hopbudget_budget_at_arrival_seconds_count{method="other"} 2
# TYPE hopbudget_calls_without_deadline_total counter
hopbudget_calls_without_deadline_total{method="/demo.Orders/Create"} 1
# TYPE hopbudget_retries_total counter
hopbudget_retries_total{method="/demo.Ledger/Commit",code="DEADLINE_EXCEEDED"} 2
hopbudget_retries_total{method="/demo.Ledger/Commit",reason="UNAVAILABLE"} 1
# TYPE hopbudget_retries_skipped_total counter
hopbudget_retries_skipped_total{reason="no_room"} 1
hopbudget_retries_skipped_total{reason="attempts_exhausted"} 0
# TYPE hopbudget_shield_operations_total counter
hopbudget_shield_operations_total{outcome="completed"} 4
hopbudget_shield_operations_total{outcome="failed"} 0
hopbudget_shield_operations_total{outcome="exceeded_bound"} 1
hopbudget_shield_operations_total{outcome="refused"} 0
# TYPE hopbudget_shield_in_flight gauge
hopbudget_shield_in_flight 2
)";

}  // namespace hopbudget::inspect::testing

#endif  // HOPBUDGET_TESTS_INSPECT_SAMPLE_EXPOSITION_H_
