// Copyright hopbudget authors.
//
// server_runner.h: how a demo service runs its gRPC server, from the
// builder's settings to the exit code. Every builder setting of the demo's
// servers is here (transport policy, keepalive, thread bound, interceptors,
// health, reflection, channelz), so that a change to them is made in one
// place.
//
//   BlockShutdownSignals();            // first in main, before any thread
//   ServerRunOptions run;
//   run.name = "orders"; run.port = 0; ...
//   run.begin_draining = [&] { draining = true; };
//   run.await_idle = [&](absl::Duration d) { return accounting.AwaitIdle(d); };
//   return RunServer(run, {&service, &admin}, /*shield=*/nullptr);
//
// RunServer listens (a port in use is an error, never shared), starts the
// HTTP exporter (/metrics, /deadlinez), prints the ready line
// "<name> listening on <grpc-port> metrics on <http-port>" on stdout, calls
// `reload` on each SIGHUP, waits for SIGINT or SIGTERM, then shuts down
// without answering a call
// CANCELLED: NOT_SERVING for `lame_duck` while still serving, then
// `begin_draining` (handlers answer UNAVAILABLE from then on), then the
// calls in handlers (and `shield`'s commits) get `shutdown_grace` to finish.
//
// Thread safety: RunServer is called once, from main's thread.
#ifndef HOPBUDGET_DEMO_SERVER_RUNNER_H_
#define HOPBUDGET_DEMO_SERVER_RUNNER_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "hopbudget/advanced/budget.h"
#include "hopbudget/advanced/retry_policy.h"
#include "hopbudget/advanced/shield.h"
#include "hopbudget/hop.h"
#include "hopbudget/server.h"

namespace hopbudget::demo {

// The keepalive policy of the demo's servers, matched to hopbudget's
// channel defaults (client.h: pings every 10 s, 3 s to answer).
inline constexpr int kMinPingIntervalMs = 5000;
inline constexpr int kServerKeepaliveTimeMs = 10000;
inline constexpr int kServerKeepaliveTimeoutMs = 3000;

// Blocks SIGINT, SIGTERM and SIGHUP in this thread and every thread it
// starts, so that RunServer() can wait for them with sigwait. Call first in
// main.
void BlockShutdownSignals();

// What every demo server sets on its builder: SO_REUSEPORT off (a port in
// use is an error, never shared) and the keepalive policy above.
void ApplyServerTransportPolicy(grpc::ServerBuilder& builder);

// Why `host`:`port` cannot be listened on, for the error message: binds a
// socket as gRPC would and names errno ("address already in use ...").
std::string ListenProblem(const std::string& host, int port);

struct ServerRunOptions {
  std::string name;       // hop name: log lines, ready line, /metrics
  std::string mode_name;  // said once on stderr at start
  std::string host = "127.0.0.1";
  int port = 0;                    // gRPC; 0 = any free port
  int metrics_port = 0;            // HTTP; 0 = any free port
  int max_threads = 256;           // gRPC server threads (ResourceQuota)
  int max_concurrent_streams = 0;  // per connection (HTTP/2 SETTINGS); 0 = gRPC's default
  // Set: hopbudget's server interceptor with this policy (hopbudget mode).
  std::optional<BudgetPolicy> interceptor_policy;
  // Set (with interceptor_policy, its defaults): the interceptor is this
  // Hop's, each method on its own budgets (hopbudget/hop.h). Not owned;
  // outlives RunServer.
  const Hop* hop = nullptr;
  // Called on SIGHUP, on RunServer's thread (re-reads the Hop's service
  // config). Unset: SIGHUP is logged and ignored.
  std::function<void()> reload;
  // With the interceptor: its admission (hopbudget/server.h). Off by default.
  AdmissionOptions admission;
  // /deadlinez: the retry policy of this hop's downstream calls, if any, and
  // links to the other hops' pages (name, url).
  std::optional<RetryPolicy> retry_policy;
  std::vector<std::pair<std::string, std::string>> peers;
  absl::Duration lame_duck = absl::Milliseconds(250);
  absl::Duration shutdown_grace = absl::Seconds(3);
  // Extra Prometheus text appended to /metrics (may be empty).
  std::function<std::string()> extra_metrics;
  // Called once, when the lame duck ends: from then on handlers must answer
  // new calls UNAVAILABLE. Required.
  std::function<void()> begin_draining;
  // Waits until no handler is running, at most the given time: true when
  // none is. Required.
  std::function<bool(absl::Duration)> await_idle;
};

// Runs the server until SIGINT/SIGTERM (see the top of this file).
// Registers health checking, reflection and channelz
// (grpc.channelz.v1.Channelz) besides `services` (not owned; they must
// outlive the call). `shield` (not owned, may be null) is drained at
// shutdown. Returns the exit code: 0 after a clean shutdown, 1 when the
// port or the HTTP exporter cannot listen, 2 for options the interceptor
// refuses.
int RunServer(const ServerRunOptions& options, const std::vector<grpc::Service*>& services,
              Shield* shield);

}  // namespace hopbudget::demo

#endif  // HOPBUDGET_DEMO_SERVER_RUNNER_H_
