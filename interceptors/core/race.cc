// Copyright hopbudget authors.
#include "hopbudget/advanced/race.h"

#include "absl/strings/str_cat.h"

namespace hopbudget {

const char* RaceOutcomeName(RaceOutcome o) {
  switch (o) {
    case RaceOutcome::kWon:
      return "won";
    case RaceOutcome::kAllFailed:
      return "all_failed";
    case RaceOutcome::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

const char* RaceFateName(RaceFate f) {
  switch (f) {
    case RaceFate::kRunning:
      return "running";
    case RaceFate::kWon:
      return "won";
    case RaceFate::kFailed:
      return "failed";
    case RaceFate::kLoser:
      return "loser";
    case RaceFate::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

RaceTracker::RaceTracker(int attempts)
    : fates_(static_cast<size_t>(attempts > 0 ? attempts : 0), RaceFate::kRunning),
      running_(attempts > 0 ? attempts : 0) {}

RaceStep RaceTracker::OnEnd(int i, absl::StatusCode code) {
  RaceStep step;
  if (i < 0 || i >= size() || fates_[i] != RaceFate::kRunning) return step;
  --running_;
  if (decided_) {
    // Its answer came after the race was decided: it lost, whatever it says.
    fates_[i] = outcome_ == RaceOutcome::kCancelled ? RaceFate::kCancelled : RaceFate::kLoser;
  } else if (code == absl::StatusCode::kOk) {
    fates_[i] = RaceFate::kWon;
    decided_ = true;
    outcome_ = RaceOutcome::kWon;
    winner_ = i;
    step.cancel_running = running_ > 0;
  } else {
    fates_[i] = RaceFate::kFailed;
    if (running_ == 0) {
      decided_ = true;
      outcome_ = RaceOutcome::kAllFailed;
    }
  }
  step.finished = running_ == 0;
  return step;
}

bool RaceTracker::Cancel() {
  if (decided_) return false;
  decided_ = true;
  outcome_ = RaceOutcome::kCancelled;
  return running_ > 0;
}

int RaceTracker::losers() const {
  int n = 0;
  for (RaceFate f : fates_) n += f == RaceFate::kLoser ? 1 : 0;
  return n;
}

absl::Status ValidateRaceSize(int attempts) {
  if (attempts < 1 || attempts > kMaxRaceAttempts) {
    return absl::InvalidArgumentError(
        absl::StrCat("a race needs 1..", kMaxRaceAttempts, " attempts, got ", attempts));
  }
  return absl::OkStatus();
}

std::string FormatRaceFailure(const std::vector<RaceAttemptSummary>& attempts) {
  std::string out = absl::StrCat("race of ", attempts.size(), " lost by every attempt:");
  for (size_t i = 0; i < attempts.size(); ++i) {
    const RaceAttemptSummary& a = attempts[i];
    absl::StrAppend(&out, i == 0 ? " " : "; ", "#", i, " ", absl::StatusCodeToString(a.code));
    if (a.attribution.has_value()) {
      // The attribution fields without the "hopbudget/1: " prefix.
      std::string fields = FormatAttributionMessage(*a.attribution);
      const size_t colon = fields.find(": ");
      absl::StrAppend(&out, " ", colon == std::string::npos ? fields : fields.substr(colon + 2));
    }
  }
  return out;
}

}  // namespace hopbudget
