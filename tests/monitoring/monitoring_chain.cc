// Copyright hopbudget authors.
//
// The chain dashboard_test.py points a real Prometheus at: gateway -> orders
// -> ledger, real gRPC servers on loopback port 0, each with an HttpExporter,
// orders calling ledger through a retrying channel. A load thread keeps
// calls flowing so that every dashboard query has data:
//   - every call brings an 800 ms budget (the budget p50 the test checks);
//   - ledger answers UNAVAILABLE to 30 % of calls (seeded): retries, skipped
//     retries, calls saved by a retry;
//   - one call in ten works 300 ms at ledger, whose request cap is 100 ms:
//     request budgets fire there and are relayed above.
// Prints one JSON line, {"gateway": PORT, "orders": PORT, "ledger": PORT}
// (the /metrics ports), then runs until its standard input closes.
#include <atomic>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "hopbudget/advanced/http_exporter.h"
#include "relay_fixture.h"

namespace hopbudget {
namespace testing {
namespace {

std::unique_ptr<HttpExporter> Export(RelayHop& hop, const std::string& name) {
  HttpExporterOptions http;
  http.hop = name;
  http.metrics = &hop.metrics();
  absl::StatusOr<std::unique_ptr<HttpExporter>> exporter = HttpExporter::Start(http);
  if (!exporter.ok()) {
    std::cerr << "monitoring_chain: " << exporter.status() << std::endl;
    std::exit(2);
  }
  return *std::move(exporter);
}

int Run() {
  HopConfig ledger_config;
  ledger_config.hop = "ledger";
  ledger_config.policy.request_cap = absl::Milliseconds(100);
  ledger_config.faults.unavailable_ratio = 0.3;
  ledger_config.faults.seed = 15;
  RelayHop ledger(ledger_config);
  HopConfig orders_config;
  orders_config.hop = "orders";
  RelayHop orders(orders_config);
  HopConfig gateway_config;
  gateway_config.hop = "gateway";
  RelayHop gateway(gateway_config);

  RetryOptions retry;
  retry.retry.max_attempts = 3;
  retry.retry.initial_backoff = absl::Milliseconds(1);
  retry.retry.max_backoff = absl::Milliseconds(5);
  orders.SetNext(ledger.address(), &retry);
  gateway.SetNext(orders.address());

  auto ledger_http = Export(ledger, "ledger");
  auto orders_http = Export(orders, "orders");
  auto gateway_http = Export(gateway, "gateway");
  std::cout << "{\"gateway\": " << gateway_http->port() << ", \"orders\": " << orders_http->port()
            << ", \"ledger\": " << ledger_http->port() << "}" << std::endl;

  std::atomic<bool> stop{false};
  std::thread load([&] {
    auto stub = NewStub(gateway.address());
    for (int i = 0; !stop.load(); ++i) {
      grpc::ClientContext ctx;
      SetBudget(ctx, absl::Milliseconds(800));
      echo::RelayReply reply;
      const bool slow = i % 10 == 9;
      stub->Call(&ctx, Request({Work(1), Work(1), Work(slow ? 300 : 1)}), &reply);
      // A steady trickle, not a flood: the machine is shared.
      absl::SleepFor(absl::Milliseconds(10));
    }
  });
  std::string line;
  while (std::getline(std::cin, line)) {
  }
  stop = true;
  load.join();
  gateway.Shutdown();
  orders.Shutdown();
  ledger.Shutdown();
  return 0;
}

}  // namespace
}  // namespace testing
}  // namespace hopbudget

int main() { return hopbudget::testing::Run(); }
