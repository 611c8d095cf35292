// Uses only installed headers: proves they stand alone.
#include <grpcpp/grpcpp.h>

#include <iostream>

#include "hopbudget/budget.h"
#include "hopbudget/client.h"
#include "hopbudget/server.h"

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
  if (!factory.ok() || !channel.ok()) {
    std::cerr << "consumer: " << factory.status() << " " << channel.status() << "\n";
    return 1;
  }
  std::cout << "consumer: hopbudget package works\n";
  return 0;
}
