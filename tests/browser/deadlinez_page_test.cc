// Copyright hopbudget authors.
//
// The /deadlinez page as a document: self-contained (no external asset, no
// origin but its own), and rendered in headless Chromium from fixed JSON
// served by a cpp-httplib server (deadlinez_browser_test.cc loads it from a
// real exporter in front of a real gRPC chain).
#include "deadlinez_page.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <regex>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "chromium.h"

namespace hopbudget {
namespace {

using ::hopbudget::testing::CountElements;
using ::hopbudget::testing::DumpDom;
using ::hopbudget::testing::TextOf;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(DeadlinezPageTest, IsOneSelfContainedDocument) {
  const std::string page(internal::DeadlinezPageHtml());
  EXPECT_THAT(page, ::testing::StartsWith("<!DOCTYPE html>"));
  EXPECT_THAT(page, HasSubstr("</html>"));
  // Nothing loaded from anywhere: no src/href to another origin, no @import,
  // no url() in the CSS, and a CSP that forbids it anyway.
  EXPECT_THAT(page, Not(HasSubstr("src=")));
  EXPECT_THAT(page, Not(HasSubstr("@import")));
  EXPECT_THAT(page, Not(HasSubstr("url(")));
  EXPECT_THAT(page, Not(HasSubstr("//cdn")));
  EXPECT_FALSE(std::regex_search(page, std::regex("(href|src)=\"(https?:)?//")));
  EXPECT_THAT(page, HasSubstr("default-src 'none'"));
  EXPECT_THAT(page, HasSubstr("connect-src 'self'"));
  // Data goes into the DOM as text only.
  EXPECT_THAT(page, Not(HasSubstr("innerHTML")));
  EXPECT_THAT(page, Not(HasSubstr("document.write")));
  EXPECT_THAT(page, Not(HasSubstr("eval(")));
  // The elements tests and users rely on.
  for (const char* id : {"id=\"hop\"", "id=\"calls\"", "id=\"no-calls\"", "id=\"timeouts\"",
                         "id=\"shield-in-flight\"", "id=\"shield\"", "id=\"status\""}) {
    EXPECT_THAT(page, HasSubstr(id));
  }
  EXPECT_THAT(page, HasSubstr("setTimeout(refresh, REFRESH_MS)"));
  EXPECT_THAT(page, HasSubstr("var REFRESH_MS = 2000;"));
}

// Serves the page and a fixed /deadlinez.json on 127.0.0.1 port 0.
class PageServer {
 public:
  explicit PageServer(std::string json, int json_status = 200) {
    server_.Get("/deadlinez", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(std::string(internal::DeadlinezPageHtml()), "text/html; charset=utf-8");
    });
    server_.Get("/deadlinez.json",
                [json, json_status](const httplib::Request&, httplib::Response& res) {
                  res.status = json_status;
                  res.set_content(json, "application/json");
                });
    server_.Get("/ready", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("ok", "text/plain");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // httplib 0.11's stop() is a no-op until the accept loop runs: wait for
    // it with one request (queued on the listening socket, no polling).
    httplib::Client client("127.0.0.1", port_);
    if (!client.Get("/ready")) ADD_FAILURE() << "page server did not start";
  }
  ~PageServer() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return absl::StrCat("http://127.0.0.1:", port_, "/deadlinez"); }

 private:
  httplib::Server server_;
  int port_ = -1;
  std::thread thread_;
};

constexpr char kSampleJson[] = R"({"hop":"gateway","now_unix_ms":1700000010000,
 "recent":[
  {"method":"/hopbudget.echo.Relay/Call","start_unix_ms":1700000009000.0,"code":"DEADLINE_EXCEEDED","source":"attempt",
   "retry_skipped":"no_room",
   "trace":[{"hop":"gateway","budget_ms":300.0,"spent_ms":300.5,"attempts":2,"code":"DEADLINE_EXCEEDED","source":"attempt"},
            {"hop":"ledger","budget_ms":null,"spent_ms":150.0,"attempts":0,"code":"CANCELLED","source":"none"}]},
  {"method":"/hopbudget.echo.Relay/Call","start_unix_ms":1700000008000.0,"code":"OK","source":"none",
   "trace":[{"hop":"gateway","budget_ms":800.0,"spent_ms":120.0,"attempts":1,"code":"OK","source":"none"},
            {"hop":"ledger","budget_ms":790.0,"spent_ms":100.0,"attempts":0,"code":"OK","source":"none"}]},
  {"method":"<img src=x onerror=alert(1)>","start_unix_ms":1700000007000.0,"code":"OK","source":"none","trace":[]}],
 "timeouts_by_source":{"server":{"client":0,"request":0,"attempt":1,"idle":0,"downstream":0,
   "exhausted-before-call":0,"arrived-expired":0,"shield":0},
  "client":{"client":0,"request":0,"attempt":2,"idle":0,"downstream":0,"exhausted-before-call":0,
   "arrived-expired":0,"shield":0}},
 "shield":{"in_flight":3,"started":9,"completed":5,"failed":1,"exceeded_bound":0,"refused":0,"unobserved":0},
 "retries":{"started":4,"succeeded_after_retry":3,"skipped":{"no_room":2,"throttled":1,"committed":0}}})";

TEST(DeadlinezPageTest, RendersWaterfallsTimeoutsAndShield) {
  PageServer server(kSampleJson);
  absl::StatusOr<std::string> dom = DumpDom(server.url());
  ASSERT_TRUE(dom.ok()) << dom.status();
  const std::string& d = *dom;
  EXPECT_EQ(CountElements(d, {"data-state=\"ok\""}), 1) << d;
  EXPECT_EQ(TextOf(d, {"id=\"hop\""}), "gateway");
  // The summary (timeouts, shield, retries) comes before the 64 call cards.
  EXPECT_LT(d.find("id=\"timeouts\""), d.find("id=\"recent\""));
  EXPECT_LT(d.find("id=\"retries-skipped\""), d.find("id=\"recent\""));
  EXPECT_EQ(CountElements(d, {"id=\"no-calls\""}), 0);

  // One row per call, newest first; the failed one highlighted with code and source.
  EXPECT_EQ(CountElements(d, {"class=\"call-row\""}), 3);
  EXPECT_EQ(CountElements(d, {"class=\"call-row\"", "class=\"failed\"",
                              "data-code=\"DEADLINE_EXCEEDED\"", "data-source=\"attempt\""}),
            1);
  EXPECT_EQ(CountElements(d, {"class=\"call-row\"", "class=\"failed\""}), 1);
  EXPECT_EQ(TextOf(d, {"class=\"call-code\""}), "DEADLINE_EXCEEDED");
  EXPECT_EQ(TextOf(d, {"class=\"call-source\""}), "source=attempt");
  // Why its failed attempt was not retried; the other calls say nothing.
  EXPECT_EQ(CountElements(d, {"class=\"call-row\"", "data-retry-skipped=\"no_room\""}), 1);
  EXPECT_EQ(CountElements(d, {"data-retry-skipped="}), 1);
  EXPECT_EQ(TextOf(d, {"class=\"call-retry\""}), "not retried: no_room");

  // One bar per hop entry; width proportional to the time spent (scale per
  // call: the OK call's largest value is gateway's 800 ms budget).
  EXPECT_EQ(CountElements(d, {"class=\"hop-bar\"", "data-hop=\"gateway\""}), 2);
  EXPECT_EQ(CountElements(d, {"class=\"hop-bar\"", "data-hop=\"ledger\""}), 2);
  EXPECT_EQ(
      CountElements(d, {"class=\"hop-bar\"", "data-hop=\"gateway\"", "style=\"width: 15%;\""}), 1);
  EXPECT_EQ(
      CountElements(d, {"class=\"hop-bar\"", "data-hop=\"ledger\"", "style=\"width: 12.5%;\""}), 1);
  EXPECT_EQ(CountElements(d, {"class=\"hop-bar\"", "class=\"failed\"", "data-hop=\"gateway\""}), 1);
  // The budget on arrival is marked, except where there was no deadline.
  EXPECT_EQ(CountElements(d, {"class=\"budget-mark\"", "data-hop=\"gateway\""}), 2);
  EXPECT_EQ(CountElements(d, {"class=\"budget-mark\"", "data-hop=\"ledger\""}), 1);
  EXPECT_EQ(
      CountElements(d, {"class=\"budget-mark\"", "data-hop=\"ledger\"", "style=\"left: 98.75%;\""}),
      1);
  EXPECT_EQ(
      CountElements(d, {"class=\"hop-bar\"", "data-hop=\"ledger\"", "data-budget-ms=\"none\""}), 1);
  EXPECT_EQ(TextOf(d, {"class=\"no-trace\""}), "no trace");

  // A hostile method name is text, not markup.
  EXPECT_THAT(d, HasSubstr("&lt;img src=x onerror=alert(1)&gt;</span>"));

  // Timeouts by source, both sides.
  EXPECT_EQ(TextOf(d, {"data-source=\"attempt\"", "data-side=\"server\""}), "1");
  EXPECT_EQ(TextOf(d, {"data-source=\"attempt\"", "data-side=\"client\""}), "2");
  EXPECT_EQ(TextOf(d, {"data-source=\"request\"", "data-side=\"server\""}), "0");
  EXPECT_EQ(CountElements(d, {"data-side=\"server\""}), 9);  // every source, slot-wait included

  // Shielded work.
  EXPECT_EQ(TextOf(d, {"id=\"shield-in-flight\""}), "3");
  EXPECT_EQ(TextOf(d, {"data-outcome=\"completed\""}), "5");
  EXPECT_EQ(TextOf(d, {"data-outcome=\"started\""}), "9");

  // Retries, and why failed attempts were not retried.
  EXPECT_EQ(TextOf(d, {"id=\"retries-started\""}), "4");
  EXPECT_EQ(TextOf(d, {"id=\"retries-saved\""}), "3");
  EXPECT_EQ(TextOf(d, {"data-reason=\"no_room\""}), "2");
  EXPECT_EQ(TextOf(d, {"data-reason=\"throttled\""}), "1");
  EXPECT_EQ(CountElements(d, {"data-reason="}), 3);
}

TEST(DeadlinezPageTest, NoCallsYet) {
  PageServer server(
      R"({"hop":"ledger","now_unix_ms":1,"recent":[],"timeouts_by_source":{},"shield":{}})");
  absl::StatusOr<std::string> dom = DumpDom(server.url());
  ASSERT_TRUE(dom.ok()) << dom.status();
  EXPECT_EQ(TextOf(*dom, {"id=\"hop\""}), "ledger");
  EXPECT_EQ(TextOf(*dom, {"id=\"no-calls\""}), "no calls yet");
  EXPECT_EQ(CountElements(*dom, {"class=\"call-row\""}), 0);
  EXPECT_EQ(TextOf(*dom, {"data-source=\"client\"", "data-side=\"server\""}), "0");
  EXPECT_EQ(TextOf(*dom, {"id=\"shield-in-flight\""}), "0");
}

TEST(DeadlinezPageTest, FetchFailureIsShown) {
  PageServer server("exporter broke", 500);
  absl::StatusOr<std::string> dom = DumpDom(server.url());
  ASSERT_TRUE(dom.ok()) << dom.status();
  EXPECT_EQ(CountElements(*dom, {"data-state=\"error\""}), 1);
  EXPECT_THAT(TextOf(*dom, {"id=\"status\""}),
              HasSubstr("could not load /deadlinez.json: HTTP 500"));
  EXPECT_EQ(TextOf(*dom, {"id=\"no-calls\""}), "no calls yet");
}

TEST(DeadlinezPageTest, MalformedJsonIsShown) {
  PageServer server("{\"hop\": ");
  absl::StatusOr<std::string> dom = DumpDom(server.url());
  ASSERT_TRUE(dom.ok()) << dom.status();
  EXPECT_EQ(CountElements(*dom, {"data-state=\"error\""}), 1);
  EXPECT_THAT(TextOf(*dom, {"id=\"status\""}), HasSubstr("could not load /deadlinez.json"));
}

}  // namespace
}  // namespace hopbudget
