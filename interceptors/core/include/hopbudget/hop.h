// Copyright hopbudget authors.
//
// hop.h: one object per process that says who this hop is to hopbudget.
//
// A `Hop` holds the hop's name (in every attribution and metric), its
// clock, its metrics and its policy table: each method's budgets, read from
// the gRPC service config the team already has (service_config.h). Every
// hopbudget part made from one Hop uses the same name, clock and table, so
// they cannot disagree.
//
// The table can be replaced while the process serves
// (ReloadServiceConfig): a config that does not read or does not validate is
// refused and the table in force is kept. A call resolves its method's
// policy once (PolicyFor) and keeps it, so it sees the old table or the new
// one, never a mix. Every table a Hop has used stays alive until the Hop is
// destroyed (tables are small; reloads are rare), so the references
// PolicyFor returns stay valid as long as the Hop.
//
// Edge cases: an empty service config ("", or "{}") gives every method
// HopOptions::defaults. A method the table does not name gets the table's
// default entry, else HopOptions::defaults.
//
// Ownership: `clock` and `metrics` are not owned and must outlive the Hop;
// the Hop must outlive everything made from it (servers, channels, loops).
//
// Thread safety: every method may be called concurrently. PolicyFor takes
// no lock and allocates nothing once a method has been resolved;
// ReloadServiceConfig serializes with itself.
//
// Example:
//   hopbudget::HopOptions options;
//   options.name = "orders";
//   options.service_config = ReadFile("orders_service_config.json");
//   absl::StatusOr<std::unique_ptr<hopbudget::Hop>> hop =
//       hopbudget::Hop::Create(std::move(options));
//   if (!hop.ok()) return hop.status();  // names the method and the numbers
#ifndef HOPBUDGET_HOP_H_
#define HOPBUDGET_HOP_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "hopbudget/advanced/clock.h"
#include "hopbudget/advanced/metrics.h"
#include "hopbudget/advanced/policy_table.h"
#include "hopbudget/advanced/retry_policy.h"

namespace hopbudget {

// Which names a Hop's service config may use.
enum class NameCheck {
  // Every service and method it names is linked into this program: its
  // generated code (a service served or a stub called) is in protobuf's
  // generated pool. A name that matches nothing is a typo that would
  // silently leave its method on the defaults.
  kLinked,
  // Any name: for a config shared by programs that each link part of it.
  kNone,
};
// Stable names: "linked", "none". AbslStringify and operator<< print them.
inline absl::string_view NameCheckName(NameCheck value) {
  return value == NameCheck::kLinked ? "linked" : "none";
}
template <typename Sink>
void AbslStringify(Sink& sink, NameCheck value) {
  sink.Append(NameCheckName(value));
}
inline std::ostream& operator<<(std::ostream& os, NameCheck value) {
  return os << NameCheckName(value);
}

struct HopOptions {
  // This hop's name in attribution and metrics: 1..64 characters of
  // [A-Za-z0-9._-]. Required.
  std::string name;
  // Not owned. Defaults (nullptr): Clock::Real(), Metrics::Default().
  Clock* clock = nullptr;
  Metrics* metrics = nullptr;
  // The policy of every method the service config does not set.
  MethodPolicy defaults;
  // A gRPC service config's JSON (with hopbudget's section, if any); "" for
  // none.
  std::string service_config;
  // Checked at Create and at every reload.
  NameCheck check_names = NameCheck::kLinked;
};

class Hop {
 public:
  // Validates the name and reads the service config (PolicyTableFromServiceConfig:
  // InvalidArgument naming the method and the numbers), then checks its
  // names (HopOptions::check_names: InvalidArgument listing the unknown
  // ones).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Hop>> Create(HopOptions options);

  ~Hop();
  Hop(const Hop&) = delete;
  Hop& operator=(const Hop&) = delete;

  const std::string& name() const { return name_; }
  Clock& clock() const { return *clock_; }
  Metrics& metrics() const { return *metrics_; }

  // The policy of `full_method` ("/pkg.Service/Method") in the table in
  // force. `method` is metrics().Method(full_method): its resolution is kept
  // per table, so later calls of the method take one atomic load. A method
  // without a label of its own ("other") is resolved by name every time.
  const MethodPolicy& PolicyFor(MethodId method, absl::string_view full_method) const {
    return *Resolve(method, full_method).method;
  }
  // The same, with the default entry of the same table: a caller that needs
  // both (the server: a method's caps, the default's attempt cap) never
  // mixes two tables when a reload comes between its reads.
  struct Resolved {
    const MethodPolicy* method;
    const MethodPolicy* table_default;
  };
  Resolved Resolve(MethodId method, absl::string_view full_method) const;

  // The table in force, the config's retryThrottling, and the service config
  // to hand gRPC core (ServiceConfigPolicies), read now: each reference
  // stays valid as long as the Hop, and a reload makes the next read see
  // the new table.
  const PolicyTable& policies() const;
  const absl::optional<RetryThrottleOptions>& retry_throttling() const;
  const std::string& core_service_config() const;
  // 1 for the table Create made, one more per successful reload.
  uint64_t generation() const;

  // Replaces the table with the one `json` gives (with the same defaults).
  // On an error (as Create's) the table in force is kept. Either way one
  // line goes to stderr and metrics() counts it
  // (hopbudget_config_reloads_total{result}, hopbudget_config_generation).
  absl::Status ReloadServiceConfig(absl::string_view json);
  // The same with the contents of the file at `path` (a SIGHUP handler's
  // call). A file that cannot be read is refused as a config that does not
  // read is: NotFound naming the path, the table in force kept, one line
  // and one count.
  absl::Status ReloadServiceConfigFile(const std::string& path);

 private:
  struct Table;
  Hop(std::string name, Clock* clock, Metrics* metrics, MethodPolicy defaults,
      NameCheck check_names);
  const Table& Current() const;
  // Counts and logs a refused reload; returns `why`.
  absl::Status RefuseReload(absl::Status why) const;

  struct Tables;  // every table made, and the lock reloads take

  const std::string name_;
  Clock* const clock_;
  Metrics* const metrics_;
  const MethodPolicy defaults_;
  const NameCheck check_names_;
  const std::unique_ptr<Tables> tables_;
  std::atomic<const Table*> current_{nullptr};
};

}  // namespace hopbudget

#endif  // HOPBUDGET_HOP_H_
