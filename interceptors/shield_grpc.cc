// Copyright hopbudget authors.
#include "hopbudget/shield_grpc.h"

#include <algorithm>

#include "absl/time/clock.h"
#include "grpc_glue.h"
#include "hopbudget/attribution.h"
#include "hopbudget/server.h"

namespace hopbudget {
namespace {

// How often AwaitShielded looks at IsCancelled(): the sync API offers no
// other way to learn of a cancel.
constexpr absl::Duration kCancelPollInterval = absl::Milliseconds(2);

grpc::Status DeadlineStatus(const Attribution& a) {
  const std::string message = FormatAttributionMessage(a);
  return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, message,
                      EncodeStatusDetails(a, message));
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
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
  ctx->AddMetadata(internal::kInternalSourceKey, internal::FormatSourceTag(tag));
  return ctx;
}

grpc::Status AwaitShielded(grpc::ServerContextBase& inbound, const ShieldHandle& handle) {
  const InboundBudget* budget = InboundBudget::Of(inbound);
  const absl::Time deadline =
      budget != nullptr ? budget->deadline() : internal::ToAbslTime(inbound.deadline());
  for (;;) {
    const absl::Time now = absl::Now();
    if (absl::optional<ShieldRecord> r =
            handle.WaitUntil(std::min(deadline, now + kCancelPollInterval))) {
      if (r->outcome == ShieldOutcome::kExceededBound) {
        Attribution a{DeadlineSource::kShield, budget != nullptr ? budget->hop() : "",
                      r->bound, r->ended - r->started};
        return DeadlineStatus(a);
      }
      return ToGrpcStatus(r->status);
    }
    if (inbound.IsCancelled()) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "caller cancelled; shielded work goes on");
    }
    if (absl::Now() >= deadline) {
      Attribution a{budget != nullptr ? budget->source() : DeadlineSource::kClient,
                    budget != nullptr ? budget->hop() : "",
                    budget != nullptr ? budget->budget_on_arrival() : absl::ZeroDuration(),
                    budget != nullptr ? absl::Now() - budget->arrival() : absl::ZeroDuration()};
      return DeadlineStatus(a);
    }
  }
}

DrainReport ShutdownAndDrain(grpc::Server& server, Shield& shield, absl::Duration max_wait) {
  const absl::Time end = absl::Now() + max_wait;
  server.Shutdown(absl::ToChronoTime(end));
  return shield.Drain(std::max(end - absl::Now(), absl::ZeroDuration()));
}

}  // namespace hopbudget
