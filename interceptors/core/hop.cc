#include "hopbudget/hop.h"

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "hopbudget/advanced/attribution.h"
#include "hopbudget/advanced/service_config.h"
#include "metrics_recorder.h"
#include "sync.h"

namespace hopbudget {

// One table and the resolutions made in it, per method label.
struct Hop::Table {
  Table(ServiceConfigPolicies c, uint64_t g) : config(std::move(c)), generation(g) {}
  const ServiceConfigPolicies config;
  const uint64_t generation;
  // by_method[i]: the policy of the method labelled i, once resolved.
  // Two threads may resolve the same method at once; both store the same
  // pointer.
  mutable std::array<std::atomic<const MethodPolicy*>, kMaxMethodLabels> by_method{};
};

struct Hop::Tables {
  internal::Mutex mu;  // serializes reloads
  std::vector<std::unique_ptr<Table>> all ABSL_GUARDED_BY(mu);
};

namespace {

absl::StatusOr<ServiceConfigPolicies> Read(absl::string_view json, const MethodPolicy& defaults,
                                           NameCheck check) {
  absl::StatusOr<ServiceConfigPolicies> config =
      PolicyTableFromServiceConfig(json.empty() ? absl::string_view("{}") : json, defaults);
  if (!config.ok() || check == NameCheck::kNone) return config;
  const google::protobuf::DescriptorPool& pool =
      *google::protobuf::DescriptorPool::generated_pool();
  absl::Status names = config->table.CheckNames(
      [&](absl::string_view service) {
        return pool.FindServiceByName(std::string(service)) != nullptr;
      },
      [&](absl::string_view service, absl::string_view method) {
        return pool.FindMethodByName(absl::StrCat(service, ".", method)) != nullptr;
      },
      "what this program does not link (no generated code for it; HopOptions::check_names)");
  if (!names.ok())
    return absl::InvalidArgumentError(absl::StrCat("service config: ", names.message()));
  return config;
}

}  // namespace

Hop::Hop(std::string name, Clock* clock, Metrics* metrics, MethodPolicy defaults,
         NameCheck check_names)
    : name_(std::move(name)),
      clock_(clock),
      metrics_(metrics),
      defaults_(std::move(defaults)),
      check_names_(check_names),
      tables_(std::make_unique<Tables>()) {}

Hop::~Hop() = default;

absl::StatusOr<std::unique_ptr<Hop>> Hop::Create(HopOptions options) {
  if (absl::Status s = ValidateHopName(options.name); !s.ok()) return s;
  absl::StatusOr<ServiceConfigPolicies> config =
      Read(options.service_config, options.defaults, options.check_names);
  if (!config.ok()) return config.status();
  std::unique_ptr<Hop> hop(
      new Hop(std::move(options.name), options.clock != nullptr ? options.clock : &Clock::Real(),
              options.metrics != nullptr ? options.metrics : &Metrics::Default(),
              std::move(options.defaults), options.check_names));
  internal::MutexLock lock(&hop->tables_->mu);
  hop->tables_->all.push_back(std::make_unique<Table>(*std::move(config), 1));
  hop->current_.store(hop->tables_->all.back().get(), std::memory_order_release);
  internal::Record(*hop->metrics_).SetConfigGeneration(1);
  return hop;
}

const Hop::Table& Hop::Current() const { return *current_.load(std::memory_order_acquire); }

Hop::Resolved Hop::Resolve(MethodId method, absl::string_view full_method) const {
  const Table& t = Current();
  const MethodPolicy* table_default = &t.config.table.Default();
  if (method.index <= 0 || method.index >= kMaxMethodLabels) {
    return {&t.config.table.Resolve(full_method), table_default};
  }
  std::atomic<const MethodPolicy*>& slot = t.by_method[method.index];
  const MethodPolicy* p = slot.load(std::memory_order_acquire);
  if (p == nullptr) {
    p = &t.config.table.Resolve(full_method);
    slot.store(p, std::memory_order_release);
  }
  return {p, table_default};
}

const PolicyTable& Hop::policies() const { return Current().config.table; }
const absl::optional<RetryThrottleOptions>& Hop::retry_throttling() const {
  return Current().config.retry_throttling;
}
const std::string& Hop::core_service_config() const { return Current().config.core_json; }
uint64_t Hop::generation() const { return Current().generation; }

absl::Status Hop::RefuseReload(absl::Status why) const {
  internal::Record(*metrics_).CountConfigReload(ConfigReload::kRefused);
  std::fprintf(stderr, "hopbudget: %s: service config reload refused, generation %llu kept: %s\n",
               name_.c_str(), static_cast<unsigned long long>(generation()),
               std::string(why.message()).c_str());
  return why;
}

absl::Status Hop::ReloadServiceConfigFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return RefuseReload(absl::NotFoundError(absl::StrCat(path, ": cannot open it")));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return RefuseReload(absl::DataLossError(absl::StrCat(path, ": cannot read it")));
  return ReloadServiceConfig(text.str());
}

absl::Status Hop::ReloadServiceConfig(absl::string_view json) {
  absl::StatusOr<ServiceConfigPolicies> config = Read(json, defaults_, check_names_);
  if (!config.ok()) return RefuseReload(config.status());
  uint64_t next;
  {
    internal::MutexLock lock(&tables_->mu);
    next = Current().generation + 1;
    tables_->all.push_back(std::make_unique<Table>(*std::move(config), next));
    current_.store(tables_->all.back().get(), std::memory_order_release);
    internal::Record(*metrics_).CountConfigReload(ConfigReload::kApplied);
    internal::Record(*metrics_).SetConfigGeneration(static_cast<int64_t>(next));
  }
  std::fprintf(stderr, "hopbudget: %s: service config reloaded, generation %llu\n", name_.c_str(),
               static_cast<unsigned long long>(next));
  return absl::OkStatus();
}

}  // namespace hopbudget
