// Copyright hopbudget authors.
//
// libFuzzer target: `grpc-status-details-bin` arrives from downstream peers.
// Decoding must not crash, and whatever it accepts must be a well-formed
// attribution that re-encodes to the same thing. Relaying it (the callee's
// own details kept beside a new attribution) must stay within what the next
// hop reads, and read back as the new attribution.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "hopbudget/advanced/attribution.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view in(reinterpret_cast<const char*>(data), size);
  const hopbudget::Attribution relay{hopbudget::DeadlineSource::kDownstream, "orders",
                                     absl::Milliseconds(1), absl::Milliseconds(2)};
  const std::string relayed = hopbudget::EncodeStatusDetails(relay, "m", in);
  if (relayed.size() > hopbudget::kMaxDetailsBytes) std::abort();
  const absl::optional<hopbudget::Attribution> relayed_back =
      hopbudget::DecodeStatusDetails(relayed);
  if (!relayed_back.has_value() || !(*relayed_back == relay)) std::abort();

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
