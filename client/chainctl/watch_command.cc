// Copyright hopbudget authors.
//
// chainctl watch: watches one order's status (WatchOrder) through the chain,
// message by message, then how the stream ended and the budget that ended it.
#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "chain.h"
#include "commands.h"

namespace hopbudget::chainctl {
namespace {

std::string Ms(absl::Duration d) {
  return absl::StrFormat("%.1fms", absl::ToDoubleMilliseconds(d));
}

}  // namespace

int Watch(int argc, char** argv) {
  ParseCommand(argc, argv, "watch",
               "chainctl watch: watch one order's status through the chain (WatchOrder): prints "
               "each message as it arrives, then the status the stream ended with and its "
               "attribution (the budget that ended it: source, hop, budget, elapsed). A watch "
               "runs until a deadline ends it: exit 0 when that was a whole-call deadline (the "
               "--budget asked, source client, or a hop's request cap, source request), 1 when "
               "anything else ended it (an idle cut, an error, a cancel).\n\n"
               "  chainctl watch --gateway=HOST:PORT --key=K [--budget=800ms]",
               {"gateway", "key", "budget"});
  const std::string gateway = absl::GetFlag(FLAGS_gateway);
  const std::string key = absl::GetFlag(FLAGS_key);
  const absl::Duration budget = absl::GetFlag(FLAGS_budget);
  cli::ExitIfBad("chainctl watch",
                 cli::FirstError({cli::Required("gateway", gateway), cli::Required("key", key),
                                  cli::Positive("budget", budget)}));
  if (key.size() > 128) {
    return Fail("watch", absl::StrCat("--key=", key.substr(0, 16), "...: ", key.size(),
                                      " bytes (an order key has 1..128)"));
  }
  auto stub = demo::Gateway::NewStub(EdgeChannel(gateway));
  WatchOutcome o =
      WatchOrder(*stub, key, budget, [](const demo::OrderStatus& m, absl::Duration at) {
        std::cout << "message " << m.seq() << " after " << Ms(at) << ": "
                  << demo::OrderStatus::State_Name(m.state());
        if (m.state() == demo::OrderStatus::COMMITTED) {
          std::cout << " order_id=" << m.result().order_id();
        }
        std::cout << " key=" << m.key() << std::endl;  // as it arrives
      });
  std::cout << absl::StatusCodeToString(static_cast<absl::StatusCode>(o.status.error_code()))
            << " after " << Ms(o.latency) << ", " << o.messages << " message(s), silent for "
            << Ms(o.silence) << " before the end" << (o.status.error_message().empty() ? "" : ": ")
            << o.status.error_message() << "\n";
  if (!o.attribution.empty()) std::cout << "attribution: " << o.attribution << "\n";
  return WatchLastedItsBudget(o) ? 0 : 1;
}

}  // namespace hopbudget::chainctl
