// Copyright hopbudget authors.
#include "hopbudget/classify.h"

#include <algorithm>

#include "absl/types/optional.h"

namespace hopbudget {

absl::string_view ClientVerdictKindName(ClientVerdictKind kind) {
  switch (kind) {
    case ClientVerdictKind::kRelayed: return "relayed";
    case ClientVerdictKind::kOwnBudget: return "own_budget";
    case ClientVerdictKind::kUnknownOrigin: return "unknown_origin";
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
                        call.hop, call.budget, now - call.budget_start};
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
    v.counted_hop = call.hop;
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
    v.counted_hop = call.hop;
    return v;
  }
  v.kind = ClientVerdictKind::kUnknownOrigin;
  v.attribution = {DeadlineSource::kDownstream, "", absl::ZeroDuration(), absl::ZeroDuration()};
  v.counted_source = DeadlineSource::kDownstream;
  v.counted_hop = "";
  return v;
}

}  // namespace hopbudget
