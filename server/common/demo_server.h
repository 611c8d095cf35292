// Copyright hopbudget authors.
//
// demo_server.h: what the three demo services (gateway, orders, ledger)
// share: their common flags, the two modes, fault injection in a handler,
// deadline accounting, the Admin service, and running a gRPC server with
// health checking, reflection and the HTTP exporter (/metrics, /deadlinez).
//
// A service's main:
//   hopbudget::demo::BlockShutdownSignals();        // first, before any thread
//   hopbudget::demo::CommonFlags common;
//   common.name = "orders";
//   hopbudget::demo::FlagSet flags("orders");
//   hopbudget::demo::RegisterCommonFlags(flags, &common);
//   ... its own flags; Parse ...
//   hopbudget::demo::DemoProcess process(common);   // validates nothing: flags did
//   MyService service(process, ...);
//   return process.Serve({&service}, /*shield=*/nullptr);
//
// A handler:
//   hopbudget::demo::CallStart call = process_.Begin(*ctx);
//   if (call.done) return call.status;    // refused, or a fault answered
//   auto out = process_.NewOutgoingContext(*ctx);
//
// Modes: kHopbudget installs hopbudget's interceptors and derives downstream
// deadlines from the inbound one (NewDownstreamContext); kBaseline installs
// nothing and gives every outgoing call a constant timeout
// (--baseline-timeout), with no cancellation propagated: what most code does
// today. The handler code is otherwise the same in both modes.
//
// Thread safety: DemoProcess's methods may be called concurrently from
// handlers.
#ifndef HOPBUDGET_DEMO_DEMO_SERVER_H_
#define HOPBUDGET_DEMO_DEMO_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "accounting.h"
#include "demo/demo.grpc.pb.h"
#include "faults.h"
#include "flags.h"
#include "hopbudget/budget.h"
#include "hopbudget/shield.h"

namespace hopbudget::demo {

enum class Mode { kHopbudget, kBaseline };

absl::string_view ModeName(Mode mode);
absl::StatusOr<Mode> ParseMode(absl::string_view text);

struct CommonFlags {
  std::string name;                   // hop name (gateway, orders, ledger)
  std::string host = "127.0.0.1";
  int port = 0;                       // gRPC; 0 = any free port
  int metrics_port = 0;               // HTTP; 0 = any free port
  std::string mode_text = "hopbudget";
  Mode mode = Mode::kHopbudget;
  int64_t seed = 1;
  // Faults at start-up.
  std::string latency = "none";
  double error_rate = 0;
  double hang_rate = 0;
  int hang_next = 0;
  absl::Duration slow_commit = absl::ZeroDuration();
  // hopbudget mode: this hop's policy.
  absl::Duration request_cap = absl::Seconds(5);
  absl::Duration attempt_cap = absl::ZeroDuration();  // 0 = none
  absl::Duration hop_reserve = absl::Milliseconds(10);
  absl::Duration min_budget = absl::Milliseconds(2);
  // baseline mode: the constant timeout of every outgoing call.
  absl::Duration baseline_timeout = absl::Seconds(1);
  absl::Duration shutdown_grace = absl::Seconds(3);
  // On SIGTERM, how long the server reports NOT_SERVING on its health
  // service, still serving every call, before it shuts down: callers that
  // watch its health (DownstreamChannelArguments) stop sending in that time.
  absl::Duration lame_duck = absl::Milliseconds(250);
  // Most threads the gRPC server may run (pollers and handlers alike): a
  // call that finds them all busy is answered RESOURCE_EXHAUSTED at once
  // instead of starting one more thread. server/README.md says why 256.
  int max_threads = 256;
  bool verbose = false;
};

void RegisterCommonFlags(FlagSet& flags, CommonFlags* common);
// After Parse: checks and derives (mode, faults, policy). InvalidArgument
// naming the flag otherwise.
absl::Status FinishCommonFlags(CommonFlags* common, FaultConfig* faults);

// This hop's budget policy from the flags (hopbudget mode).
BudgetPolicy PolicyOf(const CommonFlags& common);

// How a handler starts.
struct CallStart {
  bool done = false;          // answer `status` now, do no work
  grpc::Status status;
  std::shared_ptr<DeadlineAccounting::Work> work;  // the accounting of this call
};

// Blocks SIGINT and SIGTERM in this thread and every thread it starts, so
// that Serve() can wait for them with sigwait. Call first in main.
void BlockShutdownSignals();

class DemoProcess {
 public:
  DemoProcess(CommonFlags common, const FaultConfig& faults);
  ~DemoProcess();

  const CommonFlags& flags() const { return common_; }
  Mode mode() const { return common_.mode; }
  FaultInjector& faults() { return faults_; }
  DeadlineAccounting& accounting() { return accounting_; }

  // Starts a call: answers a call hopbudget refused on arrival, counts it,
  // applies this hop's faults (latency and hang wait until the call is
  // cancelled, polling: the sync API has no cancel callback).
  CallStart Begin(grpc::ServerContext& ctx);

  // The context of an outgoing call made while serving `inbound`, with the
  // demo header forwarded. Hopbudget: NewDownstreamContext(inbound);
  // baseline: a fresh context with deadline now + baseline_timeout.
  std::unique_ptr<grpc::ClientContext> NewOutgoingContext(const grpc::ServerContext& inbound);
  // Adds the demo header of `inbound` to `out`: for contexts made by
  // someone else (each attempt of orders' RetryLoop).
  void ForwardDemoHeader(const grpc::ServerContext& inbound, grpc::ClientContext& out) const;
  // Baseline contexts for a hand-written retry loop: one per attempt.
  std::unique_ptr<grpc::ClientContext> NewBaselineContext(const grpc::ServerContext& inbound,
                                                          int previous_attempts);

  // Waits `d`, or until `ctx` is cancelled (false then).
  static bool SleepUnlessCancelled(const grpc::ServerContext& ctx, absl::Duration d);

  // Ledger counters.
  void CountCommit(bool replayed) { (replayed ? replays_ : commits_).fetch_add(1); }
  void CountCommitStopped() { commits_stopped_.fetch_add(1); }

  Stats StatsProto() const;
  void ResetStats();
  // Prometheus text of the demo's own counters (HttpExporterOptions::extra_metrics).
  std::string ExtraMetrics() const;

  // Builds and starts the server (interceptors in hopbudget mode, health,
  // reflection, Admin), starts the HTTP exporter, prints the ready line,
  // waits for SIGINT/SIGTERM, then shuts down (draining `shield` if given).
  // Returns the exit code.
  int Serve(const std::vector<grpc::Service*>& services, Shield* shield);

 private:
  class AdminImpl;

  CommonFlags common_;
  FaultInjector faults_;
  DeadlineAccounting accounting_;
  std::atomic<int64_t> retries_received_{0};
  std::atomic<int64_t> commits_{0};
  std::atomic<int64_t> replays_{0};
  std::atomic<int64_t> commits_stopped_{0};
  std::atomic<int64_t> faults_injected_{0};
  std::atomic<bool> draining_{false};  // shutting down: handlers answer UNAVAILABLE
  std::unique_ptr<AdminImpl> admin_;
};

// The keepalive policy of the demo's servers, matched to hopbudget's
// channel defaults (client.h: pings every 10 s, 3 s to answer).
inline constexpr int kMinPingIntervalMs = 5000;
inline constexpr int kServerKeepaliveTimeMs = 10000;
inline constexpr int kServerKeepaliveTimeoutMs = 3000;

// The arguments of the channels a demo hop calls downstream on (orders ->
// ledger, gateway -> orders), and what a client of the chain should use:
// round_robin with client-side health checking (gRFC A17; pick_first
// ignores health in gRPC 1.51). When the callee goes NOT_SERVING at the
// start of its shutdown (the lame duck), its subchannel leaves READY and
// calls fail fast with UNAVAILABLE here, a code the caller can retry
// elsewhere, instead of reaching a server that is shutting down: gRPC 1.51
// answers a call that reaches a server after Shutdown() began, before its
// GOAWAY reached the caller, with CANCELLED (grpc/grpc#41785).
grpc::ChannelArguments DownstreamChannelArguments();

// What every demo server sets on its builder: SO_REUSEPORT off (a port in
// use is an error, never shared) and the keepalive policy above.
void ApplyServerTransportPolicy(grpc::ServerBuilder& builder);

// Why `host`:`port` cannot be listened on, for the error message: binds a
// socket as gRPC would and names errno ("address already in use ...").
std::string ListenProblem(const std::string& host, int port);

// Faults <-> proto.
Faults FaultsToProto(const FaultConfig& config);
absl::StatusOr<FaultConfig> FaultsFromProto(const Faults& proto);

}  // namespace hopbudget::demo

#endif  // HOPBUDGET_DEMO_DEMO_SERVER_H_
