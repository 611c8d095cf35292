// Copyright hopbudget authors.
//
// metrics_recorder.h: the library's write access to a Metrics registry.
// Internal: users read a registry (Snapshot, RecentCalls); the
// interceptors, channels, loops and shields record through this.
//
//   internal::Record(metrics).CountLeak(LeakKind::kCancelled);
//
// A MetricsRecorder is a reference: it lives no longer than the registry
// and costs nothing (each call is the registry's own, inlined).
#ifndef HOPBUDGET_METRICS_RECORDER_H_
#define HOPBUDGET_METRICS_RECORDER_H_

#include <utility>

#include "hopbudget/advanced/metrics.h"

namespace hopbudget {
namespace internal {

class MetricsRecorder {
 public:
  explicit MetricsRecorder(Metrics& metrics) : metrics_(metrics) {}

#define HOPBUDGET_RECORD(name)                         \
  template <typename... Args>                          \
  decltype(auto) name(Args&&... args) const {          \
    return metrics_.name(std::forward<Args>(args)...); \
  }
  HOPBUDGET_RECORD(CountCallEnd)
  HOPBUDGET_RECORD(EndServerCall)
  HOPBUDGET_RECORD(EndClientAttempt)
  HOPBUDGET_RECORD(EndRetryingCall)
  HOPBUDGET_RECORD(ObserveLatency)
  HOPBUDGET_RECORD(CountDeadlineExceeded)
  HOPBUDGET_RECORD(ObserveBudgetAtArrival)
  HOPBUDGET_RECORD(ObserveRequestBudget)
  HOPBUDGET_RECORD(ObserveArrivalBudgets)
  HOPBUDGET_RECORD(ObserveBudgetRemaining)
  HOPBUDGET_RECORD(CountBadBudgetHeader)
  HOPBUDGET_RECORD(CountBadAttribution)
  HOPBUDGET_RECORD(CountLeak)
  HOPBUDGET_RECORD(CountTimerArmed)
  HOPBUDGET_RECORD(ObserveBackendWait)
  HOPBUDGET_RECORD(ObserveTransitDelay)
  HOPBUDGET_RECORD(CountRetryDecision)
  HOPBUDGET_RECORD(CountRetry)
  HOPBUDGET_RECORD(CountAttemptsPerCall)
  HOPBUDGET_RECORD(CountBackoffClipped)
  HOPBUDGET_RECORD(CountPushbackHonoured)
  HOPBUDGET_RECORD(CountUnfitPolicyCall)
  HOPBUDGET_RECORD(CountTraceDropped)
  HOPBUDGET_RECORD(CountShield)
  HOPBUDGET_RECORD(CountConfigReload)
  HOPBUDGET_RECORD(SetConfigGeneration)
  HOPBUDGET_RECORD(CountShadow)
  HOPBUDGET_RECORD(AddShieldInFlight)
  HOPBUDGET_RECORD(SampleOnArrival)
  HOPBUDGET_RECORD(RecordRecentCall)
  HOPBUDGET_RECORD(CountRace)
  HOPBUDGET_RECORD(CountHedgedCall)
  HOPBUDGET_RECORD(CountHedgeSkipped)
  HOPBUDGET_RECORD(ObserveSlotWait)
  HOPBUDGET_RECORD(CountSlotRefusal)
  HOPBUDGET_RECORD(CountAdmission)
  HOPBUDGET_RECORD(CountAdmittedAfterWait)
  HOPBUDGET_RECORD(SetAdmissionState)
  HOPBUDGET_RECORD(ObserveAdmittedHandler)
#undef HOPBUDGET_RECORD

 private:
  Metrics& metrics_;
};

inline MetricsRecorder Record(Metrics& metrics) { return MetricsRecorder(metrics); }

}  // namespace internal
}  // namespace hopbudget

#endif  // HOPBUDGET_METRICS_RECORDER_H_
