// Copyright hopbudget authors.
//
// relay_fixture.h: real gRPC relay servers on 127.0.0.1 port 0 for the
// integration tests. Each hop runs the Relay service (proto/echo/relay.proto)
// behind hopbudget's server interceptor, calls the next hop through a channel
// with hopbudget's client interceptor, and records what it saw.
#ifndef HOPBUDGET_TESTS_RELAY_FIXTURE_H_
#define HOPBUDGET_TESTS_RELAY_FIXTURE_H_

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "echo/relay.grpc.pb.h"
#include "hopbudget/advanced/budget.h"
#include "hopbudget/advanced/metrics.h"
#include "hopbudget/advanced/retry.h"
#include "hopbudget/advanced/shield.h"
#include "hopbudget/server.h"
#include "sync.h"

namespace hopbudget {
namespace testing {

enum class Api { kSync, kCallback, kAsync };
// "Sync", "Callback", "Async": the suffix of a test parameterized by Api
// (INSTANTIATE_TEST_SUITE_P(..., ApiTestName)).
std::string ApiTestName(const ::testing::TestParamInfo<Api>& info);

// Failures a hop injects before doing its step (deterministic; seeded).
struct Faults {
  int unavailable_first = 0;     // the first N calls answer UNAVAILABLE
  int hang_first = 0;            // the first N calls hang until cancelled
  double unavailable_ratio = 0;  // then each call is UNAVAILABLE with this probability
  std::string pushback_ms;       // grpc-retry-pushback-ms on every UNAVAILABLE, if set
  uint32_t seed = 1;
};

struct HopConfig {
  std::string hop = "hop";
  int port = 0;         // 0: any free port
  bool health = false;  // serve grpc.health.v1 (SetServing)
  BudgetPolicy policy;
  Api api = Api::kSync;
  bool install_interceptors = true;  // false: a plain gRPC server and client
  Metrics* metrics = nullptr;        // default: a Metrics owned by the hop
  Faults faults;
  // The hop's admission (off by default). The hop's handlers block (the
  // callback and async services run each on a thread of its own), so
  // HandlerThreads::kNonBlocking suits those two APIs, kBlocking the sync one.
  AdmissionOptions admission;
  // When set, the server interceptor is this Hop's (per-method budgets from
  // its table): `hop`, `policy` and `metrics` above are then the Hop's.
  // Not owned; must outlive the RelayHop.
  const Hop* hop_config = nullptr;
};

class RelayHop {
 public:
  explicit RelayHop(HopConfig config);
  ~RelayHop();

  // Stops the server; returns once every handler has finished.
  void Shutdown();

  // Relay to `next` for requests that carry more than one step, through a
  // retrying channel when `retry` is given.
  void SetNext(const std::string& target, const RetryOptions* retry = nullptr);

  const std::string& address() const { return address_; }
  // With HopConfig::health: what the health service reports for every
  // service ("" included). Starts SERVING.
  void SetServing(bool serving);
  Metrics& metrics() { return *metrics_; }
  int calls() const { return calls_.load(); }
  int refused() const { return refused_.load(); }
  // Handlers that noticed their call was cancelled while hanging or working.
  int cancellations_seen() const { return cancellations_seen_.load(); }
  // Waits (real time, bounded) until cancellations_seen() >= n.
  bool WaitForCancellations(int n, absl::Duration timeout);
  // Last `hopbudget-budget-us` value received, "" if none.
  std::string last_budget_header() const;
  // The client metadata of the last call received whose key starts with
  // "hopbudget-", as "key=value", in the order gRPC gives them.
  std::vector<std::string> last_own_metadata() const;
  // `grpc-previous-rpc-attempts` of every call received, in order ("" if absent).
  std::vector<std::string> previous_attempts() const;

  // Applies config().faults to one call: OK to go on, else the status to
  // answer (after hanging until cancelled, for a hang).
  grpc::Status InjectFault(grpc::ServerContextBase& ctx, int call);

  // The handler logic shared by the sync, callback and async services.
  grpc::Status Handle(grpc::ServerContextBase& ctx, const echo::RelayRequest& req,
                      echo::RelayReply* reply);

 private:
  class SyncService;
  class CallbackService;
  class AsyncLoop;

  Shield& ShieldForRelays();
  // The relays of Handle() other than a plain Call: through the next hop's
  // Watch stream, or from shielded work.
  grpc::Status RelayWatch(grpc::ServerContextBase& ctx, const echo::Step& step,
                          const echo::RelayRequest& sub);
  grpc::Status RelayShielded(grpc::ServerContextBase& ctx, const echo::Step& step,
                             const echo::RelayRequest& sub);

  HopConfig config_;
  std::unique_ptr<Metrics> own_metrics_;
  Metrics* metrics_;
  std::unique_ptr<grpc::Service> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<AsyncLoop> async_;
  std::string address_;
  std::unique_ptr<echo::Relay::Stub> next_;
  // Runs the steps that relay from shielded work; made on first use.
  std::unique_ptr<Shield> shield_ ABSL_GUARDED_BY(mu_);
  std::atomic<int> calls_{0};
  std::atomic<int> refused_{0};
  std::atomic<int> cancellations_seen_{0};
  mutable hopbudget::internal::Mutex mu_;
  std::string last_budget_header_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> last_own_metadata_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> previous_attempts_ ABSL_GUARDED_BY(mu_);
  std::mt19937 rng_ ABSL_GUARDED_BY(mu_);
};

// A stub on a channel to `target` with hopbudget's client interceptor (hop
// "client"), or a plain channel when `with_interceptor` is false.
std::unique_ptr<echo::Relay::Stub> NewStub(const std::string& target, bool with_interceptor = true,
                                           Metrics* metrics = nullptr);

// As NewStub, on a channel already connected (it waits up to 20 s, and
// fails the test otherwise): for a test whose short budget must measure
// the call, not the channel's first connection, which a loaded machine
// under a sanitizer can take hundreds of ms to make.
std::unique_ptr<echo::Relay::Stub> ConnectedStub(const std::string& target,
                                                 bool with_interceptor = true,
                                                 Metrics* metrics = nullptr);

// Serves `service` on a free loopback port behind hopbudget's server
// interceptor made from `options`; *address is set to "127.0.0.1:port".
// Fails the test (and returns nullptr) when the options are refused.
std::unique_ptr<grpc::Server> ServeBehindHopbudget(grpc::Service* service,
                                                   const ServerOptions& options,
                                                   std::string* address);

// A loopback port nothing listens on now (the kernel's next free one), for
// a target whose hop has not started yet or never will.
int UnusedPort();

// Gives the call made with `ctx` `budget` from now.
void SetBudget(grpc::ClientContext& ctx, absl::Duration budget);

// A request whose i-th step is for the i-th hop.
echo::RelayRequest Request(std::vector<echo::Step> steps);
echo::Step Work(int ms);
echo::Step Hang();

}  // namespace testing
}  // namespace hopbudget

#endif  // HOPBUDGET_TESTS_RELAY_FIXTURE_H_
