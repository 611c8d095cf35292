// Copyright hopbudget authors.
//
// libFuzzer target: `hopbudget-budget-us`, `hopbudget-sent-us` and the
// millisecond trailers are read from untrusted peers. Whatever the bytes, parsing must not crash
// and an accepted value must be a budget we could have sent ourselves.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "hopbudget/advanced/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view in(reinterpret_cast<const char*>(data), size);
  const hopbudget::ParsedBudget p = hopbudget::ParseBudgetHeader(in);
  if (p.result == hopbudget::HeaderParse::kOk) {
    if (p.budget < absl::ZeroDuration() || p.budget > hopbudget::kMaxHeaderBudget) std::abort();
    // Accepted values survive a round trip exactly (up to leading zeros).
    const hopbudget::ParsedBudget again =
        hopbudget::ParseBudgetHeader(hopbudget::FormatBudgetHeader(p.budget));
    if (again.result != hopbudget::HeaderParse::kOk || again.budget != p.budget) std::abort();
  } else if (p.budget != absl::ZeroDuration()) {
    std::abort();
  }
  const hopbudget::ParsedMillis m = hopbudget::ParseMillisTrailer(in);
  if (m.result == hopbudget::HeaderParse::kOk && m.value > hopbudget::kMaxHeaderBudget) {
    std::abort();
  }
  const hopbudget::ParsedSentStamp s = hopbudget::ParseSentHeader(in);
  if (s.result == hopbudget::HeaderParse::kOk) {
    // Only the canonical form is accepted: it formats back to the input.
    if (hopbudget::FormatSentHeader(s.stamp.clock_id, s.stamp.sent) != in) std::abort();
  } else if (s.stamp.clock_id != 0 || s.stamp.sent != absl::UnixEpoch()) {
    std::abort();
  }
  return 0;
}
