// Copyright hopbudget authors.
//
// h2_load: an open-loop load of unary PlaceOrder calls on the demo gateway,
// written as HTTP/2 frames by libnghttp2 on one thread, without gRPC's
// client. The generator of the overload benchmark and of the demo's flood:
// `chainctl load` spends about 100 us of its own CPU per call (gRPC's
// client, malloc, Abseil status and time), so one core cannot offer more
// than about 9 500 calls/s with it, and the chain is then measured against a
// generator that has collapsed (docs/overload.md). This one costs a few
// microseconds per call.
//
// It behaves on the wire as a gRPC client does on one connection: each
// call's deadline starts when it is made, its headers carry grpc-timeout
// (what is left when the stream opens) and the demo's client-deadline
// header; above the server's SETTINGS_MAX_CONCURRENT_STREAMS calls wait in
// a first-in-first-out queue, where a call whose deadline passes ends
// DEADLINE_EXCEEDED without being sent; an open stream whose deadline
// passes is reset (RST_STREAM CANCEL) and ends DEADLINE_EXCEEDED. With
// --client-throttle=K a call first asks hopbudget's ClientThrottle (the SRE
// book's adaptive throttle), as `chainctl load --client-throttle` does. With
// --budget-headers it also sends the exact budget and its steady-clock stamp
// (hopbudget-budget-us, hopbudget-sent-us: docs/wire.md), as a caller with
// hopbudget's client interceptor does, so that a hop can see how long a call
// waited on its way (in its own socket, say), which grpc-timeout cannot say.
//
// It reads each service's Admin GetStats before and after (--admin), waits
// 1.5 s after the last answer for work that outlived its caller, and writes
// chainctl's summary (client/chainctl/summary.h): the table on stdout, or
// with --json=FILE (- for stdout) the JSON, plus send_lag_ms (how far behind
// its schedule it made calls: near zero, or the generator set the pace) and
// expired_unsent.
//
//   h2_load --gateway=127.0.0.1:PORT --rps=16000 --duration=6s --budget=500ms
//           [--admin=HOST:PORT,...] [--client-throttle=2] [--budget-headers]
//           [--json=FILE] [--quiet]
//
// Exit status: 0 when the load ran (whatever the calls answered), 1 when the
// connection was lost or an Admin call failed, 2 for a bad command line.
#include <arpa/inet.h>
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "client/cli/cli_flags.h"
#include "demo/client_deadline.h"
#include "demo/demo.grpc.pb.h"
#include "grpc_h2/grpc_over_h2.h"
#include "hopbudget/advanced/attribution.h"
#include "hopbudget/advanced/client_throttle.h"
#include "hopbudget/advanced/clock.h"
#include "hopbudget/advanced/deadline_source.h"
#include "hopbudget/advanced/wire.h"
#include "stats_delta.h"
#include "summary.h"

ABSL_FLAG(std::string, gateway, "", "the gateway, host:port (plaintext HTTP/2)");
ABSL_FLAG(double, rps, 0, "calls made per second (open loop), > 0");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(5), "how long calls are made, > 0");
ABSL_FLAG(absl::Duration, budget, absl::Milliseconds(500), "each call's deadline, > 0");
ABSL_FLAG(std::string, admin, "", "Admin services to read GetStats from, host:port,...");
ABSL_FLAG(double, client_throttle, 0,
          "0 (off) or K >= 1: the adaptive client throttle (hopbudget::ClientThrottle)");
ABSL_FLAG(std::string, json, "", "write the summary as JSON to this file (- for stdout)");
ABSL_FLAG(std::string, key_prefix, "", "idempotency keys are PREFIX-N (default h2load-<time>)");
ABSL_FLAG(bool, quiet, false, "no progress line on stderr");
ABSL_FLAG(bool, budget_headers, false,
          "also send what hopbudget's client interceptor sends: hopbudget-budget-us and "
          "hopbudget-sent-us (a hopbudget caller rather than a plain gRPC one)");

namespace hopbudget::h2load {
namespace {

using chainctl::CallRecord;
using chainctl::SummaryBuilder;
using grpc_h2::FormatGrpcTimeout;
using grpc_h2::FrameGrpcMessage;
using grpc_h2::StatusOfStreamEnd;
using grpc_h2::StreamEnd;

constexpr char kPath[] = "/hopbudget.demo.Gateway/PlaceOrder";
// How a call that ended on its own deadline here is attributed: the
// client's own budget, at this generator.
constexpr char kHop[] = "h2-load";

absl::Duration ProcessCpu() {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return absl::ZeroDuration();
  return absl::DurationFromTimeval(u.ru_utime) + absl::DurationFromTimeval(u.ru_stime);
}

struct Call {
  absl::Time start;
  absl::Time deadline;
  std::string body;  // the framed request
  size_t body_sent = 0;
  int32_t stream_id = 0;
  bool finished = false;
  StreamEnd end;
  std::string source, hop, message;  // of a hopbudget attribution
};

nghttp2_nv Header(absl::string_view name, absl::string_view value) {
  return {reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
          reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(), value.size(),
          NGHTTP2_NV_FLAG_NONE};
}

struct Options {
  std::string host;
  int port = 0;
  double rps = 0;
  absl::Duration duration;
  absl::Duration budget;
  std::vector<std::string> admin;
  absl::optional<ClientThrottlePolicy> throttle;
  std::string key_prefix;
  bool progress = true;
  bool budget_headers = false;
};

// One connection, one thread: makes the calls on schedule, queues them above
// the server's stream bound, expires them at their deadline, and records
// each call's end in the summary.
class Generator {
 public:
  explicit Generator(const Options& o) : o_(o) {}
  ~Generator() {
    if (session_ != nullptr) nghttp2_session_del(session_);
    if (fd_ >= 0) close(fd_);
  }

  absl::Status Connect() {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    const std::string port = absl::StrCat(o_.port);
    if (int rc = getaddrinfo(o_.host.c_str(), port.c_str(), &hints, &res); rc != 0) {
      return absl::UnavailableError(absl::StrCat(o_.host, ": ", gai_strerror(rc)));
    }
    for (addrinfo* a = res; a != nullptr && fd_ < 0; a = a->ai_next) {
      fd_ = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
      if (fd_ < 0) continue;
      if (connect(fd_, a->ai_addr, a->ai_addrlen) != 0) {
        close(fd_);
        fd_ = -1;
      }
    }
    freeaddrinfo(res);
    if (fd_ < 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot connect to ", o_.host, ":", o_.port, ": ", strerror(errno)));
    }
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK);
    authority_ = absl::StrCat(o_.host, ":", o_.port);

    nghttp2_session_callbacks* cb = nullptr;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_header_callback(cb, &Generator::OnHeader);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, &Generator::OnStreamClose);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, &Generator::OnFrame);
    nghttp2_session_client_new(&session_, cb, this);
    nghttp2_session_callbacks_del(cb);
    const nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                               {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20}};
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, 2);
    nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, 1 << 24);
    // The server's SETTINGS say how many streams it takes: wait for them
    // before the first call, as gRPC's client waits for them to mark the
    // connection ready.
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    while (!settings_seen_) {
      if (!Flush() || !Read())
        return absl::UnavailableError("connection lost during the handshake");
      if (absl::Now() > give_up) {
        return absl::DeadlineExceededError("no SETTINGS from the server within 10 s");
      }
      Wait(absl::Now() + absl::Milliseconds(10));
    }
    return absl::OkStatus();
  }

  // Runs the load; false when the connection was lost.
  bool Run(SummaryBuilder& builder) {
    builder_ = &builder;
    std::unique_ptr<ClientThrottle> throttle;
    if (o_.throttle.has_value()) throttle = *ClientThrottle::Create(*o_.throttle, &Clock::Real());
    throttle_ = throttle.get();
    std::mt19937_64 rng(0x6f70656e6c6f6f70);
    std::uniform_real_distribution<double> uniform01(0.0, 1.0);
    const std::string prefix = o_.key_prefix.empty()
                                   ? absl::StrCat("h2load-", absl::ToUnixMicros(absl::Now()))
                                   : o_.key_prefix;
    demo::Order order;
    demo::Item* item = order.add_items();
    item->set_sku("sku-1");
    item->set_quantity(1);
    const absl::Duration cpu_at_start = ProcessCpu();
    const absl::Time start = absl::Now();
    const absl::Time end = start + o_.duration;
    const absl::Duration interval = absl::Seconds(1) / o_.rps;
    absl::Time next_progress = start + absl::Milliseconds(500);
    int64_t made = 0;
    absl::Time next_due = start;
    for (;;) {
      const absl::Time now = absl::Now();
      while (next_due < end && next_due <= now) {
        builder.AddSendLag(now - next_due);
        ++made;
        next_due = start + interval * static_cast<double>(made);
        if (throttle_ != nullptr &&
            throttle_->Decide(uniform01(rng)) == ThrottleDecision::kRejectLocally) {
          builder.CountClientThrottled();
          continue;
        }
        calls_.emplace_back();
        Call& c = calls_.back();
        c.start = now;
        c.deadline = now + o_.budget;
        order.set_key(absl::StrCat(prefix, "-", made));
        c.body = FrameGrpcMessage(order.SerializeAsString());
        queue_.push_back(&c);
      }
      Expire(now);
      OpenStreams(now);
      if (!Flush()) Lose(now);
      // A lost connection ends the run (the exit status says so); gRPC's
      // client would reconnect, but a chain that drops its connections
      // under load is a finding, not a round to average in.
      if (lost_) break;
      if (o_.progress && now >= next_progress) {
        next_progress += absl::Milliseconds(500);
        std::cerr << "\r  h2_load: "
                  << absl::FormatDuration(absl::Trunc(now - start, absl::Milliseconds(100)))
                  << "  made " << made << "  waiting " << queue_.size() << "  open " << open_
                  << "  ok " << ok_ << "  failed " << failed_ << "   " << std::flush;
      }
      if (next_due >= end && queue_.empty() && open_ == 0) break;
      absl::Time wake = next_due < end ? next_due : absl::InfiniteFuture();
      if (!queue_.empty()) wake = std::min(wake, queue_.front()->deadline);
      if (!in_flight_.empty()) wake = std::min(wake, in_flight_.front()->deadline);
      Wait(wake);
      if (!Read()) Lose(absl::Now());
      if (lost_) break;
    }
    if (o_.progress) std::cerr << "\n";
    builder.SetTotal(absl::Now() - start);
    builder.SetClientCpu(ProcessCpu() - cpu_at_start);
    return !lost_;
  }

 private:
  // Calls whose deadline has passed: those still waiting for a stream end
  // here unsent; open ones are reset, as a gRPC client cancels them.
  void Expire(absl::Time now) {
    while (!queue_.empty() && queue_.front()->deadline <= now) {
      Call* c = queue_.front();
      queue_.pop_front();
      builder_->CountExpiredUnsent();
      c->source = "client";
      c->hop = kHop;
      Finish(*c, absl::StatusCode::kDeadlineExceeded, now);
    }
    while (!in_flight_.empty()) {
      Call* c = in_flight_.front();
      if (!c->finished && c->deadline > now) break;
      in_flight_.pop_front();
      if (c->finished) continue;
      nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, c->stream_id, NGHTTP2_CANCEL);
      c->source = "client";
      c->hop = kHop;
      Finish(*c, absl::StatusCode::kDeadlineExceeded, now);
    }
  }

  // Opens streams for waiting calls, oldest first, up to the server's bound.
  void OpenStreams(absl::Time now) {
    const uint32_t bound =
        nghttp2_session_get_remote_settings(session_, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
    while (!queue_.empty() && open_ < static_cast<int64_t>(bound)) {
      Call* c = queue_.front();
      queue_.pop_front();
      const std::string timeout = FormatGrpcTimeout(c->deadline - now);
      const std::string client_deadline = demo::FormatClientDeadline(c->deadline);
      std::string budget, sent;
      if (o_.budget_headers) {
        budget = FormatBudgetHeader(c->deadline - now);
        sent = FormatSentHeader(clock_id_, Clock::Real().Steady());
      }
      const nghttp2_nv headers[] = {
          Header(":method", "POST"),
          Header(":scheme", "http"),
          Header(":path", kPath),
          Header(":authority", authority_),
          Header("content-type", "application/grpc"),
          Header("te", "trailers"),
          Header("grpc-timeout", timeout),
          Header(demo::kClientDeadlineHeader, client_deadline),
          Header("user-agent", "hopbudget-h2-load"),
          Header(kBudgetHeader, budget),
          Header(kSentHeader, sent),
      };
      // The last two only with --budget-headers.
      const size_t count = sizeof(headers) / sizeof(headers[0]) - (o_.budget_headers ? 0 : 2);
      nghttp2_data_provider body;
      body.source.ptr = c;
      body.read_callback = &Generator::ReadBody;
      const int32_t id = nghttp2_submit_request(session_, nullptr, headers, count, &body, c);
      if (id < 0) {
        std::cerr << "h2_load: cannot open a stream: " << nghttp2_strerror(id) << "\n";
        Finish(*c, absl::StatusCode::kInternal, now);
        continue;
      }
      c->stream_id = id;
      ++open_;
      in_flight_.push_back(c);
    }
  }

  void Finish(Call& c, absl::StatusCode code, absl::Time now) {
    c.finished = true;
    CallRecord r;
    r.code = code;
    r.latency = now - c.start;
    if (code == absl::StatusCode::kDeadlineExceeded) {
      if (c.source.empty()) {
        // The plain trailers are absent when the hop had to cancel the call:
        // then the status message carries the attribution.
        if (absl::optional<Attribution> a = ParseAttributionMessage(c.message)) {
          c.source = std::string(DeadlineSourceName(a->source));
          c.hop = a->hop;
        }
      }
      r.source = std::move(c.source);
      r.hop = std::move(c.hop);
    }
    builder_->Add(r);
    if (throttle_ != nullptr) throttle_->Record(BackendAnswerOf(code));
    (code == absl::StatusCode::kOk ? ok_ : failed_)++;
    std::string().swap(c.body);
    std::string().swap(c.message);
  }

  // The connection is gone: every call not ended yet ends UNAVAILABLE, as
  // gRPC's client ends the calls of a transport that closed.
  void Lose(absl::Time now) {
    if (lost_) return;
    lost_ = true;
    std::cerr << "\nh2_load: the connection to " << authority_
              << " was lost: " << (why_lost_.empty() ? "unknown" : why_lost_) << "\n";
    for (Call* c : in_flight_) {
      if (!c->finished) Finish(*c, absl::StatusCode::kUnavailable, now);
    }
    in_flight_.clear();
    for (Call* c : queue_) Finish(*c, absl::StatusCode::kUnavailable, now);
    queue_.clear();
    open_ = 0;
  }

  // Sends what nghttp2 has queued, in writes of up to 64 KB; keeps what the
  // socket does not take for the next call. False when the socket failed.
  bool Flush() {
    for (;;) {
      while (out_offset_ < out_.size()) {
        const ssize_t n = write(fd_, out_.data() + out_offset_, out_.size() - out_offset_);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
        if (n < 0) return Failed(absl::StrCat("write: ", std::strerror(errno)));
        out_offset_ += static_cast<size_t>(n);
      }
      out_.clear();
      out_offset_ = 0;
      while (out_.size() < 65536) {
        const uint8_t* data = nullptr;
        const ssize_t n = nghttp2_session_mem_send(session_, &data);
        if (n < 0) return Failed(absl::StrCat("nghttp2: ", nghttp2_strerror(static_cast<int>(n))));
        if (n == 0) break;
        out_.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
      }
      if (out_.empty()) return true;
    }
  }

  // Keeps the first cause of a lost connection, for Lose() to say; false.
  bool Failed(std::string why) {
    if (why_lost_.empty()) why_lost_ = std::move(why);
    return false;
  }

  // Hands what the socket has to nghttp2. False at EOF or on an error.
  bool Read() {
    uint8_t buf[65536];
    for (;;) {
      const ssize_t n = read(fd_, buf, sizeof(buf));
      if (n > 0) {
        const ssize_t used = nghttp2_session_mem_recv(session_, buf, static_cast<size_t>(n));
        if (used < 0) {
          return Failed(absl::StrCat("nghttp2: ", nghttp2_strerror(static_cast<int>(used))));
        }
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return !goaway_;
      return Failed(n == 0 ? "the server closed the connection"
                           : absl::StrCat("read: ", std::strerror(errno)));
    }
  }

  // Sleeps until the socket is readable (or writable, with output pending)
  // or `wake`, whichever is first.
  void Wait(absl::Time wake) {
    pollfd p{fd_, POLLIN, 0};
    if (out_offset_ < out_.size()) p.events |= POLLOUT;
    const absl::Duration left = wake - absl::Now();
    if (left <= absl::ZeroDuration()) {
      poll(&p, 1, 0);
      return;
    }
    timespec ts = absl::ToTimespec(std::min(left, absl::Seconds(1)));
    ppoll(&p, 1, &ts, nullptr);
  }

  static int OnHeader(nghttp2_session* session, const nghttp2_frame* frame, const uint8_t* name,
                      size_t namelen, const uint8_t* value, size_t valuelen, uint8_t /*flags*/,
                      void* /*self*/) {
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    auto* c =
        static_cast<Call*>(nghttp2_session_get_stream_user_data(session, frame->hd.stream_id));
    if (c == nullptr || c->finished) return 0;
    const absl::string_view n(reinterpret_cast<const char*>(name), namelen);
    const absl::string_view v(reinterpret_cast<const char*>(value), valuelen);
    int number = 0;
    if (n == ":status") {
      if (absl::SimpleAtoi(v, &number)) c->end.http_status = number;
    } else if (n == "grpc-status") {
      c->end.grpc_status = absl::SimpleAtoi(v, &number) && number >= 0 ? number : 2;
    } else if (n == "grpc-message") {
      c->message = std::string(v.substr(0, 256));
    } else if (n == "hopbudget-source") {
      c->source = std::string(v.substr(0, 64));
    } else if (n == "hopbudget-hop") {
      c->hop = std::string(v.substr(0, 64));
    }
    return 0;
  }

  static int OnStreamClose(nghttp2_session* session, int32_t stream_id, uint32_t error_code,
                           void* self) {
    auto* g = static_cast<Generator*>(self);
    --g->open_;
    auto* c = static_cast<Call*>(nghttp2_session_get_stream_user_data(session, stream_id));
    if (c == nullptr || c->finished) return 0;
    c->end.h2_error = error_code;
    g->Finish(*c, StatusOfStreamEnd(c->end), absl::Now());
    return 0;
  }

  static int OnFrame(nghttp2_session* /*session*/, const nghttp2_frame* frame, void* self) {
    auto* g = static_cast<Generator*>(self);
    if (frame->hd.type == NGHTTP2_SETTINGS && (frame->hd.flags & NGHTTP2_FLAG_ACK) == 0) {
      g->settings_seen_ = true;
    } else if (frame->hd.type == NGHTTP2_GOAWAY) {
      g->goaway_ = true;
      g->why_lost_ = absl::StrCat(
          "GOAWAY ", nghttp2_http2_strerror(frame->goaway.error_code), " (",
          frame->goaway.error_code, "), last stream ", frame->goaway.last_stream_id, ": \"",
          absl::string_view(reinterpret_cast<const char*>(frame->goaway.opaque_data),
                            frame->goaway.opaque_data_len),
          "\"");
    }
    return 0;
  }

  static ssize_t ReadBody(nghttp2_session* /*session*/, int32_t /*stream_id*/, uint8_t* buf,
                          size_t length, uint32_t* data_flags, nghttp2_data_source* source,
                          void* /*self*/) {
    auto* c = static_cast<Call*>(source->ptr);
    // A call that ended (expired, its reset queued) has given its body
    // back: nothing more to send.
    if (c->finished || c->body_sent >= c->body.size()) {
      *data_flags |= NGHTTP2_DATA_FLAG_EOF;
      return 0;
    }
    const size_t n = std::min(length, c->body.size() - c->body_sent);
    memcpy(buf, c->body.data() + c->body_sent, n);
    c->body_sent += n;
    if (c->body_sent == c->body.size()) *data_flags |= NGHTTP2_DATA_FLAG_EOF;
    return static_cast<ssize_t>(n);
  }

  const Options o_;
  // Names this process's steady clock in hopbudget-sent-us.
  const uint64_t clock_id_ = std::random_device()() * uint64_t{0x9e3779b97f4a7c15} + 1;
  int fd_ = -1;
  nghttp2_session* session_ = nullptr;
  std::string authority_;
  bool settings_seen_ = false;
  bool goaway_ = false;
  std::string why_lost_;  // the first cause seen: a GOAWAY, an error, an EOF
  bool lost_ = false;
  std::string out_;
  size_t out_offset_ = 0;
  // Every call made (a deque: addresses stay put), those waiting for a
  // stream in the order made, and those with a stream in the order opened
  // (deadlines ascend in both, so the next to expire is at the front).
  std::deque<Call> calls_;
  std::deque<Call*> queue_;
  std::deque<Call*> in_flight_;
  int64_t open_ = 0;
  int64_t ok_ = 0;
  int64_t failed_ = 0;
  SummaryBuilder* builder_ = nullptr;
  ClientThrottle* throttle_ = nullptr;
};

absl::StatusOr<demo::Stats> GetStats(const std::string& admin) {
  auto stub = demo::Admin::NewStub(grpc::CreateChannel(admin, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  demo::Stats stats;
  grpc::Status s = stub->GetStats(&ctx, demo::GetStatsRequest(), &stats);
  if (!s.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                        absl::StrCat("Admin GetStats on ", admin, ": ", s.error_message()));
  }
  return stats;
}

int Main(int argc, char** argv) {
  cli::ParseOrExit(
      argc, argv, "h2_load",
      "h2_load: an open-loop load of PlaceOrder calls on the demo gateway over raw HTTP/2 "
      "(one connection, one thread), with chainctl load's summary.\n\n"
      "  h2_load --gateway=HOST:PORT --rps=N [--duration=5s] [--budget=500ms]\n"
      "          [--admin=HOST:PORT,...] [--client-throttle=K] [--budget-headers]\n"
      "          [--json=FILE|-] [--quiet]");
  Options o;
  const std::string gateway = absl::GetFlag(FLAGS_gateway);
  absl::StatusOr<std::vector<std::string>> target = chainctl::ParseTargetList(gateway);
  if (gateway.empty())
    cli::ExitIfBad("h2_load", absl::InvalidArgumentError("--gateway is required"));
  if (!target.ok() || target->size() != 1) {
    cli::ExitIfBad("h2_load", absl::InvalidArgumentError(absl::StrCat(
                                  "--gateway=", gateway, ": one host:port, port 1..65535")));
  }
  const size_t colon = gateway.rfind(':');
  o.host = gateway.substr(0, colon);
  (void)absl::SimpleAtoi(gateway.substr(colon + 1), &o.port);
  o.rps = absl::GetFlag(FLAGS_rps);
  if (!(o.rps > 0) || o.rps > 1e7) {
    cli::ExitIfBad("h2_load", absl::InvalidArgumentError(
                                  absl::StrCat("--rps=", o.rps, ": more than 0, at most 1e7")));
  }
  o.duration = absl::GetFlag(FLAGS_duration);
  o.budget = absl::GetFlag(FLAGS_budget);
  for (auto [name, d] :
       {std::pair<const char*, absl::Duration>{"duration", o.duration}, {"budget", o.budget}}) {
    if (d <= absl::ZeroDuration() || d == absl::InfiniteDuration()) {
      cli::ExitIfBad("h2_load",
                     absl::InvalidArgumentError(absl::StrCat(
                         "--", name, "=", absl::FormatDuration(d), ": more than 0, finite")));
    }
  }
  if (const std::string admin = absl::GetFlag(FLAGS_admin); !admin.empty()) {
    absl::StatusOr<std::vector<std::string>> a = chainctl::ParseTargetList(admin);
    if (!a.ok())
      cli::ExitIfBad("h2_load", absl::InvalidArgumentError(
                                    absl::StrCat("--admin=", admin, ": ", a.status().message())));
    o.admin = *a;
  }
  absl::StatusOr<absl::optional<ClientThrottlePolicy>> throttle =
      chainctl::LoadClientThrottle(absl::GetFlag(FLAGS_client_throttle));
  cli::ExitIfBad("h2_load", throttle.status());
  o.throttle = *throttle;
  o.key_prefix = absl::GetFlag(FLAGS_key_prefix);
  o.progress = !absl::GetFlag(FLAGS_quiet);
  o.budget_headers = absl::GetFlag(FLAGS_budget_headers);
  const std::string json_path = absl::GetFlag(FLAGS_json);
  if (!json_path.empty() && json_path != "-" && !std::ofstream(json_path, std::ios::app)) {
    cli::ExitIfBad("h2_load", absl::InvalidArgumentError(
                                  absl::StrCat("--json=", json_path, ": cannot write")));
  }

  std::vector<demo::Stats> before;
  for (const std::string& admin : o.admin) {
    absl::StatusOr<demo::Stats> s = GetStats(admin);
    if (!s.ok()) {
      std::cerr << "h2_load: " << s.status().message() << "\n";
      return 1;
    }
    before.push_back(*s);
  }
  Generator g(o);
  if (absl::Status s = g.Connect(); !s.ok()) {
    std::cerr << "h2_load: " << s.message() << "\n";
    return 1;
  }
  SummaryBuilder builder;
  const bool connected = g.Run(builder);
  // Work that goes on after its caller left is what the summary measures:
  // let it end before reading the services' accounting.
  if (!o.admin.empty()) absl::SleepFor(absl::Milliseconds(1500));
  for (size_t k = 0; k < o.admin.size(); ++k) {
    absl::StatusOr<demo::Stats> after =
        chainctl::StatsAfterRun([&] { return GetStats(o.admin[k]); });
    if (!after.ok()) {
      std::cerr << "h2_load: " << after.status().message() << "\n";
      return 1;
    }
    builder.AddService(chainctl::StatsDelta(before[k], *after));
  }
  const chainctl::LoadSummary summary = builder.Build();
  if (json_path.empty()) {
    std::cout << chainctl::FormatSummaryTable(summary);
  } else if (json_path == "-") {
    std::cout << chainctl::FormatSummaryJson(summary) << "\n";
  } else {
    std::ofstream(json_path) << chainctl::FormatSummaryJson(summary) << "\n";
  }
  return connected ? 0 : 1;
}

}  // namespace
}  // namespace hopbudget::h2load

int main(int argc, char** argv) { return hopbudget::h2load::Main(argc, argv); }
