// Copyright hopbudget authors.
//
// service_flags.h: the flags every demo service shares (gateway, orders,
// ledger), the two modes, and this hop's budget policy derived from them.
// Pure, no gRPC.
//
//   CommonFlags common = CommonFlagsFromCommandLine();  // service_flag_defs.h
//   FaultConfig faults;
//   absl::Status s = FinishCommonFlags(&common, &faults);
//
// The flags themselves are absl flags defined in each service's main file
// (service_flag_defs.h); this unit holds their values and checks them.
// Every bad value is an InvalidArgument naming the flag and the value
// ("--port=70000: must be in [0, 65535]").
//
// Thread safety: used by one thread at start-up; a finished CommonFlags is
// a value, read-only afterwards.
#ifndef HOPBUDGET_DEMO_SERVICE_FLAGS_H_
#define HOPBUDGET_DEMO_SERVICE_FLAGS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "faults.h"
#include "hopbudget/advanced/admission.h"
#include "hopbudget/advanced/budget.h"

namespace hopbudget::demo {

// kHopbudget: hopbudget's interceptors, downstream deadlines derived from
// the inbound one. kBaseline: no interceptors, a constant timeout per
// outgoing call, no cancellation propagated (what most code does today).
enum class Mode { kHopbudget, kBaseline };

absl::string_view ModeName(Mode mode);
absl::StatusOr<Mode> ParseMode(absl::string_view text);

struct CommonFlags {
  std::string name;  // hop name (gateway, orders, ledger)
  std::string host = "127.0.0.1";
  int port = 0;          // gRPC; 0 = any free port
  int metrics_port = 0;  // HTTP; 0 = any free port
  std::string mode_text = "hopbudget";
  Mode mode = Mode::kHopbudget;
  int64_t seed = 1;
  // Faults at start-up.
  std::string latency = "none";
  double error_rate = 0;
  double hang_rate = 0;
  int hang_next = 0;
  absl::Duration slow_commit = absl::ZeroDuration();
  bool silence = false;
  // hopbudget mode: this hop's policy.
  absl::Duration request_cap = absl::Seconds(5);
  absl::Duration attempt_cap = absl::ZeroDuration();  // 0 = none
  absl::Duration hop_reserve = absl::Milliseconds(10);
  absl::Duration min_budget = absl::Milliseconds(2);
  // baseline mode: the constant timeout of every outgoing call.
  absl::Duration baseline_timeout = absl::Seconds(1);
  absl::Duration shutdown_grace = absl::Seconds(3);
  // On SIGTERM, how long the server reports NOT_SERVING on its health
  // service, still serving every call, before it shuts down: callers that
  // watch its health (DownstreamChannelArguments) stop sending in that time.
  absl::Duration lame_duck = absl::Milliseconds(250);
  // Most threads the gRPC server may run (pollers and handlers alike): a
  // call that finds them all busy is answered RESOURCE_EXHAUSTED at once
  // instead of starting one more thread. server/README.md says why 256.
  int max_threads = 256;
  // Most calls in progress per client connection, announced in HTTP/2's
  // SETTINGS: a gRPC caller holds further calls in its own transport, where
  // their deadlines run out without costing this server. 0 = no bound.
  int max_concurrent_streams = 0;
  // hopbudget mode: a downstream call that finds no ready backend fails at
  // once (gRPC's default) instead of waiting for one inside its budget
  // (ClientOptions::backend_wait).
  bool fail_fast_without_backend = false;
  bool verbose = false;
  // absl::Mutex's lock-order graph (deadlock detection). Debian's abseil is
  // built without NDEBUG, so it checks every acquisition, gRPC's own locks
  // included, unless a process turns it off, as a release build of abseil
  // does. Off by default: the services run as they would be deployed; the
  // library's tests and the TSan build check lock order.
  bool mutex_deadlock_detection = false;
  // hopbudget mode: deadline-aware admission (hopbudget/advanced/admission.h).
  bool admission = true;
  int admission_limit = 32;
  bool admission_adaptive = true;
  int admission_queue = 2048;
  // At most this many waiters per call the limit admits
  // (AdmissionPolicy::queue_per_limit); inf: --admission-queue alone.
  double admission_queue_per_limit = 1;
  absl::Duration admission_overload_wait = absl::Milliseconds(10);
  // hopbudget mode: a gRPC service config file (JSON, with hopbudget's
  // section) giving per-method budgets over the flags' policy; SIGHUP
  // re-reads it. "" for none.
  std::string service_config;
  // /deadlinez links to other hops, "name=url,...", and parsed.
  std::string peers_text;
  std::vector<std::pair<std::string, std::string>> peers;
};

// Checks the values and derives the mode, the faults and the policy from
// them. InvalidArgument naming the flag and the value otherwise.
absl::Status FinishCommonFlags(CommonFlags* common, FaultConfig* faults);

// This hop's budget policy from the flags (hopbudget mode).
BudgetPolicy PolicyOf(const CommonFlags& common);

// This hop's admission policy from the flags (hopbudget mode, --admission).
// The adaptive limit moves within [1/4, 4x] of --admission-limit.
AdmissionPolicy AdmissionPolicyOf(const CommonFlags& common);

}  // namespace hopbudget::demo

#endif  // HOPBUDGET_DEMO_SERVICE_FLAGS_H_
