// Copyright hopbudget authors.
//
// minimal_client: the edge of a chain of minimal_server hops. One call with
// a deadline of --budget, through a Hop's channel; prints the status and, for
// DEADLINE_EXCEEDED, hopbudget's attribution: which budget fired, at which
// hop. Against the 3-hop chain of minimal_server.cc:
//
//   hopbudget_minimal_client --target=localhost:PA --budget=500ms  # OK
//   hopbudget_minimal_client --target=localhost:PA --budget=10ms   # DEADLINE_EXCEEDED, where
//
// Exit status: 0 OK, 1 otherwise (a bad flag is named on stderr).
#include <grpcpp/grpcpp.h>

#include <iostream>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "echo/relay.grpc.pb.h"
#include "hopbudget/client.h"
#include "hopbudget/hop.h"

ABSL_FLAG(std::string, target, "localhost:50051", "the first hop, HOST:PORT");
ABSL_FLAG(absl::Duration, budget, absl::Seconds(1), "the call's deadline, from now");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  auto fail = [](const absl::Status& s) {
    std::cerr << "hopbudget_minimal_client: " << s << std::endl;
    return 1;
  };
  hopbudget::HopOptions options;  // the edge is a hop too: it tells the first hop its budget
  options.name = "minimal-client";
  absl::StatusOr<std::unique_ptr<hopbudget::Hop>> hop = hopbudget::Hop::Create(options);
  if (!hop.ok()) return fail(hop.status());
  auto channel = hopbudget::CreateChannel(**hop, absl::GetFlag(FLAGS_target),
                                          grpc::InsecureChannelCredentials());
  if (!channel.ok()) return fail(channel.status());
  std::unique_ptr<hopbudget::echo::Relay::Stub> stub = hopbudget::echo::Relay::NewStub(*channel);

  grpc::ClientContext ctx;
  const absl::Time start = absl::Now();
  ctx.set_deadline(absl::ToChronoTime(start + absl::GetFlag(FLAGS_budget)));
  hopbudget::echo::RelayReply reply;
  const grpc::Status status = stub->Call(&ctx, hopbudget::echo::RelayRequest(), &reply);
  const absl::Duration took = absl::Trunc(absl::Now() - start, absl::Microseconds(100));
  if (status.ok()) {
    std::cout << "OK after " << took << std::endl;
    return 0;
  }
  std::cout << absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code()))
            << " after " << took << ": " << status.error_message() << std::endl;
  if (absl::optional<hopbudget::Attribution> a = hopbudget::AttributionOf(status)) {
    std::cout << "attribution: source=" << hopbudget::DeadlineSourceName(a->source)
              << " hop=" << (a->hop.empty() ? "(unknown)" : a->hop) << " budget=" << a->budget
              << " elapsed=" << a->elapsed << std::endl;
  }
  return 1;
}
