// Copyright hopbudget authors.
//
// libFuzzer target: `hopbudget-trace-bin` arrives from downstream peers.
// DecodeTrace must not crash, must refuse what breaks the trace's limits, and
// whatever it accepts must be a trace we could have sent: within the limits,
// valid hop names, times in range, and it re-encodes to the same entries.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "hopbudget/advanced/attribution.h"
#include "hopbudget/advanced/trace.h"

namespace {

bool SameEntry(const hopbudget::HopTrace& a, const hopbudget::HopTrace& b) {
  return a.hop == b.hop && a.budget_at_arrival == b.budget_at_arrival && a.spent == b.spent &&
         a.attempts == b.attempts && a.code == b.code && a.source == b.source;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view in(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<hopbudget::BudgetTrace> t = hopbudget::DecodeTrace(in);
  if (!t.ok()) {
    // Every refusal maps to a drop reason; oversized input is always refused.
    const hopbudget::TraceDrop why = hopbudget::DropReason(t.status());
    if (size > hopbudget::kMaxTraceBytes && why != hopbudget::TraceDrop::kOversized) std::abort();
    return 0;
  }
  if (size > hopbudget::kMaxTraceBytes) std::abort();
  if (t->hops.size() > static_cast<size_t>(hopbudget::kMaxTraceEntries)) std::abort();
  for (const hopbudget::HopTrace& h : t->hops) {
    if (!hopbudget::ValidateHopName(h.hop).ok()) std::abort();
    if (h.budget_at_arrival < absl::ZeroDuration() || h.spent < absl::ZeroDuration() ||
        h.spent == absl::InfiniteDuration() || h.attempts < 0) {
      std::abort();
    }
    const int code = static_cast<int>(h.code);
    if (code < 0 || code > 16) std::abort();
  }
  // A trace is a report: formatting it must hold for anything accepted.
  if (hopbudget::FormatWaterfall(*t).empty()) std::abort();
  // Re-encoding keeps every entry (or, past the byte limit, a prefix marked
  // truncated) and decodes again.
  const absl::StatusOr<hopbudget::BudgetTrace> again =
      hopbudget::DecodeTrace(hopbudget::EncodeTrace(*t));
  if (!again.ok() || again->hops.size() > t->hops.size()) std::abort();
  for (size_t i = 0; i < again->hops.size(); ++i) {
    if (!SameEntry(again->hops[i], t->hops[i])) std::abort();
  }
  const bool complete = again->hops.size() == t->hops.size();
  if (complete ? again->truncated != t->truncated : !again->truncated) std::abort();
  return 0;
}
