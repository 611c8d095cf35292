// Copyright hopbudget authors.
//
// accounting.h: how much work a demo service does after its client has given
// up. Measured the same way whatever the mode, from the demo-only header
// `x-demo-client-deadline-us` (proto/demo/client_deadline.h: the load
// client's absolute deadline), which services forward downstream and use for
// accounting ONLY: never to decide anything (that would make the baseline a
// hopbudget).
//
//   hopbudget::demo::DeadlineAccounting accounting;
//   auto work = accounting.Begin(hopbudget::demo::ClientDeadlineOf(*ctx));
//   ... handler work; copies of `work` may go to shielded work ...
//   // the work ends when the last copy of `work` is destroyed
//
// Per process it counts: calls (work started), calls started after the
// client deadline, and the time spent working after it: for one piece of work
// from start to end, max(0, end - max(start, deadline)).
//
// Thread safety: all methods may be called concurrently; a token may be
// destroyed on any thread. The accounting must outlive its tokens.
#ifndef HOPBUDGET_DEMO_ACCOUNTING_H_
#define HOPBUDGET_DEMO_ACCOUNTING_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "demo/client_deadline.h"
#include "hopbudget/advanced/clock.h"

namespace hopbudget::demo {

struct AccountingSnapshot {
  int64_t calls = 0;
  int64_t started_after_deadline = 0;
  int64_t in_flight = 0;
  absl::Duration work_after_deadline = absl::ZeroDuration();
  absl::Time last_end = absl::InfinitePast();
};

class DeadlineAccounting {
 public:
  class Work {
   public:
    ~Work();
    Work(const Work&) = delete;
    Work& operator=(const Work&) = delete;
    absl::Time start() const { return start_; }
    // True when the work started after the client deadline had passed.
    bool started_late() const { return deadline_.has_value() && start_ > *deadline_; }

   private:
    friend class DeadlineAccounting;
    Work(DeadlineAccounting* owner, absl::Time start, absl::optional<absl::Time> deadline)
        : owner_(owner), start_(start), deadline_(deadline) {}
    DeadlineAccounting* owner_;
    absl::Time start_;
    absl::optional<absl::Time> deadline_;
  };

  explicit DeadlineAccounting(Clock* clock = nullptr)
      : clock_(clock != nullptr ? clock : &Clock::Real()) {}

  // Starts one piece of work now; it ends when the last copy of the result
  // is destroyed.
  std::shared_ptr<Work> Begin(absl::optional<absl::Time> client_deadline);

  AccountingSnapshot Snapshot() const;
  // Waits (real time) until no work is in flight: true, or false when
  // `timeout` passed first. Shutdown uses it to know that only streams no
  // handler serves (health Watch) are left.
  bool AwaitIdle(absl::Duration timeout) const;
  // Zeroes the counters; work in flight still ends and is counted.
  void Reset();

 private:
  void End(const Work& work);

  Clock* const clock_;
  mutable absl::Mutex mu_;
  AccountingSnapshot totals_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hopbudget::demo

#endif  // HOPBUDGET_DEMO_ACCOUNTING_H_
