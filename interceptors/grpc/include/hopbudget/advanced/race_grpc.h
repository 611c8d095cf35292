// Copyright hopbudget authors.
//
// race_grpc.h: a first-success race of real gRPC calls under one deadline
// (the pure bookkeeping is RaceTracker, race.h).
//
// Race::Start() starts N attempts at once, each with its own
// grpc::ClientContext built as RetryLoop builds its attempts (deadline from
// what remains of the logical call, capped by attempt_cap; child of the
// inbound call; source tag for hopbudget's client interceptor). The first
// attempt that ends OK wins; every attempt still running is cancelled at
// once (ClientContext::TryCancel, which reaches the callee as a cancel) and
// counted as a cancelled loser, not a failure. If every attempt fails, the
// result's status is the last failure's code and details, its message
// followed by a note naming every attempt's code and attribution
// (FormatRaceFailure). Cancelling the logical call (RacingCall::TryCancel,
// or the inbound call's cancel) cancels every attempt.
//
// `on_done` runs once every attempt has ended, so that no attempt's
// completion outlives the response objects the caller gave it; the losers'
// cancels complete locally, right after the winner's answer.
//
// No thread per call: the callback form holds no thread; the sync form
// blocks only its caller while the attempts run in gRPC's callback API.
//
// The stubs' channels should carry hopbudget's client interceptor with
// ClientOptions::hop == RaceOptions::hop (attribution of each attempt).
//
// Thread safety: a Race may be used from any number of threads at once.
//
// Example (two replicas, first answer wins):
//   hopbudget::RaceOptions o;
//   o.hop = "orders"; o.budget = policy;
//   auto race = hopbudget::Race::Create(o);
//   // or, the budget from the method's entry in a Hop's table:
//   // auto race = hopbudget::Race::Create(hop, "/demo.Ledger/GetOrder");
//   echo::Reply replies[2];
//   hopbudget::RaceResult r = (*race)->Call(hopbudget::LogicalCall::Of(*ctx), 2,
//       [&](int i, grpc::ClientContext* c, std::function<void(grpc::Status)> done) {
//         replicas[i]->async()->Get(c, &req, &replies[i], std::move(done));
//       });
//   if (r.status.ok()) use(replies[r.winner]);
#ifndef HOPBUDGET_ADVANCED_RACE_GRPC_H_
#define HOPBUDGET_ADVANCED_RACE_GRPC_H_

#include <grpcpp/client_context.h>
#include <grpcpp/support/status.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/types/optional.h"
#include "hopbudget/advanced/attribution.h"
#include "hopbudget/advanced/budget.h"
#include "hopbudget/advanced/clock.h"
#include "hopbudget/advanced/metrics.h"
#include "hopbudget/advanced/race.h"
#include "hopbudget/advanced/retry_loop.h"
#include "hopbudget/hop.h"

namespace hopbudget {

struct RaceOptions {
  // This hop's name, as its channels' ClientOptions::hop. Required.
  std::string hop;
  // attempt_cap and min_attempt_budget shape each attempt; hop_reserve
  // applies to handlers whose call did not pass through hopbudget's server
  // interceptor. Must pass ValidatePolicy.
  BudgetPolicy budget;
  // Not owned; must outlive the Race. Defaults: Clock::Real(),
  // Metrics::Default().
  Clock* clock = nullptr;
  Metrics* metrics = nullptr;
};

struct RaceAttemptReport {
  grpc::StatusCode code = grpc::StatusCode::UNKNOWN;
  RaceFate fate = RaceFate::kRunning;
  absl::optional<Attribution> attribution;  // of a hopbudget DEADLINE_EXCEEDED
};

struct RaceResult {
  RaceOutcome outcome = RaceOutcome::kAllFailed;
  // OK when won; the failure described above when all failed; CANCELLED
  // when the logical call was cancelled first.
  grpc::Status status;
  int winner = -1;                          // the winning attempt's index, -1 unless kWon
  std::vector<RaceAttemptReport> attempts;  // by index
  int losers = 0;                           // attempts cancelled because another won
};

// The callback form's handle.
class RacingCall {
 public:
  virtual ~RacingCall() = default;
  // Cancels every attempt still running; the result is kCancelled unless an
  // attempt already won. Safe from any thread, any number of times.
  virtual void TryCancel() = 0;
};

class Race {
 public:
  // Starts attempt `index` (0..n-1) with `ctx` (owned by the race, valid
  // until the attempt ends) and arranges for `done` to be called once with
  // its status (a generated stub's async() method does).
  using AsyncAttempt = std::function<void(int index, grpc::ClientContext* ctx,
                                          std::function<void(grpc::Status)> done)>;

  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Race>> Create(RaceOptions options);
  // The same for `hop` (hop.h): its name, clock and metrics, whatever
  // `options` says, so the race and the Hop's channels agree on whose
  // attempt budget fired. `hop` is not owned and must outlive the race.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Race>> Create(const Hop& hop,
                                                                    RaceOptions options);
  // A race of calls of `method` ("/pkg.Service/Method") made by `hop`
  // (hop.h): the hop's name, clock and metrics are the Hop's, as on its
  // channels. Each race takes the method's entry in the Hop's table in force
  // when it starts, for every one of its attempts (a reload applies from the
  // next race): attempt_cap (a service config's perAttemptRecvTimeout),
  // min_attempt_budget and hop_reserve are the entry's. A method the table
  // does not name gets the table's default entry; a method in shadow mode
  // gets no cap, reserve or minimum: each attempt takes the logical call's
  // own deadline. options() shows the entry in force when the race was
  // made. `hop` is not owned and must outlive the race; a reload may run on
  // any thread while races run. A `method` that is not
  // "/pkg.Service/Method" is InvalidArgument.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Race>> Create(const Hop& hop,
                                                                    std::string method);
  ~Race();
  Race(const Race&) = delete;
  Race& operator=(const Race&) = delete;

  // The sync form: blocks the caller until every attempt has ended. An
  // invalid `attempts` (ValidateRaceSize) gives INVALID_ARGUMENT at once.
  RaceResult Call(const LogicalCall& call, int attempts, AsyncAttempt attempt);
  // The callback form: every `attempt` runs on the caller's thread, inside
  // Start. `on_done` runs exactly once, on a gRPC thread (or on the
  // caller's when every attempt ended at once), and never before the last
  // `attempt` has returned. `attempt` and what it refers to must stay valid
  // until then. The handle may be dropped; it is
  // nullptr when `attempts` is invalid (`on_done` then already ran with
  // INVALID_ARGUMENT).
  std::shared_ptr<RacingCall> Start(const LogicalCall& call, int attempts, AsyncAttempt attempt,
                                    absl::AnyInvocable<void(RaceResult)> on_done);

  // What the race was made with; for a race made from a Hop and a method,
  // the method's entry when the race was made, filled in as options.
  const RaceOptions& options() const { return options_; }

 private:
  Race(RaceOptions options, const Hop* hop, std::string method);
  friend class RaceCallImpl;
  // The budget one race runs under: options_.budget, or the method's entry
  // in the Hop's table in force now (kept alive as long as the Hop).
  const BudgetPolicy& BudgetNow() const;
  const RaceOptions options_;
  const Hop* const hop_;      // the table each race takes its entry from; nullptr: options_
  const std::string method_;  // "/pkg.Service/Method" when hop_ is set
  Clock& clock_;
  Metrics& metrics_;
  const MethodId method_id_;
};

}  // namespace hopbudget

#endif  // HOPBUDGET_ADVANCED_RACE_GRPC_H_
