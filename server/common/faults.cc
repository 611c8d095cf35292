// Copyright hopbudget authors.
#include "faults.h"

#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "flags.h"

namespace hopbudget::demo {

absl::StatusOr<LatencySpec> ParseLatencySpec(absl::string_view text) {
  LatencySpec spec;
  if (text.empty() || text == "none") return spec;
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad latency \"", text, "\": ", why,
                     " (use none, fixed:100ms, uniform:50ms-200ms, exp:100ms or spike:5%:1s)"));
  };
  const size_t colon = text.find(':');
  if (colon == absl::string_view::npos) return bad("no kind");
  const absl::string_view kind = text.substr(0, colon);
  const absl::string_view args = text.substr(colon + 1);
  if (kind == "fixed" || kind == "exp") {
    absl::StatusOr<absl::Duration> d = ParseDuration(args);
    if (!d.ok()) return bad(d.status().message());
    if (kind == "exp" && *d <= absl::ZeroDuration()) return bad("the mean must be > 0");
    spec.kind = kind == "fixed" ? LatencyKind::kFixed : LatencyKind::kExponential;
    spec.a = *d;
    return spec;
  }
  if (kind == "uniform") {
    std::vector<absl::string_view> parts = absl::StrSplit(args, '-');
    if (parts.size() != 2) return bad("uniform needs LOW-HIGH");
    absl::StatusOr<absl::Duration> lo = ParseDuration(parts[0]);
    if (!lo.ok()) return bad(lo.status().message());
    absl::StatusOr<absl::Duration> hi = ParseDuration(parts[1]);
    if (!hi.ok()) return bad(hi.status().message());
    if (*lo > *hi) return bad("LOW > HIGH");
    spec.kind = LatencyKind::kUniform;
    spec.a = *lo;
    spec.b = *hi;
    return spec;
  }
  if (kind == "spike") {
    std::vector<absl::string_view> parts = absl::StrSplit(args, absl::MaxSplits(':', 1));
    if (parts.size() != 2) return bad("spike needs FRACTION:LATENCY");
    double fraction = 0;
    if (absl::ConsumeSuffix(&parts[0], "%")) {
      double percent = 0;
      if (!absl::SimpleAtod(parts[0], &percent) || std::isnan(percent) || percent < 0 ||
          percent > 100) {
        return bad("the fraction must be a percentage in [0%, 100%]");
      }
      fraction = percent / 100;
    } else {
      absl::StatusOr<double> p = ParseProbability(parts[0]);
      if (!p.ok()) return bad(p.status().message());
      fraction = *p;
    }
    absl::StatusOr<absl::Duration> d = ParseDuration(parts[1]);
    if (!d.ok()) return bad(d.status().message());
    if (*d <= absl::ZeroDuration()) return bad("the spike's latency must be > 0");
    spec.kind = LatencyKind::kSpike;
    spec.a = *d;
    spec.fraction = fraction;
    return spec;
  }
  return bad("unknown kind");
}

std::string FormatLatencySpec(const LatencySpec& spec) {
  switch (spec.kind) {
    case LatencyKind::kNone:
      return "none";
    case LatencyKind::kFixed:
      return absl::StrCat("fixed:", DurationText(spec.a));
    case LatencyKind::kUniform:
      return absl::StrCat("uniform:", DurationText(spec.a), "-", DurationText(spec.b));
    case LatencyKind::kExponential:
      return absl::StrCat("exp:", DurationText(spec.a));
    case LatencyKind::kSpike:
      return absl::StrCat("spike:", spec.fraction * 100, "%:", DurationText(spec.a));
  }
  return "none";
}

absl::Status ValidateFaultConfig(const FaultConfig& c) {
  auto rate_ok = [](double r) { return !std::isnan(r) && r >= 0 && r <= 1; };
  if (!rate_ok(c.error_rate)) {
    return absl::InvalidArgumentError(absl::StrCat("error_rate ", c.error_rate, " not in [0, 1]"));
  }
  if (!rate_ok(c.hang_rate)) {
    return absl::InvalidArgumentError(absl::StrCat("hang_rate ", c.hang_rate, " not in [0, 1]"));
  }
  if (c.error_rate + c.hang_rate > 1 + 1e-9) {
    return absl::InvalidArgumentError(
        absl::StrCat("error_rate (", c.error_rate, ") + hang_rate (", c.hang_rate, ") > 1"));
  }
  if (c.hang_next < 0) {
    return absl::InvalidArgumentError(absl::StrCat("hang_next ", c.hang_next, " < 0"));
  }
  if (c.slow_commit < absl::ZeroDuration() || c.slow_commit == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("slow_commit ", DurationText(c.slow_commit), " not >= 0 and finite"));
  }
  for (absl::Duration d : {c.latency.a, c.latency.b}) {
    if (d < absl::ZeroDuration() || d == absl::InfiniteDuration()) {
      return absl::InvalidArgumentError("latency parameters must be >= 0 and finite");
    }
  }
  if (c.latency.kind == LatencyKind::kUniform && c.latency.a > c.latency.b) {
    return absl::InvalidArgumentError("uniform latency: low > high");
  }
  if (c.latency.kind == LatencyKind::kExponential && c.latency.a <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("exponential latency: mean must be > 0");
  }
  if (c.latency.kind == LatencyKind::kSpike &&
      (std::isnan(c.latency.fraction) || c.latency.fraction < 0 || c.latency.fraction > 1 ||
       c.latency.a <= absl::ZeroDuration())) {
    return absl::InvalidArgumentError(
        "spike latency: the fraction must be in [0, 1] and the latency > 0");
  }
  return absl::OkStatus();
}

absl::Status CheckFaultsSupported(const FaultConfig& config, const FaultSupport& support,
                                  absl::string_view hop) {
  if (config.slow_commit > absl::ZeroDuration() && !support.slow_commit) {
    return absl::InvalidArgumentError(absl::StrCat(
        hop, " cannot inject slow-commit (", DurationText(config.slow_commit),
        "): only the ledger commits; this hop supports latency, error-rate, hang-rate and "
        "hang-next"));
  }
  if (config.silence && !support.silence) {
    return absl::InvalidArgumentError(absl::StrCat(
        hop,
        " cannot inject silence: only the ledger serves the watch it silences (the other "
        "hops relay it); this hop supports latency, error-rate, hang-rate and hang-next"));
  }
  return absl::OkStatus();
}

absl::string_view FaultActionName(FaultAction action) {
  switch (action) {
    case FaultAction::kProceed:
      return "proceed";
    case FaultAction::kError:
      return "error";
    case FaultAction::kHang:
      return "hang";
  }
  return "unknown";
}

FaultInjector::FaultInjector(uint64_t seed, FaultConfig config) : rng_(seed) {
  if (ValidateFaultConfig(config).ok()) config_ = config;
}

absl::Status FaultInjector::Set(const FaultConfig& config) {
  absl::Status s = ValidateFaultConfig(config);
  if (!s.ok()) return s;
  absl::MutexLock lock(&mu_);
  config_ = config;
  return absl::OkStatus();
}

FaultConfig FaultInjector::config() const {
  absl::MutexLock lock(&mu_);
  return config_;
}

FaultDecision FaultInjector::Decide() {
  absl::MutexLock lock(&mu_);
  // Always two draws, so that the sequence does not depend on the config.
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const double action_draw = unit(rng_);
  const double latency_draw = unit(rng_);

  FaultDecision d;
  if (config_.hang_next > 0) {
    --config_.hang_next;
    d.action = FaultAction::kHang;
  } else if (action_draw < config_.hang_rate) {
    d.action = FaultAction::kHang;
  } else if (action_draw < config_.hang_rate + config_.error_rate) {
    d.action = FaultAction::kError;
  }
  const LatencySpec& l = config_.latency;
  switch (l.kind) {
    case LatencyKind::kNone:
      break;
    case LatencyKind::kFixed:
      d.latency = l.a;
      break;
    case LatencyKind::kUniform:
      d.latency = l.a + (l.b - l.a) * latency_draw;
      break;
    case LatencyKind::kExponential:
      // Inverse CDF; 1 - u is in (0, 1], so log never sees 0.
      d.latency = l.a * -std::log(1.0 - latency_draw);
      break;
    case LatencyKind::kSpike:
      if (latency_draw < l.fraction) d.latency = l.a;
      break;
  }
  return d;
}

}  // namespace hopbudget::demo
