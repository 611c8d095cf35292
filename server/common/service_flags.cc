// Copyright hopbudget authors.
#include "service_flags.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/cli/cli_flags.h"
#include "hopbudget/advanced/attribution.h"

namespace hopbudget::demo {

absl::string_view ModeName(Mode mode) {
  return mode == Mode::kHopbudget ? "hopbudget" : "baseline";
}

absl::StatusOr<Mode> ParseMode(absl::string_view text) {
  if (text == "hopbudget") return Mode::kHopbudget;
  if (text == "baseline") return Mode::kBaseline;
  return absl::InvalidArgumentError(
      absl::StrCat("bad mode \"", text, "\" (hopbudget or baseline)"));
}

absl::Status FinishCommonFlags(CommonFlags* c, FaultConfig* faults) {
  if (absl::Status s = ValidateHopName(c->name); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--name=", c->name, ": ", s.message()));
  }
  absl::StatusOr<Mode> mode = ParseMode(c->mode_text);
  if (!mode.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--mode=", c->mode_text, ": ", mode.status().message()));
  }
  c->mode = *mode;
  if (!c->service_config.empty() && c->mode != Mode::kHopbudget) {
    return absl::InvalidArgumentError(
        absl::StrCat("--service-config=", c->service_config, ": needs --mode=hopbudget"));
  }
  // What a typed flag cannot say: ranges, and durations that are finite
  // and not negative.
  if (absl::Status s = cli::FirstError({
          cli::InRange("port", c->port, 0, 65535),
          cli::InRange("metrics-port", c->metrics_port, 0, 65535),
          cli::InRange("seed", c->seed, 0, int64_t{1} << 62),
          cli::InRange("error-rate", c->error_rate, 0.0, 1.0),
          cli::InRange("hang-rate", c->hang_rate, 0.0, 1.0),
          cli::InRange("hang-next", c->hang_next, 0, 1 << 30),
          cli::InRange("max-threads", c->max_threads, 4, 100000),
          cli::InRange("max-concurrent-streams", c->max_concurrent_streams, 0, 1000000),
          cli::InRange("admission-limit", c->admission_limit, 1, 10000),
          cli::InRange("admission-queue", c->admission_queue, 0, 1000000),
          cli::InRange("admission-queue-per-limit", c->admission_queue_per_limit, 0.01,
                       std::numeric_limits<double>::infinity()),
          cli::PositiveOrInfinite("admission-overload-wait", c->admission_overload_wait),
          cli::NonNegative("slow-commit", c->slow_commit),
          cli::Positive("request-cap", c->request_cap),
          cli::NonNegative("attempt-cap", c->attempt_cap),
          cli::NonNegative("hop-reserve", c->hop_reserve),
          cli::NonNegative("min-budget", c->min_budget),
          cli::Positive("baseline-timeout", c->baseline_timeout),
          cli::NonNegative("lame-duck", c->lame_duck),
          cli::NonNegative("shutdown-grace", c->shutdown_grace),
      });
      !s.ok()) {
    return s;
  }
  absl::StatusOr<LatencySpec> latency = ParseLatencySpec(c->latency);
  if (!latency.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--latency=", c->latency, ": ", latency.status().message()));
  }
  faults->latency = *latency;
  faults->error_rate = c->error_rate;
  faults->hang_rate = c->hang_rate;
  faults->hang_next = c->hang_next;
  faults->slow_commit = c->slow_commit;
  faults->silence = c->silence;
  if (absl::Status s = ValidateFaultConfig(*faults); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("faults: ", s.message()));
  }
  if (c->mode == Mode::kHopbudget) {
    if (absl::Status s = ValidatePolicy(PolicyOf(*c)); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("policy flags: ", s.message()));
    }
    if (absl::Status s = ValidateAdmissionPolicy(AdmissionPolicyOf(*c)); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("admission flags: ", s.message()));
    }
  }
  c->peers.clear();
  for (absl::string_view entry : absl::StrSplit(c->peers_text, ',', absl::SkipEmpty())) {
    const size_t eq = entry.find('=');
    if (eq == absl::string_view::npos || eq == 0 || eq + 1 == entry.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--peers=", c->peers_text, ": \"", entry, "\" is not NAME=URL"));
    }
    c->peers.emplace_back(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
  }
  return absl::OkStatus();
}

AdmissionPolicy AdmissionPolicyOf(const CommonFlags& c) {
  AdmissionPolicy p;
  p.limit = c.admission_adaptive ? LimitKind::kAdaptive : LimitKind::kFixed;
  p.max_in_flight = c.admission_limit;
  p.min_limit = std::max(1, c.admission_limit / 4);
  p.max_limit = std::max(c.admission_limit, c.admission_limit * 4);
  p.max_queue = c.admission_queue;
  p.queue_per_limit = c.admission_queue_per_limit;
  p.overload_wait = c.admission_overload_wait;
  return p;
}

BudgetPolicy PolicyOf(const CommonFlags& c) {
  BudgetPolicy p;
  p.request_cap = c.request_cap;
  p.attempt_cap = c.attempt_cap > absl::ZeroDuration() ? c.attempt_cap : absl::InfiniteDuration();
  p.hop_reserve = c.hop_reserve;
  p.min_attempt_budget = c.min_budget;
  return p;
}

}  // namespace hopbudget::demo
