// Copyright hopbudget authors.
#include "accounting.h"

#include <algorithm>

namespace hopbudget::demo {

std::shared_ptr<DeadlineAccounting::Work> DeadlineAccounting::Begin(
    absl::optional<absl::Time> client_deadline) {
  const absl::Time now = clock_->Now();
  std::shared_ptr<Work> work(new Work(this, now, client_deadline));
  absl::MutexLock lock(&mu_);
  ++totals_.calls;
  ++totals_.in_flight;
  if (work->started_late()) ++totals_.started_after_deadline;
  return work;
}

DeadlineAccounting::Work::~Work() { owner_->End(*this); }

void DeadlineAccounting::End(const Work& work) {
  const absl::Time end = clock_->Now();
  absl::MutexLock lock(&mu_);
  --totals_.in_flight;
  totals_.last_end = std::max(totals_.last_end, end);
  if (work.deadline_.has_value()) {
    const absl::Time from = std::max(work.start_, *work.deadline_);
    if (end > from) totals_.work_after_deadline += end - from;
  }
}

AccountingSnapshot DeadlineAccounting::Snapshot() const {
  absl::MutexLock lock(&mu_);
  return totals_;
}

bool DeadlineAccounting::AwaitIdle(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return totals_.in_flight == 0; };
  return mu_.AwaitWithTimeout(absl::Condition(&idle), timeout);
}

void DeadlineAccounting::Reset() {
  absl::MutexLock lock(&mu_);
  const int64_t in_flight = totals_.in_flight;
  totals_ = AccountingSnapshot{};
  totals_.in_flight = in_flight;
}

}  // namespace hopbudget::demo
