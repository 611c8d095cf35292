// Copyright hopbudget authors.
//
// bench_modes.h: the three configurations every overhead figure compares.
//   plain      (a) no interceptors at all
//   noop       (b) a no-op client + server interceptor pair (bench_util.h)
//   hopbudget  (c) hopbudget fully installed: server interceptor, and on the
//              client the retrying channel (which carries the budget
//              interceptor), configured so that neither a cap nor a retry
//              triggers on a healthy echo: the client deadline (set in every
//              mode) is the tightest budget, so no hopbudget timer is armed,
//              and the budget header is sent on every call.
//   budget-only  (d) like hopbudget, but the client channel has only the
//              budget interceptor (CreateChannel), no retrying channel: splits
//              the cost of (c) between budgets and retries.
#ifndef HOPBUDGET_BENCH_BENCH_MODES_H_
#define HOPBUDGET_BENCH_BENCH_MODES_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"
#include "hopbudget/client.h"
#include "hopbudget/metrics.h"
#include "hopbudget/retry.h"
#include "hopbudget/server.h"

namespace hopbudget {
namespace bench {

inline const std::vector<std::string>& ModeNames() {
  static const std::vector<std::string> names = {"plain", "noop", "hopbudget", "budget-only"};
  return names;
}

// Server policy of mode hopbudget: caps far above the client deadline, so the
// caller's deadline is the request budget and no timer is armed.
inline BudgetPolicy BenchServerPolicy() {
  BudgetPolicy p;
  p.request_cap = absl::Seconds(30);
  p.attempt_cap = absl::Seconds(10);
  return p;
}

// Installs the interceptors of `mode` on `builder` (hop name `hop`).
inline void InstallServerMode(const std::string& mode, grpc::ServerBuilder& builder,
                              const std::string& hop, const BudgetPolicy& policy,
                              Metrics* metrics = nullptr) {
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
  if (mode == "noop") {
    creators.push_back(std::make_unique<NoopServerFactory>());
  } else if (mode == "hopbudget" || mode == "budget-only") {
    ServerOptions options;
    options.hop = hop;
    options.policy = policy;
    options.metrics = metrics;
    auto factory = MakeServerInterceptorFactory(options);
    if (!factory.ok()) Flags::Die(factory.status().ToString());
    creators.push_back(*std::move(factory));
  } else {
    return;
  }
  builder.experimental().SetInterceptorCreators(std::move(creators));
}

// The client retry options of mode hopbudget: up to 3 attempts of <= 500 ms,
// retried on UNAVAILABLE (never happens on a healthy echo).
inline RetryOptions BenchRetryOptions(const std::string& hop, Metrics* metrics = nullptr) {
  RetryOptions r;
  r.client.hop = hop;
  r.client.metrics = metrics;
  r.budget.request_cap = absl::Seconds(5);
  r.budget.attempt_cap = absl::Milliseconds(500);
  r.retry.max_attempts = 3;
  return r;
}

// A channel to `target` in `mode`.
inline std::shared_ptr<grpc::Channel> MakeClientChannel(const std::string& mode,
                                                        const std::string& target,
                                                        grpc::ChannelArguments args = {},
                                                        Metrics* metrics = nullptr) {
  auto creds = grpc::InsecureChannelCredentials();
  if (mode == "noop") {
    std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> creators;
    creators.push_back(std::make_unique<NoopClientFactory>());
    return grpc::experimental::CreateCustomChannelWithInterceptors(target, creds, args,
                                                                   std::move(creators));
  }
  if (mode == "hopbudget") {
    auto channel = CreateRetryingChannel(target, creds, BenchRetryOptions("loadgen", metrics),
                                         args);
    if (!channel.ok()) Flags::Die(channel.status().ToString());
    return *channel;
  }
  if (mode == "budget-only") {
    ClientOptions options;
    options.hop = "loadgen";
    options.metrics = metrics;
    auto channel = CreateChannel(target, creds, options, args);
    if (!channel.ok()) Flags::Die(channel.status().ToString());
    return *channel;
  }
  return grpc::CreateCustomChannel(target, creds, args);
}

}  // namespace bench
}  // namespace hopbudget

#endif  // HOPBUDGET_BENCH_BENCH_MODES_H_
