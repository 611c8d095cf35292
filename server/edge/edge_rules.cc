// Copyright hopbudget authors.
#include "edge/edge_rules.h"

#include <algorithm>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpc_h2/grpc_over_h2.h"
#include "hopbudget/advanced/attribution.h"
#include "hopbudget/advanced/deadline_source.h"
#include "hopbudget/advanced/retry_policy.h"
#include "hopbudget/advanced/wire.h"

namespace hopbudget::edge {
namespace {

bool IsGrpcContentType(absl::string_view type) {
  // gRPC's PROTOCOL-HTTP2.md: "application/grpc" [("+proto" / "+json" / {custom})],
  // and servers accept parameters after ';'.
  constexpr absl::string_view kGrpc = "application/grpc";
  if (!absl::StartsWithIgnoreCase(type, kGrpc)) return false;
  return type.size() == kGrpc.size() || type[kGrpc.size()] == '+' || type[kGrpc.size()] == ';';
}

std::string WholeMillis(absl::Duration d) {
  return absl::StrCat(
      absl::ToInt64Milliseconds(std::clamp(d, absl::ZeroDuration(), kMaxHeaderBudget)));
}

Refusal Attributed(DeadlineSource source, absl::string_view hop, absl::Duration budget,
                   absl::Duration elapsed) {
  Attribution a{source, std::string(hop), budget, elapsed};
  if (a.budget == absl::InfiniteDuration()) a.budget = absl::ZeroDuration();
  Refusal r;
  r.code = absl::StatusCode::kDeadlineExceeded;
  r.message = FormatAttributionMessage(a);
  r.trailers.push_back({kSourceTrailer, std::string(DeadlineSourceName(a.source))});
  if (!a.hop.empty()) r.trailers.push_back({kHopTrailer, a.hop});
  r.trailers.push_back({kBudgetTrailer, WholeMillis(a.budget)});
  r.trailers.push_back({kElapsedTrailer, WholeMillis(a.elapsed)});
  r.trailers.push_back(
      {"grpc-status-details-bin", absl::Base64Escape(EncodeStatusDetails(a, r.message))});
  return r;
}

}  // namespace

absl::StatusOr<InboundCall> ReadInboundCall(const std::vector<Header>& headers,
                                            absl::Time arrival) {
  InboundCall call;
  bool post = false;
  bool grpc_type = false;
  absl::Duration budget = absl::InfiniteDuration();
  for (const Header& h : headers) {
    if (h.name == ":method") {
      if (h.value != "POST") {
        return absl::InvalidArgumentError(absl::StrCat("not a gRPC call: :method is \"",
                                                       absl::CHexEscape(h.value), "\", not POST"));
      }
      post = true;
    } else if (h.name == ":path") {
      call.path = h.value;
    } else if (h.name == "content-type") {
      if (!IsGrpcContentType(h.value)) {
        return absl::InvalidArgumentError(
            absl::StrCat("not a gRPC call: content-type \"", absl::CHexEscape(h.value), "\""));
      }
      grpc_type = true;
    } else if (h.name == "grpc-timeout") {
      absl::StatusOr<absl::Duration> timeout = grpc_h2::ParseGrpcTimeout(h.value);
      if (!timeout.ok()) return timeout.status();
      budget = std::min(budget, *timeout);
    } else if (h.name == kBudgetHeader) {
      const ParsedBudget parsed = ParseBudgetHeader(h.value);
      if (parsed.result != HeaderParse::kOk) {
        return absl::InvalidArgumentError(absl::StrCat(kBudgetHeader, " \"",
                                                       absl::CHexEscape(h.value.substr(0, 32)),
                                                       "\": ", HeaderParseName(parsed.result)));
      }
      budget = std::min(budget, parsed.budget);
    }
  }
  if (!post) return absl::InvalidArgumentError("not a gRPC call: no :method POST");
  if (call.path.empty() || call.path[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat(
        "not a gRPC call: :path \"", absl::CHexEscape(call.path), "\" is not /service/method"));
  }
  if (!grpc_type) return absl::InvalidArgumentError("not a gRPC call: no content-type");
  if (budget != absl::InfiniteDuration()) call.deadline = arrival + budget;
  return call;
}

std::vector<Header> ForwardedHeaders(const std::vector<Header>& headers, absl::Time deadline,
                                     absl::Time now, uint64_t clock_id, absl::Time steady_now) {
  std::vector<Header> out;
  out.reserve(headers.size() + 3);
  for (const Header& h : headers) {
    if (h.name == "grpc-timeout" || h.name == kBudgetHeader || h.name == kSentHeader) continue;
    out.push_back(h);
  }
  if (deadline != absl::InfiniteFuture()) {
    const absl::Duration left = std::max(deadline - now, absl::ZeroDuration());
    out.push_back({"grpc-timeout", grpc_h2::FormatGrpcTimeout(left)});
    out.push_back({kBudgetHeader, FormatBudgetHeader(left)});
    out.push_back({kSentHeader, FormatSentHeader(clock_id, steady_now)});
  }
  return out;
}

Refusal RefusalFor(ArrivalDecision decision, const RefusalFacts& facts) {
  switch (decision) {
    case ArrivalDecision::kShedCannotFinish:
      return Attributed(DeadlineSource::kCannotFinish, facts.hop, facts.budget_on_arrival,
                        facts.waited);
    case ArrivalDecision::kShedQueueExpired:
      return Attributed(DeadlineSource::kQueueWait, facts.hop, facts.budget_on_arrival,
                        facts.waited);
    default:
      break;
  }
  const absl::string_view reason = ArrivalDecisionName(decision);
  Refusal r;
  r.code = absl::StatusCode::kResourceExhausted;
  r.message = absl::StrCat("hopbudget: shed at ", facts.hop, " (", reason, "): over its limit of ",
                           facts.limit, " calls in progress; retry after ",
                           absl::ToInt64Milliseconds(facts.pushback), " ms");
  r.trailers.push_back({kShedTrailer, std::string(reason)});
  r.trailers.push_back({kHopTrailer, facts.hop});
  if (facts.pushback > absl::ZeroDuration()) {
    r.trailers.push_back(
        {kPushbackHeader, absl::StrCat(absl::ToInt64Milliseconds(facts.pushback))});
  }
  return r;
}

Refusal ArrivedExpired(absl::string_view hop, absl::Duration budget_on_arrival) {
  return Attributed(DeadlineSource::kArrivedExpired, hop, budget_on_arrival, absl::ZeroDuration());
}

Refusal BadRequest(absl::string_view hop, const absl::Status& why) {
  Refusal r;
  r.code = absl::StatusCode::kInvalidArgument;
  r.message = absl::StrCat(hop, ": ", why.message());
  return r;
}

Refusal UpstreamUnavailable(absl::string_view hop, absl::string_view upstream,
                            absl::string_view why) {
  Refusal r;
  r.code = absl::StatusCode::kUnavailable;
  r.message = absl::StrCat(hop, ": upstream ", upstream, " unavailable: ", why);
  return r;
}

std::vector<Header> TrailersOnly(const Refusal& refusal) {
  std::vector<Header> out;
  out.reserve(4 + refusal.trailers.size());
  out.push_back({":status", "200"});
  out.push_back({"content-type", "application/grpc"});
  out.push_back({"grpc-status", absl::StrCat(static_cast<int>(refusal.code))});
  if (!refusal.message.empty()) {
    out.push_back({"grpc-message", grpc_h2::PercentEncodeGrpcMessage(refusal.message)});
  }
  out.insert(out.end(), refusal.trailers.begin(), refusal.trailers.end());
  return out;
}

}  // namespace hopbudget::edge
