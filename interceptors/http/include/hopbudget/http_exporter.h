// Copyright hopbudget authors.
//
// http_exporter.h: serves a Metrics registry over HTTP (target
// hopbudget::http, built on cpp-httplib), on a port the embedding server
// chooses:
//
//   GET /metrics          Prometheus text format 0.0.4 (exposition.h)
//   GET /deadlinez        a self-contained HTML page (no external assets)
//                         showing recent calls as per-hop budget waterfalls,
//                         timeouts by source and shielded work in flight
//   GET /deadlinez.json   the data behind that page
//
// Example:
//   hopbudget::HttpExporterOptions http;
//   http.hop = "orders";
//   http.port = 9102;                       // 0: any free port
//   auto exporter = hopbudget::HttpExporter::Start(http);
//   if (!exporter.ok()) return exporter.status();
//   std::cout << "metrics on " << (*exporter)->port() << "\n";
//
// The server answers on a small pool of its own threads (kHttpThreads), not
// a thread per connection, and reads the registry with Snapshot(): serving a
// scrape never blocks the gRPC hot path.
//
// Thread safety: Start() and the destructor may be called from any thread;
// the destructor stops serving and waits for requests in progress.
#ifndef HOPBUDGET_HTTP_EXPORTER_H_
#define HOPBUDGET_HTTP_EXPORTER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "hopbudget/metrics.h"

namespace hopbudget {

inline constexpr int kHttpThreads = 2;

struct HttpExporterOptions {
  // Address to listen on. Loopback by default: metrics are not for everyone.
  std::string host = "127.0.0.1";
  // 0..65535; 0 picks a free port (read it with port()).
  int port = 0;
  // The hop this process serves as (hopbudget_info and /deadlinez). Required;
  // 1..64 characters of [A-Za-z0-9._-].
  std::string hop;
  // The registry to serve; nullptr: Metrics::Default(). Must outlive the
  // exporter.
  Metrics* metrics = nullptr;
  // Appended to /metrics after hopbudget's families: more families of the
  // embedding service, in the text format, each line ending in "\n". Called
  // on an HTTP thread for every scrape.
  std::function<std::string()> extra_metrics;
  // Whether /metrics also serves the standard process_* families read from
  // /proc (process_metrics.h). Turn off when the service exports them
  // already (a Prometheus client library's process collector): the same
  // family twice is an invalid exposition.
  bool process_metrics = true;
};

class HttpExporter {
 public:
  // Binds and starts serving. Errors: InvalidArgument for a bad hop name or
  // port, Unavailable when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<HttpExporter>> Start(HttpExporterOptions options);

  ~HttpExporter();
  HttpExporter(const HttpExporter&) = delete;
  HttpExporter& operator=(const HttpExporter&) = delete;

  // The bound port.
  int port() const;

 private:
  class Impl;
  explicit HttpExporter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hopbudget

#endif  // HOPBUDGET_HTTP_EXPORTER_H_
