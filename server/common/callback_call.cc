// Copyright hopbudget authors.
#include "callback_call.h"

#include <utility>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace hopbudget::demo {

grpc::ServerUnaryReactor* DemoUnaryCall::Begin() {
  start_ = process_.Start(*ctx_);
  if (start_.done) {
    Answer(start_.status);
    return this;
  }
  if (start_.latency <= absl::ZeroDuration()) {
    AfterWait(true);
    return this;
  }
  bool cancelled = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled = cancelled_;
    if (!cancelled) phase_ = Phase::kWaiting;
  }
  if (cancelled) {
    Stop();
    return this;
  }
  // A cancel from here on cancels the alarm; one that comes before Set()
  // is seen by AfterWait().
  alarm_.Set(absl::ToChronoTime(absl::Now() + start_.latency),
             [this](bool fired) { AfterWait(fired); });
  return this;
}

void DemoUnaryCall::AfterWait(bool waited) {
  bool cancelled = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled = cancelled_ || !waited;
    if (!cancelled) phase_ = Phase::kWorking;
  }
  if (cancelled) {
    Stop();
    return;
  }
  process_.AfterLatency(start_);
  if (start_.done) {
    Answer(start_.status);
    return;
  }
  if (start_.fault == FaultAction::kHang) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled = cancelled_;
      phase_ = Phase::kHanging;
    }
    if (cancelled) Stop();  // else OnCancel() ends it
    return;
  }
  Work();
}

void DemoUnaryCall::OnCancel() {
  Phase phase;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
    phase = phase_;
  }
  switch (phase) {
    case Phase::kWaiting:
      alarm_.Cancel();  // AfterWait(false) answers
      break;
    case Phase::kHanging:
      Stop();
      break;
    case Phase::kStarting:
    case Phase::kWorking:
      // Starting: Begin() or AfterWait() sees the cancel. Working: the
      // work's downstream call is a child of this one and ends with it.
      break;
  }
}

void DemoUnaryCall::Answer(grpc::Status status) {
  if (answered_.exchange(true)) return;
  Finish(std::move(status));
}

}  // namespace hopbudget::demo
