// Copyright hopbudget authors.
#include "inspect.h"

#include <map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "exposition.h"
#include "run.h"
#include "scrape.h"
#include "summary.h"

namespace hopbudget::inspect {

const char kUsage[] =
    "usage: hopbudget-inspect [--json] [--watch] [--interval=2s] [--timeout=2s] TARGET...\n"
    "\n"
    "Scrapes the Prometheus /metrics of hopbudget services and prints one row per hop:\n"
    "calls, success, DEADLINE_EXCEEDED by source, retries, p50/p99 of the budget on arrival.\n"
    "\n"
    "  TARGET  host:port, [v6addr]:port or http://host:port[/path] (default path /metrics)\n"
    "\n"
    "Durations: 500ms, 2s, 1m. Exit status: 0 ok, 1 a target failed, 2 usage error.\n";

namespace {

absl::Status CheckDuration(absl::string_view flag, absl::Duration d) {
  if (d <= absl::ZeroDuration() || d == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " must be a positive finite duration, got ", absl::FormatDuration(d)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateOptions(const InspectOptions& options) {
  if (options.targets.empty()) {
    return absl::InvalidArgumentError("no TARGET given (e.g. 127.0.0.1:9100)");
  }
  for (const std::string& t : options.targets) {
    absl::StatusOr<Target> target = ParseTarget(t);
    if (!target.ok()) return target.status();
  }
  if (absl::Status s = CheckDuration("--timeout", options.timeout); !s.ok()) return s;
  if (options.watch) {
    if (absl::Status s = CheckDuration("--interval", options.interval); !s.ok()) return s;
  }
  return absl::OkStatus();
}

std::vector<TargetResult> ScrapeAll(const InspectOptions& options) {
  std::vector<TargetResult> results;
  for (const std::string& t : options.targets) {
    TargetResult r{t, absl::UnknownError("not scraped")};
    absl::StatusOr<Target> target = ParseTarget(t);
    if (!target.ok()) {
      r.summary = target.status();
    } else if (absl::StatusOr<std::string> body = Scrape(*target, options.timeout); !body.ok()) {
      r.summary = body.status();
    } else if (absl::StatusOr<Exposition> e = ParseExposition(*body); !e.ok()) {
      r.summary = absl::InvalidArgumentError(
          absl::StrCat(target->Url(), ": not Prometheus text format: ", e.status().message()));
    } else if (absl::StatusOr<HopSummary> s = Summarize(*e); !s.ok()) {
      r.summary = absl::InvalidArgumentError(
          absl::StrCat(target->Url(), ": unexpected metrics: ", s.status().message()));
    } else {
      r.summary = *std::move(s);
    }
    results.push_back(std::move(r));
  }
  return results;
}

int RunInspectWith(const InspectOptions& options, std::ostream& out, std::ostream& err,
                   const WaitFn& wait, const Clock* clock) {
  if (clock == nullptr) clock = &Clock::Real();
  if (absl::Status s = ValidateOptions(options); !s.ok()) {
    err << "hopbudget-inspect: " << s.message() << "\n" << kUsage;
    return 2;
  }
  // The previous scrape of each target, for the rates.
  std::map<std::string, std::pair<HopSummary, absl::Time>> previous;
  while (true) {
    std::vector<TargetResult> results = ScrapeAll(options);
    const absl::Time scraped = clock->Now();
    for (TargetResult& r : results) {
      if (!r.summary.ok()) {
        previous.erase(r.target);
        continue;
      }
      if (auto it = previous.find(r.target); it != previous.end()) {
        absl::StatusOr<HopRates> rates =
            RatesBetween(it->second.first, *r.summary, scraped - it->second.second);
        if (rates.ok()) r.rates = *rates;
      }
      previous[r.target] = {*r.summary, scraped};
    }
    int rc = 0;
    if (options.json) {
      out << FormatJson(results);
    } else {
      if (options.watch) {
        const std::string when =
            absl::FormatTime("%Y-%m-%d %H:%M:%S", scraped, absl::LocalTimeZone());
        if (options.terminal) {
          // Clear the screen and home the cursor, then redraw.
          out << "\x1b[H\x1b[2J"
              << "hopbudget-inspect  every " << absl::FormatDuration(options.interval) << "  "
              << when << "  (Ctrl-C to stop)\n\n";
        } else {
          // A pipe or a file: one block per refresh, no escape codes.
          out << "--- " << when << "\n";
        }
      }
      out << FormatTable(results);
    }
    out.flush();
    for (const TargetResult& r : results) {
      if (r.summary.ok()) continue;
      err << "hopbudget-inspect: " << r.target << ": " << r.summary.status().message() << "\n";
      rc = 1;
    }
    err.flush();
    if (!options.watch || !wait(options.interval)) return rc;
  }
}

int RunInspect(const InspectOptions& options, std::ostream& out, std::ostream& err) {
  return RunInspectWith(options, out, err, [](absl::Duration interval) {
    absl::SleepFor(interval);
    return true;
  });
}

}  // namespace hopbudget::inspect
