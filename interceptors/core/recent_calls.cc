// Copyright hopbudget authors.
//
// recent_calls.cc: the sampled ring of recent calls behind /deadlinez.
// Apart from the counters because it is the registry's one part with locks
// and copies of whole calls: what it keeps, and how rarely, is decided here
// (a sample on arrival, failures at most every kRecentFailureInterval).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <utility>
#include <vector>

#include "call_mutex.h"
#include "hopbudget/advanced/metrics.h"
#include "metrics_cells.h"

namespace hopbudget {

using internal::kRelaxed;

namespace {
// Claims the right to record with a compare-exchange on the last time, so
// that of many calls arriving or finishing together one is kept.
bool Claim(std::atomic<int64_t>& last, int64_t now, absl::Duration interval) {
  int64_t seen = last.load(kRelaxed);
  return now - seen >= absl::ToInt64Nanoseconds(interval) &&
         last.compare_exchange_strong(seen, now, kRelaxed);
}
}  // namespace

bool Metrics::SampleOnArrival(absl::Time now) {
  return Claim(cells_->recent_last_ns, absl::ToUnixNanos(now), kRecentCallInterval);
}

void Metrics::RecordRecentCall(absl::StatusCode code, bool sampled,
                               absl::FunctionRef<RecentCall()> make) {
  const bool keep = sampled || (code != absl::StatusCode::kOk &&
                                Claim(cells_->recent_last_failure_ns,
                                      absl::ToUnixNanos(clock_.Now()), kRecentFailureInterval));
  if (!keep) return;
  RecentCall call = make();
  const uint64_t seq = cells_->recent_next.fetch_add(1, kRelaxed);
  internal::RecentSlot& slot = cells_->recent[seq % kRecentCallCapacity];
  internal::CallMutexLock lock(&slot.mu);
  if (slot.used && slot.seq > seq) return;  // a newer call already took the slot
  slot.used = true;
  slot.seq = seq;
  slot.call = std::move(call);
}

std::vector<RecentCall> Metrics::RecentCalls() const {
  std::vector<std::pair<uint64_t, RecentCall>> calls;
  for (const internal::RecentSlot& slot : cells_->recent) {
    internal::CallMutexLock lock(&slot.mu);
    if (slot.used) calls.emplace_back(slot.seq, slot.call);
  }
  std::sort(calls.begin(), calls.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<RecentCall> out;
  out.reserve(calls.size());
  for (auto& c : calls) out.push_back(std::move(c.second));
  return out;
}

}  // namespace hopbudget
