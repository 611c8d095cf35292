// Copyright hopbudget authors.
//
// trace.h: the per-hop budget trace, the waterfall of one call.
//
// Every hop with hopbudget's server interceptor answers with a trailer,
// `hopbudget-trace-bin`, holding its own entry (budget on arrival, time spent,
// downstream attempts, code and the budget that fired) followed by the
// entries its downstream calls answered with. The original caller thus
// receives the whole chain, caller first:
//
//   grpc::ClientContext ctx;
//   ctx.set_deadline(...);
//   grpc::Status s = stub->PlaceOrder(&ctx, request, &reply);
//   hopbudget::BudgetTrace trace = hopbudget::TraceOf(ctx);   // client.h
//   std::cout << hopbudget::FormatWaterfall(trace);
//
//   gateway   budget  800.0 ms  spent  42.1 ms  attempts 1  OK
//   orders    budget  795.0 ms  spent  40.2 ms  attempts 2  OK
//   ledger    budget  150.0 ms  spent 150.3 ms  attempts 0  DEADLINE_EXCEEDED (attempt)
//   ledger    budget  640.0 ms  spent   3.0 ms  attempts 0  OK
//
// The trace is a report, never an input: nothing in hopbudget decides on it.
// Inbound traces larger than kMaxTraceBytes or not parseable are dropped and
// counted (hopbudget_trace_dropped_total); a hop keeps at most
// kMaxTraceEntries entries and marks the trace truncated beyond that.
// A hop that gRPC or hopbudget cancels (its deadline passed, a request cap
// fired) may answer with the cancel itself, which carries no trailers: the
// trace then ends at the caller's entry, whose code and source tell what
// happened below.
//
// Thread safety: the functions are pure.
#ifndef HOPBUDGET_ADVANCED_TRACE_H_
#define HOPBUDGET_ADVANCED_TRACE_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "hopbudget/advanced/deadline_source.h"

namespace hopbudget {

// The trailer that carries a serialized hopbudget.wire.BudgetTrace.
inline constexpr char kTraceTrailer[] = "hopbudget-trace-bin";
// The request header that asks every hop of the chain for its trace on a
// successful answer too (value "1"; RequestTrace() in client.h). Failed
// answers carry the trace without it.
inline constexpr char kTraceRequestHeader[] = "hopbudget-trace-request";
// Limits on what one hop sends and accepts.
inline constexpr int kMaxTraceEntries = 16;
inline constexpr size_t kMaxTraceBytes = 2048;

struct HopTrace {
  std::string hop;
  // InfiniteDuration(): the call had no deadline at that hop.
  absl::Duration budget_at_arrival = absl::InfiniteDuration();
  absl::Duration spent = absl::ZeroDuration();
  // Downstream calls the hop made for this call, retry attempts included.
  int attempts = 0;
  absl::StatusCode code = absl::StatusCode::kOk;
  // The budget that fired at or below this hop; kNone when none did.
  DeadlineSource source = DeadlineSource::kNone;
};

struct BudgetTrace {
  std::vector<HopTrace> hops;  // caller first
  bool truncated = false;      // entries were left out to respect the limits
};

// Why an inbound trace was not used.
enum class TraceDrop { kMalformed = 0, kOversized = 1 };
inline constexpr int kTraceDropCount = 2;
// The `reason` label of hopbudget_trace_dropped_total: "malformed", "oversized".
absl::string_view TraceDropName(TraceDrop reason);
template <typename Sink>
void AbslStringify(Sink& sink, TraceDrop value) {
  sink.Append(TraceDropName(value));
}
inline std::ostream& operator<<(std::ostream& os, TraceDrop value) {
  return os << TraceDropName(value);
}

// Serializes `trace` (the trailer value). Entries beyond kMaxTraceEntries, or
// beyond kMaxTraceBytes once serialized, are left out and `truncated` set.
std::string EncodeTrace(const BudgetTrace& trace);

// Parses a trailer value. Errors: InvalidArgument (malformed: not the proto,
// an invalid hop name, negative times, unknown code or source) and
// ResourceExhausted (more than kMaxTraceBytes, or more than kMaxTraceEntries
// entries). Use DropReason() to map an error to a TraceDrop.
[[nodiscard]] absl::StatusOr<BudgetTrace> DecodeTrace(absl::string_view bytes);
TraceDrop DropReason(const absl::Status& decode_error);

// Appends `downstream`'s entries after `into`'s, respecting kMaxTraceEntries
// (the rest are dropped and `into.truncated` set).
void AppendTrace(BudgetTrace& into, const BudgetTrace& downstream);

// One line per hop, aligned, as in the example above. "(no trace)" when empty.
std::string FormatWaterfall(const BudgetTrace& trace);

}  // namespace hopbudget

#endif  // HOPBUDGET_ADVANCED_TRACE_H_
