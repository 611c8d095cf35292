// Copyright hopbudget authors.
//
// minimal_client: the edge of a Relay chain. Sends one Call with a deadline
// and prints what each hop saw, or which budget fired where.
//
//   hopbudget_minimal_client --target=localhost:PORT_A --budget-ms=500 --work-ms=10,10,10
//
// Exit status: 0 on OK, 1 on an RPC error, 2 on bad arguments.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "echo/relay.grpc.pb.h"
#include "hopbudget/budget.h"
#include "hopbudget/client.h"

namespace {

using hopbudget::echo::HopReport;
using hopbudget::echo::Relay;
using hopbudget::echo::RelayReply;
using hopbudget::echo::RelayRequest;

struct Flags {
  std::string target = "localhost:50051";
  int budget_ms = 1000;  // 0: no deadline
  std::vector<int> work_ms;
};

bool ParseFlags(int argc, char** argv, Flags* flags) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* name) -> const char* {
      return absl::StartsWith(arg, name) ? arg.c_str() + std::string(name).size() : nullptr;
    };
    if (const char* v = value("--target=")) {
      flags->target = v;
    } else if (const char* v = value("--budget-ms=")) {
      if (!absl::SimpleAtoi(v, &flags->budget_ms) || flags->budget_ms < 0) {
        std::cerr << "bad --budget-ms: " << v << "\n";
        return false;
      }
    } else if (const char* v = value("--work-ms=")) {
      flags->work_ms.clear();
      for (absl::string_view part : absl::StrSplit(v, ',', absl::SkipEmpty())) {
        int ms = 0;
        if (!absl::SimpleAtoi(part, &ms) || ms < 0) {
          std::cerr << "bad --work-ms: " << v << "\n";
          return false;
        }
        flags->work_ms.push_back(ms);
      }
    } else {
      std::cerr << "unknown argument: " << arg << "\n"
                << "usage: " << argv[0] << " --target=HOST:PORT --budget-ms=N --work-ms=a,b,c\n";
      return false;
    }
  }
  return true;
}

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
  Flags flags;
  if (!ParseFlags(argc, argv, &flags)) return 2;

  // hopbudget: the edge installs the client interceptor too, so that the
  // first hop is told the exact budget and a local expiry is attributed.
  hopbudget::ClientOptions options;
  options.hop = "minimal-client";
  auto channel =
      hopbudget::CreateChannel(flags.target, grpc::InsecureChannelCredentials(), options);
  if (!channel.ok()) {
    std::cerr << channel.status() << "\n";
    return 2;
  }
  std::unique_ptr<Relay::Stub> stub = Relay::NewStub(*channel);

  RelayRequest request;
  request.set_payload("hello");
  for (int ms : flags.work_ms) request.add_steps()->set_work_ms(ms);

  grpc::ClientContext ctx;
  if (flags.budget_ms > 0) {
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(flags.budget_ms));
  }
  RelayReply reply;
  const absl::Time start = absl::Now();
  const grpc::Status status = stub->Call(&ctx, request, &reply);
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
