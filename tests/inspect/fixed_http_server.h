// Copyright hopbudget authors.
//
// fixed_http_server.h: a cpp-httplib server on 127.0.0.1 port 0 answering
// fixed bodies, for the scraper tests (a stand-in for an exporter).
#ifndef HOPBUDGET_TESTS_INSPECT_FIXED_HTTP_SERVER_H_
#define HOPBUDGET_TESTS_INSPECT_FIXED_HTTP_SERVER_H_

#include <gtest/gtest.h>
#include <httplib.h>

#include <string>
#include <thread>

#include "absl/strings/str_cat.h"

namespace hopbudget::inspect::testing {

class FixedHttpServer {
 public:
  FixedHttpServer() {
    port_ = server_.bind_to_any_port("127.0.0.1");
    server_.Get("/__ready", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("ready", "text/plain");
    });
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // httplib 0.11's stop() does nothing until the accept loop runs, so wait
    // for it: the socket already listens, this request is answered as soon
    // as the loop accepts it (no polling).
    httplib::Client client("127.0.0.1", port_);
    if (!client.Get("/__ready")) ADD_FAILURE() << "FixedHttpServer did not start";
  }
  ~FixedHttpServer() {
    server_.stop();
    thread_.join();
  }
  // Serves `body` with `status` at GET `path`. Call before any request.
  void Serve(const std::string& path, std::string body, int status = 200,
             std::string content_type = "text/plain; version=0.0.4") {
    server_.Get(path, [body = std::move(body), status, content_type](const httplib::Request&,
                                                                     httplib::Response& res) {
      res.status = status;
      res.set_content(body, content_type.c_str());
    });
  }
  httplib::Server& server() { return server_; }
  int port() const { return port_; }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }

 private:
  httplib::Server server_;
  int port_ = -1;
  std::thread thread_;
};

}  // namespace hopbudget::inspect::testing

#endif  // HOPBUDGET_TESTS_INSPECT_FIXED_HTTP_SERVER_H_
