// Copyright hopbudget authors.
//
// edge.h: an HTTP/2 front for a gRPC server that refuses what it cannot
// serve before gRPC sees it.
//
// gRPC 1.51 spends a core's time on every stream a caller opens, whether a
// handler serves it or hopbudget refuses it (what it costs: docs/edge.md). A
// caller that does not back off opens streams faster than that core can
// turn them away, and the server it protects starves. The edge reads each
// call's headers with libnghttp2 on one thread, asks the core's Admission
// (admission.h) whether it may go on, and either forwards it on one HTTP/2
// connection to the upstream (the demo's gateway) or answers at once with a
// Trailers-Only refusal, as hopbudget's server interceptor words it
// (edge_rules.h). A forwarded call carries what is left of its deadline
// (grpc-timeout, hopbudget-budget-us and a hopbudget-sent-us stamp); a
// caller's reset reaches the upstream as a reset; the upstream's answer
// comes back unchanged. A call's time upstream, when it ends OK, is the
// adaptive limit's sample.
//
// Edge cases:
//   - a call without grpc-timeout has no deadline: it waits in the queue at
//     most `max_wait` and is forwarded without one;
//   - a call with less than `min_attempt_budget` left on arrival is refused
//     DEADLINE_EXCEEDED (arrived-expired) without reaching admission;
//   - a request that is no gRPC call is refused INVALID_ARGUMENT;
//   - no upstream connection (refused, lost, or closing after a GOAWAY): an
//     admitted call is answered UNAVAILABLE; a new connection is tried at
//     the next call, at most every 100 ms; calls in flight on a connection
//     that sent GOAWAY finish on it.
//
// Example:
//   EdgeOptions options;
//   options.upstream = "127.0.0.1:50051";
//   absl::StatusOr<std::unique_ptr<Edge>> edge = Edge::Create(options);
//   std::cout << (*edge)->port();
//   std::thread stopper([&] { WaitForSigterm(); (*edge)->Shutdown(); });
//   (*edge)->Run();  // returns after Shutdown()
//
// Thread safety: Run() on one thread; Shutdown() and Stats() from any.
#ifndef HOPBUDGET_SERVER_EDGE_EDGE_H_
#define HOPBUDGET_SERVER_EDGE_EDGE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "hopbudget/advanced/admission.h"
#include "hopbudget/advanced/clock.h"

namespace hopbudget::edge {

struct EdgeOptions {
  // The hop name in refusals and attributions (attribution.h's rule).
  std::string hop = "edge";
  // Where to listen: an IPv4 address, and a port (0: any free port).
  std::string listen_address = "127.0.0.1";
  int port = 0;
  // The gRPC server behind the edge, host:port (plaintext HTTP/2).
  std::string upstream;
  AdmissionPolicy admission;
  // The least budget worth forwarding a call with, >= 0.
  absl::Duration min_attempt_budget = absl::Milliseconds(5);
  // SETTINGS_MAX_CONCURRENT_STREAMS offered to each caller, > 0. Refusing
  // is cheap here, so it is set high: a call held in the caller's queue
  // arrives with its budget spent waiting.
  int max_concurrent_streams = 4096;
  // The largest request body held for a call, > 0; a larger one is refused
  // RESOURCE_EXHAUSTED (gRPC's own default limit is 4 MiB).
  int64_t max_request_bytes = 4 << 20;
  // Must outlive the Edge; nullptr: Clock::Real().
  Clock* clock = nullptr;
};

// OK, or InvalidArgument naming the first bad field.
absl::Status ValidateEdgeOptions(const EdgeOptions& options);

// What the edge did so far; every counter only grows.
struct EdgeStats {
  uint64_t calls = 0;        // requests whose headers arrived
  uint64_t forwarded = 0;    // sent upstream
  uint64_t upstream_ok = 0;  // forwarded, answered grpc-status 0
  uint64_t bad_request = 0;  // not a gRPC call
  uint64_t arrived_expired = 0;
  uint64_t unavailable = 0;                            // admitted, no upstream to take it
  uint64_t caller_reset = 0;                           // the caller reset a call before its answer
  std::array<uint64_t, kArrivalDecisionCount> shed{};  // by ArrivalDecision
  uint64_t upstream_connects = 0;
  int limit = 0;  // admission's, now
};

class Edge {
 public:
  // Binds the listening socket (so port() is known before Run()); does not
  // connect upstream yet.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Edge>> Create(const EdgeOptions& options);
  ~Edge();
  Edge(const Edge&) = delete;
  Edge& operator=(const Edge&) = delete;

  int port() const;
  // Serves until Shutdown(); then closes every connection (calls in flight
  // are reset) and returns.
  void Run();
  // Makes Run() return soon; async-signal-safe.
  void Shutdown();
  EdgeStats Stats() const;

 private:
  class Loop;
  explicit Edge(std::unique_ptr<Loop> loop);
  std::unique_ptr<Loop> loop_;
};

}  // namespace hopbudget::edge

#endif  // HOPBUDGET_SERVER_EDGE_EDGE_H_
