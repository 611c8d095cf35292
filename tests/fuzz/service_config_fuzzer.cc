// Copyright hopbudget authors.
//
// libFuzzer target: a gRPC service config (with hopbudget's section) is
// read at start and on every reload, from a file an operator edits.
// Whatever the bytes, PolicyTableFromServiceConfig either gives a table
// whose every entry validates and whose lookups answer, or an
// InvalidArgument that says it is the service config's and holds no
// newline (protobuf's excerpt of the input is turned into a line and a
// column).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/match.h"
#include "hopbudget/advanced/service_config.h"

namespace {
[[noreturn]] void Die(const char* what, const absl::Status& status) {
  std::fprintf(stderr, "service_config_fuzzer: %s: %s\n", what, status.ToString().c_str());
  std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view in(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<hopbudget::ServiceConfigPolicies> p =
      hopbudget::PolicyTableFromServiceConfig(in, hopbudget::MethodPolicy{});
  if (!p.ok()) {
    if (p.status().code() != absl::StatusCode::kInvalidArgument)
      Die("not InvalidArgument", p.status());
    if (!absl::StartsWith(p.status().message(), "service config: ")) Die("unnamed", p.status());
    if (absl::StrContains(p.status().message(), "\n")) Die("two lines", p.status());
    return 0;
  }
  for (const std::string& key : p->table.Keys()) {
    const hopbudget::MethodPolicy* m = p->table.Find(key);
    if (m == nullptr) Die("a key without its policy", absl::OkStatus());
    if (absl::Status s = hopbudget::ValidateMethodPolicy(*m); !s.ok())
      Die("an entry does not validate", s);
  }
  (void)p->table.Resolve("/a.B/C");
  (void)p->table.Resolve(in);
  // What gRPC core gets reads again (without hopbudget's section its
  // entries may not nest under the defaults: not validated). Retries are
  // left in it only for methods in shadow mode, which hopbudget leaves to
  // core; retryThrottling only when some are.
  absl::StatusOr<hopbudget::ServiceConfigEntries> again =
      hopbudget::ReadServiceConfig(p->core_json, hopbudget::MethodPolicy{});
  if (!again.ok()) Die("what core gets does not read again", again.status());
  bool core_retries = false;
  for (const auto& [key, m] : again->entries) {
    if (!m.retry.has_value() && !m.hedge.has_value()) continue;
    core_retries = true;
    const hopbudget::MethodPolicy* mine = p->table.Find(key);
    if (mine == nullptr || !mine->shadow) {
      Die("core gets a retry or a hedge of a method not in shadow mode", absl::OkStatus());
    }
  }
  if (again->retry_throttling.has_value() && !core_retries) {
    Die("core gets retryThrottling without a retry of its own", absl::OkStatus());
  }
  return 0;
}
