// Copyright hopbudget authors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"
#include "fixed_http_server.h"
#include "scrape.h"

namespace hopbudget::inspect {
namespace {

using ::testing::HasSubstr;

TEST(ParseTargetTest, AcceptedForms) {
  absl::StatusOr<Target> t = ParseTarget("127.0.0.1:9100");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->host, "127.0.0.1");
  EXPECT_EQ(t->port, 9100);
  EXPECT_EQ(t->path, "/metrics");
  EXPECT_EQ(t->Url(), "http://127.0.0.1:9100/metrics");

  t = ParseTarget("http://localhost:80");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->host, "localhost");
  EXPECT_EQ(t->path, "/metrics");

  t = ParseTarget("HTTP://svc:65535/custom/metrics?x=1");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->port, 65535);
  EXPECT_EQ(t->path, "/custom/metrics?x=1");

  t = ParseTarget("[::1]:9100");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->host, "::1");
  EXPECT_EQ(t->Url(), "http://[::1]:9100/metrics");
}

class BadTargetTest : public ::testing::TestWithParam<std::pair<const char*, const char*>> {};

TEST_P(BadTargetTest, IsRejectedWithAReason) {
  absl::StatusOr<Target> t = ParseTarget(GetParam().first);
  ASSERT_FALSE(t.ok()) << GetParam().first;
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(t.status().message()), HasSubstr(GetParam().second));
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("want host:port"));
}

INSTANTIATE_TEST_SUITE_P(
    Scrape, BadTargetTest,
    ::testing::Values(
        std::make_pair("", "empty"), std::make_pair("localhost", "missing port"),
        std::make_pair("localhost:", "port \"\" is not a number"),
        std::make_pair("localhost:http", "port \"http\" is not a number"),
        std::make_pair("localhost:0", "1..65535"), std::make_pair("localhost:65536", "1..65535"),
        std::make_pair("localhost:-1", "1..65535"), std::make_pair("localhost:+80", "1..65535"),
        std::make_pair(":9100", "empty host"),
        std::make_pair("https://h:443", "scheme \"https\" is not supported"),
        std::make_pair("grpc://h:1", "scheme \"grpc\" is not supported"),
        std::make_pair("::1:9100", "IPv6 addresses need brackets"),
        std::make_pair("[::1:9100", "unterminated '['"),
        std::make_pair("[::1]9100", "missing port"), std::make_pair("h :1", "whitespace"),
        std::make_pair("user@h:1", "'@'"), std::make_pair("h:1?x", "'?'")));

TEST(ScrapeTest, ReturnsTheBody) {
  testing::FixedHttpServer server;
  server.Serve("/metrics", "up 1\n");
  server.Serve("/other", "down 0\n");
  absl::StatusOr<std::string> body = Scrape(*ParseTarget(server.address()), absl::Seconds(10));
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ(*body, "up 1\n");
  body = Scrape(*ParseTarget("http://" + server.address() + "/other"), absl::Seconds(10));
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ(*body, "down 0\n");
}

TEST(ScrapeTest, HttpErrorStatusIsAnError) {
  testing::FixedHttpServer server;
  server.Serve("/metrics", "exporter broke", 500);
  absl::StatusOr<std::string> body = Scrape(*ParseTarget(server.address()), absl::Seconds(10));
  ASSERT_FALSE(body.ok());
  EXPECT_THAT(std::string(body.status().message()), HasSubstr("HTTP 500 exporter broke"));
  body = Scrape(*ParseTarget("http://" + server.address() + "/nothing"), absl::Seconds(10));
  ASSERT_FALSE(body.ok());
  EXPECT_THAT(std::string(body.status().message()), HasSubstr("/nothing: HTTP 404"));
}

TEST(ScrapeTest, RefusedConnectionIsAnError) {
  int port;
  {
    testing::FixedHttpServer server;  // a port that was free a moment ago
    port = server.port();
  }
  absl::StatusOr<std::string> body =
      Scrape(*ParseTarget("127.0.0.1:" + std::to_string(port)), absl::Seconds(10));
  ASSERT_FALSE(body.ok());
  EXPECT_EQ(body.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(body.status().message()),
              HasSubstr("http://127.0.0.1:" + std::to_string(port) +
                        "/metrics: could not connect (refused or unreachable)"));
}

TEST(ScrapeTest, OversizedBodyIsRefused) {
  testing::FixedHttpServer server;
  server.Serve("/metrics", std::string(kMaxScrapeBytes + 1, '#'));
  absl::StatusOr<std::string> body = Scrape(*ParseTarget(server.address()), absl::Seconds(30));
  ASSERT_FALSE(body.ok());
  EXPECT_EQ(body.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(body.status().message()), HasSubstr("response larger than"));
}

TEST(ScrapeTest, SilentServerTimesOut) {
  testing::FixedHttpServer server;
  absl::Notification release;
  server.server().Get("/metrics", [&release](const httplib::Request&, httplib::Response& res) {
    release.WaitForNotification();  // answers only after the client gave up
    res.set_content("up 1\n", "text/plain");
  });
  absl::StatusOr<std::string> body =
      Scrape(*ParseTarget(server.address()), absl::Milliseconds(200));
  release.Notify();
  ASSERT_FALSE(body.ok());
  EXPECT_EQ(body.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(body.status().message()),
              HasSubstr("/metrics: no complete answer (closed, or silent for 200ms)"));
}

}  // namespace
}  // namespace hopbudget::inspect
