// Copyright hopbudget authors.
#include "edge/edge.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <list>
#include <random>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/types/optional.h"
#include "edge/edge_rules.h"
#include "grpc_h2/grpc_over_h2.h"
#include "hopbudget/advanced/attribution.h"

namespace hopbudget::edge {
namespace {

// Past this many distinct :paths a method has no latency prediction of its
// own: a caller cannot grow the edge's memory by inventing paths.
constexpr size_t kMaxPredictedMethods = 256;
constexpr absl::Duration kReconnectEvery = absl::Milliseconds(100);
constexpr size_t kReadChunk = 64 * 1024;

nghttp2_nv Nv(const Header& h) {
  return {reinterpret_cast<uint8_t*>(const_cast<char*>(h.name.data())),
          reinterpret_cast<uint8_t*>(const_cast<char*>(h.value.data())), h.name.size(),
          h.value.size(), NGHTTP2_NV_FLAG_NONE};
}

std::vector<nghttp2_nv> Nvs(const std::vector<Header>& headers) {
  std::vector<nghttp2_nv> out;
  out.reserve(headers.size());
  for (const Header& h : headers) out.push_back(Nv(h));
  return out;
}

}  // namespace

absl::Status ValidateEdgeOptions(const EdgeOptions& o) {
  if (absl::Status s = ValidateHopName(o.hop); !s.ok()) return s;
  if (o.port < 0 || o.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("port ", o.port, " is not 0..65535"));
  }
  in_addr addr{};
  if (inet_pton(AF_INET, o.listen_address.c_str(), &addr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen_address \"", o.listen_address, "\" is not an IPv4 address"));
  }
  std::pair<std::string, std::string> hp = absl::StrSplit(o.upstream, absl::MaxSplits(':', 1));
  int up_port = 0;
  if (hp.first.empty() || !absl::SimpleAtoi(hp.second, &up_port) || up_port <= 0 ||
      up_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("upstream \"", o.upstream, "\" is not host:port"));
  }
  if (absl::Status s = ValidateAdmissionPolicy(o.admission); !s.ok()) return s;
  if (o.min_attempt_budget < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "min_attempt_budget ", absl::FormatDuration(o.min_attempt_budget), " is negative"));
  }
  if (o.max_concurrent_streams <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_concurrent_streams ", o.max_concurrent_streams, " is not > 0"));
  }
  if (o.max_request_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_request_bytes ", o.max_request_bytes, " is not > 0"));
  }
  return absl::OkStatus();
}

// The event loop: every socket, session and call, on Run()'s thread.
class Edge::Loop {
 public:
  explicit Loop(const EdgeOptions& o)
      : o_(o),
        clock_(o.clock != nullptr ? *o.clock : Clock::Real()),
        clock_id_(std::random_device()() * uint64_t{0x9e3779b97f4a7c15} + 1) {}

  ~Loop() {
    for (auto& c : conns_) DropConn(c.get());
    if (listen_fd_ >= 0) close(listen_fd_);
    if (wake_fd_ >= 0) close(wake_fd_);
    if (epoll_fd_ >= 0) close(epoll_fd_);
  }

  absl::Status Init() {
    absl::StatusOr<std::unique_ptr<Admission>> admission =
        Admission::Create(o_.admission, o_.min_attempt_budget, &clock_);
    if (!admission.ok()) return admission.status();
    admission_ = std::move(*admission);
    std::pair<std::string, std::string> hp = absl::StrSplit(o_.upstream, absl::MaxSplits(':', 1));
    up_host_ = hp.first;
    up_port_ = hp.second;

    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (epoll_fd_ < 0 || wake_fd_ < 0 || listen_fd_ < 0) {
      return absl::InternalError(strerror(errno));
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(o_.port));
    inet_pton(AF_INET, o_.listen_address.c_str(), &addr.sin_addr);
    if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        listen(listen_fd_, 1024) != 0) {
      return absl::UnavailableError(absl::StrCat("cannot listen on ", o_.listen_address, ":",
                                                 o_.port, ": ", strerror(errno)));
    }
    socklen_t len = sizeof(addr);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    Watch(listen_fd_, EPOLLIN, &listen_tag_);
    Watch(wake_fd_, EPOLLIN, &wake_tag_);
    return absl::OkStatus();
  }

  int port() const { return port_; }

  void Shutdown() {
    stop_.store(true, std::memory_order_relaxed);
    const uint64_t one = 1;
    // Async-signal-safe: write(2) on an eventfd.
    [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof(one));
  }

  EdgeStats Stats() const {
    EdgeStats s;
    s.calls = calls_.load(std::memory_order_relaxed);
    s.forwarded = forwarded_.load(std::memory_order_relaxed);
    s.upstream_ok = upstream_ok_.load(std::memory_order_relaxed);
    s.bad_request = bad_request_.load(std::memory_order_relaxed);
    s.arrived_expired = arrived_expired_.load(std::memory_order_relaxed);
    s.unavailable = unavailable_.load(std::memory_order_relaxed);
    s.caller_reset = caller_reset_.load(std::memory_order_relaxed);
    for (int i = 0; i < kArrivalDecisionCount; ++i) {
      s.shed[i] = shed_[i].load(std::memory_order_relaxed);
    }
    s.upstream_connects = upstream_connects_.load(std::memory_order_relaxed);
    s.limit = admission_ != nullptr ? admission_->limit() : 0;
    return s;
  }

  void Run() {
    std::vector<epoll_event> events(256);
    while (!stop_.load(std::memory_order_relaxed)) {
      const int n =
          epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), TimeoutMs());
      for (int i = 0; i < n; ++i) {
        void* tag = events[i].data.ptr;
        if (tag == &listen_tag_) {
          Accept();
        } else if (tag == &wake_tag_) {
          uint64_t v;
          [[maybe_unused]] ssize_t r = read(wake_fd_, &v, sizeof(v));
        } else {
          auto* conn = static_cast<Conn*>(tag);
          if (conn->dead) continue;
          OnSocket(conn, events[i].events);
        }
      }
      if (admission_->NextExpiry() <= clock_.Now()) {
        Admission::Ready ready;
        admission_->Expire(&ready);
        Handle(ready);
      }
      FlushAll();
      Reap();
    }
  }

 private:
  struct Call;

  // One HTTP/2 connection: a caller's (server session) or the upstream
  // (client session).
  struct Conn {
    Loop* loop = nullptr;
    bool upstream = false;
    int fd = -1;
    nghttp2_session* session = nullptr;
    bool connecting = false;  // upstream: connect() in progress
    bool dead = false;        // closed; freed by Reap()
    bool want_out = false;    // EPOLLOUT armed
    std::string out;          // bytes nghttp2 produced that the socket has not taken
    size_t out_off = 0;
    // Caller connection: its calls by stream id. Upstream: the calls
    // forwarded on it, by the upstream stream id.
    absl::flat_hash_map<int32_t, Call*> calls;
  };

  struct Call {
    std::list<std::unique_ptr<Call>>::iterator self;  // in calls_list_
    bool retired = false;                             // in retired_
    Conn* down = nullptr;                             // nullptr once the caller's stream closed
    int32_t down_id = 0;
    Conn* up = nullptr;  // set while forwarded on an upstream stream
    int32_t up_id = 0;
    std::vector<Header> request_headers;
    InboundCall inbound;
    absl::Time arrival;
    std::string request;  // body bytes from the caller not yet sent upstream
    int64_t request_bytes = 0;
    bool request_ended = false;
    bool decided = false;
    bool queued = false;
    bool admitted = false;  // counts in admission's progress until released
    absl::Time upstream_start;
    Admission::Waiter waiter;
    // The upstream's answer on its way to the caller.
    bool response_started = false;  // response HEADERS submitted downstream
    std::vector<Header> response_headers;
    std::vector<Header> trailers;
    std::string response;
    bool response_ended = false;
    int grpc_status = -1;
    bool answered = false;  // the caller's stream has its final frame queued
  };

  // ---- sockets

  void Watch(int fd, uint32_t events, void* tag) {
    epoll_event ev{};
    ev.events = events;
    ev.data.ptr = tag;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  }

  void Rearm(Conn* c, bool want_out) {
    if (c->want_out == want_out) return;
    c->want_out = want_out;
    epoll_event ev{};
    ev.events = EPOLLIN | (want_out ? EPOLLOUT : 0u);
    ev.data.ptr = c;
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c->fd, &ev);
  }

  int TimeoutMs() const {
    const absl::Time wake = admission_->NextExpiry();
    if (wake == absl::InfiniteFuture()) return 1000;
    const absl::Duration d = wake - clock_.Now();
    if (d <= absl::ZeroDuration()) return 0;
    return static_cast<int>(
        std::min<int64_t>(absl::ToInt64Milliseconds(absl::Ceil(d, absl::Milliseconds(1))), 1000));
  }

  void Accept() {
    for (;;) {
      const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      auto conn = std::make_unique<Conn>();
      conn->loop = this;
      conn->fd = fd;
      nghttp2_session_server_new(&conn->session, Callbacks(), conn.get());
      const nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS,
                                                  static_cast<uint32_t>(o_.max_concurrent_streams)},
                                                 {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20}};
      nghttp2_submit_settings(conn->session, NGHTTP2_FLAG_NONE, settings, 2);
      Watch(fd, EPOLLIN, conn.get());
      dirty_.push_back(conn.get());
      conns_.push_back(std::move(conn));
    }
  }

  void OnSocket(Conn* c, uint32_t events) {
    if (c->connecting && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        Lose(c, absl::StrCat("connect: ", strerror(err)));
        return;
      }
      c->connecting = false;
    }
    if (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
      char buf[kReadChunk];
      for (;;) {
        const ssize_t n = read(c->fd, buf, sizeof(buf));
        if (n > 0) {
          const ssize_t used =
              nghttp2_session_mem_recv(c->session, reinterpret_cast<const uint8_t*>(buf), n);
          if (used < 0) {
            Lose(c, absl::StrCat("HTTP/2: ", nghttp2_strerror(static_cast<int>(used))));
            return;
          }
          if (static_cast<size_t>(n) < sizeof(buf)) break;
          continue;
        }
        if (n == 0) {
          Lose(c, "connection closed");
          return;
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        Lose(c, absl::StrCat("read: ", strerror(errno)));
        return;
      }
    }
    dirty_.push_back(c);
  }

  // Writes what every touched session has to say.
  void FlushAll() {
    // Flushing one connection can touch others (a caller's reset resets its
    // upstream stream), so loop until nothing new is dirty.
    while (!dirty_.empty()) {
      std::vector<Conn*> now;
      now.swap(dirty_);
      std::sort(now.begin(), now.end());
      now.erase(std::unique(now.begin(), now.end()), now.end());
      for (Conn* c : now) {
        if (!c->dead) Flush(c);
      }
    }
  }

  void Flush(Conn* c) {
    if (c->connecting) return;
    for (;;) {
      if (c->out_off == c->out.size()) {
        c->out.clear();
        c->out_off = 0;
        // Batch frames into one write: nghttp2 hands them out one by one.
        for (;;) {
          const uint8_t* data = nullptr;
          const ssize_t n = nghttp2_session_mem_send(c->session, &data);
          if (n < 0) {
            Lose(c, absl::StrCat("HTTP/2: ", nghttp2_strerror(static_cast<int>(n))));
            return;
          }
          if (n == 0) break;
          c->out.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
          if (c->out.size() >= kReadChunk) break;
        }
        if (c->out.empty()) break;
      }
      const ssize_t w = write(c->fd, c->out.data() + c->out_off, c->out.size() - c->out_off);
      if (w > 0) {
        c->out_off += static_cast<size_t>(w);
        continue;
      }
      if (w < 0 && errno == EINTR) continue;
      if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        Rearm(c, true);
        return;
      }
      Lose(c, absl::StrCat("write: ", strerror(errno)));
      return;
    }
    Rearm(c, false);
    if (!nghttp2_session_want_read(c->session) && !nghttp2_session_want_write(c->session)) {
      Lose(c, "session ended");
    }
  }

  // A connection is gone: every call on it ends, and its memory is freed by
  // Reap() once no callback can reach it.
  void Lose(Conn* c, const std::string& why) {
    if (c->dead) return;
    c->dead = true;
    any_dead_ = true;
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->fd, nullptr);
    if (c == up_) {
      // The next call to forward connects again (Upstream()).
      up_ = nullptr;
      last_error_ = why;
    }
    std::vector<Call*> calls;
    calls.reserve(c->calls.size());
    for (auto& [id, call] : c->calls) calls.push_back(call);
    c->calls.clear();
    for (Call* call : calls) {
      if (c->upstream) {
        UpstreamEnded(call, 0, absl::StrCat("connection lost (", why, ")"));
      } else {
        call->down = nullptr;
        CallerGone(call);
      }
    }
  }

  void DropConn(Conn* c) {
    if (c->session != nullptr) nghttp2_session_del(c->session);
    c->session = nullptr;
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
  }

  void Reap() {
    if (any_dead_) {
      any_dead_ = false;
      for (auto it = conns_.begin(); it != conns_.end();) {
        if ((*it)->dead) {
          DropConn(it->get());
          it = conns_.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (Call* call : retired_) calls_list_.erase(call->self);
    retired_.clear();
  }

  // Frees a call (at the next Reap(), once no callback of this turn can
  // reach it) when neither side's stream is open and it does not wait.
  void MaybeRetire(Call* call) {
    if (call->retired || call->down != nullptr || call->up != nullptr || call->queued) return;
    call->retired = true;
    retired_.push_back(call);
  }

  // ---- the upstream connection

  // The connection to forward on, connecting when there is none and the
  // last attempt is far enough back; nullptr and why when there is none.
  Conn* Upstream(std::string* why) {
    if (up_ != nullptr && !up_->dead &&
        (up_->connecting || nghttp2_session_check_request_allowed(up_->session))) {
      return up_;
    }
    if (up_ != nullptr && !up_->dead) {
      // A GOAWAY came: its calls finish on it; new ones go on a new one.
      up_ = nullptr;
    }
    const absl::Time now = clock_.Now();
    if (now < last_connect_ + kReconnectEvery) {
      *why = last_error_.empty() ? "reconnecting" : last_error_;
      return nullptr;
    }
    last_connect_ = now;
    upstream_connects_.fetch_add(1, std::memory_order_relaxed);
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (int rc = getaddrinfo(up_host_.c_str(), up_port_.c_str(), &hints, &res); rc != 0) {
      last_error_ = absl::StrCat(up_host_, ": ", gai_strerror(rc));
      *why = last_error_;
      return nullptr;
    }
    const int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int rc = fd < 0 ? -1 : connect(fd, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    if (fd < 0 || (rc != 0 && errno != EINPROGRESS)) {
      last_error_ = absl::StrCat("connect: ", strerror(errno));
      if (fd >= 0) close(fd);
      *why = last_error_;
      return nullptr;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto conn = std::make_unique<Conn>();
    conn->loop = this;
    conn->upstream = true;
    conn->fd = fd;
    conn->connecting = rc != 0;
    nghttp2_session_client_new(&conn->session, Callbacks(), conn.get());
    const nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                               {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20}};
    nghttp2_submit_settings(conn->session, NGHTTP2_FLAG_NONE, settings, 2);
    nghttp2_session_set_local_window_size(conn->session, NGHTTP2_FLAG_NONE, 0, 1 << 24);
    Watch(fd, EPOLLIN | EPOLLOUT, conn.get());
    conn->want_out = true;
    up_ = conn.get();
    dirty_.push_back(up_);
    conns_.push_back(std::move(conn));
    last_error_.clear();
    return up_;
  }

  // ---- calls

  LatencyPredictor* PredictorFor(const std::string& path) {
    auto it = predictors_.find(path);
    if (it != predictors_.end()) return it->second.get();
    if (predictors_.size() >= kMaxPredictedMethods) return nullptr;
    return predictors_.emplace(path, std::make_unique<LatencyPredictor>(o_.admission))
        .first->second.get();
  }

  // The caller's request headers are complete: decide.
  void Arrived(Call* call) {
    call->decided = true;
    calls_.fetch_add(1, std::memory_order_relaxed);
    absl::StatusOr<InboundCall> in = ReadInboundCall(call->request_headers, call->arrival);
    if (!in.ok()) {
      bad_request_.fetch_add(1, std::memory_order_relaxed);
      Answer(call, BadRequest(o_.hop, in.status()));
      return;
    }
    call->inbound = std::move(*in);
    const absl::Duration budget = call->inbound.deadline - call->arrival;
    if (budget < o_.min_attempt_budget) {
      arrived_expired_.fetch_add(1, std::memory_order_relaxed);
      Answer(call, ArrivedExpired(o_.hop, budget));
      return;
    }
    call->waiter.user = call;
    Admission::Ready others;
    const ArrivalDecision d = admission_->Arrive(&call->waiter, call->inbound.deadline,
                                                 PredictorFor(call->inbound.path), &others);
    switch (d) {
      case ArrivalDecision::kAdmit:
        call->admitted = true;
        Forward(call);
        break;
      case ArrivalDecision::kQueue:
        call->queued = true;
        break;
      default:
        Shed(call, d);
        break;
    }
    Handle(others);
  }

  // Waiters admission hands back: forward the admitted, answer the shed.
  void Handle(const Admission::Ready& ready) {
    for (Admission::Waiter* w : ready.admitted) {
      Call* call = static_cast<Call*>(w->user);
      call->queued = false;
      call->admitted = true;
      if (call->down == nullptr) {
        // Its caller left while it waited; Leave() lost the race with this
        // release. Give the place back.
        Release(call, absl::nullopt);
        MaybeRetire(call);
        continue;
      }
      Forward(call);
    }
    for (const auto& [w, why] : ready.shed) {
      Call* call = static_cast<Call*>(w->user);
      call->queued = false;
      if (call->down != nullptr) Shed(call, why);
      MaybeRetire(call);
    }
  }

  void Shed(Call* call, ArrivalDecision d) {
    shed_[static_cast<int>(d)].fetch_add(1, std::memory_order_relaxed);
    const int limit = admission_->limit();
    if (d != ArrivalDecision::kShedCannotFinish && d != ArrivalDecision::kShedQueueExpired) {
      // Under a flood nearly every call gets one of these, and its answer
      // depends only on the decision and the limit: built once per limit,
      // not per call (building it was a fifth of the edge's CPU at 16x).
      // nghttp2 reads the headers when it sends them, later in this turn
      // or the next: an answer, once built, stays until the edge goes, so
      // they are handed over without a copy. At most one per decision and
      // limit.
      std::unique_ptr<CachedAnswer>& cached = shed_answers_[{static_cast<int>(d), limit}];
      if (cached == nullptr) {
        RefusalFacts facts;
        facts.hop = o_.hop;
        facts.limit = limit;
        facts.pushback = o_.admission.pushback;
        cached = std::make_unique<CachedAnswer>();
        cached->headers = TrailersOnly(RefusalFor(d, facts));
        cached->nv = Nvs(cached->headers);
        for (nghttp2_nv& nv : cached->nv) {
          nv.flags = NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE;
        }
      }
      AnswerWith(call, cached->nv);
      return;
    }
    RefusalFacts facts;
    facts.hop = o_.hop;
    facts.limit = limit;
    facts.pushback = o_.admission.pushback;
    facts.budget_on_arrival = call->inbound.deadline == absl::InfiniteFuture()
                                  ? absl::InfiniteDuration()
                                  : call->inbound.deadline - call->arrival;
    facts.waited = clock_.Now() - call->arrival;
    Answer(call, RefusalFor(d, facts));
  }

  void Release(Call* call, absl::optional<absl::Duration> finished_in) {
    if (!call->admitted) return;
    call->admitted = false;
    if (finished_in.has_value()) {
      if (LatencyPredictor* p = PredictorFor(call->inbound.path)) {
        p->Record(*finished_in, clock_.Now());
      }
    }
    Admission::Ready ready;
    admission_->Release(finished_in, &ready);
    Handle(ready);
  }

  // The edge's own answer to the caller, in one HEADERS frame.
  void Answer(Call* call, const Refusal& refusal) {
    const std::vector<Header> headers = TrailersOnly(refusal);
    AnswerWith(call, Nvs(headers));
  }

  void AnswerWith(Call* call, const std::vector<nghttp2_nv>& nv) {
    if (call->down == nullptr || call->answered) return;
    call->answered = true;
    nghttp2_submit_response(call->down->session, call->down_id, nv.data(), nv.size(), nullptr);
    dirty_.push_back(call->down);
  }

  void Forward(Call* call) {
    std::string why;
    Conn* up = Upstream(&why);
    if (up == nullptr) {
      unavailable_.fetch_add(1, std::memory_order_relaxed);
      Answer(call, UpstreamUnavailable(o_.hop, o_.upstream, why));
      Release(call, absl::nullopt);
      return;
    }
    const absl::Time now = clock_.Now();
    const std::vector<Header> headers = ForwardedHeaders(
        call->request_headers, call->inbound.deadline, now, clock_id_, clock_.Steady());
    call->request_headers.clear();
    call->request_headers.shrink_to_fit();
    const std::vector<nghttp2_nv> nv = Nvs(headers);
    nghttp2_data_provider body{};
    body.source.ptr = call;
    body.read_callback = &Loop::ReadRequest;
    const int32_t id =
        nghttp2_submit_request(up->session, nullptr, nv.data(), nv.size(), &body, call);
    if (id < 0) {
      unavailable_.fetch_add(1, std::memory_order_relaxed);
      Answer(call, UpstreamUnavailable(o_.hop, o_.upstream, nghttp2_strerror(id)));
      Release(call, absl::nullopt);
      return;
    }
    forwarded_.fetch_add(1, std::memory_order_relaxed);
    call->up = up;
    call->up_id = id;
    call->upstream_start = now;
    up->calls[id] = call;
    dirty_.push_back(up);
  }

  // The caller's stream closed (answered, or reset by the caller).
  void CallerGone(Call* call) {
    if (!call->answered) caller_reset_.fetch_add(1, std::memory_order_relaxed);
    if (call->queued) {
      if (admission_->Leave(&call->waiter)) call->queued = false;
    }
    if (call->up != nullptr) {
      nghttp2_submit_rst_stream(call->up->session, NGHTTP2_FLAG_NONE, call->up_id, NGHTTP2_CANCEL);
      dirty_.push_back(call->up);
    }
    MaybeRetire(call);
  }

  // The upstream stream closed: pass on what did not reach the caller yet,
  // and give its place in admission to the next call.
  void UpstreamEnded(Call* call, uint32_t h2_error, absl::string_view why) {
    const bool ok = h2_error == 0 && call->response_ended && call->grpc_status == 0;
    if (ok) upstream_ok_.fetch_add(1, std::memory_order_relaxed);
    if (call->down != nullptr && !call->answered) {
      if (!call->response_started) {
        grpc_h2::StreamEnd end;
        end.h2_error = h2_error;
        Refusal r = UpstreamUnavailable(
            o_.hop, o_.upstream,
            h2_error != 0 ? absl::StrCat("stream reset (", nghttp2_http2_strerror(h2_error), ")")
                          : std::string(why.empty() ? "stream ended without an answer" : why));
        r.code = h2_error != 0 ? grpc_h2::StatusOfStreamEnd(end) : absl::StatusCode::kUnavailable;
        Answer(call, r);
      } else if (!call->response_ended) {
        // Headers went out but no trailers will come: reset, as gRPC's
        // proxies do, so the caller does not wait for them.
        call->answered = true;
        nghttp2_submit_rst_stream(call->down->session, NGHTTP2_FLAG_NONE, call->down_id,
                                  h2_error != 0 ? h2_error : uint32_t{NGHTTP2_INTERNAL_ERROR});
        dirty_.push_back(call->down);
      }
    }
    const absl::Duration upstream_time = clock_.Now() - call->upstream_start;
    call->up = nullptr;
    call->up_id = 0;
    Release(call, ok ? absl::optional<absl::Duration>(upstream_time) : absl::nullopt);
    MaybeRetire(call);
  }

  // ---- nghttp2 callbacks

  static nghttp2_session_callbacks* Callbacks() {
    static nghttp2_session_callbacks* callbacks = [] {
      nghttp2_session_callbacks* cb = nullptr;
      nghttp2_session_callbacks_new(&cb);
      nghttp2_session_callbacks_set_on_begin_headers_callback(cb, &Loop::OnBeginHeaders);
      nghttp2_session_callbacks_set_on_header_callback(cb, &Loop::OnHeader);
      nghttp2_session_callbacks_set_on_frame_recv_callback(cb, &Loop::OnFrame);
      nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, &Loop::OnData);
      nghttp2_session_callbacks_set_on_stream_close_callback(cb, &Loop::OnStreamClose);
      return cb;
    }();
    return callbacks;
  }

  Call* Find(Conn* c, int32_t id) {
    auto it = c->calls.find(id);
    return it == c->calls.end() ? nullptr : it->second;
  }

  static int OnBeginHeaders(nghttp2_session* session, const nghttp2_frame* frame, void* user) {
    auto* c = static_cast<Conn*>(user);
    if (c->upstream || frame->hd.type != NGHTTP2_HEADERS ||
        frame->headers.cat != NGHTTP2_HCAT_REQUEST) {
      return 0;
    }
    Loop* loop = c->loop;
    auto call = std::make_unique<Call>();
    call->down = c;
    call->down_id = frame->hd.stream_id;
    call->arrival = loop->clock_.Now();
    call->request_headers.reserve(16);  // a gRPC request has about 10
    c->calls[call->down_id] = call.get();
    nghttp2_session_set_stream_user_data(session, call->down_id, call.get());
    Call* raw = call.get();
    loop->calls_list_.push_back(std::move(call));
    raw->self = std::prev(loop->calls_list_.end());
    return 0;
  }

  static int OnHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                      size_t namelen, const uint8_t* value, size_t valuelen, uint8_t, void* user) {
    auto* c = static_cast<Conn*>(user);
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    Call* call = c->loop->Find(c, frame->hd.stream_id);
    if (call == nullptr) return 0;
    Header h{std::string(reinterpret_cast<const char*>(name), namelen),
             std::string(reinterpret_cast<const char*>(value), valuelen)};
    if (!c->upstream) {
      call->request_headers.push_back(std::move(h));
      return 0;
    }
    if (h.name == "grpc-status") {
      int status = -1;
      if (absl::SimpleAtoi(h.value, &status)) call->grpc_status = status;
    }
    if (frame->headers.cat == NGHTTP2_HCAT_RESPONSE) {
      call->response_headers.push_back(std::move(h));
    } else {
      call->trailers.push_back(std::move(h));
    }
    return 0;
  }

  static int OnFrame(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    auto* c = static_cast<Conn*>(user);
    Loop* loop = c->loop;
    if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) return 0;
    Call* call = loop->Find(c, frame->hd.stream_id);
    if (call == nullptr) return 0;
    const bool end = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
    if (!c->upstream) {
      if (end) {
        call->request_ended = true;
        loop->ResumeRequest(call);
      }
      if (frame->hd.type == NGHTTP2_HEADERS && !call->decided) loop->Arrived(call);
      return 0;
    }
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_RESPONSE) {
      loop->StartResponse(call, end);
    } else if (end) {
      call->response_ended = true;
      loop->ResumeResponse(call);
    }
    return 0;
  }

  static int OnData(nghttp2_session* session, uint8_t, int32_t id, const uint8_t* data, size_t len,
                    void* user) {
    auto* c = static_cast<Conn*>(user);
    Loop* loop = c->loop;
    Call* call = loop->Find(c, id);
    if (call == nullptr) return 0;
    if (!c->upstream) {
      if (call->answered) return 0;  // refused already: the rest is not needed
      call->request_bytes += static_cast<int64_t>(len);
      if (call->request_bytes > loop->o_.max_request_bytes) {
        if (!call->answered) {
          Refusal r;
          r.code = absl::StatusCode::kResourceExhausted;
          r.message = absl::StrCat(loop->o_.hop, ": request larger than ",
                                   loop->o_.max_request_bytes, " bytes");
          loop->Answer(call, r);
        }
        nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, id, NGHTTP2_NO_ERROR);
        return 0;
      }
      call->request.append(reinterpret_cast<const char*>(data), len);
      loop->ResumeRequest(call);
    } else {
      call->response.append(reinterpret_cast<const char*>(data), len);
      loop->ResumeResponse(call);
    }
    return 0;
  }

  static int OnStreamClose(nghttp2_session*, int32_t id, uint32_t error_code, void* user) {
    auto* c = static_cast<Conn*>(user);
    Loop* loop = c->loop;
    auto it = c->calls.find(id);
    if (it == c->calls.end()) return 0;
    Call* call = it->second;
    c->calls.erase(it);
    if (c->upstream) {
      loop->UpstreamEnded(call, error_code, {});
    } else {
      call->down = nullptr;
      loop->CallerGone(call);
    }
    return 0;
  }

  void ResumeRequest(Call* call) {
    if (call->up == nullptr) return;
    nghttp2_session_resume_data(call->up->session, call->up_id);
    dirty_.push_back(call->up);
  }

  void StartResponse(Call* call, bool end) {
    if (call->down == nullptr || call->answered) return;
    call->response_started = true;
    const std::vector<nghttp2_nv> nv = Nvs(call->response_headers);
    if (end) {
      // Trailers-Only: the one HEADERS frame is the whole answer.
      call->response_ended = true;
      call->answered = true;
      nghttp2_submit_response(call->down->session, call->down_id, nv.data(), nv.size(), nullptr);
    } else {
      nghttp2_data_provider body{};
      body.source.ptr = call;
      body.read_callback = &Loop::ReadResponse;
      nghttp2_submit_response(call->down->session, call->down_id, nv.data(), nv.size(), &body);
    }
    dirty_.push_back(call->down);
  }

  void ResumeResponse(Call* call) {
    if (call->down == nullptr || !call->response_started || call->answered) return;
    nghttp2_session_resume_data(call->down->session, call->down_id);
    dirty_.push_back(call->down);
  }

  // Both data providers: hand nghttp2 what has arrived, defer when nothing
  // has, end the stream (or send the trailers) when everything has.
  // Moves up to `length` bytes of `pending` to `out`; sets EOF once
  // `ended` and nothing is left. NGHTTP2_ERR_DEFERRED: nothing yet.
  static ssize_t Drain(std::string& pending, bool ended, uint8_t* out, size_t length,
                       uint32_t* flags) {
    const size_t n = std::min(length, pending.size());
    std::memcpy(out, pending.data(), n);
    pending.erase(0, n);
    if (!pending.empty()) return static_cast<ssize_t>(n);
    if (ended) {
      *flags |= NGHTTP2_DATA_FLAG_EOF;
    } else if (n == 0) {
      return NGHTTP2_ERR_DEFERRED;
    }
    return static_cast<ssize_t>(n);
  }

  static ssize_t ReadRequest(nghttp2_session*, int32_t, uint8_t* buf, size_t length,
                             uint32_t* flags, nghttp2_data_source* source, void*) {
    auto* call = static_cast<Call*>(source->ptr);
    return Drain(call->request, call->request_ended, buf, length, flags);
  }

  static ssize_t ReadResponse(nghttp2_session* session, int32_t id, uint8_t* buf, size_t length,
                              uint32_t* flags, nghttp2_data_source* source, void*) {
    auto* call = static_cast<Call*>(source->ptr);
    const ssize_t n = Drain(call->response, call->response_ended, buf, length, flags);
    if ((*flags & NGHTTP2_DATA_FLAG_EOF) != 0) {
      call->answered = true;
      if (!call->trailers.empty()) {
        *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
        const std::vector<nghttp2_nv> nv = Nvs(call->trailers);
        nghttp2_submit_trailer(session, id, nv.data(), nv.size());
      }
    }
    return n;
  }

  const EdgeOptions o_;
  Clock& clock_;
  const uint64_t clock_id_;
  std::unique_ptr<Admission> admission_;
  std::string up_host_, up_port_;
  int epoll_fd_ = -1, wake_fd_ = -1, listen_fd_ = -1;
  int port_ = 0;
  char listen_tag_ = 0, wake_tag_ = 0;
  std::atomic<bool> stop_{false};
  std::list<std::unique_ptr<Conn>> conns_;
  std::list<std::unique_ptr<Call>> calls_list_;
  // A shed's answer, by ArrivalDecision and admission's limit then.
  struct CachedAnswer {
    std::vector<Header> headers;
    std::vector<nghttp2_nv> nv;  // points into `headers`
  };
  absl::flat_hash_map<std::pair<int, int>, std::unique_ptr<CachedAnswer>> shed_answers_;
  std::vector<Call*> retired_;
  std::vector<Conn*> dirty_;
  bool any_dead_ = false;
  Conn* up_ = nullptr;
  absl::Time last_connect_ = absl::InfinitePast();
  std::string last_error_;
  absl::flat_hash_map<std::string, std::unique_ptr<LatencyPredictor>> predictors_;

  std::atomic<uint64_t> calls_{0}, forwarded_{0}, upstream_ok_{0}, bad_request_{0},
      arrived_expired_{0}, unavailable_{0}, caller_reset_{0}, upstream_connects_{0};
  std::array<std::atomic<uint64_t>, kArrivalDecisionCount> shed_{};
};

absl::StatusOr<std::unique_ptr<Edge>> Edge::Create(const EdgeOptions& options) {
  if (absl::Status s = ValidateEdgeOptions(options); !s.ok()) return s;
  auto loop = std::make_unique<Loop>(options);
  if (absl::Status s = loop->Init(); !s.ok()) return s;
  return std::unique_ptr<Edge>(new Edge(std::move(loop)));
}

Edge::Edge(std::unique_ptr<Loop> loop) : loop_(std::move(loop)) {}
Edge::~Edge() = default;
int Edge::port() const { return loop_->port(); }
void Edge::Run() { loop_->Run(); }
void Edge::Shutdown() { loop_->Shutdown(); }
EdgeStats Edge::Stats() const { return loop_->Stats(); }

}  // namespace hopbudget::edge
