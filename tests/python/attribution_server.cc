// Copyright hopbudget authors.
//
// The servers that attribution_wire_test.py calls from Python grpcio: for
// each server API (sync, callback, async), one "front" hop per policy below,
// each behind hopbudget's server interceptor and relaying to a "back" hop.
// Prints one JSON line, {"sync": {"plain": "127.0.0.1:PORT", ...}, ...}, then
// serves until its standard input closes.
//
// The policies, and the sources the test produces with them:
//   plain       hop_reserve 50 ms      client, idle, shield, downstream
//   capped      request_cap 300 ms     request (relayed), request (cut)
//   attempt     attempt_cap 100 ms     attempt
//   retrying    request_cap 500 ms, a retrying channel (attempt_cap 300 ms,
//               2 attempts)            request after a retry
//   min-budget  min_attempt_budget 300 ms   arrived-expired,
//                                           exhausted-before-call
//   to-capped   relays to a back hop with request_cap 200 ms: an origin
//               further down, re-encoded by the front
//   queued      admission: 1 call in progress, 10 wait   queue-wait
//   predicting  admission: 4 in progress, prediction after 5 samples
//                                                         cannot-finish
//   no-queue    admission: 1 call in progress, no queue  overload shed
//               (RESOURCE_EXHAUSTED, pushback 100 ms)
//   per-method  a hopbudget::Hop whose service config gives Call 300 ms
//               and Write 500 ms   request, each at its own cap
// Every front hop keeps 50 ms of reserve, so that its answer beats the
// Python caller's own deadline on a loaded machine.
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "hopbudget/hop.h"
#include "relay_fixture.h"

namespace hopbudget {
namespace testing {
namespace {

struct FrontSpec {
  std::string name;
  BudgetPolicy policy;
  bool retrying = false;
  bool to_capped_back = false;
  AdmissionOptions admission;  // off unless set
  // When set, the front is made from a Hop with this service config (its
  // own reserve in the config's hopbudget section), and `policy` is unused.
  std::string service_config;
};

AdmissionOptions Admit(int in_flight, int queue, bool predict) {
  AdmissionOptions o;
  o.enabled = true;
  o.policy.max_in_flight = in_flight;
  o.policy.max_queue = queue;
  o.policy.queue_per_limit = std::numeric_limits<double>::infinity();  // the queue asked for
  // A blocker hangs for the whole test: nothing should reach max_wait, and
  // the queue is never empty, so overload_wait would turn every waiter away
  // as overload after 100 ms; the queue-wait answers are the point here.
  o.policy.max_wait = absl::Seconds(10);
  o.policy.overload_wait = absl::InfiniteDuration();
  o.policy.predict = predict;
  o.policy.predict_min_samples = 5;
  o.policy.predict_window = 16;
  return o;
}

std::vector<FrontSpec> FrontSpecs() {
  BudgetPolicy base;
  base.hop_reserve = absl::Milliseconds(50);
  std::vector<FrontSpec> specs;
  specs.push_back({"plain", base});
  BudgetPolicy capped = base;
  capped.request_cap = absl::Milliseconds(300);
  specs.push_back({"capped", capped});
  BudgetPolicy attempt = base;
  attempt.attempt_cap = absl::Milliseconds(100);
  specs.push_back({"attempt", attempt});
  BudgetPolicy retrying = base;
  retrying.request_cap = absl::Milliseconds(500);
  specs.push_back({"retrying", retrying, /*retrying=*/true});
  BudgetPolicy min_budget = base;
  min_budget.min_attempt_budget = absl::Milliseconds(300);
  specs.push_back({"min-budget", min_budget});
  specs.push_back({"to-capped", base, false, /*to_capped_back=*/true});
  specs.push_back({"queued", base, false, false, Admit(1, 10, /*predict=*/false)});
  specs.push_back({"predicting", base, false, false, Admit(4, 10, /*predict=*/true)});
  specs.push_back({"no-queue", base, false, false, Admit(1, 0, /*predict=*/false)});
  specs.push_back({"per-method", base, false, false, AdmissionOptions{}, R"({
      "methodConfig": [
        {"name": [{"service": "hopbudget.echo.Relay", "method": "Call"}], "timeout": "0.3s"},
        {"name": [{"service": "hopbudget.echo.Relay", "method": "Write"}], "timeout": "0.5s"}],
      "hopbudget": {"methodPolicy": [{"name": [{}], "hopReserve": "0.05s"}]}})"});
  return specs;
}

int Run() {
  HopConfig back_config;
  back_config.hop = "back";
  RelayHop back(back_config);
  HopConfig capped_back_config;
  capped_back_config.hop = "back";
  capped_back_config.policy.request_cap = absl::Milliseconds(200);
  RelayHop capped_back(capped_back_config);

  RetryOptions retry;
  retry.budget.request_cap = absl::Milliseconds(500);
  retry.budget.attempt_cap = absl::Milliseconds(300);
  retry.budget.hop_reserve = absl::Milliseconds(50);
  retry.retry.max_attempts = 2;
  retry.retry.initial_backoff = absl::Milliseconds(1);
  retry.retry.max_backoff = absl::Milliseconds(1);

  const std::pair<const char*, Api> apis[] = {
      {"sync", Api::kSync}, {"callback", Api::kCallback}, {"async", Api::kAsync}};
  std::vector<std::unique_ptr<Hop>> hops;  // outlive the fronts made from them
  std::vector<std::unique_ptr<RelayHop>> fronts;
  std::vector<std::string> by_api;
  for (const auto& [api_name, api] : apis) {
    std::vector<std::string> entries;
    for (const FrontSpec& spec : FrontSpecs()) {
      HopConfig config;
      config.hop = "front";
      config.policy = spec.policy;
      config.api = api;
      config.admission = spec.admission;
      config.admission.handlers =
          api == Api::kSync ? HandlerThreads::kBlocking : HandlerThreads::kNonBlocking;
      if (!spec.service_config.empty()) {
        HopOptions options;
        options.name = "front";
        options.service_config = spec.service_config;
        absl::StatusOr<std::unique_ptr<Hop>> hop = Hop::Create(std::move(options));
        if (!hop.ok()) {
          std::cerr << "attribution_server: " << hop.status() << std::endl;
          return 1;
        }
        hops.push_back(*std::move(hop));
        config.hop_config = hops.back().get();
      }
      fronts.push_back(std::make_unique<RelayHop>(config));
      fronts.back()->SetNext(spec.to_capped_back ? capped_back.address() : back.address(),
                             spec.retrying ? &retry : nullptr);
      entries.push_back(absl::StrCat("\"", spec.name, "\": \"", fronts.back()->address(), "\""));
    }
    by_api.push_back(absl::StrCat("\"", api_name, "\": {", absl::StrJoin(entries, ", "), "}"));
  }
  std::cout << "{" << absl::StrJoin(by_api, ", ") << "}" << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
  }
  for (auto& front : fronts) front->Shutdown();
  return ::testing::Test::HasFailure() ? 1 : 0;
}

}  // namespace
}  // namespace testing
}  // namespace hopbudget

int main() { return hopbudget::testing::Run(); }
