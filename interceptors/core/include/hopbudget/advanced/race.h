// Copyright hopbudget authors.
//
// race.h: a first-success race under one deadline, as pure bookkeeping.
//
// N attempts (to different targets, or different requests) run at once
// under the caller's one deadline. The first that ends OK wins; every
// attempt still running is then cancelled at once and, whatever it answers,
// counted as a cancelled loser, not as a failure. When every attempt has
// failed, the race has failed, and FormatRaceFailure names each attempt's
// code and attribution. The gRPC adapter is hopbudget::Race (race_grpc.h).
//
// RaceTracker is the state machine the adapter drives: OnEnd() for each
// attempt's end says whether to cancel the others and whether the race is
// over (every attempt ended: the adapter answers only then, so that no
// loser's completion outlives the caller's response objects); Cancel() is
// the logical call's own cancel.
//
// Thread safety: RaceTracker is not thread-safe (the adapter holds a lock);
// the free functions are pure.
//
// Example:
//   hopbudget::RaceTracker race(3);
//   hopbudget::RaceStep step = race.OnEnd(1, absl::StatusCode::kOk);
//   if (step.cancel_running) { cancel attempts 0 and 2 }
//   if (step.finished) { answer with race.outcome(), race.winner() }
#ifndef HOPBUDGET_ADVANCED_RACE_H_
#define HOPBUDGET_ADVANCED_RACE_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "hopbudget/advanced/attribution.h"

namespace hopbudget {

inline constexpr int kMaxRaceAttempts = 16;

enum class RaceOutcome : uint8_t {
  kWon = 0,    // an attempt ended OK
  kAllFailed,  // every attempt ended with an error
  kCancelled,  // the logical call was cancelled before any attempt won
};
inline constexpr int kRaceOutcomeCount = 3;
// "won", "all_failed", "cancelled".
const char* RaceOutcomeName(RaceOutcome o);
// RaceOutcome prints as RaceOutcomeName() (AbslStringify; GoogleTest and streams).
template <typename Sink>
void AbslStringify(Sink& sink, RaceOutcome value) {
  sink.Append(RaceOutcomeName(value));
}
inline std::ostream& operator<<(std::ostream& os, RaceOutcome value) {
  return os << RaceOutcomeName(value);
}

enum class RaceFate : uint8_t {
  kRunning = 0,
  kWon,        // the first OK
  kFailed,     // ended with an error before the race was decided
  kLoser,      // still running when another won: cancelled, not a failure
  kCancelled,  // still running when the logical call was cancelled
};
// "running", "won", "failed", "loser", "cancelled".
const char* RaceFateName(RaceFate f);
// RaceFate prints as RaceFateName() (AbslStringify; GoogleTest and streams).
template <typename Sink>
void AbslStringify(Sink& sink, RaceFate value) {
  sink.Append(RaceFateName(value));
}
inline std::ostream& operator<<(std::ostream& os, RaceFate value) {
  return os << RaceFateName(value);
}

struct RaceStep {
  bool cancel_running = false;  // cancel every attempt still running, now
  bool finished = false;        // every attempt has ended: answer
};

class RaceTracker {
 public:
  // `attempts` in 1..kMaxRaceAttempts (checked by ValidateRaceSize).
  explicit RaceTracker(int attempts);

  // Attempt `i` ended with `code`. Ends of an attempt already ended, or out
  // of range, are ignored (an empty step).
  RaceStep OnEnd(int i, absl::StatusCode code);
  // The logical call is cancelled: true (cancel every running attempt) when
  // the race was still undecided.
  bool Cancel();

  bool decided() const { return decided_; }
  RaceOutcome outcome() const { return outcome_; }
  int winner() const { return winner_; }  // -1 unless kWon
  RaceFate fate(int i) const { return fates_[i]; }
  int size() const { return static_cast<int>(fates_.size()); }
  int running() const { return running_; }
  // Attempts counted as cancelled losers.
  int losers() const;

 private:
  std::vector<RaceFate> fates_;
  int running_;
  bool decided_ = false;
  RaceOutcome outcome_ = RaceOutcome::kAllFailed;
  int winner_ = -1;
};

// InvalidArgument unless 1 <= attempts <= kMaxRaceAttempts.
absl::Status ValidateRaceSize(int attempts);

// One attempt as the race's failure names it.
struct RaceAttemptSummary {
  absl::StatusCode code = absl::StatusCode::kUnknown;
  absl::optional<Attribution> attribution;  // when it was a hopbudget DEADLINE_EXCEEDED
};

// "race of 2 lost by every attempt: #0 UNAVAILABLE; #1 DEADLINE_EXCEEDED
// source=attempt hop=orders budget_ms=100 elapsed_ms=101". It does not start
// with "hopbudget", so that a status message ending in it still parses as
// the attribution it starts with (attribution.h grammar: a note).
std::string FormatRaceFailure(const std::vector<RaceAttemptSummary>& attempts);

}  // namespace hopbudget

#endif  // HOPBUDGET_ADVANCED_RACE_H_
