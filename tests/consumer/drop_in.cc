// Copyright hopbudget authors.
//
// What a service that drops hopbudget in writes, against the installed
// package, with the three drop-in headers and nothing else of hopbudget's:
// a Hop from a service config, the server interceptor on a builder, a
// plain and a retrying channel, a retry loop, and the attribution of a
// status. Built and run by run.cmake beside main.cc.
#include <grpcpp/grpcpp.h>

#include <iostream>
#include <memory>

#include "hopbudget/client.h"
#include "hopbudget/hop.h"
#include "hopbudget/server.h"

int main() {
  hopbudget::HopOptions options;
  options.name = "drop-in";
  options.service_config = R"({"methodConfig": [{"name": [{}], "timeout": "1s",
      "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.01s", "maxBackoff": "0.1s",
                      "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"],
                      "perAttemptRecvTimeout": "0.3s"}}]})";
  absl::StatusOr<std::unique_ptr<hopbudget::Hop>> hop = hopbudget::Hop::Create(options);
  if (!hop.ok()) {
    std::cerr << "drop_in: " << hop.status() << "\n";
    return 1;
  }
  grpc::ServerBuilder builder;
  const absl::Status installed = hopbudget::InstallServerInterceptor(**hop, builder);
  auto channel = hopbudget::CreateChannel(**hop, "127.0.0.1:1", grpc::InsecureChannelCredentials());
  auto retrying =
      hopbudget::CreateRetryingChannel(**hop, "127.0.0.1:1", grpc::InsecureChannelCredentials());
  auto loop = hopbudget::RetryLoop::Create(**hop, "/demo.Ledger/Commit");
  const bool attributed =
      hopbudget::AttributionOf(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "")).has_value();
  if (!installed.ok() || !channel.ok() || !retrying.ok() || !loop.ok() || attributed ||
      (*hop)->PolicyFor((*hop)->metrics().Method("/demo.Ledger/Commit"), "/demo.Ledger/Commit")
              .budget.request_cap != absl::Seconds(1)) {
    std::cerr << "drop_in: " << installed << " " << channel.status() << " " << retrying.status()
              << " " << loop.status() << "\n";
    return 1;
  }
  std::cout << "drop_in: three headers are enough\n";
  return 0;
}
