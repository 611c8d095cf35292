// Copyright hopbudget authors.
//
// demo_server.h: one demo service process (gateway, orders, ledger): what
// a handler does first (faults, accounting, refusing while draining), and
// the parts it is made of, each in its own unit:
//   service_flags.h  the values of the flags every service shares, checked;
//                    the two modes
//   outgoing.h       the contexts of outgoing calls: the only place the
//                    hopbudget and baseline modes differ
//   admin_service.h  the hop's counters, /metrics text, the Admin service
//   server_runner.h  the gRPC server: builder settings, listening, signals,
//                    shutdown
//
// A service's main (its flags: service_flag_defs.h):
//   HOPBUDGET_DEMO_DEFINE_COMMON_FLAGS("orders", absl::Seconds(2), absl::Milliseconds(300));
//   int Main(int argc, char** argv) {
//     hopbudget::demo::BlockShutdownSignals();      // first, before any thread
//     hopbudget::cli::ParseOrExit(argc, argv, "orders", "orders: ...");
//     hopbudget::demo::CommonFlags common = hopbudget::demo::CommonFlagsFromCommandLine();
//     hopbudget::demo::FaultConfig faults;
//     hopbudget::cli::ExitIfBad("orders", hopbudget::demo::FinishCommonFlags(&common, &faults));
//     hopbudget::demo::DemoProcess process(common, faults);  // validates nothing: flags did
//     MyService service(process, ...);
//     return process.Serve({&service}, /*shield=*/nullptr);
//   }
//
// A handler:
//   hopbudget::demo::CallStart call = process_.Begin(*ctx);
//   if (call.done) return call.status;    // refused, or a fault answered
//   auto out = process_.outgoing().NewContext(*ctx);
//
// Thread safety: DemoProcess's methods may be called concurrently from
// handlers; Serve() once, from main.
#ifndef HOPBUDGET_DEMO_DEMO_SERVER_H_
#define HOPBUDGET_DEMO_DEMO_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "accounting.h"
#include "admin_service.h"
#include "faults.h"
#include "flags.h"
#include "hopbudget/advanced/retry_policy.h"
#include "hopbudget/advanced/shield.h"
#include "hopbudget/hop.h"
#include "outgoing.h"
#include "server_runner.h"
#include "service_flags.h"

namespace hopbudget::demo {

// How a handler starts.
struct CallStart {
  bool done = false;  // answer `status` now, do no work
  grpc::Status status;
  std::shared_ptr<DeadlineAccounting::Work> work;  // the accounting of this call
  // This hop's faults for the call (Start): wait `latency` first, then
  // AfterLatency() applies `fault` (an error answers; a hang waits for the
  // call's cancel).
  absl::Duration latency = absl::ZeroDuration();
  FaultAction fault = FaultAction::kProceed;
};

// The methods admission covers in the demo: every unary method of
// demo.proto's services ("/hopbudget.demo.Ledger/Commit", ...), never the
// Admin service (an operator's faults and stats must answer under overload,
// as gRPC's own health and channelz do) and never a streaming method
// (WatchOrder). Why not streams: an admitted call holds its admission slot
// until its handler returns, and a watch lasts as long as its caller's
// deadline: a few watches would take the slots unary calls need, and the
// adaptive limit and the cannot-finish predictor would learn the watch's
// seconds as "handler time". A watch is bounded by its deadline and its
// idle budget instead.
std::vector<std::string> AdmittedMethods();

// Relays a WatchOrder stream read from the hop below (`below`, called with
// `down`) to this hop's caller, message by message, and returns the status
// the stream below ended with, unchanged: a DEADLINE_EXCEEDED keeps the
// attribution of the hop where its budget fired (an idle cut further down
// stays that hop's). When the caller has left (a write fails) it cancels
// the stream below and drains it. The same in both modes; what differs is
// `down` (outgoing.h: hopbudget's propagates the caller's deadline and
// cancel) and the channel (hopbudget's has the stream idle budget). A
// baseline relay blocked on a silent stream notices nothing until its own
// constant timeout: nothing propagates its caller's cancel.
grpc::Status RelayWatch(grpc::ClientContext& down, grpc::ClientReader<OrderStatus>& below,
                        grpc::ServerWriter<OrderStatus>& caller);

// An order's idempotency key as the services take it: 1..128 bytes, else
// INVALID_ARGUMENT saying so (the ledger's store holds keys to that size).
grpc::Status CheckOrderKey(const std::string& key);

class DemoProcess {
 public:
  // `support`: the faults this hop can inject (LedgerFaultSupport() for the
  // ledger); the Admin service refuses others.
  DemoProcess(CommonFlags common, const FaultConfig& faults, FaultSupport support = {});

  const CommonFlags& flags() const { return common_; }
  Mode mode() const { return common_.mode; }
  FaultInjector& faults() { return faults_; }
  DeadlineAccounting& accounting() { return accounting_; }
  HopStats& stats() { return stats_; }
  const OutgoingContexts& outgoing() const { return outgoing_; }

  // A relaying hop's WatchOrder (gateway, orders): opens the stream below
  // with `open` on this hop's stream context (OutgoingContexts::
  // NewStreamContext), relays it to `caller` (RelayWatch) and returns how
  // it ended; with --verbose, says so on stderr.
  grpc::Status RelayWatchOrder(
      const grpc::ServerContext& ctx, const OrderKey& request,
      grpc::ServerWriter<OrderStatus>& caller,
      const std::function<std::unique_ptr<grpc::ClientReader<OrderStatus>>(grpc::ClientContext*)>&
          open);

  // Starts a call: answers a call hopbudget refused on arrival, counts it,
  // answers UNAVAILABLE once the server is draining, applies this hop's
  // faults (latency and hang wait until the call is cancelled, polling: the
  // sync API has no cancel callback).
  CallStart Begin(grpc::ServerContext& ctx);
  // Begin's first half, for a handler that must not block (callback API):
  // everything but the waits. The handler then waits start.latency (unless
  // the call is cancelled first), calls AfterLatency(), and, when
  // start.fault is kHang, waits for the call's cancel.
  CallStart Start(const grpc::ServerContextBase& ctx);
  void AfterLatency(CallStart& start);

  // Waits `d`, or until `ctx` is cancelled (false then).
  static bool SleepUnlessCancelled(const grpc::ServerContext& ctx, absl::Duration d);
  // What a handler answers when it stopped because its call ended:
  // DEADLINE_EXCEEDED when the call's budget ran out (so that hopbudget's
  // interceptor attributes and counts it as an expiry), else CANCELLED.
  static grpc::Status StoppedStatus(const grpc::ServerContextBase& ctx);
  // True once the server began draining (see Begin): a long handler (a
  // watch) stops at its next step.
  bool draining() const { return draining_.load(); }

  // Runs the server with `services` (not owned) and the Admin service until
  // SIGINT/SIGTERM (RunServer), draining `shield` (may be null) at
  // shutdown. First turns absl::Mutex deadlock detection off for the whole
  // process, unless the flags ask for it (--mutex-deadlock-detection).
  // Admission (hopbudget mode, --admission) covers the unary methods of
  // demo.proto only: see AdmittedMethods(). With --service-config, the
  // server's interceptor is a Hop's, each method on its own budgets (the
  // flags' policy the default), and SIGHUP re-reads the file: a config
  // that does not read or validate is refused and the one in force kept.
  // Returns the exit code (2 when the service config is refused at start).
  int Serve(const std::vector<grpc::Service*>& services, Shield* shield);
  // With --service-config in hopbudget mode: the Hop read from the file,
  // made at the first call (Serve() makes it otherwise), so that the
  // handlers' downstream calls can be made from it before Serve(); nullptr
  // without one. An error names the file and the method. Not thread-safe;
  // the Hop lives as long as this process object.
  absl::StatusOr<const Hop*> LoadHop();
  // The retry policy of this hop's downstream calls, shown on /deadlinez.
  void SetRetryPolicy(const RetryPolicy& policy) { retry_policy_ = policy; }

 private:
  const CommonFlags common_;
  FaultInjector faults_;
  DeadlineAccounting accounting_;
  HopStats stats_;
  AdminService admin_;
  const OutgoingContexts outgoing_;
  std::optional<RetryPolicy> retry_policy_;
  std::unique_ptr<Hop> hop_;           // with --service-config
  std::atomic<bool> draining_{false};  // shutting down: handlers answer UNAVAILABLE
};

}  // namespace hopbudget::demo

#endif  // HOPBUDGET_DEMO_DEMO_SERVER_H_
