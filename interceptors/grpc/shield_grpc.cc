// Copyright hopbudget authors.
#include "hopbudget/advanced/shield_grpc.h"

#include <grpcpp/server_context.h>

#include <algorithm>
#include <memory>

#include "absl/time/clock.h"
#include "attributed_status.h"
#include "grpc_glue.h"
#include "hopbudget/advanced/attribution.h"
#include "hopbudget/server.h"
#include "sync.h"

namespace hopbudget {
namespace {

// How often AwaitShielded looks at IsCancelled(): the sync API offers no
// other way to learn of a cancel.
constexpr absl::Duration kCancelPollInterval = absl::Milliseconds(2);

// The answer for a record: its status, an exceeded bound attributed to the
// shield at this hop.
grpc::Status StatusOfRecord(const ShieldRecord& r, const InboundBudget* budget) {
  if (r.outcome == ShieldOutcome::kExceededBound) {
    Attribution a{DeadlineSource::kShield, budget != nullptr ? budget->hop() : "", r.bound,
                  r.ended - r.started};
    return internal::AttributedStatus(a);
  }
  return ToGrpcStatus(r.status);
}

// The answer when the inbound call ends before the work: its budget ran out
// (attributed to it), or the caller cancelled.
grpc::Status StatusWhenCallEnded(const grpc::ServerContextBase& inbound,
                                 const InboundBudget* budget) {
  const absl::Time deadline =
      budget != nullptr ? budget->deadline() : internal::ToAbslTime(inbound.deadline());
  Clock& clock = budget != nullptr ? budget->clock() : Clock::Real();
  const absl::Time now = clock.Now();
  if (now < deadline) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "caller cancelled; shielded work goes on");
  }
  Attribution a{budget != nullptr ? budget->source() : DeadlineSource::kClient,
                budget != nullptr ? budget->hop() : "",
                budget != nullptr ? budget->budget_on_arrival() : absl::ZeroDuration(),
                budget != nullptr ? now - budget->arrival() : absl::ZeroDuration()};
  return internal::AttributedStatus(a);
}

// Answers a callback-API unary call from shielded work. Exactly one of the
// work's end and the call's cancel takes the reactor and calls Finish();
// gRPC calls OnDone() only after Finish(), so whoever took it may use it.
class ShieldedUnaryReactor final : public grpc::ServerUnaryReactor {
 public:
  ShieldedUnaryReactor(grpc::CallbackServerContext* ctx,
                       absl::AnyInvocable<void(const ShieldRecord&)> fill)
      : ctx_(ctx), fill_(std::move(fill)), slot_(std::make_shared<Slot>()) {
    slot_->reactor = this;
  }

  void Start(const ShieldHandle& handle) {
    handle.OnDone([slot = slot_](const ShieldRecord& r) {
      ShieldedUnaryReactor* self = slot->Take();
      if (self == nullptr) return false;  // the call ended first: nobody to tell
      if (self->fill_) self->fill_(r);
      self->Finish(StatusOfRecord(r, InboundBudget::Of(*self->ctx_)));
      return true;
    });
  }

  void OnCancel() override {
    if (slot_->Take() == nullptr) return;
    Finish(StatusWhenCallEnded(*ctx_, InboundBudget::Of(*ctx_)));
  }

  void OnDone() override { delete this; }

 private:
  struct Slot {
    internal::Mutex mu;
    ShieldedUnaryReactor* reactor ABSL_GUARDED_BY(mu) = nullptr;
    ShieldedUnaryReactor* Take() {
      internal::MutexLock lock(&mu);
      ShieldedUnaryReactor* r = reactor;
      reactor = nullptr;
      return r;
    }
  };

  grpc::CallbackServerContext* const ctx_;
  absl::AnyInvocable<void(const ShieldRecord&)> fill_;
  const std::shared_ptr<Slot> slot_;
};

}  // namespace

grpc::ServerUnaryReactor* AnswerWhenShieldedDone(
    grpc::CallbackServerContext* inbound, const ShieldHandle& handle,
    absl::AnyInvocable<void(const ShieldRecord&)> fill) {
  auto* reactor = new ShieldedUnaryReactor(inbound, std::move(fill));
  reactor->Start(handle);
  return reactor;
}

grpc::Status StatusOfShieldRecord(const ShieldRecord& record,
                                  const grpc::ServerContextBase& inbound) {
  return StatusOfRecord(record, InboundBudget::Of(inbound));
}

grpc::Status StatusWhenShieldCallerLeft(const grpc::ServerContextBase& inbound) {
  return StatusWhenCallEnded(inbound, InboundBudget::Of(inbound));
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::Status ToAbslStatus(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

std::unique_ptr<grpc::ClientContext> NewShieldedContext(const ShieldContext& work) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  if (work.deadline() != absl::InfiniteFuture()) {
    ctx->set_deadline(absl::ToChronoTime(work.deadline()));
  }
  internal::SourceTag tag;
  tag.source = DeadlineSource::kShield;
  tag.budget = work.bound();
  // The logical call is the shield's bound too: a retrying channel derives
  // its attempts from it, and attribution measures from the work's start.
  tag.has_logical = true;
  tag.logical_deadline = work.deadline();
  tag.logical_source = DeadlineSource::kShield;
  tag.logical_budget = work.bound();
  if (work.deadline() != absl::InfiniteFuture()) {
    tag.budget_start = work.deadline() - work.bound();
    tag.logical_start = tag.budget_start;
  }
  ctx->AddMetadata(internal::kInternalSourceKey, internal::FormatSourceTag(tag));
  return ctx;
}

grpc::Status AwaitShielded(grpc::ServerContextBase& inbound, const ShieldHandle& handle) {
  const InboundBudget* budget = InboundBudget::Of(inbound);
  const absl::Time deadline =
      budget != nullptr ? budget->deadline() : internal::ToAbslTime(inbound.deadline());
  // The budget's clock: the one its deadline was derived on.
  Clock& clock = budget != nullptr ? budget->clock() : Clock::Real();
  for (;;) {
    const absl::Time now = clock.Now();
    if (absl::optional<ShieldRecord> r =
            handle.WaitUntil(std::min(deadline, now + kCancelPollInterval))) {
      return StatusOfRecord(*r, budget);
    }
    if (inbound.IsCancelled() || clock.Now() >= deadline) {
      return StatusWhenCallEnded(inbound, budget);
    }
  }
}

DrainReport ShutdownAndDrain(grpc::Server& server, Shield& shield, absl::Duration max_wait) {
  // Real time: grpc::Server::Shutdown takes a wall-clock deadline.
  const absl::Time end = absl::Now() + max_wait;
  server.Shutdown(absl::ToChronoTime(end));
  return shield.Drain(std::max(end - absl::Now(), absl::ZeroDuration()));
}

}  // namespace hopbudget
