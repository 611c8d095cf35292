// Copyright hopbudget authors.
//
// http_exporter.h: serves a Metrics registry over HTTP (target
// hopbudget::http, built on cpp-httplib), on a port the embedding server
// chooses:
//
//   GET /metrics          Prometheus text format 0.0.4 (exposition.h)
//   GET /deadlinez        a self-contained HTML page (no external assets)
//                         for an operator in an incident: first a summary
//                         (timeouts by source, shield, retries, each as a
//                         total and over the last 1 and 10 minutes), the
//                         policy in force and links to the other hops, then
//                         recent calls as per-hop budget waterfalls, newest
//                         first by start, each failed one saying why it was
//                         not retried
//   GET /deadlinez.json   the data behind that page. It takes the filters
//                         ?failed=1&method=/pkg.Service/Method&source=attempt
//                         (any subset; the page passes its own query on, and
//                         links to them); a bad or unknown parameter is
//                         answered 400 with a message naming it, which the
//                         page shows.
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
// a thread per connection, plus one that accepts connections and one that
// samples the summary counters every 10 s for the rates; it reads the
// registry with Snapshot(): serving a scrape never blocks the gRPC hot path.
//
// Thread safety: Start() and the destructor may be called from any thread;
// the destructor stops serving and waits for requests in progress.
#ifndef HOPBUDGET_ADVANCED_HTTP_EXPORTER_H_
#define HOPBUDGET_ADVANCED_HTTP_EXPORTER_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "hopbudget/advanced/budget.h"
#include "hopbudget/advanced/clock.h"
#include "hopbudget/advanced/metrics.h"
#include "hopbudget/advanced/retry_policy.h"

namespace hopbudget {

inline constexpr int kHttpThreads = 2;

// Another hop's /deadlinez, linked from this one's page.
struct HttpPeer {
  std::string name;  // a hop name: 1..64 characters of [A-Za-z0-9._-]
  std::string url;   // absolute http:// or https:// URL, e.g. "http://orders:9102/deadlinez"
};

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
  // Shown on /deadlinez as the policy in force (caps, reserve,
  // min_attempt_budget), and the retry policy with how many attempts fit in
  // the request budget. Pass what the service gave its interceptors; nullopt:
  // "not given". Shown as given, not validated again (the interceptor
  // factories did that; a policy run with accept_unfit_policy is shown with
  // the reason it is unfit).
  std::optional<BudgetPolicy> policy;
  std::optional<RetryPolicy> retry_policy;
  // Links to the other hops' /deadlinez pages, in the order given (at most
  // 32). Each name must be a hop name and each url an absolute http(s) URL
  // without spaces, quotes or angle brackets; InvalidArgument otherwise.
  std::vector<HttpPeer> peers;
  // Reads the time for /deadlinez (ages, the rate windows); default
  // Clock::Real(). Must outlive the exporter. The counters of the summary
  // are sampled every 10 s (a thread of the exporter, sleeping between
  // samples) and on each /deadlinez.json request, in a ring that reaches 10
  // minutes back (62 samples of about 40 counters: a few tens of KB).
  Clock* clock = nullptr;
};

class HttpExporter {
 public:
  // Binds and starts serving. Errors: InvalidArgument for a bad hop name,
  // port or peer, Unavailable when the address cannot be bound.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<HttpExporter>> Start(
      HttpExporterOptions options);

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

#endif  // HOPBUDGET_ADVANCED_HTTP_EXPORTER_H_
