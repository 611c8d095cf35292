// Copyright hopbudget authors.
//
// bench_modes.h: the configurations every overhead figure compares.
//   plain             (a) no interceptors at all
//   noop              (b) a no-op client + server interceptor pair (bench_util.h)
//   budget-only       (c) hopbudget's server interceptor, and its budget
//                     interceptor on the client (CreateChannel): configured
//                     so that no cap or retry triggers on a healthy echo (the
//                     client deadline, set in every mode, is the tightest
//                     budget: no hopbudget timer is armed, and the budget
//                     header is sent on every call)
//   retry-loop        (d) like budget-only, every call made through a
//                     RetryLoop (callback form) whose policy never triggers:
//                     the typed retry loop's cost
//   retrying-channel  (e) like budget-only, the client channel being
//                     CreateRetryingChannel: the drop-in's cost (every call
//                     hijacked and re-issued as a second call)
//   hop-table         (f) like budget-only, with the server's interceptor and
//                     the client's channel made from a Hop whose service
//                     config names 50 methods (BenchTableHop): a policy
//                     table's cost beside one policy (issue 30)
// The server side of (c), (d) and (e) is the same. scale_bench and
// cancel_bench also use "hopbudget" for the server interceptor with a
// budget-interceptor channel.
#ifndef HOPBUDGET_BENCH_BENCH_MODES_H_
#define HOPBUDGET_BENCH_BENCH_MODES_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench_util.h"
#include "hopbudget/advanced/metrics.h"
#include "hopbudget/advanced/retry.h"
#include "hopbudget/advanced/retry_loop.h"
#include "hopbudget/client.h"
#include "hopbudget/hop.h"
#include "hopbudget/server.h"

namespace hopbudget {
namespace bench {

inline const std::vector<std::string>& ModeNames() {
  static const std::vector<std::string> names = {
      "plain", "noop", "budget-only", "retry-loop", "retrying-channel", "hop-table"};
  return names;
}

// --mode=NAME: one of ModeNames(), or an error naming the flag and the value.
inline absl::Status CheckMode(const std::string& mode) {
  for (const std::string& m : ModeNames()) {
    if (m == mode) return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--mode=", mode, ": must be one of ", absl::StrJoin(ModeNames(), ", ")));
}

// The modes whose server runs hopbudget's interceptor.
inline bool ServerHasHopbudget(const std::string& mode) {
  return mode == "hopbudget" || mode == "budget-only" || mode == "retry-loop" ||
         mode == "retrying-channel" || mode == "hop-table";
}

// Server policy of mode hopbudget: caps far above the client deadline, so the
// caller's deadline is the request budget and no timer is armed.
inline BudgetPolicy BenchServerPolicy() {
  BudgetPolicy p;
  p.request_cap = absl::Seconds(30);
  p.attempt_cap = absl::Seconds(10);
  return p;
}

// The service config of mode hop-table: 50 methodConfig entries, one of
// them the echo's Relay/Call with BenchServerPolicy's request cap (so its
// calls are judged exactly as in budget-only), the other 49 made-up methods
// of made-up services with their own timeouts, retry and hedging policies
// and hopbudget entries (a table as big as a real server's). The table's
// default is BenchServerPolicy.
inline std::string BenchTableConfig() {
  std::string entries = R"({"name": [{"service": "hopbudget.echo.Relay", "method": "Call"}],
                            "timeout": "30s"})";
  std::string own;
  for (int i = 0; i < 49; ++i) {
    const std::string name =
        absl::StrCat(R"({"service": "bench.Service)", i / 7, R"(", "method": "Method)", i, R"("})");
    absl::StrAppend(&entries, R"(, {"name": [)", name, R"(], "timeout": ")", 11 + i % 5, "s\"");
    if (i % 3 == 0) {
      absl::StrAppend(&entries, R"(, "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.01s",
          "maxBackoff": "0.1s", "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"],
          "perAttemptRecvTimeout": "0.2s"})");
    } else if (i % 3 == 1) {
      absl::StrAppend(&entries,
                      R"(, "hedgingPolicy": {"maxAttempts": 2, "hedgingDelay": "0.05s"})");
    }
    absl::StrAppend(&entries, "}");
    absl::StrAppend(&own, own.empty() ? "" : ", ", R"({"name": [)", name,
                    R"(], "hopReserve": "0.005s", "minBudget": "0.002s"})");
  }
  return absl::StrCat(R"({"methodConfig": [)", entries, R"(], "hopbudget": {"methodPolicy": [)",
                      own, "]}}");
}

// The Hop of mode hop-table, named `hop`: made once, for the process (a
// Hop must outlive every server and channel made from it), so the first
// call's `hop` and `metrics` are the ones used: echo_server and load_gen
// each make one. Its made-up methods are not linked: names are not checked.
inline const Hop& BenchTableHop(const std::string& hop, Metrics* metrics) {
  static const Hop* const made = [&] {
    HopOptions options;
    options.name = hop;
    options.metrics = metrics;
    options.defaults.budget = BenchServerPolicy();
    options.service_config = BenchTableConfig();
    options.check_names = NameCheck::kNone;
    auto created = Hop::Create(std::move(options));
    if (!created.ok()) Die(created.status().ToString());
    return created->release();
  }();
  return *made;
}

// Installs the interceptors of `mode` on `builder` (hop name `hop`).
// `admission`: hopbudget modes other than hop-table only.
inline void InstallServerMode(const std::string& mode, grpc::ServerBuilder& builder,
                              const std::string& hop, const BudgetPolicy& policy,
                              Metrics* metrics = nullptr,
                              const AdmissionOptions& admission = AdmissionOptions()) {
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
  if (mode == "noop") {
    creators.push_back(std::make_unique<NoopServerFactory>());
  } else if (mode == "hop-table") {
    auto factory = MakeServerInterceptorFactory(BenchTableHop(hop, metrics));
    if (!factory.ok()) Die(factory.status().ToString());
    creators.push_back(*std::move(factory));
  } else if (ServerHasHopbudget(mode)) {
    ServerOptions options;
    options.hop = hop;
    options.policy = policy;
    options.metrics = metrics;
    options.admission = admission;
    auto factory = MakeServerInterceptorFactory(options);
    if (!factory.ok()) Die(factory.status().ToString());
    creators.push_back(*std::move(factory));
  } else {
    return;
  }
  builder.experimental().SetInterceptorCreators(std::move(creators));
}

// The client retry options of modes retry-loop and retrying-channel: up to 3
// attempts of <= 500 ms, retried on UNAVAILABLE (never happens on a healthy
// echo).
inline RetryOptions BenchRetryOptions(const std::string& hop, Metrics* metrics = nullptr) {
  RetryOptions r;
  r.client.hop = hop;
  r.client.metrics = metrics;
  r.budget.request_cap = absl::Seconds(5);
  r.budget.attempt_cap = absl::Milliseconds(500);
  r.retry.max_attempts = 3;
  return r;
}

// What a hopbudget mode's client channel may change from the defaults.
struct BenchClientOptions {
  Metrics* metrics = nullptr;      // not owned; nullptr: Metrics::Default()
  bool send_budget_header = true;  // ClientOptions::send_budget_header
};

// A channel to `target` in `mode`.
inline std::shared_ptr<grpc::Channel> MakeClientChannel(const std::string& mode,
                                                        const std::string& target,
                                                        grpc::ChannelArguments args = {},
                                                        const BenchClientOptions& client = {}) {
  Metrics* const metrics = client.metrics;
  auto creds = grpc::InsecureChannelCredentials();
  if (mode == "noop") {
    std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> creators;
    creators.push_back(std::make_unique<NoopClientFactory>());
    return grpc::experimental::CreateCustomChannelWithInterceptors(target, creds, args,
                                                                   std::move(creators));
  }
  if (mode == "retrying-channel") {
    RetryOptions retry = BenchRetryOptions("loadgen", metrics);
    retry.client.send_budget_header = client.send_budget_header;
    auto channel = CreateRetryingChannel(target, creds, retry, args);
    if (!channel.ok()) Die(channel.status().ToString());
    return *channel;
  }
  if (mode == "hop-table") {
    const Hop& hop = BenchTableHop("loadgen", metrics);
    ClientOptions options = ClientOptionsFor(hop);
    options.send_budget_header = client.send_budget_header;
    auto channel = CreateChannel(hop, options, target, creds, args);
    if (!channel.ok()) Die(channel.status().ToString());
    return *channel;
  }
  if (ServerHasHopbudget(mode)) {  // budget-only, retry-loop, hopbudget
    ClientOptions options;
    options.hop = "loadgen";
    options.metrics = metrics;
    options.send_budget_header = client.send_budget_header;
    auto channel = CreateChannel(target, creds, options, args);
    if (!channel.ok()) Die(channel.status().ToString());
    return *channel;
  }
  return grpc::CreateCustomChannel(target, creds, args);
}

// The typed retry loop of mode retry-loop, on the same policy.
inline std::unique_ptr<RetryLoop> MakeRetryLoop(Metrics* metrics = nullptr) {
  const RetryOptions r = BenchRetryOptions("loadgen", metrics);
  RetryLoopOptions options;
  options.hop = "loadgen";
  options.method = "/hopbudget.echo.Relay/Call";
  options.budget = r.budget;
  options.retry = r.retry;
  options.metrics = metrics;
  auto loop = RetryLoop::Create(options);
  if (!loop.ok()) Die(loop.status().ToString());
  return *std::move(loop);
}

}  // namespace bench
}  // namespace hopbudget

#endif  // HOPBUDGET_BENCH_BENCH_MODES_H_
