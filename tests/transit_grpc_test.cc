// Copyright hopbudget authors.
//
// A call that waits on its way to a server longer than its budget is not
// started there. gRPC's grpc-timeout is relative, so the server counts the
// budget from when it reads the call; the sender's stamp (hopbudget-sent-us)
// lets it see the wait (transit.h). The wait here is real: a TCP proxy on
// loopback holds what the client sends before passing it on, as a socket
// buffer does for a server whose CPU is busy.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "eventually.h"
#include "relay_fixture.h"

namespace hopbudget {
namespace {

using testing::Eventually;
using testing::HopConfig;
using testing::RelayHop;

// Forwards every connection to `upstream`; what the client sends is held
// for the delay in force when it was read (SetDelay) before it goes on.
// Answers pass at once.
class DelayProxy {
 public:
  explicit DelayProxy(int upstream_port) : upstream_port_(upstream_port) {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (bind(listener_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        listen(listener_, 16) != 0 ||
        getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ADD_FAILURE() << "proxy: cannot listen";
      return;
    }
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { Accept(); });
  }
  ~DelayProxy() {
    stopping_ = true;
    shutdown(listener_, SHUT_RDWR);
    if (acceptor_.joinable()) acceptor_.join();  // no connection is added after this
    absl::MutexLock lock(&mu_);
    for (int fd : fds_) shutdown(fd, SHUT_RDWR);  // ends every Pump()'s read
    for (std::thread& t : pumps_) t.join();
    close(listener_);
    for (int fd : fds_) close(fd);
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  void SetDelay(absl::Duration d) { delay_ns_ = absl::ToInt64Nanoseconds(d); }

 private:
  void Accept() {
    while (!stopping_) {
      pollfd p{listener_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      const int client = accept(listener_, nullptr, nullptr);
      if (client < 0) continue;
      const int server = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      addr.sin_port = htons(static_cast<uint16_t>(upstream_port_));
      if (connect(server, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
        close(client);
        close(server);
        continue;
      }
      absl::MutexLock lock(&mu_);
      fds_.push_back(client);
      fds_.push_back(server);
      pumps_.emplace_back([this, client, server] { Pump(client, server, true); });
      pumps_.emplace_back([this, client, server] { Pump(server, client, false); });
    }
  }
  // Copies `from` to `to`. When `delayed`, each chunk goes out `delay` after
  // it was read (a queue of chunks, sent by a second thread), so that a
  // cancel read 200 ms after a call still follows it by 200 ms.
  void Pump(int from, int to, bool delayed) {
    struct Chunk {
      absl::Time due;
      std::string bytes;
    };
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Chunk> chunks;
    bool eof = false;
    std::thread sender;
    if (delayed) {
      sender = std::thread([&] {
        for (;;) {
          Chunk c;
          {
            std::unique_lock<std::mutex> lock(mu);
            cv.wait(lock, [&] { return !chunks.empty() || eof; });
            if (chunks.empty()) break;
            c = std::move(chunks.front());
            chunks.pop_front();
          }
          absl::SleepFor(c.due - absl::Now());
          if (!SendAll(to, c.bytes.data(), c.bytes.size())) break;
        }
      });
    }
    char buf[16384];
    for (;;) {
      const ssize_t n = read(from, buf, sizeof(buf));
      if (n <= 0) break;
      if (!delayed) {
        if (!SendAll(to, buf, static_cast<size_t>(n))) break;
        continue;
      }
      {
        std::lock_guard<std::mutex> lock(mu);
        chunks.push_back({absl::Now() + absl::Nanoseconds(delay_ns_.load()),
                          std::string(buf, static_cast<size_t>(n))});
      }
      cv.notify_one();
    }
    if (delayed) {
      {
        std::lock_guard<std::mutex> lock(mu);
        eof = true;
      }
      cv.notify_one();
      sender.join();
    }
    shutdown(to, SHUT_WR);
  }
  static bool SendAll(int fd, const char* data, size_t size) {
    for (size_t off = 0; off < size;) {
      const ssize_t w = send(fd, data + off, size - off, MSG_NOSIGNAL);
      if (w <= 0) return false;
      off += static_cast<size_t>(w);
    }
    return true;
  }

  const int upstream_port_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> delay_ns_{0};
  absl::Mutex mu_;
  std::vector<int> fds_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> pumps_ ABSL_GUARDED_BY(mu_);
  std::thread acceptor_;
};

int PortOf(const std::string& address) { return std::stoi(address.substr(address.rfind(':') + 1)); }

grpc::Status CallWithBudget(echo::Relay::Stub& stub, absl::Duration budget, int work_ms) {
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, budget);
  echo::RelayReply reply;
  return stub.Call(&ctx, testing::Request({testing::Work(work_ms)}), &reply);
}

uint64_t ArrivedExpired(RelayHop& hop) {
  return hop.metrics().Snapshot().deadline_exceeded(Side::kServer, DeadlineSource::kArrivedExpired);
}

class TransitGrpcTest : public ::testing::Test {
 protected:
  TransitGrpcTest() : proxy_(PortOf(hop_.address())) {}
  RelayHop hop_{HopConfig{}};
  DelayProxy proxy_;
};

TEST_F(TransitGrpcTest, CallThatWaitedLongerThanItsBudgetOnItsWayIsNotStarted) {
  auto stub = testing::ConnectedStub(proxy_.address());
  // Calls that pass at once teach the server this sender's fastest transit.
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(CallWithBudget(*stub, absl::Seconds(5), 0).ok());
  const int started = hop_.calls() - hop_.refused();
  const uint64_t expired = ArrivedExpired(hop_);

  proxy_.SetDelay(absl::Milliseconds(400));
  EXPECT_EQ(CallWithBudget(*stub, absl::Milliseconds(200), 50).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  // The server reads the call about 200 ms after the caller gave up, with
  // gRPC's deadline still about 200 ms away: refused on arrival instead.
  ASSERT_TRUE(Eventually([&] { return ArrivedExpired(hop_) > expired; }));
  EXPECT_EQ(hop_.calls() - hop_.refused(), started);
  const HistogramSnapshot transit = hop_.metrics().Snapshot().transit_delay;
  EXPECT_EQ(transit.count, 6u);
  EXPECT_GE(transit.sum, 0.4);
}

TEST_F(TransitGrpcTest, CallThatWaitedPartOfItsBudgetKeepsOnlyTheRest) {
  auto stub = testing::ConnectedStub(proxy_.address());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(CallWithBudget(*stub, absl::Seconds(5), 0).ok());
  proxy_.SetDelay(absl::Milliseconds(300));
  grpc::ClientContext ctx;
  testing::SetBudget(ctx, absl::Seconds(2));
  echo::RelayReply reply;
  ASSERT_TRUE(stub->Call(&ctx, testing::Request({testing::Work(0)}), &reply).ok());
  ASSERT_EQ(reply.hops_size(), 1);
  // 2 s less the 300 ms the proxy held the call, give or take how much slower
  // than the fastest the warm-up calls were (gRPC's own deadline, which
  // starts when the server reads the call, would leave about 2 s).
  const absl::Duration on_arrival = absl::Microseconds(reply.hops(0).budget_on_arrival_us());
  EXPECT_LE(on_arrival, absl::Milliseconds(1800));
  EXPECT_GT(on_arrival, absl::Milliseconds(1000));
}

// gRPC's own deadline for the call comes about 300 ms after its caller's:
// this hop ends the work itself, just after the caller's deadline.
TEST_F(TransitGrpcTest, WorkOfACallThatWaitedIsEndedByThisHopNotByGrpcsLaterDeadline) {
  auto stub = testing::ConnectedStub(proxy_.address());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(CallWithBudget(*stub, absl::Seconds(5), 0).ok());
  const uint64_t timers = hop_.metrics().Snapshot().timers_armed;
  proxy_.SetDelay(absl::Milliseconds(300));
  EXPECT_EQ(CallWithBudget(*stub, absl::Milliseconds(600), 5000).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  ASSERT_TRUE(hop_.WaitForCancellations(1, absl::Seconds(20)));
  EXPECT_EQ(hop_.metrics().Snapshot().timers_armed, timers + 1);
  EXPECT_EQ(
      hop_.metrics().Snapshot().deadline_exceeded(Side::kServer, DeadlineSource::kClient, "hop"),
      1u);
}

// The control: a caller that does not stamp its calls (plain gRPC) is
// started late behind the same proxy; gRPC alone cannot see the wait.
TEST_F(TransitGrpcTest, UnstampedCallThatWaitedOnItsWayIsStartedAfterItsCallerLeft) {
  auto stub = testing::ConnectedStub(proxy_.address(), /*with_interceptor=*/false);
  ASSERT_TRUE(CallWithBudget(*stub, absl::Seconds(5), 0).ok());
  const int started = hop_.calls() - hop_.refused();
  proxy_.SetDelay(absl::Milliseconds(400));
  EXPECT_EQ(CallWithBudget(*stub, absl::Milliseconds(200), 50).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(Eventually([&] { return hop_.calls() - hop_.refused() > started; }));
}

}  // namespace
}  // namespace hopbudget
