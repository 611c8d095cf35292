// Copyright hopbudget authors.
#include "attempt_result.h"

#include "hopbudget/client.h"

namespace hopbudget {
namespace internal {

AttemptResult AttemptResultOf(const grpc::Status& status,
                              const std::multimap<grpc::string_ref, grpc::string_ref>& trailers,
                              absl::string_view hop) {
  AttemptResult result;
  result.code = static_cast<absl::StatusCode>(status.error_code());
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    absl::optional<Attribution> a = AttributionOf(status);
    const bool ours =
        a.has_value() && a->hop == hop &&
        (a->source == DeadlineSource::kAttempt || a->source == DeadlineSource::kNoBackend);
    result.fired = ours ? a->source : DeadlineSource::kDownstream;
  }
  if (auto it = trailers.find(kPushbackHeader); it != trailers.end()) {
    result.pushback = ParsePushback(absl::string_view(it->second.data(), it->second.size()));
  }
  return result;
}

}  // namespace internal
}  // namespace hopbudget
