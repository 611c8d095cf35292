// Copyright hopbudget authors.
//
// hopbudget-inspect against a running chain: gateway -> ledger, real gRPC
// servers with hopbudget's interceptors on 127.0.0.1 port 0, each with an
// HttpExporter, and RunInspect reading both /metrics.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <iostream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "eventually.h"
#include "hopbudget/advanced/http_exporter.h"
#include "inspect.h"
#include "relay_fixture.h"

namespace hopbudget {
namespace {

using ::hopbudget::testing::HopConfig;
using ::hopbudget::testing::Request;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// Metrics are recorded as a call finishes on the server, which may be just
// after the client has its status: wait (bounded) until `hop` counted `n`.
bool WaitForServerCalls(testing::RelayHop& hop, uint64_t n) {
  return testing::Eventually(
      [&] { return hop.metrics().Snapshot().calls[static_cast<int>(Side::kServer)] >= n; },
      absl::Seconds(30));
}

std::unique_ptr<HttpExporter> Export(testing::RelayHop& hop, const std::string& name) {
  HttpExporterOptions http;
  http.hop = name;
  http.metrics = &hop.metrics();
  absl::StatusOr<std::unique_ptr<HttpExporter>> exporter = HttpExporter::Start(http);
  EXPECT_TRUE(exporter.ok()) << exporter.status();
  return exporter.ok() ? *std::move(exporter) : nullptr;
}

class InspectLiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HopConfig ledger_config;
    ledger_config.hop = "ledger";
    // The hanging call ends when the ledger's own request cap fires: one
    // budget, no race with a caller's deadline or cancel.
    ledger_config.policy.request_cap = absl::Milliseconds(300);
    ledger_ = std::make_unique<testing::RelayHop>(ledger_config);
    HopConfig gateway_config;
    gateway_config.hop = "gateway";
    gateway_ = std::make_unique<testing::RelayHop>(gateway_config);
    gateway_->SetNext(ledger_->address());
    ledger_http_ = Export(*ledger_, "ledger");
    gateway_http_ = Export(*gateway_, "gateway");
    ASSERT_NE(ledger_http_, nullptr);
    ASSERT_NE(gateway_http_, nullptr);

    auto stub = testing::NewStub(gateway_->address());
    for (int i = 0; i < 3; ++i) {
      grpc::ClientContext ctx;
      testing::SetBudget(ctx, absl::Seconds(20));
      echo::RelayReply reply;
      grpc::Status s = stub->Call(&ctx, Request({testing::Work(1), testing::Work(1)}), &reply);
      ASSERT_TRUE(s.ok()) << s.error_message();
    }
    grpc::ClientContext ctx;
    testing::SetBudget(ctx, absl::Seconds(20));
    echo::RelayReply reply;
    grpc::Status s = stub->Call(&ctx, Request({testing::Work(1), testing::Hang()}), &reply);
    ASSERT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
    ASSERT_TRUE(WaitForServerCalls(*gateway_, 4));
    ASSERT_TRUE(WaitForServerCalls(*ledger_, 4));
  }

  std::string gateway_target() const { return absl::StrCat("127.0.0.1:", gateway_http_->port()); }
  std::string ledger_target() const {
    return absl::StrCat("http://127.0.0.1:", ledger_http_->port(), "/metrics");
  }

  std::unique_ptr<testing::RelayHop> ledger_, gateway_;
  std::unique_ptr<HttpExporter> ledger_http_, gateway_http_;
};

TEST_F(InspectLiveTest, TableShowsEachHop) {
  inspect::InspectOptions options;
  options.targets = {gateway_target(), ledger_target()};
  options.timeout = absl::Seconds(10);
  std::ostringstream out, err;
  ASSERT_EQ(inspect::RunInspect(options, out, err), 0) << err.str();
  std::cout << out.str();  // what `hopbudget-inspect` prints, for the log
  EXPECT_EQ(err.str(), "");
  const std::vector<std::string> lines = absl::StrSplit(out.str(), '\n');
  ASSERT_EQ(lines.size(), 4u) << out.str();
  SCOPED_TRACE(out.str());
  EXPECT_THAT(lines[0], StartsWith("HOP      TARGET"));
  // Columns: HOP TARGET CALLS OK SUCCESS TIMEOUTS(SERVER) TIMEOUTS(CLIENT)
  // RETRIES SKIPPED BUDGET_P50 BUDGET_P99 SHIELD.
  // gateway: 4 calls, 3 OK; the expiry came from downstream, on both sides
  // (its local view). Budgets on arrival just under 20 s, all in the
  // (2^(34/8), 2^(35/8)] = (19.03, 20.75] bucket: p50 = 19.89, p99 = 20.73,
  // within 4.5 % of the 20 s sent (the former fixed buckets said 20 and 29.8).
  EXPECT_THAT(absl::StrSplit(lines[1], ' ', absl::SkipEmpty()),
              ElementsAre("gateway", gateway_target(), "4", "3", "75.0%", "downstream=1",
                          "downstream=1", "0", "0", "19.9s", "20.7s", "0"));
  // ledger: its request cap fired (server side, source request). The
  // budgets are what its caller brought, before its 300 ms cap: the
  // gateway's ~20 s less the reserve, in the same (19.03, 20.75] bucket.
  EXPECT_THAT(absl::StrSplit(lines[2], ' ', absl::SkipEmpty()),
              ElementsAre("ledger", ledger_target(), "4", "3", "75.0%", "request=1", "-", "0", "0",
                          "19.9s", "20.7s", "0"));
  EXPECT_EQ(lines[3], "");
}

TEST_F(InspectLiveTest, JsonShowsEachHop) {
  inspect::InspectOptions options;
  options.targets = {gateway_target(), ledger_target()};
  options.timeout = absl::Seconds(10);
  options.json = true;
  std::ostringstream out, err;
  ASSERT_EQ(inspect::RunInspect(options, out, err), 0) << err.str();
  std::cout << out.str();  // what `hopbudget-inspect --json` prints, for the log
  const std::string json = out.str();
  SCOPED_TRACE(json);
  EXPECT_THAT(json, StartsWith("{\"targets\":[{\"target\":\"" + gateway_target() +
                               "\",\"ok\":true,\"hop\":\"gateway\",\"calls\":4,\"success\":3,"
                               "\"success_ratio\":0.75,"));
  EXPECT_THAT(json, HasSubstr("{\"target\":\"" + ledger_target() +
                              "\",\"ok\":true,\"hop\":\"ledger\",\"calls\":4,\"success\":3,"));
  // ledger's server side: its request cap fired.
  EXPECT_THAT(json, HasSubstr("\"hop\":\"ledger\",\"calls\":4,\"success\":3,\"success_ratio\":0.75,"
                              "\"client_calls\":0,\"client_success\":0,"
                              "\"timeouts\":{\"server\":{\"client\":0,\"request\":1,"));
  // gateway: the expiry came from downstream (its local view), both sides.
  EXPECT_THAT(json,
              HasSubstr("\"hop\":\"gateway\",\"calls\":4,\"success\":3,\"success_ratio\":0.75,"
                        "\"client_calls\":4,\"client_success\":3,"
                        "\"timeouts\":{\"server\":{\"client\":0,\"request\":0,\"attempt\":0,"
                        "\"idle\":0,\"downstream\":1,"));
  // Quantiles of the budget the caller brought, interpolated in their
  // bucket: ~20 s in (19.03, 20.75] at both hops (the ledger's 300 ms cap is
  // applied after arrival and is not what its caller brought).
  const std::string quantiles =
      "\"budget_at_arrival_seconds\":{\"count\":4,\"p50\":19.8884,\"p99\":20.7322}";
  const size_t first = json.find(quantiles);
  ASSERT_NE(first, std::string::npos);
  EXPECT_NE(json.find(quantiles, first + 1), std::string::npos);
  EXPECT_THAT(json, ::testing::EndsWith("]}\n"));
}

TEST_F(InspectLiveTest, AStoppedHopFailsAndTheOtherStillPrints) {
  const std::string ledger = ledger_target();
  ledger_http_.reset();  // stops serving /metrics
  inspect::InspectOptions options;
  options.targets = {gateway_target(), ledger};
  options.timeout = absl::Seconds(10);
  std::ostringstream out, err;
  EXPECT_EQ(inspect::RunInspect(options, out, err), 1);
  EXPECT_THAT(out.str(), HasSubstr("\ngateway  "));
  EXPECT_THAT(out.str(), HasSubstr(ledger + "  error: " + ledger + ": "));
  EXPECT_THAT(err.str(), StartsWith("hopbudget-inspect: " + ledger + ": "));
}

}  // namespace
}  // namespace hopbudget
