// Copyright hopbudget authors.
//
// The hopbudget hops that foreign_peer_test.py puts in front of a peer we
// did not write (a Python grpcio Relay server, the "ledger"):
//
//   caller -> gateway -> orders -> ledger (NEXT)
//
// each hop a real server behind hopbudget's server interceptor, relaying
// through a channel with its client interceptor. Usage:
//
//   foreign_peer_hops NEXT
//
// Prints "gateway ADDRESS" and "orders ADDRESS", a line each, then answers
// each "counters" line read on standard input with one line,
// "bad_attribution gateway=N orders=N" (each hop's
// hopbudget_bad_attribution_total); exits when standard input closes.
#include <iostream>
#include <string>

#include "relay_fixture.h"

namespace hopbudget {
namespace testing {
namespace {

int Run(const std::string& next) {
  HopConfig orders_config;
  orders_config.hop = "orders";
  RelayHop orders(orders_config);
  orders.SetNext(next);
  HopConfig gateway_config;
  gateway_config.hop = "gateway";
  RelayHop gateway(gateway_config);
  gateway.SetNext(orders.address());
  std::cout << "gateway " << gateway.address() << "\n"
            << "orders " << orders.address() << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line != "counters") {
      std::cerr << "foreign_peer_hops: unknown command \"" << line << "\"\n";
      return 2;
    }
    std::cout << "bad_attribution gateway=" << gateway.metrics().Snapshot().bad_attribution
              << " orders=" << orders.metrics().Snapshot().bad_attribution << std::endl;
  }
  gateway.Shutdown();
  orders.Shutdown();
  return ::testing::Test::HasFailure() ? 1 : 0;
}

}  // namespace
}  // namespace testing
}  // namespace hopbudget

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: foreign_peer_hops NEXT (the foreign peer, HOST:PORT)\n";
    return 2;
  }
  return hopbudget::testing::Run(argv[1]);
}
