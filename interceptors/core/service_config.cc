#include "hopbudget/advanced/service_config.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "grpc/service_config/service_config.pb.h"
#include "hopbudget/config.pb.h"
#include "struct_fields.h"

namespace hopbudget {
namespace {

namespace pb = ::google::protobuf;
using ::grpc::service_config::MethodConfig;
using ::grpc::service_config::ServiceConfig;

// `what` with its control characters escaped ("\\n", "\\x01"): an error is
// one line, though protobuf's messages quote the input's own keys.
std::string OneLine(absl::string_view what) {
  std::string out;
  for (char c : what) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u != 0x7f) {
      out.push_back(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      absl::StrAppend(&out, "\\x", absl::Hex(u, absl::kZeroPad2));
    }
  }
  return out;
}

absl::Status Bad(absl::string_view where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("service config: ", where, OneLine(what)));
}

// protobuf 3.21 reports a JSON syntax error as "<message>\n<up to 20 bytes
// either side of the error>\n<spaces>^". The excerpt is a piece of `json`,
// so finding it gives the error's offset; "line L, column C: <message>", or
// the message alone when the excerpt cannot be found. A column counts bytes.
std::string SyntaxError(absl::string_view json, absl::string_view error) {
  const size_t first_nl = error.find('\n');
  const size_t last_nl = error.rfind('\n');
  if (first_nl == absl::string_view::npos || first_nl == last_nl) return std::string(error);
  const absl::string_view message = error.substr(0, first_nl);
  const absl::string_view excerpt = error.substr(first_nl + 1, last_nl - first_nl - 1);
  const absl::string_view caret = error.substr(last_nl + 1);
  if (caret.empty() || caret.back() != '^') return std::string(message);
  size_t offset = json.size();
  // At the end of the input protobuf's excerpt is the unparsed tail (often
  // empty), not the text around the error: the error is at the end.
  if (!excerpt.empty() && !absl::StartsWith(message, "Unexpected end of string")) {
    const size_t at = json.find(excerpt);
    if (at == absl::string_view::npos) return std::string(message);
    offset = std::min(at + caret.size() - 1, json.size());
  }
  int line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < offset; ++i) {
    if (json[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return absl::StrCat("line ", line, ", column ", offset - line_start + 1, ": ", message);
}

absl::Duration FromProto(const pb::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

std::string Show(absl::Duration d) { return FormatBudget(d); }

// A required positive duration; `field` names it in the error.
absl::StatusOr<absl::Duration> Positive(const pb::Duration& d, absl::string_view where,
                                        absl::string_view field) {
  const absl::Duration v = FromProto(d);
  if (v <= absl::ZeroDuration()) {
    return Bad(where, absl::StrCat(field, " must be > 0, got ", Show(v)));
  }
  return v;
}

// Takes the first parse's fields that ServiceConfig of Debian's grpc-proto
// does not have out of `config`: the hopbudget section and each
// retryPolicy's perAttemptRecvTimeout (gRFC A6, newer than that proto).
struct Extras {
  absl::optional<pb::Value> hopbudget;
  absl::flat_hash_map<int, pb::Value> per_attempt;  // by methodConfig index
};

Extras TakeExtras(pb::Struct& config) {
  Extras extras;
  extras.hopbudget = internal::TakeStructField(config, "hopbudget");
  for (const char* list_name : {"methodConfig", "method_config"}) {
    pb::Value* list = internal::MutableStructField(config, list_name);
    if (list == nullptr || !list->has_list_value()) continue;
    auto& values = *list->mutable_list_value()->mutable_values();
    for (int i = 0; i < values.size(); ++i) {
      if (!values[i].has_struct_value()) continue;
      for (const char* retry_name : {"retryPolicy", "retry_policy"}) {
        pb::Value* retry =
            internal::MutableStructField(*values[i].mutable_struct_value(), retry_name);
        if (retry == nullptr || !retry->has_struct_value()) continue;
        for (const char* name : {"perAttemptRecvTimeout", "per_attempt_recv_timeout"}) {
          if (absl::optional<pb::Value> p =
                  internal::TakeStructField(*retry->mutable_struct_value(), name)) {
            extras.per_attempt[i] = *std::move(p);
          }
        }
      }
    }
  }
  return extras;
}

// Parses `value` (a piece of the first parse) into `message`, strictly.
absl::Status Reparse(const pb::Value& value, pb::Message* message, absl::string_view where) {
  std::string json;
  if (auto s = pb::util::MessageToJsonString(value, &json); !s.ok()) {
    return Bad(where, s.message().as_string());
  }
  if (auto s = pb::util::JsonStringToMessage(json, message); !s.ok()) {
    return Bad(where, s.message().as_string());
  }
  return absl::OkStatus();
}

std::vector<absl::StatusCode> Codes(const pb::RepeatedField<int>& codes) {
  std::vector<absl::StatusCode> out;
  for (int c : codes) out.push_back(static_cast<absl::StatusCode>(c));
  return out;
}

// "*", "pkg.S/*" or "pkg.S/M" for one name; an error for a method without a
// service (gRPC's rule).
absl::StatusOr<std::string> KeyOf(absl::string_view service, absl::string_view method,
                                  absl::string_view where) {
  if (service.empty()) {
    if (!method.empty()) {
      return Bad(where, absl::StrCat("name {method: \"", method, "\"} has no service"));
    }
    return std::string("*");
  }
  if (service.find('/') != absl::string_view::npos || method.find('/') != absl::string_view::npos) {
    return Bad(where, absl::StrCat("name {service: \"", service, "\", method: \"", method,
                                   "\"}: a name holds no '/'"));
  }
  return method.empty() ? absl::StrCat(service, "/*") : absl::StrCat(service, "/", method);
}

// The service config's part of one methodConfig, applied to a policy.
struct GrpcFields {
  absl::optional<absl::Duration> timeout;
  absl::optional<absl::Duration> per_attempt;
  absl::optional<RetryPolicy> retry;
  absl::optional<HedgePolicy> hedge;
  absl::optional<bool> wait_for_ready;
};

absl::StatusOr<GrpcFields> MapMethodConfig(const MethodConfig& mc,
                                           const absl::optional<pb::Value>& per_attempt,
                                           absl::string_view where,
                                           std::vector<std::string>* notes) {
  GrpcFields f;
  if (mc.has_timeout()) {
    absl::StatusOr<absl::Duration> t = Positive(mc.timeout(), where, "timeout");
    if (!t.ok()) return t.status();
    f.timeout = *t;
  }
  if (mc.has_wait_for_ready()) f.wait_for_ready = mc.wait_for_ready().value();
  if (mc.has_retry_policy()) {
    const MethodConfig::RetryPolicy& rp = mc.retry_policy();
    RetryPolicy r;
    if (rp.max_attempts() < 2) {
      return Bad(where,
                 absl::StrCat("retryPolicy.maxAttempts must be > 1, got ", rp.max_attempts()));
    }
    r.max_attempts = static_cast<int>(std::min<uint32_t>(rp.max_attempts(), 5));
    if (rp.max_attempts() > 5) {
      notes->push_back(absl::StrCat(where, "retryPolicy.maxAttempts ", rp.max_attempts(),
                                    " counts as 5, as in gRPC"));
    }
    absl::StatusOr<absl::Duration> initial =
        Positive(rp.initial_backoff(), where, "retryPolicy.initialBackoff");
    if (!initial.ok()) return initial.status();
    absl::StatusOr<absl::Duration> max =
        Positive(rp.max_backoff(), where, "retryPolicy.maxBackoff");
    if (!max.ok()) return max.status();
    r.initial_backoff = *initial;
    r.max_backoff = *max;
    if (!(rp.backoff_multiplier() > 0)) {
      return Bad(where, absl::StrCat("retryPolicy.backoffMultiplier must be > 0, got ",
                                     rp.backoff_multiplier()));
    }
    r.backoff_multiplier = rp.backoff_multiplier();
    if (rp.retryable_status_codes().empty()) {
      return Bad(where, "retryPolicy.retryableStatusCodes must not be empty");
    }
    r.retryable_codes = Codes(rp.retryable_status_codes());
    f.retry = std::move(r);
  }
  if (per_attempt.has_value()) {
    if (!mc.has_retry_policy()) {
      return Bad(where, "perAttemptRecvTimeout is a field of retryPolicy");
    }
    pb::Duration d;
    if (auto s = Reparse(*per_attempt, &d, where); !s.ok()) {
      std::string got;
      (void)pb::util::MessageToJsonString(*per_attempt, &got);
      return Bad(where, absl::StrCat("retryPolicy.perAttemptRecvTimeout must be a duration "
                                     "such as \"0.5s\", got ",
                                     got));
    }
    absl::StatusOr<absl::Duration> v = Positive(d, where, "retryPolicy.perAttemptRecvTimeout");
    if (!v.ok()) return v.status();
    f.per_attempt = *v;
  }
  if (mc.has_hedging_policy()) {
    const MethodConfig::HedgingPolicy& hp = mc.hedging_policy();
    if (hp.max_attempts() < 2) {
      return Bad(where,
                 absl::StrCat("hedgingPolicy.maxAttempts must be > 1, got ", hp.max_attempts()));
    }
    HedgePolicy h;
    h.max_attempts = static_cast<int>(std::min<uint32_t>(hp.max_attempts(), 5));
    if (hp.max_attempts() > 5) {
      notes->push_back(absl::StrCat(where, "hedgingPolicy.maxAttempts ", hp.max_attempts(),
                                    " counts as 5, as in gRPC"));
    }
    if (h.max_attempts > 3) {
      return Bad(where, absl::StrCat("hedgingPolicy.maxAttempts ", h.max_attempts,
                                     ": hopbudget sends at most 3 copies of a call"));
    }
    h.delay = FromProto(hp.hedging_delay());
    if (h.delay <= absl::ZeroDuration()) {
      return Bad(where, absl::StrCat("hedgingPolicy.hedgingDelay must be > 0 (hopbudget sends "
                                     "a hedge only after a delay), got ",
                                     Show(h.delay)));
    }
    h.quantile = 0;  // the config's delay, fixed
    h.non_fatal_codes = Codes(hp.non_fatal_status_codes());
    f.hedge = std::move(h);
  }
  return f;
}

void Apply(const GrpcFields& f, MethodPolicy* p) {
  if (f.timeout.has_value()) p->budget.request_cap = *f.timeout;
  if (f.per_attempt.has_value()) p->budget.attempt_cap = *f.per_attempt;
  if (f.retry.has_value()) p->retry = f.retry;
  if (f.hedge.has_value()) {
    p->hedge = f.hedge;
    p->idempotent = true;
  }
  if (f.wait_for_ready.has_value()) p->wait_for_ready = f.wait_for_ready;
}

absl::Status Apply(const config::MethodPolicy& h, absl::string_view where, MethodPolicy* p) {
  auto positive = [&](const pb::Duration& d, absl::string_view field,
                      absl::Duration* out) -> absl::Status {
    absl::StatusOr<absl::Duration> v = Positive(d, where, field);
    if (!v.ok()) return v.status();
    *out = *v;
    return absl::OkStatus();
  };
  if (h.has_hop_reserve()) {
    p->budget.hop_reserve = FromProto(h.hop_reserve());
    if (p->budget.hop_reserve < absl::ZeroDuration()) {
      return Bad(where, absl::StrCat("hopReserve must be >= 0, got ", Show(p->budget.hop_reserve)));
    }
  }
  if (h.has_min_budget()) {
    if (auto s = positive(h.min_budget(), "minBudget", &p->budget.min_attempt_budget); !s.ok()) {
      return s;
    }
  }
  if (h.has_max_inbound_budget()) {
    if (auto s =
            positive(h.max_inbound_budget(), "maxInboundBudget", &p->budget.max_inbound_budget);
        !s.ok()) {
      return s;
    }
  }
  if (h.has_stream_idle_budget()) {
    if (auto s = positive(h.stream_idle_budget(), "streamIdleBudget", &p->stream_idle_budget);
        !s.ok()) {
      return s;
    }
  }
  if (h.has_shield_bound()) {
    absl::Duration bound;
    if (auto s = positive(h.shield_bound(), "shieldBound", &bound); !s.ok()) return s;
    p->shield_bound = bound;
  }
  if (h.has_idempotent()) p->idempotent = h.idempotent().value();
  if (h.has_shadow()) p->shadow = h.shadow().value();
  if (h.has_admission()) p->admission = h.admission().value();
  return absl::OkStatus();
}

// The most specific of `keys` that covers `key`: itself, its service's
// "pkg.S/*", then "*". -1 when none does.
template <typename Map>
int MostSpecific(const Map& by_key, const std::string& key) {
  if (auto it = by_key.find(key); it != by_key.end()) return it->second;
  if (key != "*") {
    const std::string service = absl::StrCat(key.substr(0, key.find('/')), "/*");
    if (auto it = by_key.find(service); it != by_key.end()) return it->second;
  }
  if (auto it = by_key.find("*"); it != by_key.end()) return it->second;
  return -1;
}

}  // namespace

absl::StatusOr<ServiceConfigEntries> ReadServiceConfig(absl::string_view json,
                                                       const MethodPolicy& defaults) {
  // First parse: JSON syntax, into a Struct, so that the fields Debian's
  // ServiceConfig lacks can be taken out before the strict parse.
  pb::Value root;
  if (auto s = pb::util::JsonStringToMessage(pb::StringPiece(json.data(), json.size()), &root);
      !s.ok()) {
    return Bad("", SyntaxError(json, s.message().as_string()));
  }
  if (!root.has_struct_value()) return Bad("", "the top level must be a JSON object");
  Extras extras = TakeExtras(*root.mutable_struct_value());

  ServiceConfig config;
  if (auto s = Reparse(root, &config, ""); !s.ok()) return s;
  config::HopbudgetConfig section;
  if (extras.hopbudget.has_value()) {
    if (!extras.hopbudget->has_struct_value()) return Bad("", "hopbudget must be a JSON object");
    if (auto s = Reparse(*extras.hopbudget, &section, "hopbudget: "); !s.ok()) return s;
  }

  std::vector<std::string> notes;
  // Each methodConfig's fields, and which names it covers.
  std::vector<GrpcFields> grpc_fields;
  absl::flat_hash_map<std::string, int> grpc_by_key;
  std::vector<std::string> keys;  // in order of appearance, each once
  auto add_key = [&keys](const std::string& key) {
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  };
  for (int i = 0; i < config.method_config_size(); ++i) {
    const MethodConfig& mc = config.method_config(i);
    const std::string where = absl::StrCat("methodConfig[", i, "]: ");
    absl::optional<pb::Value> per_attempt;
    if (auto it = extras.per_attempt.find(i); it != extras.per_attempt.end()) {
      per_attempt = it->second;
    }
    absl::StatusOr<GrpcFields> f = MapMethodConfig(mc, per_attempt, where, &notes);
    if (!f.ok()) return f.status();
    grpc_fields.push_back(*std::move(f));
    for (const MethodConfig::Name& name : mc.name()) {
      absl::StatusOr<std::string> key = KeyOf(name.service(), name.method(), where);
      if (!key.ok()) return key.status();
      if (!grpc_by_key.emplace(*key, i).second) {
        return Bad(where, absl::StrCat(*key, " is named by methodConfig[", grpc_by_key[*key],
                                       "] already"));
      }
      add_key(*key);
    }
  }
  absl::flat_hash_map<std::string, int> hop_by_key;
  for (int i = 0; i < section.method_policy_size(); ++i) {
    const std::string where = absl::StrCat("hopbudget.methodPolicy[", i, "]: ");
    const config::MethodPolicy& mp = section.method_policy(i);
    if (mp.name().empty()) return Bad(where, "names no method (name: [{}] is every method)");
    for (const config::MethodPolicy::Name& name : mp.name()) {
      absl::StatusOr<std::string> key = KeyOf(name.service(), name.method(), where);
      if (!key.ok()) return key.status();
      if (!hop_by_key.emplace(*key, i).second) {
        return Bad(where, absl::StrCat(*key, " is named by hopbudget.methodPolicy[",
                                       hop_by_key[*key], "] already"));
      }
      add_key(*key);
    }
  }

  // Each named key's policy: defaults, then its methodConfig, then its
  // hopbudget entry, each the most specific that covers it.
  std::vector<PolicyTable::Entry> entries;
  for (const std::string& key : keys) {
    MethodPolicy p = defaults;
    if (const int i = MostSpecific(grpc_by_key, key); i >= 0) Apply(grpc_fields[i], &p);
    if (const int i = MostSpecific(hop_by_key, key); i >= 0) {
      const std::string where = absl::StrCat("hopbudget.methodPolicy[", i, "]: ");
      if (auto s = Apply(section.method_policy(i), where, &p); !s.ok()) return s;
    }
    entries.emplace_back(key, std::move(p));
  }
  ServiceConfigEntries out{std::move(entries), absl::nullopt, "", std::move(notes)};

  if (config.has_retry_throttling()) {
    RetryThrottleOptions t;
    t.max_tokens =
        static_cast<int>(std::min<uint32_t>(config.retry_throttling().max_tokens(), 1u << 30));
    t.token_ratio = config.retry_throttling().token_ratio();
    if (auto s = RetryThrottle::Validate(t); !s.ok()) {
      return Bad("retryThrottling: ", s.message());
    }
    out.retry_throttling = t;
  }

  // What gRPC core gets: no retries or hedges of its own (hopbudget's), and
  // its transparent retries kept. A methodConfig whose every name is in
  // shadow mode keeps its retryPolicy or hedgingPolicy, and the config its
  // retryThrottling: hopbudget leaves those calls alone, so core retries
  // them as it would without hopbudget.
  absl::flat_hash_map<std::string, bool> shadow_by_key;
  for (const PolicyTable::Entry& e : out.entries) shadow_by_key[e.first] = e.second.shadow;
  ServiceConfig core = config;
  bool core_retries = false;
  for (MethodConfig& mc : *core.mutable_method_config()) {
    bool all_shadow = mc.name_size() > 0;
    for (const MethodConfig::Name& name : mc.name()) {
      const absl::StatusOr<std::string> key = KeyOf(name.service(), name.method(), "");
      const auto it = key.ok() ? shadow_by_key.find(*key) : shadow_by_key.end();
      all_shadow = all_shadow && it != shadow_by_key.end() && it->second;
    }
    if (all_shadow && (mc.has_retry_policy() || mc.has_hedging_policy())) {
      core_retries = true;
      continue;
    }
    mc.clear_retry_policy();
    mc.clear_hedging_policy();
  }
  if (!core_retries) core.clear_retry_throttling();
  if (auto s = pb::util::MessageToJsonString(core, &out.core_json); !s.ok()) {
    return absl::InternalError(absl::StrCat("service config: ", s.message().as_string()));
  }
  return out;
}

absl::StatusOr<ServiceConfigPolicies> PolicyTableFromServiceConfig(absl::string_view json,
                                                                   const MethodPolicy& defaults) {
  absl::StatusOr<ServiceConfigEntries> read = ReadServiceConfig(json, defaults);
  if (!read.ok()) return read.status();
  absl::StatusOr<PolicyTable> table = PolicyTable::Create(defaults, std::move(read->entries));
  if (!table.ok()) return Bad("", table.status().message());
  return ServiceConfigPolicies{*std::move(table), read->retry_throttling,
                               std::move(read->core_json), std::move(read->notes)};
}

}  // namespace hopbudget
