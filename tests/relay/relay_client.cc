// Copyright hopbudget authors.
//
// relay_client: the edge of a chain of relay_server hops, for the tests
// (tests/relay/README.md). Sends one Call with a deadline and prints what
// each hop saw, or which budget fired where. With --watch it opens a
// Relay.Watch stream instead and prints each message as it arrives, then
// how the stream ended.
//
//   hopbudget_relay_client --target=localhost:PORT_A --budget=500ms --work=10ms,10ms,10ms
//   hopbudget_relay_client --target=localhost:PORT_A --budget=5s --watch --work=0,0,100ms
//       --messages=5 --silent-after=3   (one command line)
//
// Exit status: 0 on OK, 1 on an RPC error, 2 on bad arguments.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/cli/cli_flags.h"
#include "echo/relay.grpc.pb.h"
#include "hopbudget/advanced/budget.h"
#include "hopbudget/client.h"

ABSL_FLAG(std::string, target, "localhost:50051", "the first hop, HOST:PORT");
ABSL_FLAG(absl::Duration, budget, absl::Seconds(1), "the call's deadline (0 = none)");
ABSL_FLAG(std::vector<std::string>, work, {},
          "work at each hop, comma-separated durations (10ms,10ms,10ms): one hop each; with "
          "--watch the last hop's is the time before each message");
ABSL_FLAG(bool, watch, false, "open a Watch stream instead of a Call");
ABSL_FLAG(int, messages, 5, "--watch: how many messages the last hop sends");
ABSL_FLAG(int, silent_after, 0,
          "--watch: the last hop goes silent after this many messages (0 = never)");

namespace {

using hopbudget::echo::HopReport;
using hopbudget::echo::Relay;
using hopbudget::echo::RelayReply;
using hopbudget::echo::RelayRequest;

const char* CodeName(grpc::StatusCode code) {
  // clang-format off
  static const char* const kNames[] = {
      "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
      "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
      "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
      "UNAUTHENTICATED"};
  // clang-format on
  const int i = static_cast<int>(code);
  return i >= 0 && i < static_cast<int>(sizeof(kNames) / sizeof(kNames[0])) ? kNames[i]
                                                                            : "(unknown code)";
}

// HopReport microseconds: -1 is infinite.
std::string Micros(int64_t us) {
  return us < 0 ? "inf" : hopbudget::FormatBudget(absl::Microseconds(us));
}

}  // namespace

int main(int argc, char** argv) {
  namespace cli = hopbudget::cli;
  cli::ParseOrExit(argc, argv, "hopbudget_relay_client",
                   "hopbudget_relay_client: the edge of a Relay chain; sends one Call and "
                   "prints what each hop saw, or which budget fired where.\n\n"
                   "  hopbudget_relay_client --target=HOST:PORT --budget=500ms "
                   "--work=10ms,10ms,10ms");
  const std::string target = absl::GetFlag(FLAGS_target);
  const absl::Duration budget = absl::GetFlag(FLAGS_budget);
  const bool watch = absl::GetFlag(FLAGS_watch);
  const int messages = absl::GetFlag(FLAGS_messages);
  const int silent_after = absl::GetFlag(FLAGS_silent_after);
  cli::ExitIfBad("hopbudget_relay_client",
                 cli::FirstError({cli::NonNegative("budget", budget),
                                  cli::InRange("messages", messages, 0, 1000000),
                                  cli::InRange("silent-after", silent_after, 0, messages)}));
  std::vector<int64_t> work_ms;
  for (const std::string& w : absl::GetFlag(FLAGS_work)) {
    absl::Duration d;
    if (!absl::ParseDuration(w, &d) || d < absl::ZeroDuration() || d == absl::InfiniteDuration()) {
      cli::ExitIfBad("hopbudget_relay_client",
                     absl::InvalidArgumentError(
                         absl::StrCat("--work=", absl::StrJoin(absl::GetFlag(FLAGS_work), ","),
                                      ": \"", w, "\" is not a duration (10ms, 1s)")));
    }
    work_ms.push_back(absl::ToInt64Milliseconds(d));
  }

  // hopbudget: the edge installs the client interceptor too, so that the
  // first hop is told the exact budget and a local expiry is attributed.
  hopbudget::ClientOptions options;
  options.hop = "relay-client";
  auto channel = hopbudget::CreateChannel(target, grpc::InsecureChannelCredentials(), options);
  if (!channel.ok()) {
    std::cerr << channel.status() << "\n";
    return 2;
  }
  std::unique_ptr<Relay::Stub> stub = Relay::NewStub(*channel);

  RelayRequest request;
  request.set_payload("hello");
  for (int64_t ms : work_ms) request.add_steps()->set_work_ms(ms);

  grpc::ClientContext ctx;
  if (budget > absl::ZeroDuration()) {
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + budget));
  }
  RelayReply reply;
  const absl::Time start = absl::Now();
  grpc::Status status;
  if (watch) {
    // The hops before the last relay (their step: work before relaying);
    // the last hop sends one message per step after it.
    RelayRequest stream;
    stream.set_payload(request.payload());
    for (size_t i = 0; i + 1 < work_ms.size(); ++i) *stream.add_steps() = request.steps(i);
    const int64_t every = work_ms.empty() ? 0 : work_ms.back();
    for (int i = 1; i <= messages; ++i) {
      hopbudget::echo::Step* s = stream.add_steps();
      s->set_work_ms(static_cast<int32_t>(every));
      s->set_hang(i == silent_after);
    }
    std::unique_ptr<grpc::ClientReader<RelayReply>> reader = stub->Watch(&ctx, stream);
    while (reader->Read(&reply)) {
      std::vector<std::string> hops;
      for (const HopReport& hop : reply.hops()) hops.push_back(hop.hop());
      std::printf("message %s after %s via %s\n", reply.payload().c_str(),
                  hopbudget::FormatBudget(absl::Now() - start).c_str(),
                  absl::StrJoin(hops, ",").c_str());
    }
    status = reader->Finish();
    if (status.ok()) {
      std::printf("OK after %s\n", hopbudget::FormatBudget(absl::Now() - start).c_str());
      return 0;
    }
  } else {
    status = stub->Call(&ctx, request, &reply);
  }
  const std::string took = hopbudget::FormatBudget(absl::Now() - start);

  if (status.ok()) {
    std::printf("OK after %s\n", took.c_str());
    std::printf("%-16s %-18s %-18s %s\n", "hop", "budget_on_arrival", "downstream_budget",
                "source");
    for (const HopReport& hop : reply.hops()) {
      std::printf(
          "%-16s %-18s %-18s %s\n", hop.hop().c_str(), Micros(hop.budget_on_arrival_us()).c_str(),
          hop.downstream_budget_us() == 0 ? "-" : Micros(hop.downstream_budget_us()).c_str(),
          hop.source().c_str());
    }
    return 0;
  }

  std::printf("error after %s: %s: %s\n", took.c_str(), CodeName(status.error_code()),
              status.error_message().c_str());
  if (auto a = hopbudget::AttributionOf(status)) {
    std::printf("attribution: source=%s hop=%s budget=%s elapsed=%s\n",
                std::string(hopbudget::DeadlineSourceName(a->source)).c_str(),
                a->hop.empty() ? "(unknown)" : a->hop.c_str(),
                hopbudget::FormatBudget(a->budget).c_str(),
                hopbudget::FormatBudget(a->elapsed).c_str());
  } else {
    std::printf("attribution: none\n");
  }
  return 1;
}
