// Uses only installed headers: proves they stand alone.
#include <grpcpp/grpcpp.h>

#include <iostream>

#include "hopbudget/attribution.h"
#include "hopbudget/budget.h"
#include "hopbudget/client.h"
#include "hopbudget/clock.h"
#include "hopbudget/deadline_source.h"
#include "hopbudget/metrics.h"
#include "hopbudget/retry.h"
#include "hopbudget/retry_policy.h"
#include "hopbudget/server.h"
#include "hopbudget/shield.h"
#include "hopbudget/shield_grpc.h"
#include "hopbudget/wire.h"

int main() {
  hopbudget::ServerOptions server;
  server.hop = "consumer";
  server.policy.request_cap = absl::Seconds(2);
  server.policy.attempt_cap = absl::Milliseconds(500);
  auto factory = hopbudget::MakeServerInterceptorFactory(server);
  hopbudget::ClientOptions client;
  client.hop = "consumer";
  auto channel = hopbudget::CreateChannel("127.0.0.1:1", grpc::InsecureChannelCredentials(),
                                          client);
  hopbudget::RetryOptions retry;
  retry.client.hop = "consumer";
  auto retrying = hopbudget::CreateRetryingChannel("127.0.0.1:1",
                                                   grpc::InsecureChannelCredentials(), retry);
  hopbudget::Shield shield;
  auto op = shield.Run("consumer", absl::Milliseconds(100),
                       [](hopbudget::ShieldContext&) { return absl::OkStatus(); });
  if (!factory.ok() || !channel.ok() || !retrying.ok() || !op.ok() ||
      op->Wait()->outcome != hopbudget::ShieldOutcome::kCompleted) {
    std::cerr << "consumer: " << factory.status() << " " << channel.status() << "\n";
    return 1;
  }
  std::cout << "consumer: hopbudget package works\n";
  return 0;
}
