// Copyright hopbudget authors.
//
// HttpExporter over real HTTP, in front of a real gRPC hop: /metrics is what
// promtool accepts and shows the calls just made; /deadlinez.json lists them
// with their traces; bad options are refused with clear errors.
#include "hopbudget/advanced/http_exporter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "hopbudget/advanced/clock.h"
#include "hopbudget/client.h"
#include "hopbudget/server.h"
#include "metrics_recorder.h"
#include "relay_fixture.h"

namespace hopbudget {
namespace {

using ::testing::HasSubstr;
using testing::HopConfig;
using testing::RelayHop;

struct Response {
  int status = 0;
  std::string content_type;
  std::string body;
};

Response Get(int port, const std::string& path) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(10, 0);
  auto res = client.Get(path.c_str());
  if (!res) return {};
  return {res->status, res->get_header_value("Content-Type"), res->body};
}

// Runs promtool on `text`; returns its exit status and output.
std::pair<int, std::string> Promtool(const std::string& text) {
  const std::string path = ::testing::TempDir() + "/hopbudget_metrics.prom";
  std::ofstream(path) << text;
  FILE* p = popen((std::string(PROMTOOL) + " check metrics < " + path + " 2>&1").c_str(), "r");
  if (p == nullptr) return {-1, "cannot run promtool"};
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof buf, p) != nullptr) out += buf;
  const int rc = pclose(p);
  return {rc, out};
}

class HttpExporterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HopConfig gateway_config;
    gateway_config.hop = "gateway";
    gateway_config.metrics = &metrics_;
    HopConfig ledger_config;
    ledger_config.hop = "ledger";
    ledger_config.policy.request_cap = absl::Milliseconds(100);
    gateway_ = std::make_unique<RelayHop>(gateway_config);
    ledger_ = std::make_unique<RelayHop>(ledger_config);
    gateway_->SetNext(ledger_->address());
    HttpExporterOptions options;
    options.hop = "gateway";
    options.metrics = &metrics_;
    options.extra_metrics = [] {
      return "# HELP demo_extra_total An extra family.\n# TYPE demo_extra_total counter\n"
             "demo_extra_total 7\n";
    };
    auto exporter = HttpExporter::Start(options);
    ASSERT_TRUE(exporter.ok()) << exporter.status();
    exporter_ = *std::move(exporter);
  }

  grpc::Status Call(std::vector<echo::Step> steps) {
    auto stub = testing::NewStub(gateway_->address());
    grpc::ClientContext ctx;
    testing::SetBudget(ctx, absl::Seconds(5));
    echo::RelayReply reply;
    return stub->Call(&ctx, testing::Request(std::move(steps)), &reply);
  }

  Metrics metrics_;
  std::unique_ptr<RelayHop> gateway_, ledger_;
  std::unique_ptr<HttpExporter> exporter_;
};

TEST_F(HttpExporterTest, MetricsShowTheCallsAndPassPromtool) {
  ASSERT_TRUE(Call({testing::Work(0), testing::Work(0)}).ok());
  ASSERT_EQ(Call({testing::Work(0), testing::Hang()}).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  gateway_->Shutdown();
  const Response r = Get(exporter_->port(), "/metrics");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_THAT(r.body, HasSubstr("hopbudget_info{hop=\"gateway\"} 1\n"));
  EXPECT_THAT(r.body,
              HasSubstr("hopbudget_calls_total{side=\"server\",method="
                        "\"hopbudget.echo.Relay/Call\",role=\"application\",code=\"OK\"} 1\n"));
  EXPECT_THAT(
      r.body,
      HasSubstr(
          "hopbudget_calls_total{side=\"server\",method="
          "\"hopbudget.echo.Relay/Call\",role=\"application\",code=\"DEADLINE_EXCEEDED\"} 1\n"));
  EXPECT_THAT(r.body, HasSubstr("hopbudget_deadline_exceeded_total{side=\"client\","
                                "source=\"downstream\",hop=\"ledger\"} 1\n"));
  EXPECT_THAT(r.body, HasSubstr("demo_extra_total 7\n"));
  for (const char* family :
       {"process_cpu_seconds_total counter", "process_resident_memory_bytes gauge",
        "process_virtual_memory_bytes gauge", "process_open_fds gauge",
        "process_start_time_seconds gauge", "hopbudget_build_info gauge",
        "hopbudget_client_attempt_duration_seconds histogram",
        "hopbudget_client_call_duration_seconds histogram",
        "hopbudget_server_call_duration_seconds histogram"}) {
    EXPECT_THAT(r.body, HasSubstr(std::string("# TYPE ") + family + "\n")) << family;
  }
  EXPECT_THAT(r.body,
              HasSubstr("hopbudget_server_call_duration_seconds_count{method="
                        "\"hopbudget.echo.Relay/Call\",role=\"application\",code=\"OK\"} 1\n"));
  const auto [rc, out] = Promtool(r.body);
  EXPECT_EQ(rc, 0) << "promtool check metrics:\n" << out;
}

TEST_F(HttpExporterTest, DeadlinezJsonListsRecentCallsWithTheirTraces) {
  ASSERT_TRUE(Call({testing::Work(0), testing::Work(0)}).ok());
  gateway_->Shutdown();
  const Response r = Get(exporter_->port(), "/deadlinez.json");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "application/json");
  EXPECT_THAT(r.body, HasSubstr("\"hop\":\"gateway\""));
  EXPECT_THAT(r.body, HasSubstr("\"method\":\"/hopbudget.echo.Relay/Call\""));
  EXPECT_THAT(r.body, HasSubstr("\"trace\":[{\"hop\":\"gateway\""));
  EXPECT_THAT(r.body, HasSubstr("{\"hop\":\"ledger\""));
}

TEST_F(HttpExporterTest, DeadlinezJsonTakesFiltersAndRefusesBadOnes) {
  ASSERT_TRUE(Call({testing::Work(0), testing::Work(0)}).ok());
  ASSERT_EQ(Call({testing::Work(0), testing::Hang()}).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  gateway_->Shutdown();
  Response r = Get(exporter_->port(), "/deadlinez.json?failed=1");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_THAT(r.body, HasSubstr("\"filter\":{\"failed\":true,"));
  EXPECT_THAT(r.body, HasSubstr("\"recent_total\":2"));
  EXPECT_THAT(r.body, HasSubstr("\"recent\":[{\"method\":\"/hopbudget.echo.Relay/Call\""));
  EXPECT_THAT(r.body, HasSubstr("\"code\":\"DEADLINE_EXCEEDED\""));
  auto calls_listed = [](const std::string& body) {
    int n = 0;
    for (size_t at = body.find("\"start_unix_ms\""); at != std::string::npos;
         at = body.find("\"start_unix_ms\"", at + 1)) {
      ++n;
    }
    return n;
  };
  EXPECT_EQ(calls_listed(r.body), 1);
  // The source the gateway's call shows (the ledger's request cap fired).
  r = Get(exporter_->port(),
          "/deadlinez.json?source=request&method=%2Fhopbudget.echo.Relay%2FCall");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(calls_listed(r.body), 1);
  EXPECT_THAT(r.body, HasSubstr("\"code\":\"DEADLINE_EXCEEDED\""));
  r = Get(exporter_->port(), "/deadlinez.json");
  EXPECT_EQ(calls_listed(r.body), 2);
  r = Get(exporter_->port(), "/deadlinez.json?source=shield");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_THAT(r.body, HasSubstr("\"recent\":[]"));
  // Rates: the windows are there, with no sample old enough yet.
  EXPECT_THAT(r.body, HasSubstr("\"windows\":[{\"name\":\"1m\""));
  EXPECT_THAT(r.body, HasSubstr("\"policy\":null,\"retry_policy\":null,\"peers\":[]"));

  for (const char* bad : {"/deadlinez.json?source=bogus", "/deadlinez.json?failed=maybe",
                          "/deadlinez.json?method=Call", "/deadlinez.json?limit=5"}) {
    r = Get(exporter_->port(), bad);
    EXPECT_EQ(r.status, 400) << bad;
    EXPECT_THAT(r.body, HasSubstr("/deadlinez: ")) << bad;
  }
  r = Get(exporter_->port(), "/deadlinez.json?source=bogus");
  EXPECT_THAT(r.body, HasSubstr("source='bogus' is not a deadline source (client, request, "));
}

TEST(HttpExporterClockTest, RatesFollowTheInjectedClock) {
  FakeClock clock(absl::FromUnixSeconds(1700000000));
  Metrics metrics(&clock);
  HttpExporterOptions options;
  options.hop = "orders";
  options.metrics = &metrics;
  options.clock = &clock;
  options.process_metrics = false;
  BudgetPolicy policy;
  policy.request_cap = absl::Milliseconds(500);
  policy.attempt_cap = absl::Milliseconds(100);
  options.policy = policy;
  options.peers = {{"gateway", "http://127.0.0.1:9101/deadlinez"}};
  auto exporter = HttpExporter::Start(options);
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  // Counters change before the clock moves: whenever the exporter's own
  // sampler runs, it samples what a request at that time would.
  internal::Record(metrics).CountDeadlineExceeded(Side::kServer, DeadlineSource::kAttempt,
                                                  "orders");
  clock.Advance(absl::Minutes(5));
  ASSERT_EQ(Get((*exporter)->port(), "/deadlinez.json").status, 200);
  internal::Record(metrics).CountDeadlineExceeded(Side::kServer, DeadlineSource::kAttempt,
                                                  "orders");
  internal::Record(metrics).CountDeadlineExceeded(Side::kServer, DeadlineSource::kAttempt,
                                                  "orders");
  clock.Advance(absl::Seconds(70));
  const Response r = Get((*exporter)->port(), "/deadlinez.json");
  ASSERT_EQ(r.status, 200);
  EXPECT_THAT(r.body, HasSubstr("\"now_unix_ms\":1700000370000"));
  EXPECT_THAT(r.body, HasSubstr("\"totals\":{\"calls.server\":0"));
  EXPECT_THAT(r.body, HasSubstr("\"timeouts.server.attempt\":3"));
  EXPECT_THAT(r.body, HasSubstr("{\"name\":\"1m\",\"window_s\":60.000,\"span_s\":70.000,"
                                "\"complete\":true,"));
  EXPECT_THAT(r.body, HasSubstr("{\"name\":\"10m\",\"window_s\":600.000,\"span_s\":370.000,"
                                "\"complete\":false,"));
  // 1 min: the two of the last 70 s; 10 min (all there is): all three.
  const size_t one = r.body.find("\"name\":\"1m\"");
  const size_t ten = r.body.find("\"name\":\"10m\"");
  ASSERT_NE(one, std::string::npos);
  ASSERT_NE(ten, std::string::npos);
  EXPECT_NE(r.body.substr(one, ten - one).find("\"timeouts.server.attempt\":2"), std::string::npos);
  EXPECT_NE(r.body.substr(ten).find("\"timeouts.server.attempt\":3"), std::string::npos);
  EXPECT_THAT(r.body, HasSubstr("\"policy\":{\"request_cap_ms\":500.000,"));
  EXPECT_THAT(r.body, HasSubstr("\"peers\":[{\"name\":\"gateway\","));
}

TEST_F(HttpExporterTest, DeadlinezPageIsSelfContainedHtml) {
  const Response r = Get(exporter_->port(), "/deadlinez");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "text/html; charset=utf-8");
  EXPECT_THAT(r.body, HasSubstr("<html"));
  EXPECT_THAT(r.body, ::testing::Not(HasSubstr("src=\"http")));
  EXPECT_THAT(r.body, ::testing::Not(HasSubstr("href=\"http")));
}

TEST_F(HttpExporterTest, UnknownPathIsNotFound) {
  EXPECT_EQ(Get(exporter_->port(), "/nope").status, 404);
}

TEST(HttpExporterOptionsTest, BadOptionsAreRefusedWithClearErrors) {
  HttpExporterOptions no_hop;
  auto r = HttpExporter::Start(no_hop);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("hop name"));

  HttpExporterOptions bad_port;
  bad_port.hop = "x";
  bad_port.port = 70000;
  r = HttpExporter::Start(bad_port);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("70000 is outside 0..65535"));

  HttpExporterOptions no_host;
  no_host.hop = "x";
  no_host.host = "";
  EXPECT_EQ(HttpExporter::Start(no_host).status().code(), absl::StatusCode::kInvalidArgument);

  struct BadPeer {
    HttpPeer peer;
    std::string message;
  };
  const BadPeer bad_peers[] = {
      {{"", "http://a:1/deadlinez"}, "HTTP peer name: "},
      {{"bad name", "http://a:1/deadlinez"}, "HTTP peer name: "},
      {{"ledger", "javascript:alert(1)"}, "is not an absolute http:// or https:// URL"},
      {{"ledger", "ledger:9103/deadlinez"}, "is not an absolute http:// or https:// URL"},
      {{"ledger", "http://"}, "is not an absolute http:// or https:// URL with a host"},
      {{"ledger", "http://a:1/dead linez"}, "url has a space, control character"},
      {{"ledger", "http://a:1/\"onmouseover=x"}, "url has a space, control character"},
      {{"ledger", "http://a:1/<b>"}, "url has a space, control character"},
  };
  for (const BadPeer& b : bad_peers) {
    HttpExporterOptions o;
    o.hop = "x";
    o.peers = {b.peer};
    auto e = HttpExporter::Start(o);
    ASSERT_FALSE(e.ok()) << b.peer.url;
    EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(e.status().message()), HasSubstr(b.message)) << b.peer.url;
  }
  HttpExporterOptions many;
  many.hop = "x";
  many.peers.assign(33, HttpPeer{"p", "http://a:1/deadlinez"});
  auto e = HttpExporter::Start(many);
  ASSERT_FALSE(e.ok());
  EXPECT_THAT(std::string(e.status().message()), HasSubstr("33 HTTP peers, at most 32"));
}

TEST(HttpExporterOptionsTest, PortInUseIsUnavailable) {
  HttpExporterOptions first;
  first.hop = "a";
  auto a = HttpExporter::Start(first);
  ASSERT_TRUE(a.ok()) << a.status();
  HttpExporterOptions second;
  second.hop = "b";
  second.port = (*a)->port();
  auto b = HttpExporter::Start(second);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace hopbudget
