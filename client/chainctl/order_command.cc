// Copyright hopbudget authors.
//
// chainctl order: places one order; prints the result, the attribution of a
// failure and the per-hop budget waterfall.
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "chain.h"
#include "commands.h"
#include "summary.h"

namespace hopbudget::chainctl {

int Order(int argc, char** argv) {
  ParseCommand(
      argc, argv, "order",
      "chainctl order: place one order; prints the result, the attribution of a "
      "failure and the per-hop budget waterfall.\n\n"
      "  chainctl order --gateway=HOST:PORT [--budget=800ms] [--key=K] [--item=sku:qty,...]",
      {"gateway", "budget", "key", "item"});
  const std::string gateway = absl::GetFlag(FLAGS_gateway);
  const std::string key = absl::GetFlag(FLAGS_key);
  const std::string items_text = absl::GetFlag(FLAGS_item);
  const absl::Duration budget = absl::GetFlag(FLAGS_budget);
  cli::ExitIfBad("chainctl order", cli::FirstError({cli::Required("gateway", gateway),
                                                    cli::Positive("budget", budget)}));
  absl::StatusOr<std::vector<ItemSpec>> items = ParseItems(items_text);
  if (!items.ok()) {
    return Fail("order", absl::StrCat("--item=", items_text, ": ", items.status().message()));
  }
  demo::Order order;
  order.set_key(key.empty() ? absl::StrCat("cli-", absl::ToUnixMicros(absl::Now())) : key);
  for (const ItemSpec& i : *items) {
    demo::Item* it = order.add_items();
    it->set_sku(i.sku);
    it->set_quantity(i.quantity);
  }
  auto stub = demo::Gateway::NewStub(EdgeChannel(gateway));
  OrderOutcome o = PlaceOrder(*stub, order, budget);
  if (o.status.ok()) {
    std::cout << "OK in " << absl::FormatDuration(absl::Trunc(o.latency, absl::Microseconds(10)))
              << ": order_id=" << o.result.order_id() << " key=" << o.result.key()
              << (o.result.replayed() ? " (replayed: this key was committed before)" : "") << "\n";
  } else {
    std::cout << absl::StatusCodeToString(static_cast<absl::StatusCode>(o.status.error_code()))
              << " after " << absl::FormatDuration(absl::Trunc(o.latency, absl::Microseconds(10)))
              << ": " << o.status.error_message() << "\n";
    if (!o.attribution.empty()) std::cout << "attribution: " << o.attribution << "\n";
  }
  if (!o.waterfall.empty()) std::cout << o.waterfall << (o.waterfall.back() == '\n' ? "" : "\n");
  return o.status.ok() ? 0 : 1;
}

}  // namespace hopbudget::chainctl
