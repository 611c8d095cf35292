// Copyright hopbudget authors.
//
// /deadlinez from a real HttpExporter in front of a real gRPC chain
// (gateway -> ledger, hopbudget interceptors on both, 127.0.0.1 port 0),
// loaded in headless Chromium: what the page shows must be what the chain
// did.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "chromium.h"
#include "eventually.h"
#include "hopbudget/advanced/http_exporter.h"
#include "relay_fixture.h"

namespace hopbudget {
namespace {

using ::hopbudget::testing::CountElements;
using ::hopbudget::testing::DumpDom;
using ::hopbudget::testing::HopConfig;
using ::hopbudget::testing::Request;
using ::hopbudget::testing::TextOf;
using ::testing::HasSubstr;

// Metrics are recorded as a call finishes on the server, which may be just
// after the client has its status: wait (bounded) until `hop` counted `n`
// finished server calls.
bool WaitForServerCalls(testing::RelayHop& hop, uint64_t n) {
  return testing::Eventually(
      [&] { return hop.metrics().Snapshot().calls[static_cast<int>(Side::kServer)] >= n; },
      absl::Seconds(30));
}

TEST(DeadlinezBrowserTest, ShowsTheChainsCallsWaterfallsAndTimeouts) {
  ASSERT_TRUE(testing::FindChromium().ok()) << testing::FindChromium().status();
  HopConfig ledger_config;
  ledger_config.hop = "ledger";
  // The hanging call ends when the ledger's own request cap fires: one
  // budget, no race with a caller's deadline or cancel.
  ledger_config.policy.request_cap = absl::Milliseconds(300);
  testing::RelayHop ledger(ledger_config);
  HopConfig gateway_config;
  gateway_config.hop = "gateway";
  testing::RelayHop gateway(gateway_config);
  gateway.SetNext(ledger.address());

  HttpExporterOptions http;
  http.hop = "gateway";
  http.metrics = &gateway.metrics();
  absl::StatusOr<std::unique_ptr<HttpExporter>> exporter = HttpExporter::Start(http);
  ASSERT_TRUE(exporter.ok()) << exporter.status();

  auto stub = testing::NewStub(gateway.address());
  for (int i = 0; i < 3; ++i) {
    grpc::ClientContext ctx;
    testing::SetBudget(ctx, absl::Seconds(20));
    echo::RelayReply reply;
    grpc::Status s = stub->Call(&ctx, Request({testing::Work(1), testing::Work(1)}), &reply);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  {
    grpc::ClientContext ctx;
    testing::SetBudget(ctx, absl::Seconds(20));
    echo::RelayReply reply;
    grpc::Status s = stub->Call(&ctx, Request({testing::Work(1), testing::Hang()}), &reply);
    ASSERT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
  }
  ASSERT_TRUE(WaitForServerCalls(gateway, 4));

  const std::string url = absl::StrCat("http://127.0.0.1:", (*exporter)->port(), "/deadlinez");
  absl::StatusOr<std::string> dom = DumpDom(url);
  ASSERT_TRUE(dom.ok()) << dom.status();
  const std::string& d = *dom;
  SCOPED_TRACE(d.substr(d.find("<body"), 6000));

  EXPECT_EQ(CountElements(d, {"data-state=\"ok\""}), 1);
  EXPECT_EQ(TextOf(d, {"id=\"hop\""}), "gateway");
  EXPECT_EQ(CountElements(d, {"class=\"call-row\""}), 4);
  EXPECT_EQ(CountElements(d, {"class=\"call-row\"", "data-code=\"OK\""}), 3);
  EXPECT_EQ(CountElements(d, {"class=\"call-row\"", "data-method=\"/hopbudget.echo.Relay/Call\""}),
            4);
  // The failed call, highlighted with its code and the budget that fired.
  EXPECT_EQ(CountElements(
                d, {"class=\"call-row\"", "class=\"failed\"", "data-code=\"DEADLINE_EXCEEDED\""}),
            1);
  EXPECT_EQ(TextOf(d, {"class=\"call-code\""}), "DEADLINE_EXCEEDED");  // newest first
  // The waterfalls: a bar for each hop of each OK call, the budget marked.
  EXPECT_GE(CountElements(d, {"class=\"hop-bar\"", "data-hop=\"gateway\""}), 4);
  EXPECT_GE(CountElements(d, {"class=\"hop-bar\"", "data-hop=\"ledger\""}), 3);
  EXPECT_GE(CountElements(d, {"class=\"budget-mark\"", "data-hop=\"gateway\""}), 4);
  EXPECT_GE(CountElements(d, {"class=\"budget-mark\"", "data-hop=\"ledger\""}), 3);
  // The timeout, counted under the source the failed row names.
  const size_t row = d.find("class=\"call-row failed\"");
  ASSERT_NE(row, std::string::npos);
  const size_t src = d.find("data-source=\"", row);
  ASSERT_NE(src, std::string::npos);
  const std::string source = d.substr(src + 13, d.find('"', src + 13) - src - 13);
  // The ledger's request cap fired: the origin travels back (the row says
  // source=request); the gateway counts its local view, downstream, for its
  // inbound call (server) and its call to the ledger (client).
  EXPECT_EQ(source, "request");
  EXPECT_EQ(TextOf(d, {"class=\"call-source\""}), "source=request");
  EXPECT_EQ(TextOf(d, {"data-source=\"downstream\"", "data-side=\"server\""}), "1");
  EXPECT_EQ(TextOf(d, {"data-source=\"downstream\"", "data-side=\"client\""}), "1");
  EXPECT_EQ(TextOf(d, {"data-source=\"request\"", "data-side=\"server\""}), "0");
  EXPECT_EQ(TextOf(d, {"id=\"shield-in-flight\""}), "0");
}

}  // namespace
}  // namespace hopbudget
