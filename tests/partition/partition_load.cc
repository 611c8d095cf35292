// Copyright hopbudget authors.
//
// partition_load: the partition test's client, run inside the gateway's
// network namespace. Starts PlaceOrder calls at a fixed rate (open loop,
// whatever their latency), each with the same budget, and polls the orders
// service's Admin stats; prints one line per event for the test to read:
//
//   start <unix_us>                          when the run began
//   call <start_ms> <elapsed_ms> <code>      one per call, when it ends
//   orders <t_ms> <in_flight>                orders' calls in handlers
//
//   partition_load --gateway=127.0.0.1:P --orders=10.77.2.2:Q --rps=20
//                  --budget=800ms --out=FILE
//
// Runs until SIGTERM, then waits for the calls in flight and exits 0.
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/cli/cli_flags.h"
#include "demo/demo.grpc.pb.h"

ABSL_FLAG(std::string, gateway, "", "gateway HOST:PORT (required)");
ABSL_FLAG(std::string, orders, "", "orders HOST:PORT, for its Admin stats (required)");
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
                   "  partition_load --gateway=HOST:PORT --orders=HOST:PORT [--rps=20] "
                   "[--budget=800ms] [--out=FILE]");
  const std::string gateway = absl::GetFlag(FLAGS_gateway);
  const std::string orders = absl::GetFlag(FLAGS_orders);
  const int rps = absl::GetFlag(FLAGS_rps);
  const std::string out_path = absl::GetFlag(FLAGS_out);
  const absl::Duration budget = absl::GetFlag(FLAGS_budget);
  cli::ExitIfBad(
      "partition_load",
      cli::FirstError({cli::Required("gateway", gateway), cli::Required("orders", orders),
                       cli::InRange("rps", rps, 1, 10000), cli::Positive("budget", budget)}));
  if (!out_path.empty()) out = std::fopen(out_path.c_str(), "w");
  if (out == nullptr) return 1;
  signal(SIGTERM, OnTerm);
  auto stub = Gateway::NewStub(grpc::CreateChannel(gateway, grpc::InsecureChannelCredentials()));
  auto admin = Admin::NewStub(grpc::CreateChannel(orders, grpc::InsecureChannelCredentials()));
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
      std::fprintf(out, "call %.1f %.1f %d\n", ms(c->start), absl::ToDoubleMilliseconds(end - c->start),
                  static_cast<int>(c->status.error_code()));
      std::fflush(out);
    }
  });
  std::atomic<bool> done{false};
  std::thread poller([&] {
    while (!done) {
      grpc::ClientContext ctx;
      ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Milliseconds(500)));
      Stats stats;
      if (admin->GetStats(&ctx, GetStatsRequest(), &stats).ok()) {
        absl::MutexLock lock(&out_mu);
        std::fprintf(out, "orders %.1f %lld\n", ms(absl::Now()),
                    static_cast<long long>(stats.in_flight()));
        std::fflush(out);
      }
      absl::SleepFor(absl::Milliseconds(100));
    }
  });
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
  poller.join();
  cq.Shutdown();
  reaper.join();
  return 0;
}

}  // namespace
}  // namespace hopbudget::demo

int main(int argc, char** argv) { return hopbudget::demo::Main(argc, argv); }
