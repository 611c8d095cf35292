// Copyright hopbudget authors.
#include "hopbudget/http_exporter.h"

#include <httplib.h>

#include <sys/socket.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "deadlinez_page.h"
#include "hopbudget/attribution.h"
#include "hopbudget/exposition.h"
#include "hopbudget/process_metrics.h"

namespace hopbudget {

class HttpExporter::Impl {
 public:
  Impl(HttpExporterOptions options)
      : options_(std::move(options)),
        metrics_(options_.metrics != nullptr ? *options_.metrics : Metrics::Default()) {
    server_.new_task_queue = [] { return new httplib::ThreadPool(kHttpThreads); };
    // httplib's default adds SO_REUSEPORT, which lets a second process
    // share a port already in use; a taken port must be an error.
    server_.set_socket_options([](int sock) {
      int yes = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    });
    server_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      std::string body = FormatPrometheusText(metrics_.Snapshot(), options_.hop);
      if (options_.process_metrics) {
        // A /proc that cannot be read leaves the families out, not the scrape.
        if (absl::StatusOr<ProcessStats> p = ReadProcessStats(); p.ok()) {
          body += FormatProcessMetrics(*p);
        }
      }
      if (options_.extra_metrics) body += options_.extra_metrics();
      res.set_content(body, kPrometheusContentType);
    });
    server_.Get("/deadlinez", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(std::string(internal::DeadlinezPageHtml()), "text/html; charset=utf-8");
    });
    server_.Get("/deadlinez.json", [this](const httplib::Request&, httplib::Response& res) {
      res.set_header("Cache-Control", "no-store");
      res.set_content(FormatDeadlinezJson(metrics_.Snapshot(), metrics_.RecentCalls(),
                                          options_.hop, absl::Now()),
                      "application/json");
    });
  }

  ~Impl() {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }

  absl::Status Start() {
    if (options_.port == 0) {
      port_ = server_.bind_to_any_port(options_.host);
    } else if (server_.bind_to_port(options_.host, options_.port)) {
      port_ = options_.port;
    }
    if (port_ <= 0) {
      return absl::UnavailableError(absl::StrCat("hopbudget: cannot listen for HTTP on ",
                                                 options_.host, ":", options_.port));
    }
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // httplib's stop() does nothing before the loop runs: an exporter
    // destroyed right after Start() would wait on its thread forever. A
    // one-time wait at start-up, a few milliseconds at most.
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    while (!server_.is_running()) {
      if (absl::Now() > give_up) {
        return absl::UnavailableError("hopbudget: HTTP server did not start in 10 s");
      }
      absl::SleepFor(absl::Milliseconds(1));
    }
    return absl::OkStatus();
  }

  int port() const { return port_; }

 private:
  const HttpExporterOptions options_;
  Metrics& metrics_;
  httplib::Server server_;
  int port_ = -1;
  std::thread thread_;
};

absl::StatusOr<std::unique_ptr<HttpExporter>> HttpExporter::Start(HttpExporterOptions options) {
  if (absl::Status s = ValidateHopName(options.hop); !s.ok()) return s;
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("hopbudget: HTTP port ", options.port, " is outside 0..65535"));
  }
  if (options.host.empty()) {
    return absl::InvalidArgumentError("hopbudget: HTTP host is empty");
  }
  auto impl = std::make_unique<Impl>(std::move(options));
  if (absl::Status s = impl->Start(); !s.ok()) return s;
  return std::unique_ptr<HttpExporter>(new HttpExporter(std::move(impl)));
}

HttpExporter::HttpExporter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpExporter::~HttpExporter() = default;
int HttpExporter::port() const { return impl_->port(); }

}  // namespace hopbudget
