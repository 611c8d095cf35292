// Copyright hopbudget authors.
//
// service_flag_defs.h: the absl flags every demo service takes, defined in
// each service's main file (a library never defines flags: absl flags are
// global to a binary, and each service has its own defaults):
//
//   HOPBUDGET_DEMO_DEFINE_COMMON_FLAGS("orders", absl::Seconds(2), absl::Milliseconds(300));
//   ABSL_FLAG(std::string, ledger, "", "ledger service HOST:PORT (required)");
//   int Main(int argc, char** argv) {
//     cli::ParseOrExit(argc, argv, "orders", "orders: ...");
//     CommonFlags common = CommonFlagsFromCommandLine();
//     FaultConfig faults;
//     cli::ExitIfBad("orders", FinishCommonFlags(&common, &faults));
//
// The flags and their meaning are CommonFlags' fields (service_flags.h),
// written with dashes on the command line (--metrics-port).
#ifndef HOPBUDGET_DEMO_SERVICE_FLAG_DEFS_H_
#define HOPBUDGET_DEMO_SERVICE_FLAG_DEFS_H_

#include <cstdint>
#include <string>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/time/time.h"
#include "service_flags.h"

ABSL_DECLARE_FLAG(std::string, name);
ABSL_DECLARE_FLAG(std::string, host);
ABSL_DECLARE_FLAG(int, port);
ABSL_DECLARE_FLAG(int, metrics_port);
ABSL_DECLARE_FLAG(std::string, mode);
ABSL_DECLARE_FLAG(int64_t, seed);
ABSL_DECLARE_FLAG(std::string, latency);
ABSL_DECLARE_FLAG(double, error_rate);
ABSL_DECLARE_FLAG(double, hang_rate);
ABSL_DECLARE_FLAG(int, hang_next);
ABSL_DECLARE_FLAG(absl::Duration, slow_commit);
ABSL_DECLARE_FLAG(bool, silence);
ABSL_DECLARE_FLAG(absl::Duration, request_cap);
ABSL_DECLARE_FLAG(absl::Duration, attempt_cap);
ABSL_DECLARE_FLAG(absl::Duration, hop_reserve);
ABSL_DECLARE_FLAG(absl::Duration, min_budget);
ABSL_DECLARE_FLAG(absl::Duration, baseline_timeout);
ABSL_DECLARE_FLAG(absl::Duration, lame_duck);
ABSL_DECLARE_FLAG(absl::Duration, shutdown_grace);
ABSL_DECLARE_FLAG(int, max_threads);
ABSL_DECLARE_FLAG(int, max_concurrent_streams);
ABSL_DECLARE_FLAG(bool, fail_fast_without_backend);
ABSL_DECLARE_FLAG(bool, verbose);
ABSL_DECLARE_FLAG(bool, mutex_deadlock_detection);
ABSL_DECLARE_FLAG(bool, admission);
ABSL_DECLARE_FLAG(int, admission_limit);
ABSL_DECLARE_FLAG(bool, admission_adaptive);
ABSL_DECLARE_FLAG(int, admission_queue);
ABSL_DECLARE_FLAG(double, admission_queue_per_limit);
ABSL_DECLARE_FLAG(absl::Duration, admission_overload_wait);
ABSL_DECLARE_FLAG(std::string, service_config);
ABSL_DECLARE_FLAG(std::string, peers);

// Defines the flags above with this service's hop name and request and
// attempt caps (absl::ZeroDuration() = no attempt cap) as defaults.
#define HOPBUDGET_DEMO_DEFINE_COMMON_FLAGS(hop, request_cap_default, attempt_cap_default)      \
  ABSL_FLAG(std::string, name, hop, "hop name in metrics, attribution and the ready line");    \
  ABSL_FLAG(std::string, host, "127.0.0.1", "address to listen on (gRPC and HTTP)");           \
  ABSL_FLAG(int, port, 0, "gRPC port, 0..65535 (0 = any free port)");                          \
  ABSL_FLAG(int, metrics_port, 0, "HTTP port of /metrics and /deadlinez (0 = any free port)"); \
  ABSL_FLAG(std::string, mode, "hopbudget",                                                    \
            "hopbudget (interceptors, derived deadlines) or baseline (constant timeouts)");    \
  ABSL_FLAG(int64_t, seed, 1, "seed of the fault injector (same seed, same faults)");          \
  ABSL_FLAG(std::string, latency, "none",                                                      \
            "added latency: none, fixed:100ms, uniform:50ms-200ms, exp:100ms, spike:5%:1s");   \
  ABSL_FLAG(double, error_rate, 0, "probability of answering UNAVAILABLE, 0..1");              \
  ABSL_FLAG(double, hang_rate, 0,                                                              \
            "probability of never answering (until the call is cancelled), 0..1");             \
  ABSL_FLAG(int, hang_next, 0, "the next N calls hang");                                       \
  ABSL_FLAG(absl::Duration, slow_commit, absl::ZeroDuration(),                                 \
            "ledger: each commit takes this long first");                                      \
  ABSL_FLAG(bool, silence, false, "ledger: watches send nothing, staying open");               \
  ABSL_FLAG(absl::Duration, request_cap, request_cap_default,                                  \
            "hopbudget mode: most time per request");                                          \
  ABSL_FLAG(absl::Duration, attempt_cap, attempt_cap_default,                                  \
            "hopbudget mode: most time per downstream attempt (0 = none)");                    \
  ABSL_FLAG(absl::Duration, hop_reserve, absl::Milliseconds(10),                               \
            "hopbudget mode: time kept back from each downstream call");                       \
  ABSL_FLAG(absl::Duration, min_budget, absl::Milliseconds(2),                                 \
            "hopbudget mode: below this a call is refused / not started");                     \
  ABSL_FLAG(absl::Duration, baseline_timeout, absl::Seconds(1),                                \
            "baseline mode: constant timeout of every outgoing call (per attempt)");           \
  ABSL_FLAG(absl::Duration, lame_duck, absl::Milliseconds(250),                                \
            "on SIGTERM: how long to report NOT_SERVING, still serving, before shutting "      \
            "down (0 = shut down at once)");                                                   \
  ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(3),                                  \
            "on SIGTERM: how long running calls and shielded commits may finish");             \
  ABSL_FLAG(int, max_threads, 256,                                                             \
            "most gRPC server threads (4..100000); a call beyond them is answered "            \
            "RESOURCE_EXHAUSTED");                                                             \
  ABSL_FLAG(int, max_concurrent_streams, 0,                                                    \
            "most calls in progress per client connection (HTTP/2 SETTINGS, 0..1000000; 0 = "  \
            "gRPC's default, no bound): a gRPC caller holds further calls in its own queue");  \
  ABSL_FLAG(bool, fail_fast_without_backend, false,                                            \
            "hopbudget mode: a downstream call with no ready backend fails at once "           \
            "(UNAVAILABLE) instead of waiting for one inside its budget");                     \
  ABSL_FLAG(bool, verbose, false, "log every call's outcome to stderr");                       \
  ABSL_FLAG(bool, mutex_deadlock_detection, false,                                             \
            "absl::Mutex deadlock detection, which Debian's abseil runs on every lock "        \
            "(gRPC's too) unless a process turns it off");                                     \
  ABSL_FLAG(bool, admission, true,                                                             \
            "hopbudget mode: deadline-aware admission (a limit of calls in progress, a "       \
            "queue that holds no thread, refusal of what cannot finish)");                     \
  ABSL_FLAG(int, admission_limit, 32,                                                          \
            "hopbudget mode: calls in progress at most (where the adaptive limit starts), "    \
            "1..10000");                                                                       \
  ABSL_FLAG(bool, admission_adaptive, true,                                                    \
            "hopbudget mode: the limit follows measured handler time (Gradient2)");            \
  ABSL_FLAG(int, admission_queue, 2048,                                                        \
            "hopbudget mode: calls waiting for admission at most, 0..1000000");                \
  ABSL_FLAG(double, admission_queue_per_limit, 1,                                              \
            "hopbudget mode: and at most this many per call the limit admits at once "         \
            "(0.01..inf; inf: --admission-queue alone)");                                      \
  ABSL_FLAG(absl::Duration, admission_overload_wait, absl::Milliseconds(10),                   \
            "hopbudget mode: the longest a call waits for admission once the queue has not "   \
            "been empty for 100 ms (sustained overload); inf: no such bound");                 \
  ABSL_FLAG(std::string, service_config, "",                                                   \
            "hopbudget mode: a gRPC service config file (JSON, with hopbudget's section) "     \
            "giving per-method budgets over the flags' policy; SIGHUP re-reads it");           \
  ABSL_FLAG(std::string, peers, "",                                                            \
            "/deadlinez links to other hops: NAME=URL,... (e.g. "                              \
            "ledger=http://127.0.0.1:9103/deadlinez)")

namespace hopbudget::demo {

// The flags' values (after cli::ParseOrExit), not yet checked: pass the
// result to FinishCommonFlags.
inline CommonFlags CommonFlagsFromCommandLine() {
  CommonFlags c;
  c.name = absl::GetFlag(FLAGS_name);
  c.host = absl::GetFlag(FLAGS_host);
  c.port = absl::GetFlag(FLAGS_port);
  c.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  c.mode_text = absl::GetFlag(FLAGS_mode);
  c.seed = absl::GetFlag(FLAGS_seed);
  c.latency = absl::GetFlag(FLAGS_latency);
  c.error_rate = absl::GetFlag(FLAGS_error_rate);
  c.hang_rate = absl::GetFlag(FLAGS_hang_rate);
  c.hang_next = absl::GetFlag(FLAGS_hang_next);
  c.slow_commit = absl::GetFlag(FLAGS_slow_commit);
  c.silence = absl::GetFlag(FLAGS_silence);
  c.request_cap = absl::GetFlag(FLAGS_request_cap);
  c.attempt_cap = absl::GetFlag(FLAGS_attempt_cap);
  c.hop_reserve = absl::GetFlag(FLAGS_hop_reserve);
  c.min_budget = absl::GetFlag(FLAGS_min_budget);
  c.baseline_timeout = absl::GetFlag(FLAGS_baseline_timeout);
  c.lame_duck = absl::GetFlag(FLAGS_lame_duck);
  c.shutdown_grace = absl::GetFlag(FLAGS_shutdown_grace);
  c.max_threads = absl::GetFlag(FLAGS_max_threads);
  c.max_concurrent_streams = absl::GetFlag(FLAGS_max_concurrent_streams);
  c.fail_fast_without_backend = absl::GetFlag(FLAGS_fail_fast_without_backend);
  c.verbose = absl::GetFlag(FLAGS_verbose);
  c.mutex_deadlock_detection = absl::GetFlag(FLAGS_mutex_deadlock_detection);
  c.admission = absl::GetFlag(FLAGS_admission);
  c.admission_limit = absl::GetFlag(FLAGS_admission_limit);
  c.admission_adaptive = absl::GetFlag(FLAGS_admission_adaptive);
  c.admission_queue = absl::GetFlag(FLAGS_admission_queue);
  c.admission_queue_per_limit = absl::GetFlag(FLAGS_admission_queue_per_limit);
  c.admission_overload_wait = absl::GetFlag(FLAGS_admission_overload_wait);
  c.service_config = absl::GetFlag(FLAGS_service_config);
  c.peers_text = absl::GetFlag(FLAGS_peers);
  return c;
}

}  // namespace hopbudget::demo

#endif  // HOPBUDGET_DEMO_SERVICE_FLAG_DEFS_H_
