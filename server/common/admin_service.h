// Copyright hopbudget authors.
//
// admin_service.h: what a demo hop counts and how it reports it: the hop's
// counters (HopStats, on top of the deadline accounting), their Prometheus
// text for /metrics, and the hopbudget.demo.Admin service (SetFaults,
// GetFaults, GetStats, ResetStats) that chainctl calls.
//
//   HopStats stats("ledger", Mode::kHopbudget, &accounting, &faults);
//   AdminService admin(&stats, &faults, {.hop = "ledger"});
//   builder.RegisterService(&admin);
//   stats.CountCommit(/*replayed=*/false);
//
// Ownership: both classes keep the pointers they are given; the pointees
// must outlive them (DemoProcess owns all of them).
// Thread safety: every method may be called concurrently (counters are
// atomics; the accounting and the injector lock their own state).
#ifndef HOPBUDGET_DEMO_ADMIN_SERVICE_H_
#define HOPBUDGET_DEMO_ADMIN_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "accounting.h"
#include "demo/demo.grpc.pb.h"
#include "faults.h"
#include "service_flags.h"

namespace hopbudget::demo {

// Faults <-> proto. FaultsFromProto validates (InvalidArgument otherwise).
Faults FaultsToProto(const FaultConfig& config);
absl::StatusOr<FaultConfig> FaultsFromProto(const Faults& proto);

class HopStats {
 public:
  HopStats(std::string hop, Mode mode, DeadlineAccounting* accounting, FaultInjector* faults)
      : hop_(std::move(hop)), mode_(mode), accounting_(accounting), faults_(faults) {}

  void CountRetryReceived() { retries_received_.fetch_add(1); }
  void CountFaultInjected() { faults_injected_.fetch_add(1); }
  // Ledger counters.
  void CountCommit(bool replayed) { (replayed ? replays_ : commits_).fetch_add(1); }
  void CountCommitStopped() { commits_stopped_.fetch_add(1); }
  // A retry or duplicate that joined the shielded commit of its key still
  // in flight (Shield::RunOnce) instead of starting another.
  void CountCommitJoined() { commits_joined_.fetch_add(1); }
  // Orders counters: one read sent `attempts` attempts (1 + its hedges); a
  // call found no ledger slot in time (DownstreamSlots, source slot-wait).
  void CountRead(int attempts) {
    reads_.fetch_add(1);
    if (attempts > 1) read_hedges_.fetch_add(attempts - 1);
  }
  void CountSlotRefusal() { slot_refusals_.fetch_add(1); }
  // A call answered without work (InboundBudget::refused(): on arrival, or
  // shed by admission).
  void CountRefused() { refused_.fetch_add(1, std::memory_order_relaxed); }

  // The Admin reply: the counters, the accounting and the faults in force.
  Stats Proto() const;
  // Zeroes the counters and the accounting (work in flight is still counted
  // when it ends).
  void Reset();
  // Prometheus text of the demo's own counters (HttpExporterOptions::extra_metrics).
  std::string ExtraMetrics() const;

 private:
  const std::string hop_;
  const Mode mode_;
  DeadlineAccounting* const accounting_;
  FaultInjector* const faults_;
  std::atomic<int64_t> retries_received_{0};
  std::atomic<int64_t> commits_{0};
  std::atomic<int64_t> replays_{0};
  std::atomic<int64_t> commits_stopped_{0};
  std::atomic<int64_t> commits_joined_{0};
  std::atomic<int64_t> reads_{0};
  std::atomic<int64_t> read_hedges_{0};
  std::atomic<int64_t> slot_refusals_{0};
  std::atomic<int64_t> refused_{0};
  std::atomic<int64_t> faults_injected_{0};
};

struct AdminOptions {
  std::string hop;       // in log lines and errors
  bool verbose = false;  // log every SetFaults to stderr
  // SetFaults refuses a fault outside this (INVALID_ARGUMENT, saying what
  // the hop supports): chainctl then exits 2 instead of the fault being
  // accepted and never injected.
  FaultSupport support;
};

class AdminService final : public Admin::Service {
 public:
  AdminService(HopStats* stats, FaultInjector* faults, AdminOptions options)
      : stats_(stats), faults_(faults), options_(std::move(options)) {}

  // INVALID_ARGUMENT, faults unchanged, when the request's faults do not
  // validate or ask for one this hop cannot inject (options.support).
  grpc::Status SetFaults(grpc::ServerContext*, const SetFaultsRequest* req, Faults* resp) override;
  grpc::Status GetFaults(grpc::ServerContext*, const GetStatsRequest*, Faults* resp) override;
  grpc::Status GetStats(grpc::ServerContext*, const GetStatsRequest*, Stats* resp) override;
  grpc::Status ResetStats(grpc::ServerContext*, const GetStatsRequest*, Stats* resp) override;

 private:
  HopStats* const stats_;
  FaultInjector* const faults_;
  const AdminOptions options_;
};

}  // namespace hopbudget::demo

#endif  // HOPBUDGET_DEMO_ADMIN_SERVICE_H_
