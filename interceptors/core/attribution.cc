// Copyright hopbudget authors.
#include "hopbudget/attribution.h"

#include <cstdint>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "hopbudget/status.pb.h"
#include "hopbudget/wire.h"

namespace hopbudget {
namespace {

constexpr int kDeadlineExceededCode = 4;  // google.rpc.Code.DEADLINE_EXCEEDED
constexpr char kMessagePrefix[] = "hopbudget/1: ";
// hopbudget 0.1 wrote the same fields unversioned.
constexpr char kLegacyMessagePrefix[] = "hopbudget: ";
constexpr char kVersionedMarker[] = "hopbudget/";
constexpr char kLegacyMarker[] = "hopbudget: source=";
constexpr size_t kMaxMessageBytesRead = 256;

bool IsHopChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

bool IsValidHop(absl::string_view hop) {
  if (hop.empty() || hop.size() > kMaxHopNameBytes) return false;
  for (char c : hop) {
    if (!IsHopChar(c)) return false;
  }
  return true;
}

int64_t WholeMillis(absl::Duration d) {
  if (d <= absl::ZeroDuration() || d > kMaxHeaderBudget) return 0;
  return absl::ToInt64Milliseconds(d);
}

absl::optional<absl::Duration> Millis(absl::string_view v) {
  ParsedMillis p = ParseMillisTrailer(v);
  if (p.result != HeaderParse::kOk) return absl::nullopt;
  return p.value;
}

// Origin sources only: kNone and kDownstream never travel as an origin
// (kDownstream with an empty hop does: "fired further down, origin unknown").
bool IsWireSource(DeadlineSource s) { return s != DeadlineSource::kNone; }

}  // namespace

absl::Status ValidateHopName(absl::string_view hop) {
  if (IsValidHop(hop)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("hopbudget: hop name \"",
                                                 absl::CHexEscape(hop.substr(0, 80)),
                                                 "\" must be 1..64 characters of [A-Za-z0-9._-]"));
}

std::string EncodeStatusDetails(const Attribution& a, absl::string_view message) {
  rpc::ErrorInfo info;
  info.set_reason(std::string(DeadlineSourceReason(a.source)));
  info.set_domain(kErrorDomain);
  auto& md = *info.mutable_metadata();
  md["source"] = std::string(DeadlineSourceName(a.source));
  if (!a.hop.empty()) md["hop"] = a.hop;
  md["budget_ms"] = absl::StrCat(WholeMillis(a.budget));
  md["elapsed_ms"] = absl::StrCat(WholeMillis(a.elapsed));

  rpc::Status status;
  status.set_code(kDeadlineExceededCode);
  status.set_message(std::string(message));
  auto* any = status.add_details();
  any->set_type_url(kErrorInfoTypeUrl);
  info.SerializeToString(any->mutable_value());
  return status.SerializeAsString();
}

absl::optional<Attribution> DecodeStatusDetails(absl::string_view bytes) {
  if (bytes.empty() || bytes.size() > kMaxDetailsBytes) return absl::nullopt;
  rpc::Status status;
  if (!status.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::nullopt;
  }
  for (const auto& any : status.details()) {
    if (any.type_url() != kErrorInfoTypeUrl) continue;
    rpc::ErrorInfo info;
    if (!info.ParseFromString(any.value()) || info.domain() != kErrorDomain) continue;
    absl::optional<DeadlineSource> source = DeadlineSourceFromReason(info.reason());
    if (!source.has_value() || !IsWireSource(*source)) return absl::nullopt;
    Attribution a;
    a.source = *source;
    const auto& md = info.metadata();
    if (auto it = md.find("hop"); it != md.end()) {
      if (!IsValidHop(it->second)) return absl::nullopt;
      a.hop = it->second;
    }
    if (auto it = md.find("budget_ms"); it != md.end()) {
      auto v = Millis(it->second);
      if (!v) return absl::nullopt;
      a.budget = *v;
    }
    if (auto it = md.find("elapsed_ms"); it != md.end()) {
      auto v = Millis(it->second);
      if (!v) return absl::nullopt;
      a.elapsed = *v;
    }
    return a;
  }
  return absl::nullopt;
}

std::string FormatAttributionMessage(const Attribution& a) {
  std::string out = absl::StrCat(kMessagePrefix, "source=", DeadlineSourceName(a.source));
  if (!a.hop.empty()) absl::StrAppend(&out, " hop=", a.hop);
  absl::StrAppend(&out, " budget_ms=", WholeMillis(a.budget),
                  " elapsed_ms=", WholeMillis(a.elapsed));
  return out;
}

absl::optional<Attribution> ParseAttributionMessage(absl::string_view message) {
  if (!absl::ConsumePrefix(&message, kMessagePrefix) &&
      !(absl::StartsWith(message, kLegacyMarker) &&
        absl::ConsumePrefix(&message, kLegacyMessagePrefix))) {
    return absl::nullopt;
  }
  if (message.size() > kMaxMessageBytesRead) message = message.substr(0, kMaxMessageBytesRead);
  std::vector<absl::string_view> fields = absl::StrSplit(message, ' ');
  Attribution a;
  bool have_source = false, have_budget = false, have_elapsed = false;
  for (absl::string_view field : fields) {
    if (have_source && have_budget && have_elapsed) break;  // trailing text
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(field, absl::MaxSplits('=', 1));
    if (kv.first == "source" && !have_source) {
      auto s = ParseDeadlineSource(kv.second);
      if (!s || !IsWireSource(*s)) return absl::nullopt;
      a.source = *s;
      have_source = true;
    } else if (kv.first == "hop" && have_source && a.hop.empty()) {
      if (!IsValidHop(kv.second)) return absl::nullopt;
      a.hop = std::string(kv.second);
    } else if (kv.first == "budget_ms" && have_source && !have_budget) {
      auto v = Millis(kv.second);
      if (!v) return absl::nullopt;
      a.budget = *v;
      have_budget = true;
    } else if (kv.first == "elapsed_ms" && have_budget && !have_elapsed) {
      auto v = Millis(kv.second);
      if (!v) return absl::nullopt;
      a.elapsed = *v;
      have_elapsed = true;
    } else {
      return absl::nullopt;
    }
  }
  if (!(have_source && have_budget && have_elapsed)) return absl::nullopt;
  return a;
}

absl::string_view AttributionParseName(AttributionParse p) {
  switch (p) {
    case AttributionParse::kAbsent:
      return "absent";
    case AttributionParse::kOk:
      return "ok";
    case AttributionParse::kMalformed:
      return "malformed";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& os, AttributionParse p) {
  return os << AttributionParseName(p);
}

ParsedAttribution ReadAttributionMessage(absl::string_view message) {
  ParsedAttribution out;
  if (!absl::StartsWith(message, kVersionedMarker) && !absl::StartsWith(message, kLegacyMarker)) {
    return out;
  }
  if (absl::optional<Attribution> a = ParseAttributionMessage(message)) {
    out.result = AttributionParse::kOk;
    out.value = *std::move(a);
  } else {
    out.result = AttributionParse::kMalformed;
  }
  return out;
}

ParsedAttribution ReadStatusDetails(absl::string_view bytes) {
  ParsedAttribution out;
  if (bytes.empty()) return out;
  if (absl::optional<Attribution> a = DecodeStatusDetails(bytes)) {
    out.result = AttributionParse::kOk;
    out.value = *std::move(a);
  } else {
    out.result = AttributionParse::kMalformed;
  }
  return out;
}

ParsedAttribution ReadAttributionTrailers(const AttributionTrailers& t) {
  ParsedAttribution out;
  if (!t.source && !t.hop && !t.budget_ms && !t.elapsed_ms) return out;
  out.result = AttributionParse::kMalformed;
  if (!t.source || !t.budget_ms || !t.elapsed_ms) return out;
  absl::optional<DeadlineSource> source = ParseDeadlineSource(*t.source);
  if (!source.has_value() || !IsWireSource(*source)) return out;
  if (t.hop && !IsValidHop(*t.hop)) return out;
  absl::optional<absl::Duration> budget = Millis(*t.budget_ms);
  absl::optional<absl::Duration> elapsed = Millis(*t.elapsed_ms);
  if (!budget || !elapsed) return out;
  out.result = AttributionParse::kOk;
  out.value = {*source, t.hop ? std::string(*t.hop) : std::string(), *budget, *elapsed};
  return out;
}

}  // namespace hopbudget
