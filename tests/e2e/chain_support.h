// Copyright hopbudget authors.
//
// chain_support.h: what the end-to-end tests do to a running chain besides
// starting it (chain_process.h): read a hop's Admin stats, set its faults,
// call the gateway as a client, wait for a condition. For tests only: a
// failed Admin call is a test failure (gtest), not a status to handle.
// Each function may be called from any thread.
#ifndef HOPBUDGET_TESTS_E2E_CHAIN_SUPPORT_H_
#define HOPBUDGET_TESTS_E2E_CHAIN_SUPPORT_H_

#include <memory>
#include <string>
#include <utility>

#include "../eventually.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "chain_process.h"
#include "demo/demo.grpc.pb.h"

namespace hopbudget::e2e {

// Admin GetStats of `p`. A failed call (its deadline is 20 s, generous on
// purpose: ASan, a loaded machine) adds a test failure and returns empty
// stats.
demo::Stats StatsOf(const ChainProcess& p);

// Admin SetFaults of `p` (20 s deadline): replaces all of its faults by
// `faults`. Returns the faults it now runs; a failed call adds a test
// failure and returns empty faults.
demo::Faults SetFaults(const ChainProcess& p, const demo::Faults& faults);

// A stub for the chain's edge, `gateway`, calling through hopbudget's client
// interceptors as hop "e2e" (so that an error names "e2e" when the test's
// own deadline fired). With `watch_health` the channel watches the
// gateway's health (round_robin with healthCheckConfig, as the demo's hops
// call each other): it stops sending when a restarting gateway says
// NOT_SERVING, before the gateway's Shutdown() answers what still arrives
// CANCELLED.
std::unique_ptr<demo::Gateway::Stub> GatewayStub(const ChainProcess& gateway,
                                                 bool watch_health = false);

// Places order `key`, one item (sku-1 x1), through `gateway` with a deadline
// `budget` from now; the gateway's status, its answer in `reply`. With
// `wait_for_ready` gRPC's pick queues the call rather than failing it fast
// when the gateway turns unhealthy just after hopbudget let the call go
// (client.h, BackendWait::kWithinBudget).
grpc::Status PlaceOneItem(demo::Gateway::Stub& gateway, const std::string& key,
                          absl::Duration budget, demo::OrderResult* reply,
                          bool wait_for_ready = false);

// Waits (really, but bounded and without a tolerance window) until `pred`
// holds, asking every 20 ms; false if it still does not after `max`.
//
//   EXPECT_TRUE(Eventually([&] { return StatsOf(ledger).in_flight() == 0; }));
template <typename Pred>
bool Eventually(Pred pred, absl::Duration max = absl::Seconds(20)) {
  return testing::Eventually(std::move(pred), max, absl::Milliseconds(20));
}

}  // namespace hopbudget::e2e

#endif  // HOPBUDGET_TESTS_E2E_CHAIN_SUPPORT_H_
