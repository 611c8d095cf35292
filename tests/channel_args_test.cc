// Copyright hopbudget authors.
//
// The channel arguments hopbudget puts on the channels it creates
// (channel_defaults.h): which ones, that the caller's values win, and what
// they do, seen from a plain TCP listener on loopback that records every
// connection attempt the channel makes:
//   - a peer that accepts TCP but never answers the HTTP/2 handshake is
//     abandoned after the 2 s connect timeout (gRPC's default: 20 s);
//   - reconnection attempts to a peer that keeps failing start at 200 ms
//     apart and are never more than the 2 s backoff cap (+20 % jitter) apart
//     (gRPC's default: 1, 1.6, 2.6, 4.1, 6.6 s ... up to 120 s).
#include <arpa/inet.h>
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "channel_defaults.h"
#include "gtest/gtest.h"
#include "hopbudget/client.h"
#include "hopbudget/retry.h"
#include "sync.h"

namespace hopbudget {
namespace {

using internal::kChannelDefaults;

// The value of `key` in `args`: an int, or -1 when absent (or not an int).
int IntArg(const grpc::ChannelArguments& args, const char* key) {
  const grpc_channel_args c = args.c_channel_args();
  for (size_t i = 0; i < c.num_args; ++i) {
    if (std::strcmp(c.args[i].key, key) == 0) {
      return c.args[i].type == GRPC_ARG_INTEGER ? c.args[i].value.integer : -2;
    }
  }
  return -1;
}

TEST(ChannelDefaultsTest, EveryDefaultIsSetUnlessTheCallerSetIt) {
  const grpc::ChannelArguments none = internal::WithChannelDefaults(grpc::ChannelArguments());
  for (const internal::ChannelDefault& d : kChannelDefaults) {
    EXPECT_EQ(IntArg(none, d.key), d.value) << d.key;
  }
  EXPECT_EQ(IntArg(none, GRPC_ARG_KEEPALIVE_TIME_MS), 10000);
  EXPECT_EQ(IntArg(none, GRPC_ARG_MAX_RECONNECT_BACKOFF_MS), 2000);

  grpc::ChannelArguments user;
  user.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 60000);
  user.SetString(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, "odd");  // the caller's, whatever its type
  user.SetInt("x.other", 3);
  const grpc::ChannelArguments merged = internal::WithChannelDefaults(user);
  EXPECT_EQ(IntArg(merged, GRPC_ARG_KEEPALIVE_TIME_MS), 60000);
  EXPECT_EQ(IntArg(merged, GRPC_ARG_MAX_RECONNECT_BACKOFF_MS), -2);
  EXPECT_EQ(IntArg(merged, "x.other"), 3);
  EXPECT_EQ(IntArg(merged, GRPC_ARG_KEEPALIVE_TIMEOUT_MS), 3000);
  EXPECT_EQ(merged.c_channel_args().num_args, none.c_channel_args().num_args + 1);  // x.other
}

// A TCP listener on 127.0.0.1 that records when each connection arrives and
// then either holds it silently or resets it at once.
class AttemptRecorder {
 public:
  enum class Answer { kSilence, kReset };

  explicit AttemptRecorder(Answer answer) : answer_(answer) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    listen(fd_, 64);
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    if (pipe2(wake_, O_CLOEXEC) != 0) wake_[0] = wake_[1] = -1;
    thread_ = std::thread([this] { Run(); });
  }
  ~AttemptRecorder() {
    (void)!write(wake_[1], "x", 1);
    thread_.join();
    for (int fd : held_) close(fd);
    close(fd_);
    close(wake_[0]);
    close(wake_[1]);
  }

  std::string target() const { return absl::StrCat("127.0.0.1:", port_); }

  // Waits until `n` attempts arrived or `timeout` passed; their times.
  std::vector<absl::Time> WaitFor(size_t n, absl::Duration timeout) {
    hopbudget::internal::MutexLock lock(&mu_);
    auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return times_.size() >= n; };
    mu_.AwaitWithTimeout(hopbudget::internal::Condition(&enough), timeout);
    return times_;
  }

 private:
  void Run() {
    while (true) {
      pollfd fds[2] = {{fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
      if (poll(fds, 2, -1) < 0 || (fds[1].revents & POLLIN) != 0) return;
      const int conn = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (conn < 0) continue;
      {
        hopbudget::internal::MutexLock lock(&mu_);
        times_.push_back(absl::Now());
      }
      if (answer_ == Answer::kReset) {
        const linger reset{1, 0};  // close with RST
        setsockopt(conn, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
        close(conn);
      } else {
        held_.push_back(conn);
      }
    }
  }

  const Answer answer_;
  int fd_ = -1;
  int port_ = 0;
  int wake_[2] = {-1, -1};
  std::vector<int> held_;  // owned by the thread until it is joined
  hopbudget::internal::Mutex mu_;
  std::vector<absl::Time> times_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

std::shared_ptr<grpc::Channel> HopbudgetChannel(const std::string& target,
                                                const grpc::ChannelArguments& args = {}) {
  ClientOptions options;
  options.hop = "test";
  auto channel = CreateChannel(target, grpc::InsecureChannelCredentials(), options, args);
  EXPECT_TRUE(channel.ok()) << channel.status();
  return *channel;
}

std::shared_ptr<grpc::Channel> RetryingChannel(const std::string& target,
                                               const grpc::ChannelArguments& args = {}) {
  RetryOptions options;
  options.client.hop = "test";
  options.budget.request_cap = absl::Seconds(2);
  options.budget.attempt_cap = absl::Milliseconds(300);
  auto channel = CreateRetryingChannel(target, grpc::InsecureChannelCredentials(), options, args);
  EXPECT_TRUE(channel.ok()) << channel.status();
  return *channel;
}

TEST(ChannelDefaultsTest, AHandshakeThatNeverAnswersIsAbandonedWithinTheConnectTimeout) {
  // gRPC's default (20 s) would leave 20 s between the two attempts; the
  // bound leaves room for a loaded machine and still catches that.
  AttemptRecorder plain(AttemptRecorder::Answer::kSilence);
  AttemptRecorder retrying(AttemptRecorder::Answer::kSilence);
  auto a = HopbudgetChannel(plain.target());
  auto b = RetryingChannel(retrying.target());
  a->GetState(/*try_to_connect=*/true);
  b->GetState(/*try_to_connect=*/true);
  for (AttemptRecorder* r : {&plain, &retrying}) {
    const std::vector<absl::Time> t = r->WaitFor(2, absl::Seconds(30));
    ASSERT_GE(t.size(), 2u) << "no second attempt within 30 s";
    EXPECT_LT(t[1] - t[0], absl::Seconds(8)) << "the connect timeout is not 2 s";
    EXPECT_GE(t[1] - t[0], absl::Milliseconds(1500)) << "the handshake was not waited for";
  }
}

TEST(ChannelDefaultsTest, ReconnectionAttemptsAreNeverMoreThanTheCapApart) {
  // In gRPC 1.51 a handshake that fails (the peer resets the connection)
  // ends only at the attempt's deadline, max(backoff, connect timeout): with
  // the connect timeout lowered to 100 ms by the caller (whose value wins),
  // the gaps between attempts are the backoff itself: 0.2, 0.32, 0.51, 0.82,
  // 1.3, 2, 2, 2 s (+-20 %), 9 attempts in ~9 s. gRPC's default backoff (1,
  // 1.6, 2.6, 4.1, 6.6, 10.5 s ...) would need ~50 s for 9 attempts, with
  // gaps of 3.3 s and more from the fourth.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  AttemptRecorder plain(AttemptRecorder::Answer::kReset);
  AttemptRecorder retrying(AttemptRecorder::Answer::kReset);
  auto a = HopbudgetChannel(plain.target(), args);
  auto b = RetryingChannel(retrying.target(), args);
  a->GetState(/*try_to_connect=*/true);
  b->GetState(/*try_to_connect=*/true);
  for (AttemptRecorder* r : {&plain, &retrying}) {
    const std::vector<absl::Time> t = r->WaitFor(9, absl::Seconds(30));
    ASSERT_GE(t.size(), 9u) << "fewer than 9 attempts in 30 s";
    absl::Duration widest = absl::ZeroDuration();
    std::string gaps;
    for (size_t i = 1; i < 9; ++i) {
      widest = std::max(widest, t[i] - t[i - 1]);
      absl::StrAppend(&gaps, " ", absl::FormatDuration(t[i] - t[i - 1]));
    }
    EXPECT_LT(widest, absl::Milliseconds(3200)) << "gaps:" << gaps;
    EXPECT_LT(t[8] - t[0], absl::Seconds(16)) << "gaps:" << gaps;
    // The first gaps are the short initial backoff, not the 2 s cap.
    EXPECT_LT(t[2] - t[0], absl::Milliseconds(1500)) << "gaps:" << gaps;
  }
}

}  // namespace
}  // namespace hopbudget
