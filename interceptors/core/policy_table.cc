#include "hopbudget/advanced/policy_table.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace hopbudget {

absl::Status ValidateMethodPolicy(const MethodPolicy& policy) {
  if (policy.retry.has_value() && policy.hedge.has_value()) {
    return absl::InvalidArgumentError(
        "a method is retried or hedged, not both (gRFC A6: retryPolicy and hedgingPolicy are one "
        "oneof)");
  }
  if (policy.retry.has_value()) {
    absl::StatusOr<RetryFit> fit = ValidateRetryPolicy(policy.budget, *policy.retry);
    if (!fit.ok()) return fit.status();
  } else {
    if (absl::Status s = ValidatePolicy(policy.budget); !s.ok()) return s;
  }
  if (policy.hedge.has_value()) {
    if (absl::Status s = ValidateHedgePolicy(*policy.hedge); !s.ok()) return s;
    if (!policy.idempotent) {
      return absl::InvalidArgumentError(
          "a hedged method runs more than once on the server: it must be idempotent");
    }
  }
  if (policy.stream_idle_budget <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("stream_idle_budget must be > 0 (InfiniteDuration() for none), got ",
                     FormatBudget(policy.stream_idle_budget)));
  }
  if (policy.shield_bound.has_value() && (*policy.shield_bound <= absl::ZeroDuration() ||
                                          *policy.shield_bound == absl::InfiniteDuration())) {
    return absl::InvalidArgumentError(
        absl::StrCat("shield_bound must be > 0 and finite (shielded work always has a bound), "
                     "got ",
                     FormatBudget(*policy.shield_bound)));
  }
  return absl::OkStatus();
}

struct PolicyTable::Rep {
  MethodPolicy default_policy;
  absl::flat_hash_map<std::string, MethodPolicy> services;  // "pkg.S"
  absl::flat_hash_map<std::string, MethodPolicy> methods;   // "pkg.S/M"
  std::vector<std::string> keys;                            // as given, sorted
  absl::flat_hash_map<std::string, MethodPolicy> by_key;
};

PolicyTable::~PolicyTable() = default;

namespace {

struct ParsedKey {
  PolicyScope scope = PolicyScope::kDefault;
  absl::string_view service;
  absl::string_view method;
};

// "*", "pkg.S/*" or "pkg.S/M"; nullopt for anything else.
absl::optional<ParsedKey> ParseKey(absl::string_view key) {
  if (key == "*") return ParsedKey{};
  const size_t slash = key.find('/');
  if (slash == absl::string_view::npos || slash == 0 || slash + 1 == key.size()) {
    return absl::nullopt;
  }
  absl::string_view service = key.substr(0, slash);
  absl::string_view method = key.substr(slash + 1);
  if (method.find('/') != absl::string_view::npos || service.find('*') != absl::string_view::npos) {
    return absl::nullopt;
  }
  if (method == "*") return ParsedKey{PolicyScope::kService, service, {}};
  if (method.find('*') != absl::string_view::npos) return absl::nullopt;
  return ParsedKey{PolicyScope::kMethod, service, method};
}

std::string Describe(const ParsedKey& k) {
  switch (k.scope) {
    case PolicyScope::kDefault:
      return "default";
    case PolicyScope::kService:
      return absl::StrCat("service ", k.service);
    case PolicyScope::kMethod:
      return absl::StrCat("method ", k.service, "/", k.method);
  }
  return "unknown";
}

// "/pkg.S/M" -> ("pkg.S", "M"); false when `full_method` is not of that form.
bool SplitFullMethod(absl::string_view full_method, absl::string_view* service,
                     absl::string_view* method) {
  if (full_method.empty() || full_method[0] != '/') return false;
  full_method.remove_prefix(1);
  const size_t slash = full_method.find('/');
  if (slash == absl::string_view::npos || slash == 0 || slash + 1 == full_method.size()) {
    return false;
  }
  *service = full_method.substr(0, slash);
  *method = full_method.substr(slash + 1);
  return true;
}

// Default first, then services, then methods; alphabetical within each.
bool KeyOrder(const std::string& a, const std::string& b) {
  auto rank = [](const std::string& k) {
    if (k == "*") return 0;
    return absl::EndsWith(k, "/*") ? 1 : 2;
  };
  if (rank(a) != rank(b)) return rank(a) < rank(b);
  return a < b;
}

}  // namespace

absl::StatusOr<PolicyTable> PolicyTable::Create(MethodPolicy default_policy,
                                                std::vector<Entry> entries) {
  auto rep = std::make_shared<Rep>();
  rep->default_policy = std::move(default_policy);
  bool default_given = false;
  for (Entry& e : entries) {
    const absl::optional<ParsedKey> k = ParseKey(e.first);
    if (!k.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("policy table: key \"", e.first,
                       "\" is not \"*\", \"pkg.Service/*\" or \"pkg.Service/Method\""));
    }
    if (absl::Status s = ValidateMethodPolicy(e.second); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(Describe(*k), ": ", s.message()));
    }
    if (rep->by_key.contains(e.first)) {
      return absl::InvalidArgumentError(
          absl::StrCat("policy table: ", Describe(*k), " is given twice"));
    }
    rep->by_key.emplace(e.first, e.second);
    rep->keys.push_back(e.first);
    switch (k->scope) {
      case PolicyScope::kDefault:
        rep->default_policy = std::move(e.second);
        default_given = true;
        break;
      case PolicyScope::kService:
        rep->services.emplace(std::string(k->service), std::move(e.second));
        break;
      case PolicyScope::kMethod:
        rep->methods.emplace(e.first, std::move(e.second));
        break;
    }
  }
  if (!default_given) {
    if (absl::Status s = ValidateMethodPolicy(rep->default_policy); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("default: ", s.message()));
    }
  }
  std::sort(rep->keys.begin(), rep->keys.end(), KeyOrder);
  return PolicyTable(std::move(rep));
}

const MethodPolicy& PolicyTable::Resolve(absl::string_view full_method) const {
  absl::string_view service, method;
  if (!SplitFullMethod(full_method, &service, &method)) return rep_->default_policy;
  // full_method without its leading '/' is the method key.
  if (auto it = rep_->methods.find(full_method.substr(1)); it != rep_->methods.end()) {
    return it->second;
  }
  if (auto it = rep_->services.find(service); it != rep_->services.end()) return it->second;
  return rep_->default_policy;
}

const MethodPolicy& PolicyTable::Default() const { return rep_->default_policy; }

PolicyScope PolicyTable::ScopeOf(absl::string_view full_method) const {
  absl::string_view service, method;
  if (!SplitFullMethod(full_method, &service, &method)) return PolicyScope::kDefault;
  if (rep_->methods.contains(full_method.substr(1))) return PolicyScope::kMethod;
  if (rep_->services.contains(service)) return PolicyScope::kService;
  return PolicyScope::kDefault;
}

bool IsGrpcServiceMethod(absl::string_view full_method) {
  return absl::StartsWith(full_method, "/grpc.");
}

BudgetPolicy InboundPolicy(const BudgetPolicy& resolved, absl::string_view full_method,
                           const PolicyTable* table) {
  if (!IsGrpcServiceMethod(full_method)) return resolved;
  if (table != nullptr && table->ScopeOf(full_method) != PolicyScope::kDefault) return resolved;
  BudgetPolicy uncapped = resolved;
  uncapped.request_cap = absl::InfiniteDuration();
  uncapped.max_inbound_budget = absl::InfiniteDuration();
  return uncapped;
}

absl::Status PolicyTable::CheckNamesExist(absl::Span<const std::string> registered) const {
  absl::flat_hash_set<std::string> methods;
  absl::flat_hash_set<absl::string_view> services;
  for (const std::string& full : registered) {
    absl::string_view service, method;
    if (!SplitFullMethod(full, &service, &method)) continue;
    methods.insert(std::string(absl::string_view(full).substr(1)));
    services.insert(service);
  }
  return CheckNames([&](absl::string_view service) { return services.contains(service); },
                    [&](absl::string_view service, absl::string_view method) {
                      return methods.contains(absl::StrCat(service, "/", method));
                    },
                    "what this server does not serve");
}

absl::Status PolicyTable::CheckNames(
    absl::FunctionRef<bool(absl::string_view service)> service_exists,
    absl::FunctionRef<bool(absl::string_view service, absl::string_view method)> method_exists,
    absl::string_view what_is_missing) const {
  std::vector<std::string> unmatched;
  for (const std::string& key : rep_->keys) {
    const absl::optional<ParsedKey> k = ParseKey(key);
    if (k->scope == PolicyScope::kService && !service_exists(k->service)) {
      unmatched.push_back(Describe(*k));
    } else if (k->scope == PolicyScope::kMethod && !method_exists(k->service, k->method)) {
      unmatched.push_back(Describe(*k));
    }
  }
  if (unmatched.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("policy table names ", what_is_missing, ": ", absl::StrJoin(unmatched, ", ")));
}

std::vector<std::string> PolicyTable::Keys() const { return rep_->keys; }

const MethodPolicy* PolicyTable::Find(absl::string_view key) const {
  auto it = rep_->by_key.find(key);
  return it == rep_->by_key.end() ? nullptr : &it->second;
}

}  // namespace hopbudget
