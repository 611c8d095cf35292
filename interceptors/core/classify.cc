// Copyright hopbudget authors.
#include "hopbudget/advanced/classify.h"

#include <algorithm>

#include "absl/types/optional.h"

namespace hopbudget {

absl::string_view ClientVerdictKindName(ClientVerdictKind kind) {
  switch (kind) {
    case ClientVerdictKind::kRelayed:
      return "relayed";
    case ClientVerdictKind::kOwnBudget:
      return "own_budget";
    case ClientVerdictKind::kUnknownOrigin:
      return "unknown_origin";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& os, ClientVerdictKind kind) {
  return os << ClientVerdictKindName(kind);
}

absl::Duration DeadlineSlack(absl::Time start, absl::Time deadline) {
  if (deadline == absl::InfiniteFuture()) return absl::ZeroDuration();
  return std::max(absl::Milliseconds(5), (deadline - start) / 10);
}

ClientVerdict ClassifyClientDeadline(const ClientCall& call, const ReceivedAttribution& received,
                                     absl::Time now) {
  ClientVerdict v;
  const bool ours_passed = call.deadline != absl::InfiniteFuture() &&
                           now + DeadlineSlack(call.start, call.deadline) >= call.deadline;
  absl::optional<Attribution> origin;
  for (const ParsedAttribution* form : {&received.details, &received.message, &received.trailers}) {
    if (form->result == AttributionParse::kMalformed) ++v.malformed_forms;
    if (form->result == AttributionParse::kOk && !origin.has_value()) origin = form->value;
  }
  const Attribution own{call.deadline_source == DeadlineSource::kNone ? DeadlineSource::kClient
                                                                      : call.deadline_source,
                        std::string(call.hop), call.budget, now - call.budget_start};
  if (origin.has_value() &&
      (origin->source == DeadlineSource::kClient ||
       origin->source == DeadlineSource::kArrivedExpired) &&
      call.deadline_source == DeadlineSource::kAttempt && ours_passed) {
    // The callee saw "its client deadline" pass, or refused the call as it
    // arrived with (almost) nothing left, and that deadline was this hop's
    // attempt budget. (Racing the callee: whichever of gRPC's local deadline
    // and the callee's answer arrives first.)
    v.kind = ClientVerdictKind::kOwnBudget;
    v.attribution = own;
    v.counted_source = DeadlineSource::kAttempt;
    v.counted_hop = std::string(call.hop);
    return v;
  }
  if (origin.has_value()) {
    v.kind = ClientVerdictKind::kRelayed;
    v.attribution = *origin;
    v.rewrite = received.details.result != AttributionParse::kOk;
    v.counted_source = DeadlineSource::kDownstream;
    v.counted_hop = origin->hop;
    return v;
  }
  if (ours_passed) {
    v.kind = ClientVerdictKind::kOwnBudget;
    v.attribution = own;
    v.counted_source = own.source;
    v.counted_hop = std::string(call.hop);
    return v;
  }
  v.kind = ClientVerdictKind::kUnknownOrigin;
  v.attribution = {DeadlineSource::kDownstream, "", absl::ZeroDuration(), absl::ZeroDuration()};
  v.counted_source = DeadlineSource::kDownstream;
  v.counted_hop = "";
  return v;
}

Attribution ServerCutAttribution(const ServerCall& call, absl::Time now) {
  const RequestBudget& rb = call.budget;
  switch (rb.outcome) {
    case ArrivalOutcome::kAccepted:
      break;
    case ArrivalOutcome::kShedCannotFinish:
      return {DeadlineSource::kCannotFinish, std::string(call.hop), rb.budget_on_arrival,
              now - rb.arrival};
    case ArrivalOutcome::kShedQueueExpired:
    case ArrivalOutcome::kShedOverload:
      return {DeadlineSource::kQueueWait, std::string(call.hop), rb.budget_on_arrival,
              now - rb.arrival};
    case ArrivalOutcome::kExpired:
    case ArrivalOutcome::kBelowMinimum:
      return {DeadlineSource::kArrivedExpired, std::string(call.hop),
              std::max(rb.budget_on_arrival, absl::ZeroDuration()), absl::ZeroDuration()};
  }
  // This hop's cap, or the caller's deadline where this hop enforces it
  // (gRPC's own came later: the call waited on its way, transit.h).
  const DeadlineSource source =
      rb.source == DeadlineSource::kClient ? DeadlineSource::kClient : DeadlineSource::kRequest;
  return {source, std::string(call.hop), rb.budget_on_arrival, now - rb.arrival};
}

namespace {
// The request deadline has (nearly) passed: gRPC's own deadline timer fires
// early by as long as a preemption between its two clock reads, as on the
// client side (DeadlineSlack).
bool RequestDeadlinePassed(const RequestBudget& rb, absl::Time now) {
  return rb.deadline != absl::InfiniteFuture() &&
         now + DeadlineSlack(rb.arrival, rb.deadline) >= rb.deadline;
}
}  // namespace

ServerVerdict ClassifyServerAnswer(const ServerCall& call, absl::StatusCode handler_code,
                                   const ReceivedAttribution& relayed, absl::Time now) {
  ServerVerdict v;
  const RequestBudget& rb = call.budget;
  const bool refused = rb.outcome != ArrivalOutcome::kAccepted;
  v.code = handler_code;
  if (rb.outcome == ArrivalOutcome::kShedOverload && !call.cut_by_this_hop) {
    v.code = absl::StatusCode::kResourceExhausted;
    v.replace = true;
    v.overload_shed = true;
    return v;
  }
  if (call.cut_by_this_hop || refused) {
    v.code = absl::StatusCode::kDeadlineExceeded;
    v.attribution = ServerCutAttribution(call, now);
    v.fired = v.attribution.source;
    v.replace = !call.cut_by_this_hop;  // a cut has answered already
    return v;
  }
  if (handler_code == absl::StatusCode::kDeadlineExceeded) {
    absl::optional<Attribution> origin;
    for (const ParsedAttribution* form : {&relayed.details, &relayed.message}) {
      if (form->result == AttributionParse::kMalformed) ++v.malformed_forms;
      if (form->result == AttributionParse::kOk && !origin.has_value()) origin = form->value;
    }
    v.replace = true;
    v.count = true;
    if (origin.has_value()) {
      v.attribution = *std::move(origin);
      v.counted_source = DeadlineSource::kDownstream;
    } else if (RequestDeadlinePassed(rb, now)) {
      v.attribution = {rb.source, std::string(call.hop), rb.budget_on_arrival, now - rb.arrival};
      v.counted_source = rb.source;
    } else {
      // The handler answered DEADLINE_EXCEEDED without the detail of the
      // downstream call that produced it.
      v.attribution = {DeadlineSource::kDownstream, "", absl::ZeroDuration(), absl::ZeroDuration()};
      v.counted_source = DeadlineSource::kDownstream;
    }
    v.counted_hop = v.attribution.hop;
    v.fired = v.attribution.source;
    return v;
  }
  if (handler_code == absl::StatusCode::kCancelled && RequestDeadlinePassed(rb, now)) {
    // The handler saw its call cancelled by gRPC enforcing the deadline.
    v.code = absl::StatusCode::kDeadlineExceeded;
    v.fired = rb.source;
    v.count = true;
    v.counted_source = rb.source;
    v.counted_hop = std::string(call.hop);
  }
  return v;
}

ServerVerdict ClassifyServerEnd(const ServerCall& call, absl::Time now) {
  ServerVerdict v;
  const RequestBudget& rb = call.budget;
  if (call.cut_by_this_hop || rb.outcome != ArrivalOutcome::kAccepted) {
    v.code = absl::StatusCode::kDeadlineExceeded;
    v.fired = ServerCutAttribution(call, now).source;
    return v;
  }
  if (RequestDeadlinePassed(rb, now)) {
    // gRPC enforced the caller's deadline: counted here, nobody else saw
    // it at this hop.
    v.code = absl::StatusCode::kDeadlineExceeded;
    v.fired = rb.source;
    v.count = true;
    v.counted_source = rb.source;
    v.counted_hop = std::string(call.hop);
    return v;
  }
  v.code = absl::StatusCode::kCancelled;
  return v;
}

}  // namespace hopbudget
