// Copyright hopbudget authors.
//
// partition_load: the partition test's client, run inside the gateway's
// network namespace. Starts PlaceOrder calls at a fixed rate (open loop,
// whatever their latency), each with the same budget, and polls each hop's
// Admin stats (one thread per hop, every 100 ms); prints one line per event
// for the test to read:
//
//   start <unix_us>                          when the run began
//   call <start_ms> <elapsed_ms> <code> <source>
//                                            one per call, when it ends;
//                                            source: the attribution of a
//                                            DEADLINE_EXCEEDED ("-": none)
//   inflight <hop> <t_ms> <in_flight>        that hop's calls in handlers
//
//   partition_load --gateway=127.0.0.1:P
//                  --admin=gateway=127.0.0.1:P,orders=10.77.2.2:Q,ledger=10.77.3.2:R
//                  --rps=20 --budget=800ms --out=FILE
//
// Runs until SIGTERM, then waits for the calls in flight and exits 0.
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/cli/cli_flags.h"
#include "demo/demo.grpc.pb.h"
#include "hopbudget/advanced/attribution.h"

ABSL_FLAG(std::string, gateway, "", "gateway HOST:PORT (required)");
ABSL_FLAG(std::string, admin, "", "HOP=HOST:PORT,... whose Admin stats to poll (required)");
ABSL_FLAG(int, rps, 20, "calls started per second, 1..10000");
ABSL_FLAG(std::string, out, "", "file for the records (default stdout)");
ABSL_FLAG(absl::Duration, budget, absl::Milliseconds(800), "deadline of each call");

namespace hopbudget::demo {
namespace {

// Lines from several threads: one write each, serialized.
absl::Mutex out_mu;
FILE* out = stdout;

std::atomic<bool> stop{false};
extern "C" void OnTerm(int) { stop = true; }

struct Call {
  grpc::ClientContext ctx;
  Order order;
  OrderResult reply;
  grpc::Status status;
  absl::Time start;
  std::unique_ptr<grpc::ClientAsyncResponseReader<OrderResult>> rpc;
};

int Main(int argc, char** argv) {
  cli::ParseOrExit(argc, argv, "partition_load",
                   "partition_load: open-loop orders at the gateway during the partition "
                   "test; one record per call.\n\n"
                   "  partition_load --gateway=HOST:PORT --admin=HOP=HOST:PORT,... [--rps=20] "
                   "[--budget=800ms] [--out=FILE]");
  const std::string gateway = absl::GetFlag(FLAGS_gateway);
  const std::string admin_list = absl::GetFlag(FLAGS_admin);
  const int rps = absl::GetFlag(FLAGS_rps);
  const std::string out_path = absl::GetFlag(FLAGS_out);
  const absl::Duration budget = absl::GetFlag(FLAGS_budget);
  absl::Status admin_status = absl::OkStatus();
  std::vector<std::pair<std::string, std::string>> admins;
  for (absl::string_view item : absl::StrSplit(admin_list, ',', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    if (kv.first.empty() || kv.second.empty()) {
      admin_status = absl::InvalidArgumentError(
          absl::StrCat("--admin=", admin_list, ": want HOP=HOST:PORT, got '", item, "'"));
    }
    admins.push_back(std::move(kv));
  }
  cli::ExitIfBad(
      "partition_load",
      cli::FirstError({cli::Required("gateway", gateway), cli::Required("admin", admin_list),
                       admin_status, cli::InRange("rps", rps, 1, 10000),
                       cli::Positive("budget", budget)}));
  if (!out_path.empty()) out = std::fopen(out_path.c_str(), "w");
  if (out == nullptr) return 1;
  signal(SIGTERM, OnTerm);
  auto stub = Gateway::NewStub(grpc::CreateChannel(gateway, grpc::InsecureChannelCredentials()));
  const absl::Time t0 = absl::Now();
  std::fprintf(out, "start %lld\n", static_cast<long long>(absl::ToUnixMicros(t0)));
  std::fflush(out);
  auto ms = [t0](absl::Time t) { return absl::ToDoubleMilliseconds(t - t0); };

  grpc::CompletionQueue cq;
  std::thread reaper([&cq, &ms] {
    void* tag;
    bool ok;
    while (cq.Next(&tag, &ok)) {
      std::unique_ptr<Call> c(static_cast<Call*>(tag));
      const absl::Time end = absl::Now();
      absl::MutexLock lock(&out_mu);
      absl::optional<hopbudget::Attribution> a =
          hopbudget::DecodeStatusDetails(c->status.error_details());
      const std::string source(a.has_value() ? hopbudget::DeadlineSourceName(a->source) : "-");
      std::fprintf(out, "call %.1f %.1f %d %s\n", ms(c->start),
                   absl::ToDoubleMilliseconds(end - c->start),
                   static_cast<int>(c->status.error_code()), source.c_str());
      std::fflush(out);
    }
  });
  std::atomic<bool> done{false};
  // One poller per hop: a hop behind a lossy link must not delay the others.
  std::vector<std::thread> pollers;
  for (const auto& [hop, target] : admins) {
    pollers.emplace_back([&, hop = hop, target = target] {
      auto admin = Admin::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
      while (!done) {
        grpc::ClientContext ctx;
        ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Milliseconds(500)));
        Stats stats;
        if (admin->GetStats(&ctx, GetStatsRequest(), &stats).ok()) {
          absl::MutexLock lock(&out_mu);
          std::fprintf(out, "inflight %s %.1f %lld\n", hop.c_str(), ms(absl::Now()),
                       static_cast<long long>(stats.in_flight()));
          std::fflush(out);
        }
        absl::SleepFor(absl::Milliseconds(100));
      }
    });
  }
  const absl::Duration every = absl::Seconds(1) / rps;
  for (int64_t n = 0;; ++n) {
    const absl::Time at = t0 + every * n;
    absl::SleepFor(at - absl::Now());
    if (stop) break;
    auto* c = new Call;
    c->start = absl::Now();
    c->ctx.set_deadline(absl::ToChronoTime(c->start + budget));
    c->order.set_key(absl::StrCat("p-", absl::ToUnixMicros(t0), "-", n));
    Item* item = c->order.add_items();
    item->set_sku("sku-1");
    item->set_quantity(1);
    c->rpc = stub->AsyncPlaceOrder(&c->ctx, c->order, &cq);
    c->rpc->Finish(&c->reply, &c->status, c);
  }
  // Every call ends by its deadline.
  absl::SleepFor(budget + absl::Seconds(1));
  done = true;
  for (std::thread& t : pollers) t.join();
  cq.Shutdown();
  reaper.join();
  return 0;
}

}  // namespace
}  // namespace hopbudget::demo

int main(int argc, char** argv) { return hopbudget::demo::Main(argc, argv); }
