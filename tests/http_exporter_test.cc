// Copyright hopbudget authors.
//
// HttpExporter over real HTTP, in front of a real gRPC hop: /metrics is what
// promtool accepts and shows the calls just made; /deadlinez.json lists them
// with their traces; bad options are refused with clear errors.
#include "hopbudget/http_exporter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "hopbudget/client.h"
#include "hopbudget/server.h"
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
  EXPECT_THAT(r.body, HasSubstr("hopbudget_server_call_duration_seconds_count{method="
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
