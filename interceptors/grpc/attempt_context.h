// Copyright hopbudget authors.
//
// attempt_context.h (internal): the budget of one logical call as its
// attempts see it, and the grpc::ClientContext of each attempt. Shared by
// every form that makes several real calls under one deadline (RetryLoop,
// Race, Hedger, DownstreamSlots, and the retrying channel), so that their
// attempts carry the same deadline, parentage, source tag and headers: the
// source tag of an attempt is built here and nowhere else.
#ifndef HOPBUDGET_INTERNAL_ATTEMPT_CONTEXT_H_
#define HOPBUDGET_INTERNAL_ATTEMPT_CONTEXT_H_

#include <grpcpp/client_context.h>

#include <cstdint>
#include <memory>

#include "absl/time/time.h"
#include "grpc_glue.h"
#include "hopbudget/advanced/budget.h"
#include "hopbudget/advanced/deadline_source.h"
#include "hopbudget/advanced/retry_loop.h"

namespace hopbudget {
namespace internal {

// Not thread-safe to build; const methods may be called concurrently.
class LogicalBudget {
 public:
  // `policy` shapes each attempt (attempt_cap, min_attempt_budget); its
  // hop_reserve is taken off the inbound deadline of a handler whose call
  // did not pass through hopbudget's server interceptor.
  LogicalBudget(const BudgetPolicy& policy, const LogicalCall& call, absl::Time now);
  // The logical call of a call the retrying channel hijacked: the one the
  // source tag on it says (`tag.has_logical`: NewDownstreamContext() or a
  // form above made it), or else the call's own `deadline` (InfiniteFuture():
  // none), a client budget from `now`. `tag.source` kExhaustedBeforeCall
  // (nothing was left on arrival) makes every attempt fail fast. Attempts are
  // children of the tagged inbound call, if any, found by its key.
  LogicalBudget(const BudgetPolicy& policy, const SourceTag& tag, absl::Time deadline,
                absl::Time now);

  // The context of attempt number `attempt` (1-based) started at `now`:
  //   - deadline min(logical deadline, now + attempt_cap) (DeriveCallDeadline);
  //   - a child of the inbound call, if any, so that its cancel reaches it;
  //   - `grpc-previous-rpc-attempts: attempt - 1` from the second attempt on;
  //   - the source tag hopbudget's client interceptor reads (attribution,
  //     and a fail-fast without the network when the attempt cannot start
  //     with min_attempt_budget or the inbound call was refused);
  //   - the trace request when the inbound caller asked for one.
  // `kind`: kRetryAttempt for an attempt of a retrying layer (the retry
  // loop, the retrying channel), which observes the logical call itself.
  // `handed_tag`: when not null, the source tag is written there instead of
  // into the metadata, and the caller starts the call inside a
  // ScopedAttemptTag (grpc_glue.h) on this thread.
  std::unique_ptr<grpc::ClientContext> NewAttemptContext(
      int attempt, absl::Time now, ClientCallKind kind = ClientCallKind::kPlainCall,
      SourceTag* handed_tag = nullptr) const;
  // The source tag of an attempt whose deadline `call` was derived at `now`
  // (what NewAttemptContext() writes).
  SourceTag AttemptTag(const CallDeadline& call, absl::Time now, ClientCallKind kind) const;

  // The policy attempts derive from (the reserve already taken off).
  const BudgetPolicy& attempt_policy() const { return attempt_policy_; }
  // The logical deadline (InfiniteFuture(): none), its source, its length
  // and when it started.
  absl::Time deadline() const { return deadline_; }
  DeadlineSource source() const { return source_; }
  absl::Duration budget() const { return budget_; }
  absl::Time start() const { return start_; }
  // The inbound call was refused on arrival: every attempt fails fast.
  bool exhausted() const { return exhausted_; }
  // The inbound call the attempts serve (0: none), for reports to it.
  uintptr_t inbound_key() const { return inbound_key_; }
  uint64_t inbound_id() const { return inbound_id_; }

 private:
  const grpc::ServerContextBase* inbound_;
  BudgetPolicy attempt_policy_;
  absl::Time deadline_ = absl::InfiniteFuture();
  DeadlineSource source_ = DeadlineSource::kNone;
  absl::Duration budget_ = absl::InfiniteDuration();
  absl::Time start_;
  bool exhausted_ = false;
  bool trace_requested_ = false;
  uintptr_t inbound_key_ = 0;
  uint64_t inbound_id_ = 0;
};

// Destroys an ended attempt's context soon, on hopbudget's timer thread.
// Not inline: the completion callback may run inside that very context's
// TryCancel() (which holds the context's mutex), and a context destroyed on
// a gRPC callback thread may drop its channel's last reference there, which
// gRPC 1.51 cannot shut its callback queue down from (grpc#32584). Forms
// that call `on_done` once every attempt has ended hand their contexts here
// first, so the caller may tear its stubs down in `on_done`.
// A canceller passes its own reference here after TryCancel() returns, for
// the same reasons.
void DestroyLater(std::shared_ptr<grpc::ClientContext> ended);

}  // namespace internal
}  // namespace hopbudget

#endif  // HOPBUDGET_INTERNAL_ATTEMPT_CONTEXT_H_
