// Copyright hopbudget authors.
#include "attributed_status.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "hopbudget/advanced/wire.h"

namespace hopbudget {
namespace internal {
namespace {

std::string WholeMillis(absl::Duration d) {
  return absl::StrCat(
      absl::ToInt64Milliseconds(std::clamp(d, absl::ZeroDuration(), kMaxHeaderBudget)));
}

absl::optional<absl::string_view> Find(
    const std::multimap<grpc::string_ref, grpc::string_ref>& trailers, const char* key) {
  auto it = trailers.find(key);
  if (it == trailers.end()) return absl::nullopt;
  return absl::string_view(it->second.data(), it->second.size());
}

}  // namespace

grpc::Status AttributedStatus(const Attribution& a, absl::string_view note,
                              absl::string_view relayed_details) {
  std::string message = FormatAttributionMessage(a, note);
  std::string details = EncodeStatusDetails(a, message, relayed_details);
  return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, std::move(message), std::move(details));
}

std::vector<TrailerPair> AttributionTrailerPairs(const Attribution& a) {
  std::vector<TrailerPair> pairs;
  pairs.reserve(4);
  pairs.push_back({kSourceTrailer, std::string(DeadlineSourceName(a.source))});
  if (!a.hop.empty()) pairs.push_back({kHopTrailer, a.hop});
  pairs.push_back({kBudgetTrailer, WholeMillis(a.budget)});
  pairs.push_back({kElapsedTrailer, WholeMillis(a.elapsed)});
  return pairs;
}

void AddAttributionTrailers(const Attribution& a,
                            std::multimap<std::string, std::string>* trailers) {
  // Ours replace whatever the handler set under the same names: a caller
  // reads the first value of a key.
  if (!trailers->empty()) {
    for (const char* key : {kSourceTrailer, kHopTrailer, kBudgetTrailer, kElapsedTrailer}) {
      trailers->erase(key);
    }
  }
  for (TrailerPair& p : AttributionTrailerPairs(a)) trailers->emplace(p.key, std::move(p.value));
}

AttributionTrailers AttributionTrailersOf(
    const std::multimap<grpc::string_ref, grpc::string_ref>& trailers) {
  AttributionTrailers t;
  t.source = Find(trailers, kSourceTrailer);
  t.hop = Find(trailers, kHopTrailer);
  t.budget_ms = Find(trailers, kBudgetTrailer);
  t.elapsed_ms = Find(trailers, kElapsedTrailer);
  return t;
}

}  // namespace internal
}  // namespace hopbudget
