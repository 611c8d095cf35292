// Copyright hopbudget authors.
//
// policy_table.h: budgets per method. Pure values, no gRPC types.
//
// A real server has methods with different budgets: a read that must answer
// in 50 ms, a write that may take 2 s. A `PolicyTable` holds one
// `MethodPolicy` per method, per service and a default, and resolves a
// method's full name ("/pkg.Service/Method") to its policy the way the gRPC
// service config does: the method's own entry, else its service's, else the
// default. Every entry is validated when the table is made (ValidatePolicy,
// ValidateRetryPolicy, ValidateHedgePolicy), and the error names the entry.
// A table is usually read from a gRPC service config (service_config.h).
//
// Edge cases: a name that is not "/service/method" resolves to the default;
// an empty table resolves everything to the default. Infinite durations in a
// policy mean "no cap" (budget.h).
//
// Thread safety: a PolicyTable is immutable once made; Resolve may be called
// concurrently. The reference Resolve returns lives as long as the table.
//
// Example:
//   hopbudget::MethodPolicy read;
//   read.budget.request_cap = absl::Milliseconds(50);
//   absl::StatusOr<hopbudget::PolicyTable> table = hopbudget::PolicyTable::Create(
//       hopbudget::MethodPolicy{}, {{"demo.Orders/Get", read}});
//   if (!table.ok()) return table.status();
//   const hopbudget::MethodPolicy& p = table->Resolve("/demo.Orders/Get");
#ifndef HOPBUDGET_ADVANCED_POLICY_TABLE_H_
#define HOPBUDGET_ADVANCED_POLICY_TABLE_H_

#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "absl/types/span.h"
#include "hopbudget/advanced/budget.h"
#include "hopbudget/advanced/hedge.h"
#include "hopbudget/advanced/retry_policy.h"

namespace hopbudget {

// Everything hopbudget decides for the calls of one method.
struct MethodPolicy {
  // Request cap (a service config's `timeout`), attempt cap
  // (`retryPolicy.perAttemptRecvTimeout`), reserve, minimum and inbound
  // clamp.
  BudgetPolicy budget;
  // How a failed call is retried; nullopt: it is not.
  absl::optional<RetryPolicy> retry;
  // How a slow call is hedged; nullopt: it is not. Never set with `retry`.
  absl::optional<HedgePolicy> hedge;
  // Whether a call may run twice on the server. A hedged method must be
  // (ValidateMethodPolicy); a service config's hedgingPolicy implies it.
  bool idempotent = false;
  // gRPC's wait-for-ready for the method's calls; nullopt: the caller's.
  absl::optional<bool> wait_for_ready;
  // Most time a stream may go without a message; InfiniteDuration(): no
  // idle budget.
  absl::Duration stream_idle_budget = absl::InfiniteDuration();
  // Shadow mode: hopbudget computes and counts what it would do but changes
  // no call.
  bool shadow = false;
  // Whether the method's calls are held to the server's admission gate, when
  // it has one; false: never queued or shed by admission.
  bool admission = true;
  // The bound of work a handler of the method shields (Shield::RunFor);
  // nullopt: the bound the handler's code gives. Finite and > 0.
  absl::optional<absl::Duration> shield_bound;
};

// Checks one policy: ValidatePolicy(budget), then ValidateRetryPolicy or
// ValidateHedgePolicy, then the rest (retry and hedge both set, a hedged
// method that is not idempotent, stream_idle_budget <= 0, a shield_bound
// that is not finite and > 0). InvalidArgument
// with the checker's message.
absl::Status ValidateMethodPolicy(const MethodPolicy& policy);

// What an entry's key names.
enum class PolicyScope { kDefault, kService, kMethod };
// Stable names for logs and test failures: "default", "service", "method".
// AbslStringify and operator<< print them (GoogleTest, streams).
inline absl::string_view PolicyScopeName(PolicyScope value) {
  switch (value) {
    case PolicyScope::kDefault:
      return "default";
    case PolicyScope::kService:
      return "service";
    case PolicyScope::kMethod:
      return "method";
  }
  return "unknown";
}
template <typename Sink>
void AbslStringify(Sink& sink, PolicyScope value) {
  sink.Append(PolicyScopeName(value));
}
inline std::ostream& operator<<(std::ostream& os, PolicyScope value) {
  return os << PolicyScopeName(value);
}

class PolicyTable {
 public:
  // One entry: `key` is "pkg.Service/Method" (one method), "pkg.Service/*"
  // (every method of a service) or "*" (the default, which then replaces
  // `default_policy`).
  using Entry = std::pair<std::string, MethodPolicy>;

  // Makes a table. Fails with InvalidArgument naming the key when a key is
  // malformed ("", "/", "pkg.S/", a method without a service), appears twice,
  // or its policy fails ValidateMethodPolicy (the message starts with
  // "method pkg.S/M: " or "service pkg.S: " or "default: ").
  [[nodiscard]] static absl::StatusOr<PolicyTable> Create(MethodPolicy default_policy,
                                                          std::vector<Entry> entries);

  // The policy of `full_method` ("/pkg.Service/Method", as gRPC names a call):
  // its method entry, else its service entry, else the default.
  const MethodPolicy& Resolve(absl::string_view full_method) const;

  // The policy of every method no entry names ("*", else the default policy
  // given to Create).
  const MethodPolicy& Default() const;

  // Which entry Resolve(full_method) uses: kMethod, kService or kDefault.
  PolicyScope ScopeOf(absl::string_view full_method) const;

  // Checks that every method and service the table names is among
  // `registered` (full names, "/pkg.Service/Method"): a name that matches
  // nothing is a typo that would silently leave a method on the default.
  // InvalidArgument listing every unmatched key.
  absl::Status CheckNamesExist(absl::Span<const std::string> registered) const;
  // The same check against predicates: `service_exists("pkg.S")` for a
  // service entry, `method_exists("pkg.S", "M")` for a method entry. The
  // error reads "policy table names <what_is_missing>: <keys>".
  absl::Status CheckNames(
      absl::FunctionRef<bool(absl::string_view service)> service_exists,
      absl::FunctionRef<bool(absl::string_view service, absl::string_view method)> method_exists,
      absl::string_view what_is_missing) const;

  // The keys of the table's entries, sorted: "*" first, then services
  // ("pkg.S/*") and methods.
  std::vector<std::string> Keys() const;
  // The policy of one key as given to Create (nullptr when absent).
  const MethodPolicy* Find(absl::string_view key) const;

  PolicyTable(const PolicyTable&) = default;
  PolicyTable& operator=(const PolicyTable&) = default;
  PolicyTable(PolicyTable&&) = default;
  PolicyTable& operator=(PolicyTable&&) = default;
  ~PolicyTable();

 private:
  struct Rep;
  explicit PolicyTable(std::shared_ptr<const Rep> rep) : rep_(std::move(rep)) {}
  std::shared_ptr<const Rep> rep_;
};

// Whether `full_method` is one of gRPC's own services: its name starts with
// "/grpc." (health, reflection, channelz). Their calls belong to the
// transport, not to a request of the hop: a caller's health watch
// (`healthCheckConfig`) is a stream without a deadline that lives as long as
// its connection.
[[nodiscard]] bool IsGrpcServiceMethod(absl::string_view full_method);

// The budget of an inbound call of `full_method`, whose policy `resolved` is
// `table`'s entry for it (nullptr: a server with one policy for every
// method): `resolved` as it is, except that a gRPC service method with no
// entry of its own in `table` has neither a request cap nor an inbound
// clamp (max_inbound_budget). Cut at a cap, a health
// watch ends and the caller's channel takes this server out of rotation
// until a new watch answers. `table`, when given, is only read during the
// call.
[[nodiscard]] BudgetPolicy InboundPolicy(const BudgetPolicy& resolved,
                                         absl::string_view full_method, const PolicyTable* table);

}  // namespace hopbudget

#endif  // HOPBUDGET_ADVANCED_POLICY_TABLE_H_
