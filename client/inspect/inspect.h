// Copyright hopbudget authors.
//
// inspect.h: hopbudget-inspect as a library. Scrapes the Prometheus /metrics
// of one or more hopbudget services and prints one row per hop: calls,
// success, DEADLINE_EXCEEDED by source (server and client side), retries,
// retries skipped, p50/p99 of the budget on arrival and shielded work in
// flight; as a table for people or as JSON for scripts.
//
// Targets: "host:port", "[v6addr]:port", "http://host:port" or
// "http://host:port/path" (default path /metrics). Other schemes, a missing
// or out-of-range port and an empty host are usage errors.
//
// Failures: every target is scraped even when another one fails; a failed
// target is reported (a row in the table, an "error" in JSON, a line on
// `err`) and makes the exit code 1. Bad options print to `err` and give 2
// before anything is scraped.
//
// Watch: with `watch`, scrapes every `interval` and prints again until the
// process is interrupted (the return value is then never reached): the
// table, on a terminal (`terminal`) after an ANSI clear-screen, else after
// a plain "--- <time>" line, so that a pipe or a file gets no escape codes;
// or one JSON document per line. From the second scrape on, each hop also
// gets its rates since the previous scrape (calls, OK, server-side
// timeouts and retries per second): the totals say what happened since
// start, the rates what happens now. `timeout` bounds the
// connect and each read of one scrape.
//
// Thread safety: RunInspect may be called from several threads; it shares no
// state between calls.
//
// Example:
//   hopbudget::inspect::InspectOptions options;
//   options.targets = {"127.0.0.1:9100", "http://127.0.0.1:9101/metrics"};
//   options.json = true;
//   int rc = hopbudget::inspect::RunInspect(options, std::cout, std::cerr);
#ifndef HOPBUDGET_CLIENT_INSPECT_INSPECT_H_
#define HOPBUDGET_CLIENT_INSPECT_INSPECT_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace hopbudget::inspect {

struct InspectOptions {
  std::vector<std::string> targets;  // "host:port" or "http://host:port[/metrics]"
  bool json = false;
  bool watch = false;
  absl::Duration interval = absl::Seconds(2);
  absl::Duration timeout = absl::Seconds(2);
  // stdout is a terminal (isatty): --watch may clear the screen.
  bool terminal = false;
};

// Scrapes each target once (or repeatedly with watch) and prints the table or JSON to `out`.
// Returns a process exit code (0 ok, 1 a target failed, 2 bad options).
int RunInspect(const InspectOptions& options, std::ostream& out, std::ostream& err);

}  // namespace hopbudget::inspect

#endif  // HOPBUDGET_CLIENT_INSPECT_INSPECT_H_
