// Copyright hopbudget authors.
//
// relay_server: one hop of a Relay chain with hopbudget dropped in, and the
// faults the tests need (--hang-first, --retry-attempts, --stream-idle,
// Relay.Watch). Used by service_process_test (tests/demo), the cli checks
// and python.stream_idle (tests/python); the smallest drop-in for reading is
// examples/minimal_server.cc. Everything hopbudget-specific is marked
// "hopbudget:"; the rest is an ordinary Relay hop.
//
//   hopbudget_relay_server --port=0 --hop=c
//   hopbudget_relay_server --port=0 --hop=b --next=localhost:PORT_C --request-cap=50ms
//   hopbudget_relay_server --port=0 --hop=a --next=localhost:PORT_B
//
// Relay.Watch streams through the same chain: the last hop sends one message
// per step of its request, every other hop relays the stream from the next
// one under a stream idle budget (--stream-idle, or the request's
// steps[0].relay_watch_idle_ms), so a stream that goes silent below is cut
// with DEADLINE_EXCEEDED, source idle, at the hop that saw the silence
// (tests/relay/README.md).
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "client/cli/cli_flags.h"
#include "echo/relay.grpc.pb.h"
#include "hopbudget/advanced/retry_loop.h"
#include "hopbudget/client.h"
#include "hopbudget/server.h"

ABSL_FLAG(int, port, 50051, "port, 0..65535 (0 = any free port)");
ABSL_FLAG(std::string, host, "0.0.0.0", "the address to listen on (127.0.0.1: loopback only)");
ABSL_FLAG(std::string, hop, "relay", "this hop's name");
ABSL_FLAG(std::string, next, "", "the next hop, HOST:PORT (empty: this is the last hop)");
ABSL_FLAG(absl::Duration, request_cap, absl::ZeroDuration(),
          "most time one request may take here (0 = no cap of our own)");
ABSL_FLAG(absl::Duration, min_budget, absl::Milliseconds(1),
          "below this a call is refused / not started");
ABSL_FLAG(absl::Duration, attempt_cap, absl::ZeroDuration(),
          "most time per downstream attempt (0 = none)");
ABSL_FLAG(int, retry_attempts, 1, "> 1: call --next through a retry loop with this many attempts");
ABSL_FLAG(int, hang_first, 0, "the first N calls hang until cancelled (a dead peer)");
ABSL_FLAG(absl::Duration, stream_idle, absl::ZeroDuration(),
          "most silence allowed on a Watch stream relayed from --next, before it is cut "
          "DEADLINE_EXCEEDED (source idle); a request's steps[0].relay_watch_idle_ms overrides "
          "it (0 = no idle budget)");

namespace {

// The command line, read once in main.
struct Flags {
  int port;
  std::string host;
  std::string hop;
  std::string next;
  absl::Duration request_cap;
  absl::optional<absl::Duration> min_budget;  // unset: the policy's default
  absl::Duration attempt_cap;
  int retry_attempts;
  int hang_first;
  absl::Duration stream_idle;  // zero: none
};

using hopbudget::echo::HopReport;
using hopbudget::echo::Relay;
using hopbudget::echo::RelayReply;
using hopbudget::echo::RelayRequest;

// -1 for infinite, as HopReport wants it.
int64_t ReportMicros(absl::Duration d) {
  if (d == absl::InfiniteDuration()) return -1;
  return absl::ToInt64Microseconds(std::max(d, absl::ZeroDuration()));
}

class RelayService final : public Relay::Service {
 public:
  // `retry`: retry the downstream call within the budget (nullptr: one call).
  RelayService(std::string hop, std::unique_ptr<Relay::Stub> next,
               std::unique_ptr<hopbudget::RetryLoop> retry, int hang_first)
      : hop_(std::move(hop)),
        next_(std::move(next)),
        retry_(std::move(retry)),
        hang_first_(hang_first) {}

  // The stream of Call: the last hop sends one message per step of its
  // request (each after that step's work_ms; a step with `hang` is followed
  // by silence until the call is cancelled); every other hop relays the
  // stream from the next hop, adding its report to each message.
  grpc::Status Watch(grpc::ServerContext* ctx, const RelayRequest* request,
                     grpc::ServerWriter<RelayReply>* writer) override {
    // hopbudget: as for Call, a refused call gets no work.
    const hopbudget::InboundBudget* budget = hopbudget::InboundBudget::Of(*ctx);
    if (budget != nullptr && budget->refused()) return grpc::Status::CANCELLED;
    const HopReport report = Report(budget);
    if (next_ == nullptr) return Stream(*ctx, *request, budget, report, writer);

    const hopbudget::echo::Step step =
        request->steps_size() > 0 ? request->steps(0) : hopbudget::echo::Step();
    if (step.relay_watch_idle_ms() < 0) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("steps[0].relay_watch_idle_ms: ", step.relay_watch_idle_ms(),
                                       " is negative (0: this hop's --stream-idle)"));
    }
    if (!Work(*ctx, step.work_ms())) return Ended(budget, "expired before relaying");
    RelayRequest down;
    down.set_payload(request->payload());
    for (int i = 1; i < request->steps_size(); ++i) *down.add_steps() = request->steps(i);

    // hopbudget: the stream's deadline is what is left of ours, less the hop
    // reserve, and our caller's cancel cancels it. Its idle budget (the
    // channel's --stream-idle unless the request names one) is enforced by
    // the client interceptor: silence longer than that cancels the stream
    // and Finish() answers DEADLINE_EXCEEDED, source idle, at this hop.
    std::unique_ptr<grpc::ClientContext> call = hopbudget::NewDownstreamContext(*ctx);
    if (step.relay_watch_idle_ms() > 0) {
      hopbudget::SetStreamIdleBudget(*call, absl::Milliseconds(step.relay_watch_idle_ms()));
    }
    std::unique_ptr<grpc::ClientReader<RelayReply>> reader = next_->Watch(call.get(), down);
    RelayReply in;
    while (reader->Read(&in)) {
      RelayReply out;
      out.set_payload(in.payload());
      *out.add_hops() = report;
      for (HopReport& r : *in.mutable_hops()) *out.add_hops() = std::move(r);
      if (!writer->Write(out)) {
        // Our caller left: stop the stream below, then read it to its end
        // (Finish() needs every message read).
        call->TryCancel();
        while (reader->Read(&in)) {
        }
        break;
      }
    }
    // Unchanged, so that a DEADLINE_EXCEEDED keeps the attribution of the
    // hop where the budget fired (an idle cut further down stays that hop's).
    return reader->Finish();
  }

  grpc::Status Call(grpc::ServerContext* ctx, const RelayRequest* request,
                    RelayReply* reply) override {
    const int call_number = ++calls_;
    auto previous = ctx->client_metadata().find("grpc-previous-rpc-attempts");
    if (previous != ctx->client_metadata().end()) {
      std::cout << hop_ << ": call " << call_number << " is a retry (grpc-previous-rpc-attempts="
                << std::string(previous->second.data(), previous->second.size()) << ")"
                << std::endl;
    }
    if (call_number <= hang_first_) {
      // A dead peer: never answers; the caller's budget must end the call.
      std::cout << hop_ << ": call " << call_number << " hangs until cancelled" << std::endl;
      while (!ctx->IsCancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      return grpc::Status::CANCELLED;
    }
    // hopbudget: a call that arrived without enough budget is refused: the
    // interceptor answers it DEADLINE_EXCEEDED whatever we return; do no
    // work for it.
    const hopbudget::InboundBudget* budget = hopbudget::InboundBudget::Of(*ctx);
    if (budget != nullptr && budget->refused()) return grpc::Status::CANCELLED;

    HopReport report = Report(budget);

    const int work_ms = request->steps_size() > 0 ? request->steps(0).work_ms() : 0;
    if (!Work(*ctx, work_ms)) {
      // The call is over already (deadline, request cap or caller cancel) and
      // this status is never sent; DEADLINE_EXCEEDED lets the interceptor
      // count an expiry as one.
      const bool expired = budget != nullptr && budget->remaining() <= absl::ZeroDuration();
      return expired ? grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "expired during work")
                     : grpc::Status::CANCELLED;
    }

    if (next_ != nullptr) {
      RelayRequest down;
      down.set_payload(request->payload());
      for (int i = 1; i < request->steps_size(); ++i) *down.add_steps() = request->steps(i);

      // hopbudget: the downstream deadline is what is left of ours, less the
      // hop reserve; cancelling our call cancels this one.
      auto report_budget = [&](const grpc::ClientContext& call) {
        const absl::Time now = budget != nullptr ? budget->clock().Now() : absl::Now();
        const auto deadline = call.deadline();
        report.set_downstream_budget_us(deadline == std::chrono::system_clock::time_point::max()
                                            ? -1
                                            : ReportMicros(absl::FromChrono(deadline) - now));
      };
      RelayReply down_reply;
      grpc::Status status;
      if (retry_ != nullptr) {
        // hopbudget: one real call per attempt, each with min(what is left,
        // attempt cap); the loop owns the attempts' contexts.
        status = retry_->Call(hopbudget::LogicalCall::Of(*ctx), [&](grpc::ClientContext* attempt) {
          if (report.downstream_budget_us() == 0) report_budget(*attempt);
          return next_->Call(attempt, down, &down_reply);
        });
      } else {
        std::unique_ptr<grpc::ClientContext> call = hopbudget::NewDownstreamContext(*ctx);
        report_budget(*call);
        status = next_->Call(call.get(), down, &down_reply);
      }
      // Unchanged, so that a DEADLINE_EXCEEDED keeps the attribution of the
      // hop where the budget fired.
      if (!status.ok()) return status;
      reply->set_payload(down_reply.payload());
      *reply->add_hops() = std::move(report);
      for (HopReport& r : *down_reply.mutable_hops()) *reply->add_hops() = std::move(r);
      return grpc::Status::OK;
    }
    reply->set_payload(request->payload());
    *reply->add_hops() = std::move(report);
    return grpc::Status::OK;
  }

 private:
  HopReport Report(const hopbudget::InboundBudget* budget) const {
    HopReport report;
    report.set_hop(hop_);
    report.set_budget_on_arrival_us(budget != nullptr ? ReportMicros(budget->budget_on_arrival())
                                                      : -1);
    report.set_source(std::string(hopbudget::DeadlineSourceName(
        budget != nullptr ? budget->source() : hopbudget::DeadlineSource::kNone)));
    return report;
  }

  // The status of a call that ended while this hop worked. It is never sent
  // (the call is over); DEADLINE_EXCEEDED lets the interceptor count an
  // expiry as one.
  static grpc::Status Ended(const hopbudget::InboundBudget* budget, const char* what) {
    const bool expired = budget != nullptr && budget->remaining() <= absl::ZeroDuration();
    return expired ? grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, what)
                   : grpc::Status::CANCELLED;
  }

  // The last hop of a Watch: one message per step, payload its index.
  static grpc::Status Stream(grpc::ServerContext& ctx, const RelayRequest& request,
                             const hopbudget::InboundBudget* budget, const HopReport& report,
                             grpc::ServerWriter<RelayReply>* writer) {
    for (int i = 0; i < request.steps_size(); ++i) {
      if (!Work(ctx, request.steps(i).work_ms())) return Ended(budget, "expired while streaming");
      RelayReply message;
      message.set_payload(absl::StrCat(i));
      *message.add_hops() = report;
      if (!writer->Write(message)) return grpc::Status::CANCELLED;  // the caller left
      if (request.steps(i).hang()) {
        // Silence: no message, no status, until the caller gives up.
        Work(ctx, std::numeric_limits<int>::max());
        return grpc::Status::CANCELLED;
      }
    }
    return grpc::Status::OK;
  }

  // Sleeps `work_ms` in small slices; false if the call was cancelled first.
  static bool Work(const grpc::ServerContext& ctx, int work_ms) {
    using Clock = std::chrono::steady_clock;
    const Clock::time_point end = Clock::now() + std::chrono::milliseconds(std::max(work_ms, 0));
    while (!ctx.IsCancelled()) {
      const Clock::time_point now = Clock::now();
      if (now >= end) return true;
      std::this_thread::sleep_for(
          std::min<Clock::duration>(end - now, std::chrono::milliseconds(1)));
    }
    return false;
  }

  const std::string hop_;
  const std::unique_ptr<Relay::Stub> next_;
  const std::unique_ptr<hopbudget::RetryLoop> retry_;
  const int hang_first_;
  std::atomic<int> calls_{0};
};

}  // namespace

int main(int argc, char** argv) {
  namespace cli = hopbudget::cli;
  const cli::CommandLine cl = cli::ParseOrExit(
      argc, argv, "hopbudget_relay_server",
      "hopbudget_relay_server: one hop of a Relay chain with hopbudget dropped in; prints "
      "\"listening on PORT\".\n\n"
      "  hopbudget_relay_server --port=0 --hop=b --next=localhost:PORT_C [--request-cap=50ms]");
  Flags flags;
  flags.port = absl::GetFlag(FLAGS_port);
  flags.host = absl::GetFlag(FLAGS_host);
  flags.hop = absl::GetFlag(FLAGS_hop);
  flags.next = absl::GetFlag(FLAGS_next);
  flags.request_cap = absl::GetFlag(FLAGS_request_cap);
  if (cl.WasSet("min_budget")) flags.min_budget = absl::GetFlag(FLAGS_min_budget);
  flags.attempt_cap = absl::GetFlag(FLAGS_attempt_cap);
  flags.retry_attempts = absl::GetFlag(FLAGS_retry_attempts);
  flags.hang_first = absl::GetFlag(FLAGS_hang_first);
  flags.stream_idle = absl::GetFlag(FLAGS_stream_idle);
  cli::ExitIfBad("hopbudget_relay_server",
                 cli::FirstError({cli::InRange("port", flags.port, 0, 65535),
                                  cli::Required("host", flags.host),
                                  cli::NonNegative("request-cap", flags.request_cap),
                                  cli::NonNegative("min-budget", absl::GetFlag(FLAGS_min_budget)),
                                  cli::NonNegative("attempt-cap", flags.attempt_cap),
                                  cli::InRange("retry-attempts", flags.retry_attempts, 1, 100),
                                  cli::InRange("hang-first", flags.hang_first, 0, 1 << 30),
                                  cli::NonNegative("stream-idle", flags.stream_idle)}));

  std::unique_ptr<Relay::Stub> next;
  std::unique_ptr<hopbudget::RetryLoop> retry;
  if (!flags.next.empty()) {
    // hopbudget: downstream calls go through the client interceptor.
    hopbudget::ClientOptions client_options;
    client_options.hop = flags.hop;
    // hopbudget: every stream on this channel (Watch) is cut when it stays
    // silent longer than this; a call can override it (SetStreamIdleBudget).
    if (flags.stream_idle > absl::ZeroDuration()) {
      client_options.stream_idle_budget = flags.stream_idle;
    }
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        hopbudget::CreateChannel(flags.next, grpc::InsecureChannelCredentials(), client_options);
    if (!channel.ok()) {
      std::cerr << channel.status() << "\n";
      return 2;
    }
    next = Relay::NewStub(*channel);
    if (flags.retry_attempts > 1) {
      // hopbudget: each attempt gets min(what is left, attempt cap).
      hopbudget::RetryLoopOptions loop;
      loop.hop = flags.hop;
      loop.method = "/hopbudget.echo.Relay/Call";
      if (flags.attempt_cap > absl::ZeroDuration()) {
        loop.budget.attempt_cap = flags.attempt_cap;
      }
      if (flags.min_budget.has_value()) {
        loop.budget.min_attempt_budget = *flags.min_budget;
      }
      loop.retry.max_attempts = flags.retry_attempts;
      absl::StatusOr<std::unique_ptr<hopbudget::RetryLoop>> created =
          hopbudget::RetryLoop::Create(loop);
      if (!created.ok()) {
        std::cerr << created.status() << "\n";
        return 2;
      }
      retry = *std::move(created);
    }
  }
  RelayService service(flags.hop, std::move(next), std::move(retry), flags.hang_first);

  // hopbudget: one server interceptor per server.
  hopbudget::ServerOptions options;
  options.hop = flags.hop;
  if (flags.min_budget.has_value()) {
    options.policy.min_attempt_budget = *flags.min_budget;
  }
  if (flags.request_cap > absl::ZeroDuration()) {
    options.policy.request_cap = flags.request_cap;
  }
  if (flags.attempt_cap > absl::ZeroDuration()) {
    options.policy.attempt_cap = flags.attempt_cap;
  }
  auto factory = hopbudget::MakeServerInterceptorFactory(options);
  if (!factory.ok()) {
    std::cerr << factory.status() << "\n";
    return 2;
  }
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
  creators.push_back(*std::move(factory));

  grpc::ServerBuilder builder;
  // A port in use is an error: gRPC's default SO_REUSEPORT would let a
  // second server share it and split the connections between the two.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Permit the keepalive pings of hopbudget::CreateChannel (every 10 s, also
  // without calls; gRPC's default policy answers them with GOAWAY).
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  int port = 0;
  builder.AddListeningPort(absl::StrCat(flags.host, ":", flags.port),
                           grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  builder.experimental().SetInterceptorCreators(std::move(creators));
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::cerr << "cannot listen on port " << flags.port << " (in use by another server?)\n";
    return 1;
  }
  std::cout << "listening on " << port << std::endl;
  server->Wait();
  return 0;
}
