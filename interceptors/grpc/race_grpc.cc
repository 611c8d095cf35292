// Copyright hopbudget authors.
//
// Race: RaceTracker behind one lock; each attempt's completion feeds it, and
// the winner's completion cancels the rest from the thread it arrived on.
#include "hopbudget/advanced/race_grpc.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "attempt_context.h"
#include "call_mutex.h"
#include "completion_gate.h"
#include "grpc_glue.h"
#include "hopbudget/client.h"
#include "metrics_recorder.h"
#include "sync.h"

namespace hopbudget {

class RaceCallImpl final : public RacingCall, public std::enable_shared_from_this<RaceCallImpl> {
 public:
  RaceCallImpl(Race& race, const LogicalCall& call, int attempts, Race::AsyncAttempt attempt,
               absl::AnyInvocable<void(RaceResult)> on_done)
      : race_(race),
        logical_(race.BudgetNow(), call, race.clock_.Now()),
        tracker_(attempts),
        attempt_(std::move(attempt)),
        gate_(std::move(on_done)),
        statuses_(static_cast<size_t>(attempts)) {}

  void Begin() {
    const int n = tracker_.size();
    std::vector<grpc::ClientContext*> ctxs;
    {
      internal::CallMutexLock lock(&mu_);
      const absl::Time now = race_.clock_.Now();
      // Every attempt is a first attempt of its own request: no
      // grpc-previous-rpc-attempts.
      for (int i = 0; i < n; ++i) {
        ctxs_.push_back(logical_.NewAttemptContext(1, now));
        ctxs.push_back(ctxs_.back().get());
      }
    }
    // Every attempt may end, and the race with them, before the last
    // attempt_ returns: the gate holds `on_done` until then.
    gate_.Run([&] {
      for (int i = 0; i < n; ++i) {
        // A context cancelled before its call starts cancels that call as it
        // starts: a winner among the first attempts stops the later ones.
        attempt_(i, ctxs[i],
                 [self = shared_from_this(), i](grpc::Status s) { self->OnEnd(i, std::move(s)); });
      }
    });
  }

  void TryCancel() override {
    std::vector<std::shared_ptr<grpc::ClientContext>> running;
    {
      internal::CallMutexLock lock(&mu_);
      if (!tracker_.Cancel()) return;
      running = RunningLocked();
    }
    CancelAll(std::move(running));
  }

 private:
  // References, so that a completion that runs inside TryCancel() cannot
  // free the context under it; released through CancelAll.
  std::vector<std::shared_ptr<grpc::ClientContext>> RunningLocked()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<std::shared_ptr<grpc::ClientContext>> out;
    for (int i = 0; i < tracker_.size(); ++i) {
      if (tracker_.fate(i) == RaceFate::kRunning) out.push_back(ctxs_[i]);
    }
    return out;
  }

  static void CancelAll(std::vector<std::shared_ptr<grpc::ClientContext>> ctxs) {
    for (auto& c : ctxs) {
      c->TryCancel();
      internal::DestroyLater(std::move(c));
    }
  }

  void OnEnd(int i, grpc::Status status) {
    std::vector<std::shared_ptr<grpc::ClientContext>> cancel;
    bool finished = false;
    {
      internal::CallMutexLock lock(&mu_);
      const RaceStep step = tracker_.OnEnd(i, static_cast<absl::StatusCode>(status.error_code()));
      statuses_[i] = std::move(status);
      if (tracker_.fate(i) == RaceFate::kFailed) last_failed_ = i;
      if (step.cancel_running) cancel = RunningLocked();
      finished = step.finished;
    }
    CancelAll(std::move(cancel));
    if (finished) Finish();
  }

  void Finish() {
    RaceResult r;
    std::vector<std::shared_ptr<grpc::ClientContext>> ended;
    {
      internal::CallMutexLock lock(&mu_);
      // Every attempt has ended: their contexts (and channel references)
      // go to DestroyLater before `on_done` lets the caller tear its stubs
      // down (attempt_context.h says why not here).
      ended = std::move(ctxs_);
      ctxs_.clear();
      r.outcome = tracker_.outcome();
      r.winner = tracker_.winner();
      r.losers = tracker_.losers();
      std::vector<RaceAttemptSummary> summaries;
      for (int i = 0; i < tracker_.size(); ++i) {
        RaceAttemptReport a;
        a.code = statuses_[i].error_code();
        a.fate = tracker_.fate(i);
        if (a.code == grpc::StatusCode::DEADLINE_EXCEEDED)
          a.attribution = AttributionOf(statuses_[i]);
        summaries.push_back({static_cast<absl::StatusCode>(a.code), a.attribution});
        r.attempts.push_back(std::move(a));
      }
      switch (r.outcome) {
        case RaceOutcome::kWon:
          r.status = statuses_[r.winner];
          break;
        case RaceOutcome::kCancelled:
          r.status = grpc::Status(grpc::StatusCode::CANCELLED, "hopbudget: race cancelled");
          break;
        case RaceOutcome::kAllFailed: {
          const grpc::Status& last = statuses_[last_failed_];
          r.status = grpc::Status(
              last.error_code(),
              absl::StrCat(last.error_message(), " (", FormatRaceFailure(summaries), ")"),
              last.error_details());
          break;
        }
      }
    }
    for (auto& c : ended) internal::DestroyLater(std::move(c));
    internal::Record(race_.metrics_).CountRace(r.outcome, r.losers);
    gate_.Complete(std::move(r));
  }

  Race& race_;
  const internal::LogicalBudget logical_;
  internal::CallMutex mu_;
  RaceTracker tracker_ ABSL_GUARDED_BY(mu_);
  const Race::AsyncAttempt attempt_;
  internal::CompletionGate<RaceResult> gate_;  // holds `on_done`
  std::vector<std::shared_ptr<grpc::ClientContext>> ctxs_ ABSL_GUARDED_BY(mu_);
  std::vector<grpc::Status> statuses_ ABSL_GUARDED_BY(mu_);
  int last_failed_ ABSL_GUARDED_BY(mu_) = 0;
};

absl::StatusOr<std::unique_ptr<Race>> Race::Create(RaceOptions options) {
  if (absl::Status s = ValidateHopName(options.hop); !s.ok()) return s;
  if (absl::Status s = ValidatePolicy(options.budget); !s.ok()) return s;
  return std::unique_ptr<Race>(new Race(std::move(options), nullptr, ""));
}

absl::StatusOr<std::unique_ptr<Race>> Race::Create(const Hop& hop, RaceOptions options) {
  options.hop = hop.name();
  options.clock = &hop.clock();
  options.metrics = &hop.metrics();
  return Create(std::move(options));
}

absl::StatusOr<std::unique_ptr<Race>> Race::Create(const Hop& hop, std::string method) {
  if (!internal::IsFullMethodName(method)) {
    return absl::InvalidArgumentError(
        absl::StrCat("hopbudget: Race of ", hop.name(), ": method \"", method,
                     "\" is not a full method name (\"/pkg.Service/Method\")"));
  }
  RaceOptions options;
  options.hop = hop.name();
  options.clock = &hop.clock();
  options.metrics = &hop.metrics();
  // What options() shows; each race reads the table in force (BudgetNow).
  options.budget = hop.PolicyFor(hop.metrics().Method(method), method).budget;
  // Every entry was validated when the Hop read its config.
  return std::unique_ptr<Race>(new Race(std::move(options), &hop, std::move(method)));
}

Race::Race(RaceOptions options, const Hop* hop, std::string method)
    : options_(std::move(options)),
      hop_(hop),
      method_(std::move(method)),
      clock_(options_.clock != nullptr ? *options_.clock : Clock::Real()),
      metrics_(options_.metrics != nullptr ? *options_.metrics : Metrics::Default()),
      method_id_(hop_ != nullptr ? metrics_.Method(method_) : MethodId{}) {}
Race::~Race() = default;

const BudgetPolicy& Race::BudgetNow() const {
  if (hop_ == nullptr) return options_.budget;
  const MethodPolicy& entry = hop_->PolicyFor(method_id_, method_);
  return entry.shadow ? PassThroughPolicy() : entry.budget;
}

namespace {
RaceResult InvalidSize(int attempts) {
  RaceResult r;
  const absl::Status s = ValidateRaceSize(attempts);
  r.status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(s.message()));
  return r;
}
}  // namespace

std::shared_ptr<RacingCall> Race::Start(const LogicalCall& call, int attempts, AsyncAttempt attempt,
                                        absl::AnyInvocable<void(RaceResult)> on_done) {
  if (!ValidateRaceSize(attempts).ok()) {
    on_done(InvalidSize(attempts));
    return nullptr;
  }
  auto c =
      std::make_shared<RaceCallImpl>(*this, call, attempts, std::move(attempt), std::move(on_done));
  c->Begin();
  return c;
}

RaceResult Race::Call(const LogicalCall& call, int attempts, AsyncAttempt attempt) {
  if (!ValidateRaceSize(attempts).ok()) return InvalidSize(attempts);
  RaceResult result;
  internal::Notification done;
  Start(call, attempts, std::move(attempt), [&](RaceResult r) {
    result = std::move(r);
    done.Notify();
  });
  done.WaitForNotification();
  return result;
}

}  // namespace hopbudget
