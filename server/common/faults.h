// Copyright hopbudget authors.
//
// faults.h: what a demo service does wrong on purpose. Pure decision logic:
// FaultInjector says what to do with the next call; the service does it.
//
//   hopbudget::demo::FaultInjector faults(/*seed=*/42);
//   faults.Set(*hopbudget::demo::ParseFaultFlags("exp:20ms", 0.1, 0.0, 0, absl::ZeroDuration()));
//   hopbudget::demo::FaultDecision d = faults.Decide();
//   // sleep d.latency, then: kError -> UNAVAILABLE, kHang -> wait until cancelled
//
// Determinism: one seeded generator (std::mt19937_64) per injector; each
// Decide() draws the same number of values in the same order whatever the
// configuration, so a run with the same seed and the same call order makes
// the same decisions. Concurrent calls make the call order (and so which
// call gets which decision) depend on scheduling; the totals do not.
//
// Thread safety: all methods may be called concurrently.
#ifndef HOPBUDGET_DEMO_FAULTS_H_
#define HOPBUDGET_DEMO_FAULTS_H_

#include <cstdint>
#include <random>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace hopbudget::demo {

enum class LatencyKind { kNone, kFixed, kUniform, kExponential, kSpike };

struct LatencySpec {
  LatencyKind kind = LatencyKind::kNone;
  absl::Duration a = absl::ZeroDuration();  // fixed value, uniform low, exponential mean, spike
  absl::Duration b = absl::ZeroDuration();  // uniform high
  double fraction = 0;                      // spike: the fraction of calls that wait `a`
};

// "none" (or ""), "fixed:100ms", "uniform:50ms-200ms" (low <= high),
// "exp:100ms" (mean > 0), "spike:5%:1s" (5 % of calls wait 1 s, the others
// none: a replica that is slow now and then, the tail hedging is for; the
// fraction is a percentage in [0, 100] with `%`, or a probability in
// [0, 1] without; the latency > 0). InvalidArgument naming the spec
// otherwise.
absl::StatusOr<LatencySpec> ParseLatencySpec(absl::string_view text);
// Inverse of ParseLatencySpec.
std::string FormatLatencySpec(const LatencySpec& spec);

struct FaultConfig {
  LatencySpec latency;
  double error_rate = 0;                              // UNAVAILABLE, in [0, 1]
  double hang_rate = 0;                               // never answer until cancelled, in [0, 1]
  int hang_next = 0;                                  // the next N calls hang, >= 0
  absl::Duration slow_commit = absl::ZeroDuration();  // ledger only, >= 0
  // Ledger only: its WatchOrder streams send no message while this is set,
  // but stay open (a peer that stopped talking without hanging up). A
  // watch already running goes silent from its next message on.
  bool silence = false;
};

// Rates in [0, 1], error_rate + hang_rate <= 1, hang_next >= 0, slow_commit
// >= 0 and finite, latency parameters >= 0 and finite.
absl::Status ValidateFaultConfig(const FaultConfig& config);

// The faults a hop can inject: latency, errors and hangs everywhere; a slow
// commit and a silent watch only where there is a commit and a watch source
// (the ledger). A fault a hop cannot inject is refused, not accepted and
// silently ignored.
struct FaultSupport {
  bool slow_commit = false;
  bool silence = false;
};

// What the ledger supports; every other hop: FaultSupport().
inline FaultSupport LedgerFaultSupport() {
  FaultSupport s;
  s.slow_commit = true;
  s.silence = true;
  return s;
}

// InvalidArgument naming the fault and `hop` when `config` asks for one
// `support` lacks ("gateway cannot inject slow-commit: only the ledger
// commits").
absl::Status CheckFaultsSupported(const FaultConfig& config, const FaultSupport& support,
                                  absl::string_view hop);

enum class FaultAction {
  kProceed,  // do the work (after `latency`)
  kError,    // answer UNAVAILABLE (after `latency`)
  kHang,     // never answer; end only when the call is cancelled
};

absl::string_view FaultActionName(FaultAction action);

struct FaultDecision {
  FaultAction action = FaultAction::kProceed;
  absl::Duration latency = absl::ZeroDuration();
};

class FaultInjector {
 public:
  explicit FaultInjector(uint64_t seed, FaultConfig config = {});

  // Replaces the configuration (validated; unchanged on error). The
  // generator keeps its state: changing faults does not replay a sequence.
  absl::Status Set(const FaultConfig& config);
  FaultConfig config() const;

  // The fault for the next call. hang_next comes first (and counts down),
  // then one uniform draw decides hang (< hang_rate) or error (< hang_rate +
  // error_rate), and one more draw gives the latency (for a spike: `a` when
  // the draw is < fraction, else none).
  FaultDecision Decide();

 private:
  mutable absl::Mutex mu_;
  FaultConfig config_ ABSL_GUARDED_BY(mu_);
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hopbudget::demo

#endif  // HOPBUDGET_DEMO_FAULTS_H_
