// Copyright hopbudget authors.
#include "service_flags.h"

#include "absl/strings/str_cat.h"
#include "hopbudget/attribution.h"

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

void RegisterCommonFlags(FlagSet& flags, CommonFlags* c) {
  flags.String("name", &c->name, "hop name in metrics, attribution and the ready line");
  flags.String("host", &c->host, "address to listen on (gRPC and HTTP)");
  flags.Int("port", &c->port, "gRPC port (0 = any free port)", 0, 65535);
  flags.Int("metrics-port", &c->metrics_port, "HTTP port of /metrics and /deadlinez (0 = any)",
            0, 65535);
  flags.String("mode", &c->mode_text,
               "hopbudget (interceptors, derived deadlines) or baseline (constant timeouts)");
  flags.Int64("seed", &c->seed, "seed of the fault injector (same seed, same faults)");
  flags.String("latency", &c->latency,
               "added latency: none, fixed:100ms, uniform:50ms-200ms, exp:100ms");
  flags.Probability("error-rate", &c->error_rate, "probability of answering UNAVAILABLE");
  flags.Probability("hang-rate", &c->hang_rate,
                    "probability of never answering (until the call is cancelled)");
  flags.Int("hang-next", &c->hang_next, "the next N calls hang");
  flags.Duration("slow-commit", &c->slow_commit, "ledger: each commit takes this long first");
  flags.Duration("request-cap", &c->request_cap, "hopbudget mode: most time per request");
  flags.Duration("attempt-cap", &c->attempt_cap,
                 "hopbudget mode: most time per downstream attempt (0 = none)");
  flags.Duration("hop-reserve", &c->hop_reserve,
                 "hopbudget mode: time kept back from each downstream call");
  flags.Duration("min-budget", &c->min_budget,
                 "hopbudget mode: below this a call is refused / not started");
  flags.Duration("baseline-timeout", &c->baseline_timeout,
                 "baseline mode: constant timeout of every outgoing call (per attempt)");
  flags.Duration("lame-duck", &c->lame_duck,
                 "on SIGTERM: how long to report NOT_SERVING, still serving, before shutting "
                 "down (0 = shut down at once)");
  flags.Duration("shutdown-grace", &c->shutdown_grace,
                 "on SIGTERM: how long running calls and shielded commits may finish");
  flags.Int("max-threads", &c->max_threads,
            "most gRPC server threads; a call beyond them is answered RESOURCE_EXHAUSTED", 4,
            100000);
  flags.Bool("verbose", &c->verbose, "log every call's outcome to stderr");
}

absl::Status FinishCommonFlags(CommonFlags* c, FaultConfig* faults) {
  if (absl::Status s = ValidateHopName(c->name); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--name: ", s.message()));
  }
  absl::StatusOr<Mode> mode = ParseMode(c->mode_text);
  if (!mode.ok()) return absl::InvalidArgumentError(absl::StrCat("--mode: ", mode.status().message()));
  c->mode = *mode;
  absl::StatusOr<LatencySpec> latency = ParseLatencySpec(c->latency);
  if (!latency.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--latency: ", latency.status().message()));
  }
  faults->latency = *latency;
  faults->error_rate = c->error_rate;
  faults->hang_rate = c->hang_rate;
  faults->hang_next = c->hang_next;
  faults->slow_commit = c->slow_commit;
  if (absl::Status s = ValidateFaultConfig(*faults); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("faults: ", s.message()));
  }
  if (c->request_cap <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--request-cap must be > 0");
  }
  if (c->baseline_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--baseline-timeout must be > 0");
  }
  if (c->mode == Mode::kHopbudget) {
    if (absl::Status s = ValidatePolicy(PolicyOf(*c)); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("policy flags: ", s.message()));
    }
  }
  return absl::OkStatus();
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
