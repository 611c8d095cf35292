// Copyright hopbudget authors.
//
// libFuzzer target: a status message and the plain hopbudget-* trailers are
// untrusted text. The parsers must not crash, must accept only what
// FormatAttributionMessage could produce, and must agree on what is absent,
// valid or malformed. The note a relaying hop keeps of a message is bounded
// and, relayed again, unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "hopbudget/advanced/attribution.h"

namespace {

void CheckNote(absl::string_view in) {
  const std::string kept = hopbudget::KeptNote(in);
  if (kept.size() > hopbudget::kMaxNoteBytes) std::abort();
  const hopbudget::Attribution relay{hopbudget::DeadlineSource::kDownstream, "",
                                     absl::ZeroDuration(), absl::ZeroDuration()};
  const std::string relayed = hopbudget::FormatAttributionMessage(relay, in);
  const absl::optional<hopbudget::Attribution> back = hopbudget::ParseAttributionMessage(relayed);
  if (!back.has_value() || !(*back == relay)) std::abort();
  if (hopbudget::KeptNote(relayed) != kept) std::abort();
}

void CheckMessage(absl::string_view in) {
  const absl::optional<hopbudget::Attribution> a = hopbudget::ParseAttributionMessage(in);
  const hopbudget::ParsedAttribution read = hopbudget::ReadAttributionMessage(in);
  // The reader says ok exactly when the parser accepts, with the same value.
  if ((read.result == hopbudget::AttributionParse::kOk) != a.has_value()) std::abort();
  if (!a.has_value()) return;
  if (!(read.value == *a)) std::abort();
  if (a->source == hopbudget::DeadlineSource::kNone) std::abort();
  const std::string formatted = hopbudget::FormatAttributionMessage(*a);
  const absl::optional<hopbudget::Attribution> again =
      hopbudget::ParseAttributionMessage(formatted);
  if (!again.has_value() || !(*again == *a)) std::abort();
}

// The input split at newlines as source, hop, budget_ms, elapsed_ms; a
// missing part is an absent trailer.
void CheckTrailers(absl::string_view in) {
  const std::vector<absl::string_view> parts = absl::StrSplit(in, absl::MaxSplits('\n', 3));
  hopbudget::AttributionTrailers t;
  absl::optional<absl::string_view>* fields[] = {&t.source, &t.hop, &t.budget_ms, &t.elapsed_ms};
  for (size_t i = 0; i < parts.size() && i < 4; ++i) *fields[i] = parts[i];
  const hopbudget::ParsedAttribution read = hopbudget::ReadAttributionTrailers(t);
  if (read.result != hopbudget::AttributionParse::kOk) return;
  const hopbudget::Attribution& a = read.value;
  if (a.source == hopbudget::DeadlineSource::kNone) std::abort();
  if (a.budget < absl::ZeroDuration() || a.elapsed < absl::ZeroDuration()) std::abort();
  if (a.hop.size() > hopbudget::kMaxHopNameBytes) std::abort();
  // What the trailers said reads back the same as a message.
  const absl::optional<hopbudget::Attribution> again =
      hopbudget::ParseAttributionMessage(hopbudget::FormatAttributionMessage(a));
  if (!again.has_value() || !(*again == a)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view in(reinterpret_cast<const char*>(data), size);
  CheckMessage(in);
  CheckNote(in);
  CheckTrailers(in);
  return 0;
}
