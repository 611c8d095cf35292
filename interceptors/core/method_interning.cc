// Copyright hopbudget authors.
//
// method_interning.cc: a full method name to its label index, once per call.
// Apart from the recording because it is the one place that asks the
// protobuf descriptor pool which methods the binary knows (the bound on the
// `method` label's cardinality), and the one lookup on a call's path that is
// not a constant offset.
#include <google/protobuf/descriptor.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "hopbudget/advanced/metrics.h"
#include "metrics_cells.h"

namespace hopbudget {
namespace internal {

// "/pkg.Service/Method" -> "pkg.Service.Method", the descriptor's full name.
bool KnownToDescriptorPool(absl::string_view method) {
  if (method.size() < 4 || method[0] != '/') return false;
  std::string name(method.substr(1));
  const size_t slash = name.rfind('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == name.size()) return false;
  name[slash] = '.';
  return google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(name) != nullptr;
}

}  // namespace internal

MethodId Metrics::Method(absl::string_view full_method) {
  auto& slot = cells_->method_cache[(reinterpret_cast<uintptr_t>(full_method.data()) >> 4) %
                                    cells_->method_cache.size()];
  const internal::MetricsCells::MethodCacheEntry* cached = slot.load(std::memory_order_acquire);
  // The name is compared too: an address may hold another name later (a
  // generic call's method string).
  if (cached != nullptr && cached->data == full_method.data() && cached->name == full_method) {
    return cached->id;
  }
  const MethodId id{cells_->method_labels.Intern(full_method)};
  if (cached == nullptr) {
    auto* mine = new internal::MetricsCells::MethodCacheEntry{full_method.data(),
                                                              std::string(full_method), id};
    if (!slot.compare_exchange_strong(cached, mine, std::memory_order_acq_rel)) delete mine;
  }
  return id;
}

}  // namespace hopbudget
