// Copyright hopbudget authors.
#include "callback_call.h"

#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <utility>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "google/protobuf/descriptor.h"

namespace hopbudget::demo {

int DemoMethodIndex(absl::string_view service, absl::string_view method) {
  const google::protobuf::ServiceDescriptor* s =
      Order::descriptor()->file()->FindServiceByName(std::string(service));
  const google::protobuf::MethodDescriptor* m =
      s != nullptr ? s->FindMethodByName(std::string(method)) : nullptr;
  if (m == nullptr) {
    std::cerr << "demo: no method " << service << "." << method << " in demo.proto\n";
    std::abort();
  }
  return m->index();
}

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
  // No cancel comes before Begin() returns (gRPC binds the reactor then),
  // so the alarm is in place before OnCancel() can look for it.
  {
    std::lock_guard<std::mutex> lock(mu_);
    alarm_ = std::make_unique<grpc::Alarm>();
    phase_ = Phase::kWaiting;
  }
  alarm_->Set(absl::ToChronoTime(absl::Now() + start_.latency),
              [this](bool fired) { AfterWait(fired); });
  return this;
}

void DemoUnaryCall::AfterWait(bool waited) {
  bool cancelled = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled = cancelled_ || !waited;
    if (!cancelled) {
      phase_ = Phase::kWorking;
      in_work_ = true;  // from here until the end of this function
    }
  }
  if (cancelled) {
    Stop();
    return;
  }
  Proceed();
  absl::optional<grpc::Status> deferred;
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_work_ = false;
    deferred.swap(deferred_);
  }
  if (deferred.has_value()) Send(*std::move(deferred));
}

void DemoUnaryCall::Proceed() {
  process_.AfterLatency(start_);
  if (start_.done) {
    Answer(start_.status);
    return;
  }
  if (start_.fault == FaultAction::kHang) {
    bool cancelled = false;
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
  absl::InlinedVector<std::function<void()>, 2> tracked;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
    phase = phase_;
    tracked.swap(tracked_);  // a Track() from now on cancels at once
  }
  switch (phase) {
    case Phase::kWaiting:
      alarm_->Cancel();  // AfterWait(false) answers
      break;
    case Phase::kHanging:
      Stop();
      break;
    case Phase::kWorking:
      for (std::function<void()>& cancel : tracked) cancel();
      CancelWork();
      break;
    case Phase::kStarting:
      break;  // Begin() or AfterWait() sees the cancel
  }
}

void DemoUnaryCall::Answer(grpc::Status status) {
  if (answered_.exchange(true)) return;
  {
    // An answer from another thread while Work() still runs waits for it
    // to return: once Finish() is called gRPC may delete this call (OnDone)
    // under Work()'s feet.
    std::lock_guard<std::mutex> lock(mu_);
    if (in_work_) {
      deferred_ = std::move(status);
      return;
    }
  }
  Send(std::move(status));
}

void DemoUnaryCall::Send(grpc::Status status) {
  // The handler's work ends with its answer, as a sync handler's ends when
  // it returns; what gRPC then takes to deliver it (a caller that reads
  // slowly, a full connection) is not work of this hop. Copies handed to
  // shielded work keep counting until they end.
  start_.work.reset();
  Finish(std::move(status));
}

}  // namespace hopbudget::demo
