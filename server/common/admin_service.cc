// Copyright hopbudget authors.
#include "admin_service.h"

#include <sys/resource.h>

#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace hopbudget::demo {

Faults FaultsToProto(const FaultConfig& c) {
  Faults f;
  f.set_latency(FormatLatencySpec(c.latency));
  f.set_error_rate(c.error_rate);
  f.set_hang_rate(c.hang_rate);
  f.set_hang_next(c.hang_next);
  f.set_slow_commit_ms(absl::ToInt64Milliseconds(c.slow_commit));
  f.set_silence(c.silence);
  return f;
}

absl::StatusOr<FaultConfig> FaultsFromProto(const Faults& f) {
  FaultConfig c;
  absl::StatusOr<LatencySpec> latency = ParseLatencySpec(f.latency());
  if (!latency.ok()) return latency.status();
  c.latency = *latency;
  c.error_rate = f.error_rate();
  c.hang_rate = f.hang_rate();
  c.hang_next = f.hang_next();
  if (f.slow_commit_ms() < 0) return absl::InvalidArgumentError("slow_commit_ms < 0");
  c.slow_commit = absl::Milliseconds(f.slow_commit_ms());
  c.silence = f.silence();
  if (absl::Status s = ValidateFaultConfig(c); !s.ok()) return s;
  return c;
}

Stats HopStats::Proto() const {
  const AccountingSnapshot a = accounting_->Snapshot();
  Stats s;
  s.set_hop(hop_);
  s.set_mode(std::string(ModeName(mode_)));
  s.set_calls(a.calls);
  s.set_calls_started_after_deadline(a.started_after_deadline);
  s.set_work_after_deadline_ms(absl::ToDoubleMilliseconds(a.work_after_deadline));
  s.set_retries_received(retries_received_.load());
  s.set_commits(commits_.load());
  s.set_replays(replays_.load());
  s.set_in_flight(a.in_flight);
  s.set_last_end_unix_us(a.last_end == absl::InfinitePast() ? 0 : absl::ToUnixMicros(a.last_end));
  s.set_commits_stopped(commits_stopped_.load());
  s.set_commits_joined(commits_joined_.load());
  s.set_reads(reads_.load());
  s.set_read_hedges(read_hedges_.load());
  s.set_slot_refusals(slot_refusals_.load());
  s.set_refused(refused_.load());
  s.set_faults_injected(faults_injected_.load());
  // The CPU a load cost this process is the difference of two readings
  // (chainctl load): served and refused calls priced from it.
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) == 0) {
    s.set_cpu_us(int64_t{u.ru_utime.tv_sec + u.ru_stime.tv_sec} * 1000000 + u.ru_utime.tv_usec +
                 u.ru_stime.tv_usec);
  }
  *s.mutable_faults() = FaultsToProto(faults_->config());
  return s;
}

void HopStats::Reset() {
  accounting_->Reset();
  retries_received_ = 0;
  commits_ = 0;
  replays_ = 0;
  commits_stopped_ = 0;
  commits_joined_ = 0;
  reads_ = 0;
  read_hedges_ = 0;
  slot_refusals_ = 0;
  refused_ = 0;
  faults_injected_ = 0;
}

std::string HopStats::ExtraMetrics() const {
  const AccountingSnapshot a = accounting_->Snapshot();
  const std::string labels = absl::StrCat("{hop=\"", hop_, "\",mode=\"", ModeName(mode_), "\"}");
  std::string out;
  absl::StrAppend(&out,
                  "# HELP demo_calls_started_after_deadline_total Calls whose work started after "
                  "the client deadline (x-demo-client-deadline-us) had passed.\n"
                  "# TYPE demo_calls_started_after_deadline_total counter\n"
                  "demo_calls_started_after_deadline_total",
                  labels, " ", a.started_after_deadline, "\n");
  absl::StrAppend(&out,
                  "# HELP demo_work_after_deadline_seconds_total Handler work done after the "
                  "client deadline had passed.\n"
                  "# TYPE demo_work_after_deadline_seconds_total counter\n"
                  "demo_work_after_deadline_seconds_total",
                  labels, " ",
                  absl::StrFormat("%.6f", absl::ToDoubleSeconds(a.work_after_deadline)), "\n");
  absl::StrAppend(&out,
                  "# HELP demo_retries_received_total Calls that arrived as a retry "
                  "(grpc-previous-rpc-attempts, hopbudget-previous-attempts or the baseline's "
                  "header).\n"
                  "# TYPE demo_retries_received_total counter\n"
                  "demo_retries_received_total",
                  labels, " ", retries_received_.load(), "\n");
  return out;
}

grpc::Status AdminService::SetFaults(grpc::ServerContext*, const SetFaultsRequest* req,
                                     Faults* resp) {
  absl::StatusOr<FaultConfig> c = FaultsFromProto(req->faults());
  if (!c.ok()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(c.status().message()));
  }
  if (absl::Status s = CheckFaultsSupported(*c, options_.support, options_.hop); !s.ok()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(s.message()));
  }
  if (absl::Status s = faults_->Set(*c); !s.ok()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(s.message()));
  }
  *resp = FaultsToProto(faults_->config());
  if (options_.verbose)
    std::cerr << options_.hop << ": faults " << resp->ShortDebugString() << "\n";
  return grpc::Status::OK;
}

grpc::Status AdminService::GetFaults(grpc::ServerContext*, const GetStatsRequest*, Faults* resp) {
  *resp = FaultsToProto(faults_->config());
  return grpc::Status::OK;
}

grpc::Status AdminService::GetStats(grpc::ServerContext*, const GetStatsRequest*, Stats* resp) {
  *resp = stats_->Proto();
  return grpc::Status::OK;
}

grpc::Status AdminService::ResetStats(grpc::ServerContext*, const GetStatsRequest*, Stats* resp) {
  stats_->Reset();
  *resp = stats_->Proto();
  return grpc::Status::OK;
}

}  // namespace hopbudget::demo
