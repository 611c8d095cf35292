// Copyright hopbudget authors.
#include "hopbudget/advanced/http_exporter.h"

#include <httplib.h>
#include <sys/socket.h>

#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "deadlinez_page.h"
#include "deadlinez_view.h"
#include "hopbudget/advanced/attribution.h"
#include "hopbudget/advanced/exposition.h"
#include "hopbudget/advanced/process_metrics.h"
#include "sync.h"

namespace hopbudget {
namespace {

inline constexpr size_t kMaxPeers = 32;

absl::Status ValidatePeer(const HttpPeer& peer) {
  if (absl::Status s = ValidateHopName(peer.name); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("hopbudget: HTTP peer name: ", s.message()));
  }
  const bool scheme =
      absl::StartsWith(peer.url, "http://") || absl::StartsWith(peer.url, "https://");
  const size_t host_at = peer.url.find("://") + 3;
  if (!scheme || peer.url.size() <= host_at || peer.url.size() > 2048) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hopbudget: HTTP peer ", peer.name, ": url '", peer.url,
        "' is not an absolute http:// or https:// URL with a host (at most 2048 characters)"));
  }
  for (char c : peer.url) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f || c == '"' || c == '\'' || c == '<' ||
        c == '>' || c == '\\') {
      return absl::InvalidArgumentError(
          absl::StrCat("hopbudget: HTTP peer ", peer.name,
                       ": url has a space, control character, quote, backslash or angle bracket"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

class HttpExporter::Impl {
 public:
  Impl(HttpExporterOptions options)
      : options_(std::move(options)),
        metrics_(options_.metrics != nullptr ? *options_.metrics : Metrics::Default()),
        clock_(options_.clock != nullptr ? *options_.clock : Clock::Real()) {
    rates_.Record(clock_.Now(), internal::SummaryCounters(metrics_.Snapshot()));
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
    server_.Get("/deadlinez.json", [this](const httplib::Request& req, httplib::Response& res) {
      res.set_header("Cache-Control", "no-store");
      std::vector<std::pair<std::string, std::string>> params(req.params.begin(), req.params.end());
      absl::StatusOr<internal::DeadlinezFilter> filter = internal::ParseDeadlinezFilter(params);
      if (!filter.ok()) {
        res.status = 400;
        res.set_content(std::string(filter.status().message()), "text/plain; charset=utf-8");
        return;
      }
      internal::DeadlinezInputs in;
      in.hop = options_.hop;
      in.snapshot = metrics_.Snapshot();
      in.recent = metrics_.RecentCalls();
      in.now = clock_.Now();
      in.filter = *std::move(filter);
      const std::vector<uint64_t> current = internal::SummaryCounters(in.snapshot);
      rates_.Record(in.now, current);
      in.windows = rates_.Windows(
          in.now, current, {std::begin(internal::kRateWindows), std::end(internal::kRateWindows)});
      in.policy = options_.policy;
      in.retry_policy = options_.retry_policy;
      in.peers = options_.peers;
      res.set_content(internal::FormatDeadlinezDocument(in), "application/json");
    });
  }

  ~Impl() {
    {
      internal::MutexLock lock(&mu_);
      stopping_ = true;
    }
    if (sampler_.joinable()) sampler_.join();
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
      return absl::UnavailableError(
          absl::StrCat("hopbudget: cannot listen for HTTP on ", options_.host, ":", options_.port));
    }
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // The rates' samples, taken whether or not anyone looks at the page, so
    // that the first view in an incident already has the last 10 minutes.
    // It sleeps on the stop condition between samples (no polling).
    sampler_ = std::thread([this] {
      internal::MutexLock lock(&mu_);
      while (!mu_.AwaitWithTimeout(internal::Condition(&stopping_), internal::kRateStep)) {
        mu_.Unlock();
        rates_.Record(clock_.Now(), internal::SummaryCounters(metrics_.Snapshot()));
        mu_.Lock();
      }
    });
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
  Clock& clock_;
  internal::RateRing rates_;
  internal::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread sampler_;
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
  if (options.peers.size() > kMaxPeers) {
    return absl::InvalidArgumentError(
        absl::StrCat("hopbudget: ", options.peers.size(), " HTTP peers, at most ", kMaxPeers));
  }
  for (const HttpPeer& peer : options.peers) {
    if (absl::Status s = ValidatePeer(peer); !s.ok()) return s;
  }
  auto impl = std::make_unique<Impl>(std::move(options));
  if (absl::Status s = impl->Start(); !s.ok()) return s;
  return std::unique_ptr<HttpExporter>(new HttpExporter(std::move(impl)));
}

HttpExporter::HttpExporter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpExporter::~HttpExporter() = default;
int HttpExporter::port() const { return impl_->port(); }

}  // namespace hopbudget
