// Copyright hopbudget authors.
//
// classify.h: which budget fired, decided from values and time alone.
//
// When a call ends DEADLINE_EXCEEDED, the client interceptor must say which
// budget fired and where: its own (the caller's deadline, an attempt cap, a
// request budget passed down), one that fired further down (the callee's
// attribution, relayed), or an unknown one (a callee without hopbudget).
// ClassifyClientDeadline is that decision as a pure function of what the
// call was given and what the callee answered, so that it is tested
// table-style on a fake clock; the interceptor only reads the inputs off the
// call and applies the verdict (rewrite the status, count the metric).
//
// Thread safety: pure functions of values.
//
// Example:
//   hopbudget::ClientCall call{start, deadline, hopbudget::DeadlineSource::kAttempt,
//                              absl::Milliseconds(300), start, "orders"};
//   hopbudget::ClientVerdict v = hopbudget::ClassifyClientDeadline(call, received, now);
//   if (v.rewrite) status = StatusOf(v.attribution);
#ifndef HOPBUDGET_ADVANCED_CLASSIFY_H_
#define HOPBUDGET_ADVANCED_CLASSIFY_H_

#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "hopbudget/advanced/attribution.h"
#include "hopbudget/advanced/budget.h"
#include "hopbudget/advanced/deadline_source.h"

namespace hopbudget {

// What one client call was given.
struct ClientCall {
  absl::Time start;                              // when the call started
  absl::Time deadline = absl::InfiniteFuture();  // the call's deadline
  // Which budget the deadline is (kNone: none set; kClient at the edge).
  DeadlineSource deadline_source = DeadlineSource::kNone;
  // That budget's length and start, as attribution reports them (a request
  // budget started when the inbound call arrived, not when this call did).
  absl::Duration budget = absl::InfiniteDuration();
  absl::Time budget_start;
  absl::string_view hop;  // this hop's name; must outlive the call to classify
};

// The attribution forms the callee's answer carried (attribution.h readers).
struct ReceivedAttribution {
  ParsedAttribution details;   // grpc-status-details-bin
  ParsedAttribution message;   // the status message
  ParsedAttribution trailers;  // the plain hopbudget-* trailers
};

// What the client concludes.
enum class ClientVerdictKind {
  kRelayed,        // a budget further down fired: the callee's origin stands
  kOwnBudget,      // this call's own deadline fired (or its attempt budget,
                   // seen by the callee as its client deadline)
  kUnknownOrigin,  // a callee without hopbudget timed out: downstream, no hop
};

// "relayed", "own_budget", "unknown_origin".
absl::string_view ClientVerdictKindName(ClientVerdictKind kind);
template <typename Sink>
void AbslStringify(Sink& sink, ClientVerdictKind kind) {
  sink.Append(ClientVerdictKindName(kind));
}
std::ostream& operator<<(std::ostream& os, ClientVerdictKind kind);

struct ClientVerdict {
  ClientVerdictKind kind = ClientVerdictKind::kUnknownOrigin;
  // What the status must carry.
  Attribution attribution;
  // Whether the status must be rewritten to carry `attribution` (false when
  // the callee's details already say it).
  bool rewrite = true;
  // The metric: hopbudget_deadline_exceeded_total{side="client"} by this
  // source and hop (a relayed origin counts as kDownstream at its hop).
  DeadlineSource counted_source = DeadlineSource::kDownstream;
  std::string counted_hop;
  // Forms that were present but malformed: each is counted, all ignored.
  int malformed_forms = 0;
};

// "Nearly passed": gRPC converts a deadline to its monotonic clock with two
// clock reads, so a preempted thread fires it early by the preemption
// (tens of ms on a loaded 2-core machine). A tenth of the call's budget, at
// least 5 ms; an infinite deadline never passes.
absl::Duration DeadlineSlack(absl::Time start, absl::Time deadline);

// The server side: what a hop's answer to one inbound call means, and what
// goes on the wire. ClassifyServerAnswer decides when the handler answers;
// ClassifyServerEnd when the call ended without that answer reaching the
// interceptor (gRPC cancelled it: the caller left, its deadline passed, or
// this hop's own cancel).

// One inbound call as the server interceptor derived it.
struct ServerCall {
  RequestBudget budget;   // from DeriveRequestBudget (budget.h)
  absl::string_view hop;  // this hop's name; must outlive the call to classify
  // This hop cancelled the call itself (request cap, refusal backstop): its
  // cancel already answered, with the status message alone.
  bool cut_by_this_hop = false;
};

struct ServerVerdict {
  absl::StatusCode code = absl::StatusCode::kOk;  // what the caller got (or gets)
  DeadlineSource fired = DeadlineSource::kNone;   // the budget that fired, for the trace
  // Whether the answer must be replaced by a DEADLINE_EXCEEDED carrying
  // `attribution` in every form.
  bool replace = false;
  Attribution attribution;
  // Whether to count hopbudget_deadline_exceeded_total{side="server"} now,
  // by this source and hop (refusals and this hop's cuts are counted when
  // they happen, not here).
  bool count = false;
  DeadlineSource counted_source = DeadlineSource::kNone;
  std::string counted_hop;
  int malformed_forms = 0;  // forms the handler relayed that were malformed
  // Admission shed the call for overload: answer RESOURCE_EXHAUSTED with a
  // pushback (v.code), not an attribution.
  bool overload_shed = false;
};

// The attribution of a call this hop ends itself: refused on arrival
// (arrived-expired, elapsed 0), shed by admission (cannot-finish or
// queue-wait, elapsed since arrival), or cut at its request budget: source
// request, or client when the budget it enforced was the caller's (gRPC's
// deadline came later: the call waited on its way).
Attribution ServerCutAttribution(const ServerCall& call, absl::Time now);

// The handler answered `handler_code`, carrying `relayed` (its status's
// details and message; the trailers are unused). In order:
//   1. this hop cut the call: the cut stands (nothing reaches the caller);
//   2. the call was refused on arrival or shed by admission: the refusal
//      goes out, whatever the handler said (DEADLINE_EXCEEDED, source
//      arrived-expired, cannot-finish or queue-wait; an overload shed is
//      RESOURCE_EXHAUSTED with `overload_shed` set and no attribution);
//   3. DEADLINE_EXCEEDED carrying a valid origin: relayed as it is, counted
//      as kDownstream at the origin's hop;
//   4. DEADLINE_EXCEEDED with no origin, this hop's request deadline passed:
//      this hop's budget (its source, from the arrival);
//   5. DEADLINE_EXCEEDED otherwise: downstream, origin unknown;
//   6. CANCELLED after the request deadline: gRPC enforced the deadline, so
//      the caller got DEADLINE_EXCEEDED (counted, not replaced: it is gone);
//   7. anything else stands.
// "Passed" allows DeadlineSlack(arrival, deadline), as on the client: gRPC
// fires a deadline early by as long as a preemption (tens of ms seen under
// load), so a cancel that close to the deadline is taken for it.
ServerVerdict ClassifyServerAnswer(const ServerCall& call, absl::StatusCode handler_code,
                                   const ReceivedAttribution& relayed, absl::Time now);

// The call ended with no answer from the handler: this hop's cut or
// refusal, gRPC enforcing the deadline (counted here: nobody else saw it at
// this hop), or a cancel by the caller (CANCELLED).
ServerVerdict ClassifyServerEnd(const ServerCall& call, absl::Time now);

// Decides a DEADLINE_EXCEEDED that ended `call` at `now`, given what the
// callee's answer carried. In order:
//   1. the first valid form (details, then message, then trailers) is the
//      callee's origin;
//   2. an origin of kClient or kArrivedExpired while this call's deadline
//      was its own attempt budget and has (nearly) passed: the attempt budget
//      fired (kOwnBudget, source kAttempt), so that a retry loop retries it;
//   3. any other origin: kRelayed, the status rewritten only when the
//      details were not the valid form;
//   4. no origin, this call's deadline (nearly) passed: kOwnBudget with the
//      deadline's source (kClient when none was recorded);
//   5. otherwise kUnknownOrigin: downstream, no hop, zero budget.
// Elapsed is measured from `call.budget_start`.
ClientVerdict ClassifyClientDeadline(const ClientCall& call, const ReceivedAttribution& received,
                                     absl::Time now);

}  // namespace hopbudget

#endif  // HOPBUDGET_ADVANCED_CLASSIFY_H_
