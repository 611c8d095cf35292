// Copyright hopbudget authors.
//
// service_config.h: per-method budgets from a gRPC service config.
//
// Teams already describe their methods' budgets in the gRPC service config
// (gRFC A6, gRPC's doc/service_config.md). `PolicyTableFromServiceConfig`
// reads its JSON with protobuf's JSON parser into the official
// `grpc.service_config.ServiceConfig` message and maps each `methodConfig`
// onto a MethodPolicy (policy_table.h):
//   timeout                              -> budget.request_cap
//   retryPolicy                          -> retry (maxAttempts, initialBackoff,
//                                           maxBackoff, backoffMultiplier,
//                                           retryableStatusCodes)
//   retryPolicy.perAttemptRecvTimeout    -> budget.attempt_cap
//   hedgingPolicy                        -> hedge (maxAttempts, hedgingDelay as
//                                           a fixed delay, nonFatalStatusCodes),
//                                           and idempotent
//   waitForReady                         -> wait_for_ready
//   retryThrottling (top level)          -> retry_throttling
// What the service config cannot say comes from hopbudget's section, the
// top-level key "hopbudget" (schema: proto/hopbudget/config.proto):
// hopReserve, minBudget, maxInboundBudget, idempotent, streamIdleBudget,
// shadow, admission, shieldBound, per name like methodConfig.
//
// A method's policy is `defaults`, then the service config's fields of the
// most specific methodConfig that names it, then the hopbudget fields of the
// most specific hopbudget entry that names it: each source resolves as gRPC
// resolves methodConfig (method, else service, else the entry with an empty
// name).
//
// Errors are InvalidArgument, and say where: bad JSON with its line and
// column ("service config: line 3, column 7: Unexpected token."), an unknown
// field or a wrong type with protobuf's path, and every gRPC rule the
// config breaks (a duplicate name, a method without a service, maxAttempts
// < 2, a duration <= 0, an empty retryableStatusCodes), naming the
// methodConfig by its index. A policy that does not nest fails as
// PolicyTable::Create fails, naming the method.
//
// gRPC's own limits are kept: a maxAttempts above 5 counts as 5, and
// `notes` says so. hopbudget's are added: a hedge is at most 3 attempts,
// after a delay > 0; a backoffMultiplier is >= 1.
//
// Thread safety: a pure function of its arguments.
//
// Example:
//   absl::StatusOr<hopbudget::ServiceConfigPolicies> p =
//       hopbudget::PolicyTableFromServiceConfig(json, hopbudget::MethodPolicy{});
//   if (!p.ok()) return p.status();  // names the method and the numbers
//   const hopbudget::MethodPolicy& get = p->table.Resolve("/demo.Orders/Get");
#ifndef HOPBUDGET_ADVANCED_SERVICE_CONFIG_H_
#define HOPBUDGET_ADVANCED_SERVICE_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "hopbudget/advanced/policy_table.h"
#include "hopbudget/advanced/retry_policy.h"

namespace hopbudget {

struct ServiceConfigPolicies {
  // One entry per name in methodConfig or in the hopbudget section.
  PolicyTable table;
  // The config's retryThrottling; nullopt when it has none.
  absl::optional<RetryThrottleOptions> retry_throttling;
  // The service config for gRPC core itself: the input without
  // retryPolicy, hedgingPolicy, retryThrottling and the hopbudget section
  // (hopbudget retries and hedges; core keeps its transparent retries),
  // except that a methodConfig whose every name is in shadow mode keeps
  // its retryPolicy or hedgingPolicy, and then the config its
  // retryThrottling: core retries those calls, as without hopbudget.
  std::string core_json;
  // What was read differently from how it was written, one sentence each
  // ("methodConfig[1]: retryPolicy.maxAttempts 7 counts as 5, as in gRPC").
  std::vector<std::string> notes;
};

// Reads `json`, a gRPC service config, with `defaults` for everything the
// config does not set. An empty object ("{}") gives a table of `defaults`
// alone.
[[nodiscard]] absl::StatusOr<ServiceConfigPolicies> PolicyTableFromServiceConfig(
    absl::string_view json, const MethodPolicy& defaults);

// The same config read but not yet validated: each named key's policy
// (PolicyTable::Entry, in the order the config names them), for a tool
// that reports on every method rather than stop at the first that does not
// nest (hopbudget-lint). Fails as PolicyTableFromServiceConfig does, except
// for ValidateMethodPolicy's checks.
struct ServiceConfigEntries {
  std::vector<PolicyTable::Entry> entries;
  absl::optional<RetryThrottleOptions> retry_throttling;
  std::string core_json;
  std::vector<std::string> notes;
};
[[nodiscard]] absl::StatusOr<ServiceConfigEntries> ReadServiceConfig(absl::string_view json,
                                                                     const MethodPolicy& defaults);

}  // namespace hopbudget

#endif  // HOPBUDGET_ADVANCED_SERVICE_CONFIG_H_
