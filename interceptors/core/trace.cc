// Copyright hopbudget authors.
#include "hopbudget/advanced/trace.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "hopbudget/advanced/attribution.h"
#include "hopbudget/trace.pb.h"

namespace hopbudget {
namespace {

constexpr int kMaxStatusCode = 16;  // UNAUTHENTICATED
// Times beyond this are not plausible budgets (the budget header's own limit
// is lower); refusing them keeps the arithmetic below far from overflow.
constexpr int64_t kMaxTraceMicros = int64_t{100} * 24 * 3600 * 1000000;

int64_t ToMicros(absl::Duration d) {
  if (d == absl::InfiniteDuration()) return -1;
  return std::clamp<int64_t>(absl::ToInt64Microseconds(d), 0, kMaxTraceMicros);
}

void ToProto(const HopTrace& h, wire::HopEntry* e) {
  e->set_hop(h.hop);
  e->set_budget_at_arrival_us(ToMicros(h.budget_at_arrival));
  e->set_spent_us(std::max<int64_t>(ToMicros(h.spent), 0));
  e->set_attempts(std::max(h.attempts, 0));
  e->set_code(static_cast<int32_t>(h.code));
  if (h.source != DeadlineSource::kNone) e->set_source(std::string(DeadlineSourceName(h.source)));
}

absl::StatusOr<HopTrace> FromProto(const wire::HopEntry& e) {
  HopTrace h;
  if (!ValidateHopName(e.hop()).ok()) {
    return absl::InvalidArgumentError("hopbudget: trace entry with an invalid hop name");
  }
  h.hop = e.hop();
  if (e.budget_at_arrival_us() < -1 || e.budget_at_arrival_us() > kMaxTraceMicros ||
      e.spent_us() < 0 || e.spent_us() > kMaxTraceMicros || e.attempts() < 0) {
    return absl::InvalidArgumentError("hopbudget: trace entry with an out-of-range number");
  }
  h.budget_at_arrival = e.budget_at_arrival_us() < 0 ? absl::InfiniteDuration()
                                                     : absl::Microseconds(e.budget_at_arrival_us());
  h.spent = absl::Microseconds(e.spent_us());
  h.attempts = e.attempts();
  if (e.code() < 0 || e.code() > kMaxStatusCode) {
    return absl::InvalidArgumentError("hopbudget: trace entry with an unknown status code");
  }
  h.code = static_cast<absl::StatusCode>(e.code());
  if (!e.source().empty()) {
    absl::optional<DeadlineSource> s = ParseDeadlineSource(e.source());
    if (!s.has_value() || *s == DeadlineSource::kNone) {
      return absl::InvalidArgumentError("hopbudget: trace entry with an unknown source");
    }
    h.source = *s;
  }
  return h;
}

std::string Millis(absl::Duration d) {
  if (d == absl::InfiniteDuration()) return "none";
  return absl::StrFormat("%.1f ms", absl::ToDoubleMilliseconds(d));
}

}  // namespace

std::string EncodeTrace(const BudgetTrace& trace) {
  wire::BudgetTrace out;
  out.set_truncated(trace.truncated);
  for (const HopTrace& h : trace.hops) {
    if (out.entries_size() == kMaxTraceEntries) {
      out.set_truncated(true);
      break;
    }
    ToProto(h, out.add_entries());
    if (out.ByteSizeLong() > kMaxTraceBytes) {
      out.mutable_entries()->RemoveLast();
      out.set_truncated(true);
      break;
    }
  }
  return out.SerializeAsString();
}

absl::StatusOr<BudgetTrace> DecodeTrace(absl::string_view bytes) {
  if (bytes.size() > kMaxTraceBytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("hopbudget: trace of ", bytes.size(), " bytes exceeds ", kMaxTraceBytes));
  }
  wire::BudgetTrace in;
  if (!in.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::InvalidArgumentError("hopbudget: trace is not a hopbudget.wire.BudgetTrace");
  }
  if (in.entries_size() > kMaxTraceEntries) {
    return absl::ResourceExhaustedError(absl::StrCat("hopbudget: trace of ", in.entries_size(),
                                                     " entries exceeds ", kMaxTraceEntries));
  }
  BudgetTrace out;
  out.truncated = in.truncated();
  for (const wire::HopEntry& e : in.entries()) {
    absl::StatusOr<HopTrace> h = FromProto(e);
    if (!h.ok()) return h.status();
    out.hops.push_back(*std::move(h));
  }
  return out;
}

absl::string_view TraceDropName(TraceDrop reason) {
  return reason == TraceDrop::kOversized ? "oversized" : "malformed";
}

TraceDrop DropReason(const absl::Status& decode_error) {
  return decode_error.code() == absl::StatusCode::kResourceExhausted ? TraceDrop::kOversized
                                                                     : TraceDrop::kMalformed;
}

void AppendTrace(BudgetTrace& into, const BudgetTrace& downstream) {
  for (const HopTrace& h : downstream.hops) {
    if (static_cast<int>(into.hops.size()) >= kMaxTraceEntries) {
      into.truncated = true;
      return;
    }
    into.hops.push_back(h);
  }
  if (downstream.truncated) into.truncated = true;
}

std::string FormatWaterfall(const BudgetTrace& trace) {
  if (trace.hops.empty()) return "(no trace)\n";
  size_t width = 0;
  for (const HopTrace& h : trace.hops) width = std::max(width, h.hop.size());
  std::string out;
  for (const HopTrace& h : trace.hops) {
    absl::StrAppendFormat(&out, "%-*s  budget %10s  spent %10s  attempts %d  %s",
                          static_cast<int>(width), h.hop, Millis(h.budget_at_arrival),
                          Millis(h.spent), h.attempts, absl::StatusCodeToString(h.code));
    if (h.source != DeadlineSource::kNone) {
      absl::StrAppend(&out, " (", DeadlineSourceName(h.source), ")");
    }
    out += '\n';
  }
  if (trace.truncated) out += "(truncated: more hops than the trace keeps)\n";
  return out;
}

}  // namespace hopbudget
