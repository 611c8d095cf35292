// Copyright hopbudget authors.
//
// edge: the demo chain's front door (edge.h). Listens for gRPC callers,
// refuses on arrival what admission will not let in, and forwards the rest
// to the gateway on one HTTP/2 connection. Prints "edge listening on PORT"
// once it listens; on SIGTERM or SIGINT it stops and prints its counters
// as one line of key=value pairs on stderr ("edge stats: calls=N ...").
//
//   edge --upstream=127.0.0.1:50051 [--port=0] [--name=edge] [--limit=adaptive]
//        [--max-in-flight=64] [--max-limit=512] [--max-queue=1024]
//        [--min-attempt-budget=5ms] [--max-concurrent-streams=4096]
#include <csignal>
#include <iostream>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "client/cli/cli_flags.h"
#include "edge/edge.h"

ABSL_FLAG(std::string, upstream, "", "the gRPC server behind the edge, host:port (required)");
ABSL_FLAG(int, port, 0, "port to listen on (0: any free port)");
ABSL_FLAG(std::string, listen_address, "127.0.0.1", "IPv4 address to listen on");
ABSL_FLAG(std::string, name, "edge", "this hop's name in refusals and attributions");
ABSL_FLAG(std::string, limit, "adaptive",
          "admission's limit of calls in progress: fixed or adaptive");
ABSL_FLAG(int, max_in_flight, 64, "the limit (fixed), or where it starts (adaptive)");
ABSL_FLAG(int, max_limit, 512, "the adaptive limit's ceiling");
ABSL_FLAG(int, max_queue, 1024, "calls waiting for admission at most (0: none wait)");
ABSL_FLAG(absl::Duration, min_attempt_budget, absl::Milliseconds(5),
          "the least budget worth forwarding a call with");
ABSL_FLAG(int, max_concurrent_streams, 4096, "SETTINGS_MAX_CONCURRENT_STREAMS for each caller");

namespace {
hopbudget::edge::Edge* g_edge = nullptr;
void Stop(int) {
  if (g_edge != nullptr) g_edge->Shutdown();
}
}  // namespace

int main(int argc, char** argv) {
  namespace cli = hopbudget::cli;
  cli::ParseOrExit(argc, argv, "edge",
                   "edge: the demo chain's front door; refuses on arrival what admission will "
                   "not let in, forwards the rest to --upstream.\n\n"
                   "  edge --upstream=HOST:PORT [--port=N]");
  cli::ExitIfBad("edge", cli::FirstError({
                             cli::Required("upstream", absl::GetFlag(FLAGS_upstream)),
                             cli::OneOf("limit", absl::GetFlag(FLAGS_limit), {"fixed", "adaptive"}),
                         }));
  hopbudget::edge::EdgeOptions o;
  o.upstream = absl::GetFlag(FLAGS_upstream);
  o.port = absl::GetFlag(FLAGS_port);
  o.listen_address = absl::GetFlag(FLAGS_listen_address);
  o.hop = absl::GetFlag(FLAGS_name);
  o.admission.limit = absl::GetFlag(FLAGS_limit) == "fixed" ? hopbudget::LimitKind::kFixed
                                                            : hopbudget::LimitKind::kAdaptive;
  o.admission.max_in_flight = absl::GetFlag(FLAGS_max_in_flight);
  o.admission.max_limit = absl::GetFlag(FLAGS_max_limit);
  o.admission.max_queue = absl::GetFlag(FLAGS_max_queue);
  o.min_attempt_budget = absl::GetFlag(FLAGS_min_attempt_budget);
  o.max_concurrent_streams = absl::GetFlag(FLAGS_max_concurrent_streams);
  absl::StatusOr<std::unique_ptr<hopbudget::edge::Edge>> edge = hopbudget::edge::Edge::Create(o);
  if (!edge.ok()) {
    std::cerr << "edge: " << edge.status().message() << "\n";
    return edge.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  g_edge = edge->get();
  std::signal(SIGTERM, Stop);
  std::signal(SIGINT, Stop);
  std::signal(SIGPIPE, SIG_IGN);
  std::cout << o.hop << " listening on " << (*edge)->port() << std::endl;
  (*edge)->Run();
  const hopbudget::edge::EdgeStats s = (*edge)->Stats();
  std::string line = absl::StrCat("edge stats: calls=", s.calls, " forwarded=", s.forwarded,
                                  " upstream_ok=", s.upstream_ok, " bad_request=", s.bad_request,
                                  " arrived_expired=", s.arrived_expired,
                                  " unavailable=", s.unavailable, " caller_reset=", s.caller_reset,
                                  " upstream_connects=", s.upstream_connects, " limit=", s.limit);
  for (int i = 0; i < hopbudget::kArrivalDecisionCount; ++i) {
    const auto d = static_cast<hopbudget::ArrivalDecision>(i);
    if (d == hopbudget::ArrivalDecision::kAdmit || d == hopbudget::ArrivalDecision::kQueue)
      continue;
    absl::StrAppend(&line, " shed_", hopbudget::ArrivalDecisionName(d), "=", s.shed[i]);
  }
  std::cerr << line << std::endl;
  g_edge = nullptr;
  return 0;
}
