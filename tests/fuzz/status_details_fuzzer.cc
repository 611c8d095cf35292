// Copyright hopbudget authors.
//
// libFuzzer target: `grpc-status-details-bin` arrives from downstream peers.
// Decoding must not crash, and whatever it accepts must be a well-formed
// attribution that re-encodes to the same thing.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "hopbudget/attribution.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view in(reinterpret_cast<const char*>(data), size);
  const absl::optional<hopbudget::Attribution> a = hopbudget::DecodeStatusDetails(in);
  if (!a.has_value()) return 0;
  if (a->source == hopbudget::DeadlineSource::kNone) std::abort();
  if (!a->hop.empty() && !hopbudget::ValidateHopName(a->hop).ok()) std::abort();
  if (a->budget < absl::ZeroDuration() || a->elapsed < absl::ZeroDuration()) std::abort();
  const absl::optional<hopbudget::Attribution> again =
      hopbudget::DecodeStatusDetails(hopbudget::EncodeStatusDetails(*a, "m"));
  if (!again.has_value() || !(*again == *a)) std::abort();
  return 0;
}
