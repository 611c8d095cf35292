// Copyright hopbudget authors.
#include "hopbudget/advanced/attribution.h"

#include <cstdint>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "hopbudget/advanced/wire.h"
#include "hopbudget/status.pb.h"

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

// Protobuf's wire format (protobuf.dev/programming-guides/encoding), for
// EncodeStatusDetails: varints and length-delimited fields only.
constexpr uint32_t kVarint = 0;
constexpr uint32_t kLengthDelimited = 2;

constexpr uint32_t FieldTag(uint32_t field, uint32_t wire_type) { return field << 3 | wire_type; }

size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// The bytes a length-delimited field `field` of `len` bytes takes.
size_t BytesFieldSize(uint32_t field, size_t len) {
  return VarintSize(FieldTag(field, kLengthDelimited)) + VarintSize(len) + len;
}

void PutBytes(std::string* out, uint32_t field, absl::string_view v) {
  PutVarint(out, FieldTag(field, kLengthDelimited));
  PutVarint(out, v.size());
  out->append(v.data(), v.size());
}

// A map<string, string> entry: a message {key = 1, value = 2}, both always
// written (as protobuf writes map entries).
void PutMapEntry(std::string* out, uint32_t field, absl::string_view key, absl::string_view value) {
  PutVarint(out, FieldTag(field, kLengthDelimited));
  PutVarint(out, BytesFieldSize(1, key.size()) + BytesFieldSize(2, value.size()));
  PutBytes(out, 1, key);
  PutBytes(out, 2, value);
}

// A google.protobuf.Any {type_url = 1, value = 2}; proto3 leaves an empty
// value out.
size_t AnySize(absl::string_view type_url, absl::string_view value) {
  return (type_url.empty() ? 0 : BytesFieldSize(1, type_url.size())) +
         (value.empty() ? 0 : BytesFieldSize(2, value.size()));
}

void PutAny(std::string* out, uint32_t field, absl::string_view type_url, absl::string_view value) {
  PutVarint(out, FieldTag(field, kLengthDelimited));
  PutVarint(out, AnySize(type_url, value));
  if (!type_url.empty()) PutBytes(out, 1, type_url);
  if (!value.empty()) PutBytes(out, 2, value);
}

// Origin sources only: kNone and kDownstream never travel as an origin
// (kDownstream with an empty hop does: "fired further down, origin unknown").
bool IsWireSource(DeadlineSource s) { return s != DeadlineSource::kNone; }

// Whether `any` is an ErrorInfo of ours, valid or not: a new attribution
// replaces every one.
bool IsOurErrorInfo(const google::protobuf::Any& any) {
  rpc::ErrorInfo info;
  return any.type_url() == kErrorInfoTypeUrl && info.ParseFromString(any.value()) &&
         info.domain() == kErrorDomain;
}

absl::optional<Attribution> AttributionOfErrorInfo(const rpc::ErrorInfo& info) {
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

// The fields of an attribution message, and in *note_at where its note
// starts (message.size() when it has none).
absl::optional<Attribution> ParseFields(absl::string_view message, size_t* note_at) {
  const absl::string_view whole = message;
  if (!absl::ConsumePrefix(&message, kMessagePrefix) &&
      !(absl::StartsWith(message, kLegacyMarker) &&
        absl::ConsumePrefix(&message, kLegacyMessagePrefix))) {
    return absl::nullopt;
  }
  if (message.size() > kMaxMessageBytesRead) message = message.substr(0, kMaxMessageBytesRead);
  std::vector<absl::string_view> fields = absl::StrSplit(message, ' ');
  Attribution a;
  // Valid fields take well under kMaxMessageBytesRead, so a note, if any,
  // starts inside what is read.
  *note_at = whole.size();
  bool have_source = false, have_budget = false, have_elapsed = false;
  for (absl::string_view field : fields) {
    if (have_source && have_budget && have_elapsed) {  // trailing text
      *note_at = static_cast<size_t>(field.data() - whole.data());
      break;
    }
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

// At most kMaxNoteBytes of `text`: a longer one is cut where a UTF-8
// character starts and marked, so that a reader knows text is missing and
// a relayed note, already within the bound, is never cut again. A UTF-8
// character has at most 3 continuation bytes: more is not UTF-8, cut as is.
std::string BoundedNote(absl::string_view text) {
  if (text.size() <= kMaxNoteBytes) return std::string(text);
  const size_t room = kMaxNoteBytes - (sizeof(kNoteTruncatedMarker) - 1);
  size_t cut = room;
  while (cut > room - 3 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  if ((static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) cut = room;
  return absl::StrCat(text.substr(0, cut), kNoteTruncatedMarker);
}

}  // namespace

absl::Status ValidateHopName(absl::string_view hop) {
  if (IsValidHop(hop)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("hopbudget: hop name \"",
                                                 absl::CHexEscape(hop.substr(0, 80)),
                                                 "\" must be 1..64 characters of [A-Za-z0-9._-]"));
}

std::string EncodeStatusDetails(const Attribution& a, absl::string_view message,
                                absl::string_view relayed) {
  // Written field by field rather than built as messages: ErrorInfo's
  // metadata is a protobuf map, and building one per answer was most of
  // what a refusal's attribution cost (docs/overload.md). The bytes are
  // those of protobuf's deterministic serialization (attribution_test).
  const absl::AlphaNum budget_ms(WholeMillis(a.budget));
  const absl::AlphaNum elapsed_ms(WholeMillis(a.elapsed));
  std::string info;
  info.reserve(160 + a.hop.size());
  PutBytes(&info, 1, DeadlineSourceReason(a.source));  // reason
  PutBytes(&info, 2, kErrorDomain);                    // domain
  // metadata, in key order
  PutMapEntry(&info, 3, "budget_ms", budget_ms.Piece());
  PutMapEntry(&info, 3, "elapsed_ms", elapsed_ms.Piece());
  if (!a.hop.empty()) PutMapEntry(&info, 3, "hop", a.hop);
  PutMapEntry(&info, 3, "source", DeadlineSourceName(a.source));

  std::string out;
  out.reserve(info.size() + message.size() + 64);
  PutVarint(&out, FieldTag(1, kVarint));  // code
  PutVarint(&out, kDeadlineExceededCode);
  if (!message.empty()) PutBytes(&out, 2, message);  // message
  PutAny(&out, 3, kErrorInfoTypeUrl, info);          // details[0]

  // A callee's own details say what failed in its terms: they stay beside
  // ours, as long as the next hop still reads the whole.
  rpc::Status old;
  if (!relayed.empty() && relayed.size() <= kMaxDetailsBytes &&
      old.ParseFromArray(relayed.data(), static_cast<int>(relayed.size()))) {
    for (const auto& detail : old.details()) {
      if (IsOurErrorInfo(detail)) continue;  // replaced by ours
      const size_t size = BytesFieldSize(3, AnySize(detail.type_url(), detail.value()));
      if (out.size() + size > kMaxDetailsBytes) continue;
      PutAny(&out, 3, detail.type_url(), detail.value());
    }
  }
  return out;
}

absl::optional<Attribution> DecodeStatusDetails(absl::string_view bytes) {
  ParsedAttribution p = ReadStatusDetails(bytes);
  if (p.result != AttributionParse::kOk) return absl::nullopt;
  return std::move(p.value);
}

std::string FormatAttributionMessage(const Attribution& a, absl::string_view note) {
  std::string out = absl::StrCat(kMessagePrefix, "source=", DeadlineSourceName(a.source));
  if (!a.hop.empty()) absl::StrAppend(&out, " hop=", a.hop);
  absl::StrAppend(&out, " budget_ms=", WholeMillis(a.budget),
                  " elapsed_ms=", WholeMillis(a.elapsed));
  if (std::string kept = KeptNote(note); !kept.empty()) absl::StrAppend(&out, " (", kept, ")");
  return out;
}

std::string KeptNote(absl::string_view message) {
  absl::string_view text = message;
  size_t note_at = 0;
  if (ParseFields(message, &note_at).has_value()) {
    // A relayed attribution message: its fields are replaced, its note is
    // the callee's text. Unwrapping the parentheses we wrapped it in keeps
    // that text once, however many hops relay it.
    text = absl::StripAsciiWhitespace(message.substr(note_at));
    if (text.size() >= 2 && text.front() == '(' && text.back() == ')') {
      text = text.substr(1, text.size() - 2);
    }
  }
  return BoundedNote(absl::StripAsciiWhitespace(text));
}

absl::optional<Attribution> ParseAttributionMessage(absl::string_view message) {
  size_t note_at = 0;
  return ParseFields(message, &note_at);
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
  out.result = AttributionParse::kMalformed;
  // Too large to read, or not a google.rpc.Status at all: whoever sent it,
  // these are not well-formed details.
  if (bytes.size() > kMaxDetailsBytes) return out;
  rpc::Status status;
  if (!status.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return out;
  bool undecodable_error_info = false;
  for (const auto& any : status.details()) {
    if (any.type_url() != kErrorInfoTypeUrl) continue;
    rpc::ErrorInfo info;
    if (!info.ParseFromString(any.value())) {
      undecodable_error_info = true;  // whose it is cannot be told
      continue;
    }
    if (info.domain() != kErrorDomain) continue;
    // The first ErrorInfo of ours decides: valid, or malformed.
    if (absl::optional<Attribution> a = AttributionOfErrorInfo(info)) {
      out.result = AttributionParse::kOk;
      out.value = *std::move(a);
    }
    return out;
  }
  // A well-formed google.rpc.Status of a peer's own, without our ErrorInfo,
  // carries no attribution: absent, not malformed.
  if (!undecodable_error_info) out.result = AttributionParse::kAbsent;
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
