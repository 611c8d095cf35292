// Copyright hopbudget authors.
//
// libFuzzer target: a status message is untrusted text. The parser must not
// crash and must accept only what FormatAttributionMessage could produce.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "hopbudget/attribution.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view in(reinterpret_cast<const char*>(data), size);
  const absl::optional<hopbudget::Attribution> a = hopbudget::ParseAttributionMessage(in);
  if (!a.has_value()) return 0;
  if (a->source == hopbudget::DeadlineSource::kNone) std::abort();
  const std::string formatted = hopbudget::FormatAttributionMessage(*a);
  const absl::optional<hopbudget::Attribution> again =
      hopbudget::ParseAttributionMessage(formatted);
  if (!again.has_value() || !(*again == *a)) std::abort();
  return 0;
}
