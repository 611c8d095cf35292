// Copyright hopbudget authors.
//
// label_table.h (internal): interns metric label values into small indexes
// without a lock, so that a counter array can be indexed on the hot path.
//
// Capacity is fixed: index 0 is the fold-in value ("other"), and at most
// kCapacity - 1 admitted values get an index of their own, in first-seen
// order; later ones fold into 0. A lookup of a known value is a hash, a few
// probes and one string compare; the first sight of a value allocates once.
// Refused values are remembered too (up to kCapacity of them), so that
// asking `admit` again, which may be slow, is the exception.
#ifndef HOPBUDGET_INTERNAL_LABEL_TABLE_H_
#define HOPBUDGET_INTERNAL_LABEL_TABLE_H_

#include <array>
#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"

namespace hopbudget {
namespace internal {

template <int kCapacity>
class LabelTable {
 public:
  // `admit` decides whether a new value deserves an index of its own; it is
  // called on first sight only (and again for values it refused).
  explicit LabelTable(std::function<bool(absl::string_view)> admit) : admit_(std::move(admit)) {}
  LabelTable(const LabelTable&) = delete;
  LabelTable& operator=(const LabelTable&) = delete;
  ~LabelTable() {
    for (auto& slot : slots_) delete slot.load(std::memory_order_relaxed);
  }

  int Intern(absl::string_view value) {
    const size_t h = absl::Hash<absl::string_view>()(value);
    for (size_t i = 0; i < kSlots; ++i) {
      std::atomic<Entry*>& slot = slots_[(h + i) % kSlots];
      Entry* e = slot.load(std::memory_order_acquire);
      if (e == nullptr) return Insert(slot, h + i, value);
      if (e->name == value) return e->index;
    }
    return 0;
  }

  // The interned values by index; index 0 is "", gaps (lost races) are "".
  std::vector<std::string> Names() const {
    std::vector<std::string> out(kCapacity);
    for (const auto& slot : slots_) {
      if (const Entry* e = slot.load(std::memory_order_acquire); e != nullptr && e->index > 0) {
        out[e->index] = e->name;
      }
    }
    return out;
  }

 private:
  struct Entry {
    std::string name;
    int index;
  };
  // At most 2 * kCapacity entries (admitted and refused): half full at most,
  // which keeps probe sequences short.
  static constexpr size_t kSlots = 4 * kCapacity;

  int Insert(std::atomic<Entry*>& first_free, size_t pos, absl::string_view value) {
    int index = 0;
    if (!admit_(value)) {
      if (refused_.fetch_add(1, std::memory_order_relaxed) >= kCapacity) return 0;
    } else {
      index = next_.fetch_add(1, std::memory_order_relaxed);
      if (index >= kCapacity) return 0;  // full: everything new folds into 0
    }
    auto* mine = new Entry{std::string(value), index};
    std::atomic<Entry*>* slot = &first_free;
    for (size_t i = 0; i < kSlots; ++i) {
      Entry* expected = nullptr;
      if (slot->compare_exchange_strong(expected, mine, std::memory_order_acq_rel)) {
        return index;
      }
      if (expected->name == value) {  // another thread interned it first
        delete mine;
        return expected->index;
      }
      slot = &slots_[(pos + i + 1) % kSlots];
    }
    delete mine;
    return 0;
  }

  const std::function<bool(absl::string_view)> admit_;
  std::atomic<int> next_{1};
  std::atomic<int> refused_{0};
  std::array<std::atomic<Entry*>, kSlots> slots_{};
};

}  // namespace internal
}  // namespace hopbudget

#endif  // HOPBUDGET_INTERNAL_LABEL_TABLE_H_
