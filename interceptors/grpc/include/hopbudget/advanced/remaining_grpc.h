// Copyright hopbudget authors.
//
// remaining_grpc.h: RemainingOf() (remaining.h) for the inbound call a
// handler is serving.
//
// For a call that passed through hopbudget's server interceptor the answer
// comes from its InboundBudget: the request deadline after this hop's caps,
// its source (client or request), the hop reserve of its policy, read on the
// interceptor's clock. For any other call it is the gRPC deadline, source
// client, with BudgetPolicy's default reserve, on the real clock.
//
// Thread safety: safe from any thread while the call lives.
//
// Example, in a handler:
//   hopbudget::RemainingTime r = hopbudget::Remaining(*ctx);
//   if (r.outcome == hopbudget::RemainingOutcome::kExhausted) return Refuse();
//   LOG(INFO) << "left " << r.left << " bounded by " << DeadlineSourceName(r.source);
#ifndef HOPBUDGET_ADVANCED_REMAINING_GRPC_H_
#define HOPBUDGET_ADVANCED_REMAINING_GRPC_H_

#include <grpcpp/server_context.h>

#include "hopbudget/advanced/remaining.h"

namespace hopbudget {

RemainingTime Remaining(const grpc::ServerContextBase& inbound);

}  // namespace hopbudget

#endif  // HOPBUDGET_ADVANCED_REMAINING_GRPC_H_
