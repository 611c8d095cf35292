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
//     (gRPC's default: 1, 1.6, 2.6, 4.1, 6.6 s ... up to 120 s);
//   - gRPC core's transparent retries are on, seen from an HTTP/2 peer
//     (python/h2_peer.py) that answers a stream with a GOAWAY saying it was
//     not processed: gRPC sends it again; core retries no answer on its own,
//     and each attempt of hopbudget's carries its count in a header core
//     leaves alone;
//   - a service config given to a hopbudget channel loses what would make
//     core retry answers (retryPolicy, hedgingPolicy, retryThrottling).
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

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "channel_defaults.h"
#include "child_process.h"
#include "echo/relay.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hopbudget/advanced/retry.h"
#include "hopbudget/client.h"
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
  const grpc::ChannelArguments none = *internal::WithChannelDefaults(grpc::ChannelArguments());
  for (const internal::ChannelDefault& d : kChannelDefaults) {
    EXPECT_EQ(IntArg(none, d.key), d.value) << d.key;
  }
  EXPECT_EQ(IntArg(none, GRPC_ARG_KEEPALIVE_TIME_MS), 10000);
  EXPECT_EQ(IntArg(none, GRPC_ARG_MAX_RECONNECT_BACKOFF_MS), 2000);

  grpc::ChannelArguments user;
  user.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 60000);
  user.SetString(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, "odd");  // the caller's, whatever its type
  user.SetInt("x.other", 3);
  const grpc::ChannelArguments merged = *internal::WithChannelDefaults(user);
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

// python/h2_peer.py with `args`, ready; nullptr (and a test failure) if not.
std::unique_ptr<demo::ChildProcess> StartH2Peer(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {HOPBUDGET_H2_PEER};
  argv.insert(argv.end(), args.begin(), args.end());
  auto peer = demo::ChildProcess::Spawn(HOPBUDGET_PYTHON3, argv);
  EXPECT_TRUE(peer.ok()) << peer.status();
  if (!peer.ok()) return nullptr;
  const absl::Status ready = (*peer)->WaitReady(absl::Seconds(30));
  EXPECT_TRUE(ready.ok()) << ready;
  return ready.ok() ? *std::move(peer) : nullptr;
}

// The peer's one line per stream it saw (see h2_peer.py).
std::vector<std::string> StreamsSeen(const demo::ChildProcess& peer) {
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(peer.Stderr(), '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, "stream ")) lines.emplace_back(line);
  }
  return lines;
}

grpc::Status CallOnce(const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = echo::Relay::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  echo::RelayRequest request;
  echo::RelayReply reply;
  return stub->Call(&ctx, request, &reply);
}

using ::testing::ElementsAre;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(ChannelDefaultsTest, ACallThatRacedAGoawayIsSentAgainByGrpc) {
  // What a server shutting down does to a stream it had not read yet.
  auto peer = StartH2Peer({"--refuse-first=1", "--goaway"});
  ASSERT_NE(peer, nullptr);
  auto plain = HopbudgetChannel(peer->address());
  const grpc::Status s = CallOnce(plain);
  EXPECT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
  EXPECT_THAT(StreamsSeen(*peer), ElementsAre(EndsWith(" goaway"), EndsWith(" answered")));

  auto peer2 = StartH2Peer({"--refuse-first=1", "--goaway"});
  ASSERT_NE(peer2, nullptr);
  auto retrying = RetryingChannel(peer2->address());
  const grpc::Status r = CallOnce(retrying);
  EXPECT_TRUE(r.ok()) << r.error_code() << " " << r.error_message();
  EXPECT_THAT(StreamsSeen(*peer2), ElementsAre(EndsWith(" goaway"), EndsWith(" answered")));
}

TEST(ChannelDefaultsTest, WithCoreRetriesSwitchedOffTheSameCallFails) {
  // The caller's value wins: this is what every hopbudget channel did
  // before core retries were left on.
  auto peer = StartH2Peer({"--refuse-first=1", "--goaway"});
  ASSERT_NE(peer, nullptr);
  grpc::ChannelArguments off;
  off.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  auto channel = HopbudgetChannel(peer->address(), off);
  const grpc::Status s = CallOnce(channel);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_THAT(StreamsSeen(*peer), ElementsAre(EndsWith(" goaway")));
}

TEST(ChannelDefaultsTest, CoreRetriesNoAnswerAndHopbudgetsAttemptsCarryTheirCount) {
  // UNAVAILABLE is retryable for hopbudget (RetryPolicy's default), never
  // for core without a retryPolicy: a plain channel sends one stream, the
  // retrying channel its 3 attempts and no more. gRPC core removes
  // grpc-previous-rpc-attempts from every attempt; hopbudget's copy arrives.
  auto peer = StartH2Peer({"--status=14"});
  ASSERT_NE(peer, nullptr);
  auto plain = HopbudgetChannel(peer->address());
  EXPECT_EQ(CallOnce(plain).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(StreamsSeen(*peer), ElementsAre(HasSubstr(" grpc=- hopbudget=- answered")));

  auto peer2 = StartH2Peer({"--status=14"});
  ASSERT_NE(peer2, nullptr);
  auto retrying = RetryingChannel(peer2->address());
  EXPECT_EQ(CallOnce(retrying).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(StreamsSeen(*peer2), ElementsAre(HasSubstr(" grpc=- hopbudget=- answered"),
                                               HasSubstr(" grpc=- hopbudget=1 answered"),
                                               HasSubstr(" grpc=- hopbudget=2 answered")));
}

// A service config asking gRPC core to retry UNAVAILABLE 5 times, beside
// settings that are not about retries.
constexpr char kCoreRetryConfig[] = R"({
  "loadBalancingConfig": [{"round_robin": {}}],
  "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1},
  "methodConfig": [{
    "name": [{"service": "hopbudget.echo.Relay"}],
    "timeout": "5s",
    "waitForReady": false,
    "retryPolicy": {"maxAttempts": 5, "initialBackoff": "0.01s", "maxBackoff": "0.01s",
                    "backoffMultiplier": 1, "retryableStatusCodes": ["UNAVAILABLE"]},
    "hedgingPolicy": {"maxAttempts": 2, "hedgingDelay": "0.1s"}}]})";

TEST(ChannelDefaultsTest, AServiceConfigLosesWhatMakesCoreRetryAndKeepsTheRest) {
  const absl::StatusOr<std::string> json = internal::WithoutCoreRetries(kCoreRetryConfig);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, Not(HasSubstr("retryPolicy")));
  EXPECT_THAT(*json, Not(HasSubstr("hedgingPolicy")));
  EXPECT_THAT(*json, Not(HasSubstr("retryThrottling")));
  EXPECT_THAT(*json, HasSubstr(R"("loadBalancingConfig":[{"round_robin":{}}])"));
  EXPECT_THAT(*json, HasSubstr(R"("timeout":"5s")"));
  EXPECT_THAT(*json, HasSubstr(R"("waitForReady":false)"));
  EXPECT_THAT(*json, HasSubstr(R"("service":"hopbudget.echo.Relay")"));
}

TEST(ChannelDefaultsTest, AServiceConfigThatIsNotAJsonObjectIsAClearError) {
  for (const char* bad : {"{\"methodConfig\": [", "[1, 2]", "", "retryPolicy"}) {
    grpc::ChannelArguments args;
    args.SetServiceConfigJSON(bad);
    ClientOptions options;
    options.hop = "test";
    auto channel = CreateChannel("127.0.0.1:1", grpc::InsecureChannelCredentials(), options, args);
    ASSERT_FALSE(channel.ok()) << bad;
    EXPECT_EQ(channel.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(channel.status().message(), HasSubstr("service config")) << bad;
    RetryOptions retry;
    retry.client.hop = "test";
    auto retrying =
        CreateRetryingChannel("127.0.0.1:1", grpc::InsecureChannelCredentials(), retry, args);
    ASSERT_FALSE(retrying.ok()) << bad;
    EXPECT_THAT(retrying.status().message(), HasSubstr("service config")) << bad;
  }
}

TEST(ChannelDefaultsTest, CoreDoesNotRetryWhatAServiceConfigAsksOnAHopbudgetChannel) {
  grpc::ChannelArguments args;
  args.SetServiceConfigJSON(kCoreRetryConfig);
  // The precondition: on a plain gRPC channel core sends the call 5 times.
  auto peer = StartH2Peer({"--status=14"});
  ASSERT_NE(peer, nullptr);
  EXPECT_EQ(
      CallOnce(grpc::CreateCustomChannel(peer->address(), grpc::InsecureChannelCredentials(), args))
          .error_code(),
      grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(StreamsSeen(*peer).size(), 5u);
  // hopbudget's channel keeps the rest of the config (round_robin) and sends
  // it once; the retrying channel sends its own 3 attempts.
  auto peer2 = StartH2Peer({"--status=14"});
  ASSERT_NE(peer2, nullptr);
  EXPECT_EQ(CallOnce(HopbudgetChannel(peer2->address(), args)).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(StreamsSeen(*peer2).size(), 1u);
  auto peer3 = StartH2Peer({"--status=14"});
  ASSERT_NE(peer3, nullptr);
  EXPECT_EQ(CallOnce(RetryingChannel(peer3->address(), args)).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(StreamsSeen(*peer3).size(), 3u);
}

}  // namespace
}  // namespace hopbudget
