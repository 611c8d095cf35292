// Copyright hopbudget authors.
//
// attempt_result.h (internal): what ended one attempt, read off its gRPC
// answer, for DecideRetry. Shared by the retrying channel and the typed
// retry loop, so that both retry exactly the same answers.
#ifndef HOPBUDGET_INTERNAL_ATTEMPT_RESULT_H_
#define HOPBUDGET_INTERNAL_ATTEMPT_RESULT_H_

#include <grpcpp/support/status.h>
#include <grpcpp/support/string_ref.h>

#include <map>

#include "absl/strings/string_view.h"
#include "hopbudget/advanced/retry_policy.h"

namespace hopbudget {
namespace internal {

// gRFC A6's attempt count. gRPC core removes it from a call while core
// retries are on; hopbudget's own copy is wire.h's kPreviousAttemptsHeader.
inline constexpr char kGrpcPreviousAttemptsHeader[] = "grpc-previous-rpc-attempts";

// `status` and `trailers` are one attempt's answer as the budget interceptor
// of hop `hop` left them. Only this hop's own attempt budget makes a
// DEADLINE_EXCEEDED retryable (fired = kAttempt); any other is kDownstream.
// The pushback comes from `grpc-retry-pushback-ms`. `committed` is false.
AttemptResult AttemptResultOf(const grpc::Status& status,
                              const std::multimap<grpc::string_ref, grpc::string_ref>& trailers,
                              absl::string_view hop);

}  // namespace internal
}  // namespace hopbudget

#endif  // HOPBUDGET_INTERNAL_ATTEMPT_RESULT_H_
