// Copyright hopbudget authors.
//
// precision_bench: how late after its budget expires a call returns
// DEADLINE_EXCEEDED to its caller, for each source of the deadline. Real
// gRPC servers in this process (callback API, hopbudget installed) on
// 127.0.0.1, whose handler hangs until the call is cancelled; the caller
// makes blocking unary calls one at a time:
//   client   the caller's own deadline (ClientContext::set_deadline), through
//            hopbudget's client interceptor; fires in gRPC's client timer.
//   attempt  the retrying channel's attempt cap (max_attempts = 1, client
//            deadline 1 s): the attempt's deadline is set by hopbudget.
//            Measured against call start + attempt_cap, an upper bound (the
//            attempt starts a few us after the call).
//   client-plain  the same without any interceptor (plain channel and
//            server): gRPC's own floor, for reference.
//   request  the server's ServerOptions policy.request_cap, enforced by
//            hopbudget's shared timer on the server; measured against the
//            deadline the server interceptor derived (InboundBudget).
// Lateness = the time the blocking call returned (absl::Now(), realtime,
// because deadlines are absl::Time) - the budget's deadline.
//
//   precision_bench [--calls=500] [--budget=10ms]
#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bench_modes.h"
#include "bench_util.h"
#include "echo/relay.grpc.pb.h"
#include "hopbudget/advanced/retry.h"
#include "hopbudget/client.h"
#include "hopbudget/server.h"

ABSL_FLAG(int, calls, 500, "calls per measurement, 1..1000000");
ABSL_FLAG(absl::Duration, budget, absl::Milliseconds(10), "each call's deadline");

namespace hopbudget {
namespace bench {
namespace {

// Deadlines the server interceptor derived, by request payload.
class DeadlineBook {
 public:
  void Put(const std::string& id, absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    book_[id] = deadline;
  }
  absl::Time Take(const std::string& id) {
    absl::MutexLock lock(&mu_);
    auto it = book_.find(id);
    if (it == book_.end()) return absl::InfinitePast();
    absl::Time t = it->second;
    book_.erase(it);
    return t;
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, absl::Time> book_ ABSL_GUARDED_BY(mu_);
};

// Parks the call until it is cancelled (by a deadline, by hopbudget's
// request timer, or by the caller): no thread, no polling.
class HangReactor : public grpc::ServerUnaryReactor {
 public:
  void OnCancel() override { Finish(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled")); }
  void OnDone() override { delete this; }
};

class HangService final : public echo::Relay::CallbackService {
 public:
  explicit HangService(DeadlineBook* book) : book_(book) {}
  grpc::ServerUnaryReactor* Call(grpc::CallbackServerContext* ctx, const echo::RelayRequest* req,
                                 echo::RelayReply* /*reply*/) override {
    const InboundBudget* budget = InboundBudget::Of(*ctx);
    if (budget != nullptr) book_->Put(req->payload(), budget->deadline());
    return new HangReactor;
  }

 private:
  DeadlineBook* book_;
};

struct Server {
  Server(DeadlineBook* book, const BudgetPolicy& policy, const std::string& mode = "hopbudget")
      : service(book) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service);
    InstallServerMode(mode, builder, "server", policy);
    server = builder.BuildAndStart();
    if (server == nullptr) Die("could not start a server");
  }
  ~Server() {
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server->Wait();
  }
  std::string target() const { return absl::StrCat("127.0.0.1:", port); }
  HangService service;
  int port = 0;
  std::unique_ptr<grpc::Server> server;
};

struct Row {
  std::string source;
  Stats stats;
  int wrong = 0;       // calls that did not end in DEADLINE_EXCEEDED of this source
  double p99_all = 0;  // p99 lateness with the wrong calls counted as infinitely late
};

int Main(int argc, char** argv) {
  cli::ParseOrExit(argc, argv, "precision_bench",
                   "precision_bench: how close to its deadline a call ends, per deadline "
                   "source.\n\n  precision_bench [--calls=500] [--budget=10ms]");
  const int calls = absl::GetFlag(FLAGS_calls);
  const absl::Duration budget = absl::GetFlag(FLAGS_budget);
  cli::ExitIfBad("precision_bench", cli::FirstError({cli::InRange("calls", calls, 1, 1000000),
                                                     cli::Positive("budget", budget)}));

  DeadlineBook book;
  Server open_server(&book, BenchServerPolicy());
  BudgetPolicy capped;
  capped.request_cap = budget;
  capped.hop_reserve = std::min(absl::Milliseconds(5), budget / 4);
  capped.min_attempt_budget = std::min(absl::Milliseconds(1), budget / 4);
  Server capped_server(&book, capped);
  Server plain_server(&book, BenchServerPolicy(), "plain");

  ClientOptions client_options;
  client_options.hop = "caller";
  auto client_channel =
      CreateChannel(open_server.target(), grpc::InsecureChannelCredentials(), client_options);
  if (!client_channel.ok()) Die(client_channel.status().ToString());
  RetryOptions retry;
  retry.client.hop = "caller";
  retry.budget.request_cap = absl::Seconds(2);
  retry.budget.attempt_cap = budget;
  retry.retry.max_attempts = 1;
  auto retry_channel =
      CreateRetryingChannel(open_server.target(), grpc::InsecureChannelCredentials(), retry);
  if (!retry_channel.ok()) Die(retry_channel.status().ToString());
  auto capped_channel =
      CreateChannel(capped_server.target(), grpc::InsecureChannelCredentials(), client_options);
  if (!capped_channel.ok()) Die(capped_channel.status().ToString());

  struct Case {
    std::string source;
    std::shared_ptr<grpc::Channel> channel;
    DeadlineSource expected;
  };
  std::vector<Case> cases = {
      {"client-plain", MakeClientChannel("plain", plain_server.target()), DeadlineSource::kNone},
      {"client", *client_channel, DeadlineSource::kClient},
      {"attempt", *retry_channel, DeadlineSource::kAttempt},
      {"request", *capped_channel, DeadlineSource::kRequest}};
  std::vector<Row> rows;
  for (const Case& c : cases) {
    auto stub = echo::Relay::NewStub(c.channel);
    // Warm-up: connect, and the first calls of each path.
    for (int i = 0; i < 20; ++i) {
      grpc::ClientContext ctx;
      ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Milliseconds(2)));
      echo::RelayRequest req;
      req.set_payload(absl::StrCat("warm-", c.source, "-", i));
      echo::RelayReply reply;
      stub->Call(&ctx, req, &reply);
      book.Take(req.payload());
    }
    Row row;
    row.source = c.source;
    std::vector<double> late_ms;
    for (int i = 0; i < calls; ++i) {
      grpc::ClientContext ctx;
      echo::RelayRequest req;
      req.set_payload(absl::StrCat(c.source, "-", i));
      echo::RelayReply reply;
      const absl::Time start = absl::Now();
      absl::Time deadline;
      const bool client_deadline = c.source == "client" || c.source == "client-plain";
      if (client_deadline) {
        deadline = start + budget;
      } else {
        ctx.set_deadline(absl::ToChronoTime(start + absl::Seconds(1)));
        deadline = start + budget;  // attempt: an upper bound; request: replaced below
      }
      if (client_deadline) ctx.set_deadline(absl::ToChronoTime(deadline));
      grpc::Status status = stub->Call(&ctx, req, &reply);
      const absl::Time done = absl::Now();
      const absl::Time server_deadline = book.Take(req.payload());
      if (c.source == "request") deadline = server_deadline;
      absl::optional<Attribution> a = AttributionOf(status);
      const bool attributed = c.expected == DeadlineSource::kNone
                                  ? !a.has_value()
                                  : a.has_value() && a->source == c.expected;
      if (status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED || !attributed ||
          deadline == absl::InfinitePast()) {
        if (row.wrong++ == 0) {
          std::fprintf(
              stderr, "precision_bench: %s call %d after %s: %s: %s\n", c.source.c_str(), i,
              absl::FormatDuration(done - start).c_str(),
              absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code())).c_str(),
              status.error_message().c_str());
        }
        continue;
      }
      late_ms.push_back(absl::ToDoubleMilliseconds(done - deadline));
    }
    // Calls answered wrongly count as infinitely late in the p99 the target
    // is judged on.
    row.p99_all = QuantileCountingFailures(late_ms, row.wrong, 0.99);
    row.stats = Summarize(late_ms);
    rows.push_back(row);
  }

  std::printf("Enforcement precision: lateness of DEADLINE_EXCEEDED at the caller, budget %s\n\n",
              absl::FormatDuration(budget).c_str());
  std::printf("| source | calls | p50 (ms) | p99 (ms) | max (ms) | not attributed |\n");
  std::printf("| --- | --- | --- | --- | --- | --- |\n");
  for (const Row& r : rows) {
    std::printf("| %s | %zu | %s | %s | %s | %d |\n", r.source.c_str(), r.stats.n,
                Fixed(r.stats.p50).c_str(), Fixed(r.stats.p99).c_str(), Fixed(r.stats.max).c_str(),
                r.wrong);
  }
  std::printf("\n");
  for (const Row& r : rows) {
    std::printf(
        "RESULT bench=precision source=%s calls=%zu p50_ms=%.4f p99_ms=%.4f max_ms=%.4f "
        "wrong=%d budget_ms=%.1f p99_all_ms=%.4f\n",
        r.source.c_str(), r.stats.n, r.stats.p50, r.stats.p99, r.stats.max, r.wrong,
        absl::ToDoubleMilliseconds(budget), r.p99_all);
  }
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace hopbudget

int main(int argc, char** argv) { return hopbudget::bench::Main(argc, argv); }
