// Copyright hopbudget authors.
#include "summary.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/types/optional.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "hopbudget/advanced/exposition.h"

namespace hopbudget::chainctl {

double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  q = std::min(1.0, std::max(0.0, q));
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(values.size())));
  return values[rank == 0 ? 0 : rank - 1];
}

bool LoadFailed(const LoadSummary& s, double max_error_rate) {
  if (s.sent == 0) return false;
  if (max_error_rate < 0) return s.ok == 0;
  return s.error_rate > max_error_rate;
}

void SummaryBuilder::Add(const CallRecord& call) { calls_.push_back(call); }

LoadSummary SummaryBuilder::Build() const {
  LoadSummary s;
  s.not_sent = not_sent_;
  s.client_throttled = client_throttled_;
  s.expired_unsent = expired_unsent_;
  s.send_lag_p99_ms = Percentile(send_lags_ms_, 0.99);
  if (!send_lags_ms_.empty()) {
    s.send_lag_max_ms = *std::max_element(send_lags_ms_.begin(), send_lags_ms_.end());
  }
  std::vector<double> latencies, ok_latencies;
  for (const CallRecord& c : calls_) {
    ++s.sent;
    latencies.push_back(absl::ToDoubleMilliseconds(c.latency));
    if (c.code == absl::StatusCode::kOk) {
      ++s.ok;
      ok_latencies.push_back(absl::ToDoubleMilliseconds(c.latency));
      continue;
    }
    ++s.errors_by_code[absl::StatusCodeToString(c.code)];
    if (c.code == absl::StatusCode::kDeadlineExceeded) {
      const std::string source = c.source.empty() ? "unattributed" : c.source;
      const std::string hop = c.hop.empty() ? "?" : c.hop;
      ++s.deadline_exceeded_by_source[source][hop];
    }
  }
  s.p50_ms = Percentile(latencies, 0.50);
  s.p90_ms = Percentile(latencies, 0.90);
  s.p95_ms = Percentile(latencies, 0.95);
  s.p99_ms = Percentile(latencies, 0.99);
  s.p999_ms = Percentile(latencies, 0.999);
  s.ok_p50_ms = Percentile(ok_latencies, 0.50);
  s.ok_p99_ms = Percentile(ok_latencies, 0.99);
  s.total = total_;
  s.client_cpu = client_cpu_;
  if (total_ > absl::ZeroDuration()) {
    s.rps = static_cast<double>(s.sent) / absl::ToDoubleSeconds(total_);
  }
  if (s.sent > 0) s.error_rate = static_cast<double>(s.sent - s.ok) / static_cast<double>(s.sent);
  if (!latencies.empty()) {
    const auto [lo, hi] = std::minmax_element(latencies.begin(), latencies.end());
    s.fastest_ms = *lo;
    s.slowest_ms = *hi;
    double sum = 0;
    for (double v : latencies) sum += v;
    s.average_ms = sum / static_cast<double>(latencies.size());
    // Ten even buckets from fastest to slowest, each counting the calls at
    // or below its bound and above the previous one.
    constexpr int kBuckets = 10;
    const double width = (s.slowest_ms - s.fastest_ms) / kBuckets;
    for (int b = 1; b <= kBuckets; ++b) {
      s.histogram.push_back({b == kBuckets ? s.slowest_ms : s.fastest_ms + width * b, 0});
    }
    for (double v : latencies) {
      int b = width > 0 ? static_cast<int>((v - s.fastest_ms) / width) : 0;
      if (b >= kBuckets || (b > 0 && v <= s.histogram[b - 1].le_ms)) b = std::max(0, b - 1);
      b = std::min(b, kBuckets - 1);
      ++s.histogram[b].count;
    }
  }
  for (const ServiceDelta& d : services_) {
    s.retries += d.retries;
    s.calls_started_after_deadline += d.calls_started_after_deadline;
    s.work_after_deadline_ms += d.work_after_deadline_ms;
    s.reads += d.reads;
    s.read_hedges += d.read_hedges;
    s.slot_refusals += d.slot_refusals;
    s.per_hop.push_back(d);
  }
  s.extra_load = s.reads > 0 ? static_cast<double>(s.read_hedges) / s.reads : 0;
  return s;
}

std::string FormatSummaryTable(const LoadSummary& s) {
  std::vector<std::vector<std::string>> rows;
  auto row = [&rows](absl::string_view name, const std::string& value) {
    rows.push_back({std::string(name), value});
  };
  row("sent", absl::StrCat(s.sent));
  row("ok", absl::StrCat(s.ok));
  if (s.not_sent > 0) row("not sent (concurrency limit)", absl::StrCat(s.not_sent));
  if (s.client_throttled > 0) {
    row("not sent (client throttle)", absl::StrCat(s.client_throttled));
  }
  for (const auto& [code, n] : s.errors_by_code) row(absl::StrCat("error ", code), absl::StrCat(n));
  for (const auto& [source, hops] : s.deadline_exceeded_by_source) {
    for (const auto& [hop, n] : hops) {
      row(absl::StrCat("DEADLINE_EXCEEDED: ", PlainSource(source, hop)), absl::StrCat(n));
    }
  }
  row("retries (arrived at a service)", absl::StrCat(s.retries));
  row("latency p50 / p99", absl::StrFormat("%.1f ms / %.1f ms", s.p50_ms, s.p99_ms));
  row("latency of OK answers p50 / p99",
      absl::StrFormat("%.1f ms / %.1f ms", s.ok_p50_ms, s.ok_p99_ms));
  row("latency p90 / p95 / p99.9",
      absl::StrFormat("%.1f ms / %.1f ms / %.1f ms", s.p90_ms, s.p95_ms, s.p999_ms));
  row("latency average / fastest / slowest",
      absl::StrFormat("%.1f ms / %.1f ms / %.1f ms", s.average_ms, s.fastest_ms, s.slowest_ms));
  row("total / achieved rate",
      absl::StrFormat("%.2f s / %.1f calls/s", absl::ToDoubleSeconds(s.total), s.rps));
  row("error rate", absl::StrFormat("%.1f %%", s.error_rate * 100));
  row("made behind schedule p99 / max",
      absl::StrFormat("%.1f ms / %.1f ms", s.send_lag_p99_ms, s.send_lag_max_ms));
  if (s.expired_unsent > 0) {
    row("expired waiting for a stream (never sent)", absl::StrCat(s.expired_unsent));
  }
  row("calls started after the client deadline", absl::StrCat(s.calls_started_after_deadline));
  row("work after the client deadline", absl::StrFormat("%.1f ms", s.work_after_deadline_ms));
  if (s.reads > 0) {
    row("hedges / reads sent downstream (extra load)",
        absl::StrFormat("%d / %d (%.1f %%)", s.read_hedges, s.reads, s.extra_load * 100));
  }
  if (s.slot_refusals > 0)
    row("refused a downstream slot (slot-wait)", absl::StrCat(s.slot_refusals));
  for (const ServiceDelta& d : s.per_hop) {
    row(absl::StrCat("  ", d.hop, ": started late / work after / retries"),
        absl::StrFormat("%d / %.1f ms / %d", d.calls_started_after_deadline,
                        d.work_after_deadline_ms, d.retries));
  }
  // Columns as wide as their widest cell: a long label never runs into its value.
  std::string out = AlignColumns(rows, "  ");
  if (!s.histogram.empty()) {
    out += "  latency histogram (ms):\n";
    int64_t most = 1;
    for (const LoadSummary::Bucket& b : s.histogram) most = std::max(most, b.count);
    for (const LoadSummary::Bucket& b : s.histogram) {
      absl::StrAppend(&out,
                      absl::StrFormat("    <= %9.1f  %7d  %s\n", b.le_ms, b.count,
                                      std::string(static_cast<size_t>(40 * b.count / most), '#')));
    }
  }
  return out;
}

namespace {
std::string JsonNumber(double v) {
  if (!std::isfinite(v)) return "0";
  return absl::StrFormat("%.3f", v);
}
}  // namespace

std::string FormatSummaryJson(const LoadSummary& s) {
  std::string out = "{";
  absl::StrAppend(&out, "\"sent\":", s.sent, ",\"ok\":", s.ok, ",\"not_sent\":", s.not_sent,
                  ",\"client_throttled\":", s.client_throttled);
  absl::StrAppend(&out, ",\"errors_by_code\":{");
  bool first = true;
  for (const auto& [code, n] : s.errors_by_code) {
    absl::StrAppend(&out, first ? "" : ",", JsonString(code), ":", n);
    first = false;
  }
  absl::StrAppend(&out, "},\"deadline_exceeded_by_source\":{");
  first = true;
  for (const auto& [source, hops] : s.deadline_exceeded_by_source) {
    absl::StrAppend(&out, first ? "" : ",", JsonString(source), ":{");
    first = false;
    bool first_hop = true;
    for (const auto& [hop, n] : hops) {
      absl::StrAppend(&out, first_hop ? "" : ",", JsonString(hop), ":", n);
      first_hop = false;
    }
    out += "}";
  }
  absl::StrAppend(
      &out, "},\"retries\":", s.retries, ",\"latency_ms\":{\"p50\":", JsonNumber(s.p50_ms),
      ",\"p90\":", JsonNumber(s.p90_ms), ",\"p95\":", JsonNumber(s.p95_ms),
      ",\"p99\":", JsonNumber(s.p99_ms), ",\"p999\":", JsonNumber(s.p999_ms),
      ",\"average\":", JsonNumber(s.average_ms), ",\"fastest\":", JsonNumber(s.fastest_ms),
      ",\"slowest\":", JsonNumber(s.slowest_ms), "}");
  absl::StrAppend(&out, ",\"ok_latency_ms\":{\"p50\":", JsonNumber(s.ok_p50_ms),
                  ",\"p99\":", JsonNumber(s.ok_p99_ms), "}");
  absl::StrAppend(&out, ",\"total_s\":", JsonNumber(absl::ToDoubleSeconds(s.total)),
                  ",\"client_cpu_s\":", JsonNumber(absl::ToDoubleSeconds(s.client_cpu)),
                  ",\"rps\":", JsonNumber(s.rps), ",\"error_rate\":", JsonNumber(s.error_rate),
                  ",\"histogram_ms\":[");
  for (size_t b = 0; b < s.histogram.size(); ++b) {
    absl::StrAppend(&out, b == 0 ? "" : ",", "{\"le\":", JsonNumber(s.histogram[b].le_ms),
                    ",\"count\":", s.histogram[b].count, "}");
  }
  out += "]";
  absl::StrAppend(&out, ",\"send_lag_ms\":{\"p99\":", JsonNumber(s.send_lag_p99_ms),
                  ",\"max\":", JsonNumber(s.send_lag_max_ms),
                  "},\"expired_unsent\":", s.expired_unsent);
  absl::StrAppend(&out, ",\"calls_started_after_deadline\":", s.calls_started_after_deadline,
                  ",\"work_after_deadline_ms\":", JsonNumber(s.work_after_deadline_ms));
  absl::StrAppend(&out, ",\"reads\":", s.reads, ",\"read_hedges\":", s.read_hedges,
                  ",\"extra_load\":", JsonNumber(s.extra_load),
                  ",\"slot_refusals\":", s.slot_refusals);
  absl::StrAppend(&out, ",\"per_hop\":[");
  first = true;
  for (const ServiceDelta& d : s.per_hop) {
    absl::StrAppend(&out, first ? "" : ",", "{\"hop\":", JsonString(d.hop), ",\"calls\":", d.calls,
                    ",\"refused\":", d.refused, ",\"cpu_ms\":", JsonNumber(d.cpu_ms),
                    ",\"calls_started_after_deadline\":", d.calls_started_after_deadline,
                    ",\"work_after_deadline_ms\":", JsonNumber(d.work_after_deadline_ms),
                    ",\"retries\":", d.retries, "}");
    first = false;
  }
  out += "]}";
  return out;
}

double OkShare(const LoadSummary& s) {
  const int64_t made = s.sent + s.client_throttled;
  return made > 0 ? static_cast<double>(s.ok) / made : 0;
}

std::string ShortestDecimal(double v) {
  if (!std::isfinite(v)) return "0";
  for (int decimals = 0; decimals <= 17; ++decimals) {
    std::string text = absl::StrFormat("%.*f", decimals, v);
    double back = 0;
    if (absl::SimpleAtod(text, &back) && back == v) return text;
  }
  return absl::StrFormat("%.17f", v);
}

namespace {

namespace pb = google::protobuf;

// Reads the fields of one JSON object; the first error is kept.
class Fields {
 public:
  Fields(const pb::Struct& s, std::string where) : s_(s), where_(std::move(where)) {}
  void Int(const std::string& key, int64_t* out) {
    if (const pb::Value* v = Get(key, pb::Value::kNumberValue)) {
      *out = static_cast<int64_t>(std::llround(v->number_value()));
    }
  }
  void Num(const std::string& key, double* out) {
    if (const pb::Value* v = Get(key, pb::Value::kNumberValue)) *out = v->number_value();
  }
  void Str(const std::string& key, std::string* out) {
    if (const pb::Value* v = Get(key, pb::Value::kStringValue)) *out = v->string_value();
  }
  const pb::Struct* Object(const std::string& key) {
    const pb::Value* v = Get(key, pb::Value::kStructValue);
    return v == nullptr ? nullptr : &v->struct_value();
  }
  const pb::ListValue* List(const std::string& key) {
    const pb::Value* v = Get(key, pb::Value::kListValue);
    return v == nullptr ? nullptr : &v->list_value();
  }
  void Fail(const std::string& key, const std::string& what) {
    if (status_.ok()) {
      status_ = absl::InvalidArgumentError(absl::StrCat("load summary: ", where_, key, ": ", what));
    }
  }
  const absl::Status& status() const { return status_; }

 private:
  const pb::Value* Get(const std::string& key, pb::Value::KindCase kind) {
    auto it = s_.fields().find(key);
    if (it == s_.fields().end()) return nullptr;
    if (it->second.kind_case() != kind) {
      Fail(key, kind == pb::Value::kNumberValue   ? "not a number"
                : kind == pb::Value::kStringValue ? "not a string"
                : kind == pb::Value::kStructValue ? "not an object"
                                                  : "not a list");
      return nullptr;
    }
    return &it->second;
  }
  const pb::Struct& s_;
  std::string where_;
  absl::Status status_;
};

}  // namespace

absl::StatusOr<LoadSummary> ParseSummaryJson(absl::string_view json) {
  pb::Value root;
  if (auto s = pb::util::JsonStringToMessage(pb::StringPiece(json.data(), json.size()), &root);
      !s.ok()) {
    // protobuf's message goes on with an excerpt of the input on more lines.
    const std::string message = s.message().as_string();
    return absl::InvalidArgumentError(
        absl::StrCat("load summary: not JSON: ", message.substr(0, message.find('\n'))));
  }
  if (!root.has_struct_value()) {
    return absl::InvalidArgumentError("load summary: the top level must be a JSON object");
  }
  LoadSummary s;
  Fields f(root.struct_value(), "");
  f.Int("sent", &s.sent);
  f.Int("ok", &s.ok);
  f.Int("not_sent", &s.not_sent);
  f.Int("client_throttled", &s.client_throttled);
  if (const pb::Struct* codes = f.Object("errors_by_code")) {
    Fields c(*codes, "errors_by_code.");
    for (const auto& [code, n] : codes->fields()) c.Int(code, &s.errors_by_code[code]);
    if (!c.status().ok()) return c.status();
  }
  if (const pb::Struct* sources = f.Object("deadline_exceeded_by_source")) {
    Fields by_source(*sources, "deadline_exceeded_by_source.");
    for (const auto& [source, unused] : sources->fields()) {
      if (const pb::Struct* hops = by_source.Object(source)) {
        Fields h(*hops, absl::StrCat("deadline_exceeded_by_source.", source, "."));
        for (const auto& [hop, n] : hops->fields()) {
          h.Int(hop, &s.deadline_exceeded_by_source[source][hop]);
        }
        if (!h.status().ok()) return h.status();
      }
    }
    if (!by_source.status().ok()) return by_source.status();
  }
  f.Int("retries", &s.retries);
  if (const pb::Struct* l = f.Object("latency_ms")) {
    Fields q(*l, "latency_ms.");
    q.Num("p50", &s.p50_ms);
    q.Num("p90", &s.p90_ms);
    q.Num("p95", &s.p95_ms);
    q.Num("p99", &s.p99_ms);
    q.Num("p999", &s.p999_ms);
    q.Num("average", &s.average_ms);
    q.Num("fastest", &s.fastest_ms);
    q.Num("slowest", &s.slowest_ms);
    if (!q.status().ok()) return q.status();
  }
  if (const pb::Struct* l = f.Object("ok_latency_ms")) {
    Fields q(*l, "ok_latency_ms.");
    q.Num("p50", &s.ok_p50_ms);
    q.Num("p99", &s.ok_p99_ms);
    if (!q.status().ok()) return q.status();
  }
  double total_s = 0, client_cpu_s = 0;
  f.Num("total_s", &total_s);
  f.Num("client_cpu_s", &client_cpu_s);
  s.total = absl::Seconds(total_s);
  s.client_cpu = absl::Seconds(client_cpu_s);
  f.Num("rps", &s.rps);
  f.Num("error_rate", &s.error_rate);
  if (const pb::ListValue* buckets = f.List("histogram_ms")) {
    for (int i = 0; i < buckets->values_size(); ++i) {
      const std::string where = absl::StrCat("histogram_ms[", i, "]");
      if (!buckets->values(i).has_struct_value()) {
        f.Fail(where, "not an object");
        break;
      }
      Fields b(buckets->values(i).struct_value(), where + ".");
      LoadSummary::Bucket bucket{0, 0};
      b.Num("le", &bucket.le_ms);
      b.Int("count", &bucket.count);
      if (!b.status().ok()) return b.status();
      s.histogram.push_back(bucket);
    }
  }
  if (const pb::Struct* l = f.Object("send_lag_ms")) {
    Fields q(*l, "send_lag_ms.");
    q.Num("p99", &s.send_lag_p99_ms);
    q.Num("max", &s.send_lag_max_ms);
    if (!q.status().ok()) return q.status();
  }
  f.Int("expired_unsent", &s.expired_unsent);
  f.Int("calls_started_after_deadline", &s.calls_started_after_deadline);
  f.Num("work_after_deadline_ms", &s.work_after_deadline_ms);
  f.Int("reads", &s.reads);
  f.Int("read_hedges", &s.read_hedges);
  f.Num("extra_load", &s.extra_load);
  f.Int("slot_refusals", &s.slot_refusals);
  if (const pb::ListValue* hops = f.List("per_hop")) {
    for (int i = 0; i < hops->values_size(); ++i) {
      const std::string where = absl::StrCat("per_hop[", i, "]");
      if (!hops->values(i).has_struct_value()) {
        f.Fail(where, "not an object");
        break;
      }
      Fields h(hops->values(i).struct_value(), where + ".");
      ServiceDelta d;
      h.Str("hop", &d.hop);
      h.Int("calls", &d.calls);
      h.Int("refused", &d.refused);
      h.Num("cpu_ms", &d.cpu_ms);
      h.Int("calls_started_after_deadline", &d.calls_started_after_deadline);
      h.Num("work_after_deadline_ms", &d.work_after_deadline_ms);
      h.Int("retries", &d.retries);
      if (!h.status().ok()) return h.status();
      s.per_hop.push_back(std::move(d));
    }
  }
  if (!f.status().ok()) return f.status();
  return s;
}

absl::StatusOr<absl::optional<ClientThrottlePolicy>> LoadClientThrottle(double k) {
  if (k == 0) return absl::optional<ClientThrottlePolicy>();
  ClientThrottlePolicy policy;
  policy.k = k;
  if (absl::Status s = ValidateClientThrottlePolicy(policy); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--client-throttle=", k, ": 0 (off) or a number >= 1 (", s.message(), ")"));
  }
  policy.window = absl::Seconds(5);
  return absl::optional<ClientThrottlePolicy>(policy);
}

absl::StatusOr<std::vector<std::string>> ParseTargetList(absl::string_view text) {
  std::vector<std::string> out;
  if (text.empty()) return absl::InvalidArgumentError("empty target list (want host:port,...)");
  for (absl::string_view t : absl::StrSplit(text, ',')) {
    const size_t colon = t.rfind(':');
    int port = 0;
    if (colon == absl::string_view::npos || colon == 0 ||
        !absl::SimpleAtoi(t.substr(colon + 1), &port) || port < 1 || port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad target \"", t, "\" (want host:port, port 1..65535)"));
    }
    out.emplace_back(t);
  }
  return out;
}

absl::StatusOr<std::vector<ItemSpec>> ParseItems(absl::string_view text) {
  std::vector<ItemSpec> out;
  if (text.empty()) return absl::InvalidArgumentError("no items (want sku[:qty],...)");
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    ItemSpec item;
    const size_t colon = part.find(':');
    item.sku = std::string(part.substr(0, colon));
    if (item.sku.empty())
      return absl::InvalidArgumentError(absl::StrCat("bad item \"", part, "\": empty sku"));
    if (colon != absl::string_view::npos &&
        (!absl::SimpleAtoi(part.substr(colon + 1), &item.quantity) || item.quantity < 1 ||
         item.quantity > 1000)) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad item \"", part, "\": quantity must be 1..1000"));
    }
    out.push_back(item);
  }
  return out;
}

std::string FormatItems(const std::vector<ItemSpec>& items) {
  return absl::StrJoin(items, ",", [](std::string* out, const ItemSpec& i) {
    absl::StrAppend(out, i.sku, ":", i.quantity);
  });
}

std::vector<ItemSpec> WithOrderReference(const std::vector<ItemSpec>& items,
                                         absl::string_view key) {
  std::vector<ItemSpec> out = items;
  out.push_back({absl::StrCat("ref-", key), 1});
  return out;
}

std::string LedgerItemsText(const std::vector<ItemSpec>& items) {
  return absl::StrJoin(items, ", ", [](std::string* out, const ItemSpec& i) {
    absl::StrAppend(out, i.sku, " x", i.quantity);
  });
}

namespace {

bool HasControl(absl::string_view s) {
  return s.find_first_of("\t\n\r") != absl::string_view::npos;
}

absl::optional<absl::StatusCode> ParseCodeName(absl::string_view name) {
  for (int c = 0; c <= 16; ++c) {
    const auto code = static_cast<absl::StatusCode>(c);
    if (absl::StatusCodeToString(code) == name) return code;
  }
  return absl::nullopt;
}

}  // namespace

std::string FormatRequestRecord(const RequestRecord& r) {
  return absl::StrCat(r.key, "\t", FormatItems(r.items), "\t", absl::StatusCodeToString(r.code),
                      "\t", r.order_id);
}

absl::StatusOr<std::vector<RequestRecord>> ParseRequestRecords(absl::string_view text) {
  std::vector<RequestRecord> out;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    if (line.empty()) continue;
    auto bad = [line_no](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat("request record line ", line_no, ": ", why));
    };
    std::vector<absl::string_view> f = absl::StrSplit(line, '\t');
    if (f.size() != 4) {
      return bad(
          absl::StrCat("want 4 tab-separated fields (key, items, code, order_id), got ", f.size()));
    }
    RequestRecord r;
    r.key = std::string(f[0]);
    if (r.key.empty()) return bad("empty key");
    absl::StatusOr<std::vector<ItemSpec>> items = ParseItems(f[1]);
    if (!items.ok()) return bad(items.status().message());
    r.items = *std::move(items);
    absl::optional<absl::StatusCode> code = ParseCodeName(f[2]);
    if (!code.has_value()) return bad(absl::StrCat("unknown status code \"", f[2], "\""));
    r.code = *code;
    if (!absl::SimpleAtoi(f[3], &r.order_id) || r.order_id < 0) {
      return bad(absl::StrCat("bad order_id \"", f[3], "\""));
    }
    out.push_back(std::move(r));
  }
  return out;
}

absl::StatusOr<AuditResult> AuditExactlyOnce(const std::vector<RequestRecord>& requests,
                                             const std::vector<LedgerRow>& rows) {
  struct OrderSeen {
    std::string items;  // LedgerItemsText
    bool acknowledged = false;
    std::set<int64_t> acked_ids;
  };
  AuditResult a;
  a.requests = static_cast<int64_t>(requests.size());
  std::map<std::string, OrderSeen> orders;          // key -> order
  std::map<std::string, std::string> key_of_items;  // items -> key
  for (const RequestRecord& r : requests) {
    if (HasControl(r.key)) return absl::InvalidArgumentError("a key holds a tab or newline");
    const std::string items = LedgerItemsText(r.items);
    auto [it, fresh] = orders.try_emplace(r.key, OrderSeen{items});
    if (!fresh && it->second.items != items) {
      return absl::InvalidArgumentError(absl::StrCat("key ", r.key,
                                                     " was sent with two item lists: \"",
                                                     it->second.items, "\" and \"", items, "\""));
    }
    auto [owner, first] = key_of_items.try_emplace(items, r.key);
    if (!first && owner->second != r.key) {
      return absl::InvalidArgumentError(
          absl::StrCat("orders ", owner->second, " and ", r.key, " have the same items \"", items,
                       "\": the audit cannot tell their rows apart (WithOrderReference)"));
    }
    if (r.code == absl::StatusCode::kOk) {
      it->second.acknowledged = true;
      it->second.acked_ids.insert(r.order_id);
    }
  }
  a.orders = static_cast<int64_t>(orders.size());
  std::map<std::string, std::vector<const LedgerRow*>> rows_by_key, rows_by_items;
  for (const LedgerRow& row : rows) {
    const bool ours = orders.count(row.key) > 0 || key_of_items.count(row.items) > 0;
    if (!ours) {
      ++a.other_rows;
      continue;
    }
    rows_by_key[row.key].push_back(&row);
    rows_by_items[row.items].push_back(&row);
  }
  auto ids = [](const std::vector<const LedgerRow*>& rs) {
    return absl::StrJoin(rs, ", ", [](std::string* out, const LedgerRow* r) {
      absl::StrAppend(out, "order_id ", r->order_id, " key ", r->key);
    });
  };
  for (const auto& [key, o] : orders) {
    if (o.acknowledged) ++a.acknowledged;
    const std::vector<const LedgerRow*>& same_items = rows_by_items[o.items];
    const std::vector<const LedgerRow*>& same_key = rows_by_key[key];
    if (same_items.size() > 1) {
      a.violations.push_back(absl::StrCat("order ", key, " committed ", same_items.size(),
                                          " times: ", ids(same_items)));
    }
    for (const LedgerRow* row : same_items) {
      if (row->key != key) {
        a.violations.push_back(
            absl::StrCat("order ", key, " committed under another key: ", ids({row})));
      }
    }
    for (const LedgerRow* row : same_key) {
      if (row->items != o.items) {
        a.violations.push_back(absl::StrCat("key ", key, " committed with items \"", row->items,
                                            "\", not the order's \"", o.items, "\" (order_id ",
                                            row->order_id, ")"));
      }
    }
    const LedgerRow* own = nullptr;
    for (const LedgerRow* row : same_key) {
      if (row->items == o.items) own = row;
    }
    if (own != nullptr) {
      ++a.committed;
      if (!o.acknowledged) ++a.committed_unacknowledged;
    }
    if (o.acknowledged && own == nullptr) {
      a.violations.push_back(absl::StrCat("order ", key, " acknowledged (order_id ",
                                          *o.acked_ids.begin(), ") but not in the ledger"));
    }
    if (o.acknowledged && own != nullptr) {
      for (int64_t id : o.acked_ids) {
        if (id != own->order_id) {
          a.violations.push_back(absl::StrCat("order ", key, " acknowledged as order_id ", id,
                                              " but committed as order_id ", own->order_id));
        }
      }
    }
  }
  return a;
}

std::string FormatAudit(const AuditResult& a, size_t max_violations) {
  std::string out =
      absl::StrCat(a.requests, " requests, ", a.orders, " orders: ", a.acknowledged,
                   " acknowledged, ", a.committed, " committed (", a.committed_unacknowledged,
                   " though the client saw an error), ", a.violations.size(), " violation(s)");
  for (size_t i = 0; i < a.violations.size() && i < max_violations; ++i) {
    absl::StrAppend(&out, "\n  ", a.violations[i]);
  }
  if (a.violations.size() > max_violations) {
    absl::StrAppend(&out, "\n  ... and ", a.violations.size() - max_violations, " more");
  }
  return out;
}

std::string PlainSource(absl::string_view source, absl::string_view hop) {
  static const std::map<std::string, std::string, std::less<>> kPlain = {
      {"client", "the client's own deadline"},
      {"request", "the request cap"},
      {"attempt", "an attempt cap"},
      {"idle", "the idle budget"},
      {"downstream", "a budget further down"},
      {"exhausted-before-call", "too little left to call on"},
      {"arrived-expired", "arrived expired"},
      {"shield", "the shield's bound"},
      {"slot-wait", "no slot in time"},
      {"queue-wait", "waited for admission until too late"},
      {"cannot-finish", "refused: could not finish in time"},
  };
  const auto it = kPlain.find(source);
  const std::string what = it == kPlain.end() ? std::string(source) : it->second;
  return absl::StrCat(what, ", at ", hop.empty() ? "?" : hop);
}

std::string AlignColumns(const std::vector<std::vector<std::string>>& rows,
                         absl::string_view indent) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()));
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line(indent);
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

std::string ErrorKinds(const std::vector<ErrorSeen>& errors) {
  if (errors.empty()) return "-";
  struct Group {
    int total = 0;
    std::map<std::string, int> by_hop;
  };
  // (code, source) -> where; in first-seen order, then most frequent first.
  std::vector<std::pair<std::pair<std::string, std::string>, Group>> groups;
  for (const ErrorSeen& e : errors) {
    auto key = std::make_pair(e.code, e.source);
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&key](const auto& g) { return g.first == key; });
    if (it == groups.end()) it = groups.insert(groups.end(), {key, Group()});
    ++it->second.total;
    if (!e.source.empty()) ++it->second.by_hop[e.hop.empty() ? "?" : e.hop];
  }
  std::stable_sort(groups.begin(), groups.end(),
                   [](const auto& a, const auto& b) { return a.second.total > b.second.total; });
  std::vector<std::string> parts;
  for (const auto& [key, g] : groups) {
    std::string part = absl::StrCat(g.total, "x ", key.first);
    if (!key.second.empty()) {
      // PlainSource says "<budget>, at <hop>"; with several hops, each with its count.
      std::vector<std::string> where;
      for (const auto& [hop, n] : g.by_hop) {
        where.push_back(g.by_hop.size() == 1 ? hop : absl::StrCat(n, " at ", hop));
      }
      const std::string budget = PlainSource(key.second, "");
      absl::StrAppend(&part, ", ", budget.substr(0, budget.rfind(", at ")), " (",
                      g.by_hop.size() == 1 ? "at " : "", absl::StrJoin(where, ", "), ")");
    }
    parts.push_back(std::move(part));
  }
  return absl::StrJoin(parts, "; ");
}

}  // namespace hopbudget::chainctl
