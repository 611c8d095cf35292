// Copyright hopbudget authors.
//
// The gRPC interop test cases (doc/interop-test-descriptions.md in grpc/grpc)
// run by a plain gRPC C++ client -- no hopbudget interceptor -- against the
// real hopbudget_interop_server binary (examples/interop_server.cc), which has
// hopbudget's server interceptor installed. Each test starts its own server on
// port 0 in a child process and kills it in TearDown.
//
// The test suite is named `interop` (lower case) so that the CTest names read
// like the interop harness's test cases ("interop.empty_unary") and
// `ctest -R interop` selects them.
#include <errno.h>
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "grpc/testing/empty.pb.h"
#include "grpc/testing/messages.pb.h"
#include "grpc/testing/test.grpc.pb.h"

#ifndef HOPBUDGET_INTEROP_SERVER
#error "HOPBUDGET_INTEROP_SERVER must be the path of hopbudget_interop_server"
#endif

namespace {

using grpc::ClientContext;
using grpc::Status;
using grpc::StatusCode;
using grpc::testing::Empty;
using grpc::testing::SimpleRequest;
using grpc::testing::SimpleResponse;
using grpc::testing::StreamingInputCallRequest;
using grpc::testing::StreamingInputCallResponse;
using grpc::testing::StreamingOutputCallRequest;
using grpc::testing::StreamingOutputCallResponse;
using grpc::testing::TestService;
using grpc::testing::UnimplementedService;
using std::chrono::milliseconds;
using std::chrono::seconds;

// Generous: the server may be an ASan build on a loaded machine.
constexpr seconds kStartTimeout(30);
constexpr seconds kStopTimeout(10);
constexpr seconds kCallTimeout(20);

constexpr char kEchoInitialKey[] = "x-grpc-test-echo-initial";
constexpr char kEchoInitialValue[] = "test_initial_metadata_value";
constexpr char kEchoTrailingKey[] = "x-grpc-test-echo-trailing-bin";
const std::string kEchoTrailingValue("\xab\xab\xab", 3);

std::chrono::system_clock::time_point In(std::chrono::system_clock::duration d) {
  return std::chrono::system_clock::now() + d;
}

std::string Zeros(int n) { return std::string(static_cast<size_t>(n), '\0'); }

// A payload body of exactly `n` zero bytes; the failure message stays short.
::testing::AssertionResult IsZeros(const std::string& body, int n) {
  if (body.size() != static_cast<size_t>(n)) {
    return ::testing::AssertionFailure() << "body has " << body.size() << " bytes, expected " << n;
  }
  const size_t nonzero = body.find_first_not_of('\0');
  if (nonzero != std::string::npos) {
    return ::testing::AssertionFailure() << "body byte " << nonzero << " is not zero";
  }
  return ::testing::AssertionSuccess();
}

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return "killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  }
  return "wait status " + std::to_string(status);
}

::testing::AssertionResult IsStatus(const Status& s, StatusCode code) {
  if (s.error_code() == code) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "status " << s.error_code() << " \"" << s.error_message() << "\", expected " << code;
}

::testing::AssertionResult IsOk(const Status& s) { return IsStatus(s, StatusCode::OK); }

// Values of `key` in a metadata map, as strings.
std::vector<std::string> Values(const std::multimap<grpc::string_ref, grpc::string_ref>& md,
                                const std::string& key) {
  std::vector<std::string> out;
  auto range = md.equal_range(key);
  for (auto it = range.first; it != range.second; ++it) {
    out.emplace_back(it->second.data(), it->second.size());
  }
  return out;
}

// hopbudget-* keys in a metadata map.
std::vector<std::string> HopbudgetKeys(
    const std::multimap<grpc::string_ref, grpc::string_ref>& md) {
  std::vector<std::string> out;
  for (const auto& [key, value] : md) {
    std::string k(key.data(), key.size());
    if (k.rfind("hopbudget-", 0) == 0) out.push_back(k);
  }
  return out;
}

// hopbudget_interop_server as a child process.
//   - Its stdout is a pipe whose first line, "listening on PORT", gives the
//     port.
//   - Its stderr goes to an unlinked temporary file, copied to this process's
//     stderr when the server is stopped. A sanitizer report in it fails the
//     test: a server thread can die in a report (ASan symbolizing a stack
//     overflow) while its other threads keep answering, and SIGTERM then
//     looks like a clean end.
//   - It gets SIGKILL if this process dies first (PR_SET_PDEATHSIG), so that a
//     crashed or timed-out test leaves no server behind and CTest is not kept
//     waiting on the output the server inherited.
class InteropServerProcess {
 public:
  InteropServerProcess() = default;
  InteropServerProcess(const InteropServerProcess&) = delete;
  InteropServerProcess& operator=(const InteropServerProcess&) = delete;
  ~InteropServerProcess() { Stop(); }

  // Fatal gtest failure when the server does not come up.
  void Start() {
    ASSERT_EQ(pid_, -1) << "already started";
    stderr_file_ = std::tmpfile();
    ASSERT_NE(stderr_file_, nullptr) << "tmpfile: " << std::strerror(errno);
    const int stderr_fd = fileno(stderr_file_);
    ASSERT_EQ(fcntl(stderr_fd, F_SETFD, FD_CLOEXEC), 0) << std::strerror(errno);
    int fds[2];
    ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0) << "pipe2: " << std::strerror(errno);
    // Everything the child needs is built before fork(): after it, the child
    // of a multi-threaded process may only make async-signal-safe calls.
    std::string path = HOPBUDGET_INTEROP_SERVER;
    std::string port_arg = "--port=0";
    char* const argv[] = {path.data(), port_arg.data(), nullptr};
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid == 0) {
      if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(126);
      // dup2 clears O_CLOEXEC on the copies.
      if (dup2(fds[1], STDOUT_FILENO) < 0 || dup2(stderr_fd, STDERR_FILENO) < 0) _exit(126);
      execv(argv[0], argv);
      _exit(127);
    }
    const int fork_errno = errno;
    close(fds[1]);
    if (pid < 0) {
      close(fds[0]);
      FAIL() << "fork: " << std::strerror(fork_errno);
    }
    pid_ = pid;
    stdout_fd_ = fds[0];  // kept open until Stop(): the server never gets SIGPIPE

    std::string line;
    ASSERT_TRUE(ReadFirstLine(&line)) << "hopbudget_interop_server (" << path
                                      << ") printed no port; first output: \"" << line << "\"";
    constexpr char kPrefix[] = "listening on ";
    ASSERT_EQ(line.rfind(kPrefix, 0), 0u) << "unexpected first line: \"" << line << "\"";
    const std::string digits = line.substr(sizeof(kPrefix) - 1);
    ASSERT_FALSE(digits.empty()) << line;
    ASSERT_EQ(digits.find_first_not_of("0123456789"), std::string::npos) << line;
    port_ = std::stoi(digits);
    ASSERT_GT(port_, 0) << line;
    ASSERT_LT(port_, 65536) << line;
  }

  // SIGTERM, then waitpid (SIGKILL if it lingers). A server that exited on its
  // own before that is a test failure: it crashed or gave up.
  void Stop() {
    if (pid_ > 0) {
      int status = 0;
      pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        ADD_FAILURE() << "hopbudget_interop_server ended during the test: "
                      << DescribeWaitStatus(status);
      } else {
        kill(pid_, SIGTERM);
        const auto give_up = std::chrono::steady_clock::now() + kStopTimeout;
        while ((r = waitpid(pid_, &status, WNOHANG)) == 0 &&
               std::chrono::steady_clock::now() < give_up) {
          std::this_thread::sleep_for(milliseconds(5));
        }
        if (r == 0) {
          kill(pid_, SIGKILL);
          r = waitpid(pid_, &status, 0);
          ADD_FAILURE() << "hopbudget_interop_server ignored SIGTERM for " << kStopTimeout.count()
                        << " s; killed";
        } else if (r == pid_ && !(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) &&
                   !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
          ADD_FAILURE() << "hopbudget_interop_server did not end cleanly on SIGTERM: "
                        << DescribeWaitStatus(status);
        }
        if (r < 0) ADD_FAILURE() << "waitpid: " << std::strerror(errno);
      }
      pid_ = -1;
    }
    if (stdout_fd_ >= 0) {
      close(stdout_fd_);
      stdout_fd_ = -1;
    }
    if (stderr_file_ != nullptr) {
      CheckStderr();
      std::fclose(stderr_file_);
      stderr_file_ = nullptr;
    }
  }

  int port() const { return port_; }

 private:
  // Copies what the (now ended) server wrote on stderr to ours, and fails on a
  // sanitizer report.
  void CheckStderr() {
    std::string text;
    std::rewind(stderr_file_);
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), stderr_file_)) > 0) text.append(buf, n);
    if (text.empty()) return;
    std::fprintf(stderr, "---- hopbudget_interop_server stderr ----\n%s%s---- end ----\n",
                 text.c_str(), text.back() == '\n' ? "" : "\n");
    for (const char* report : {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                               "runtime error:", "WARNING: ThreadSanitizer"}) {
      const size_t at = text.find(report);
      if (at != std::string::npos) {
        const size_t newline = text.rfind('\n', at);
        const size_t line_start = newline == std::string::npos ? 0 : newline + 1;
        ADD_FAILURE() << "sanitizer report from hopbudget_interop_server: "
                      << text.substr(line_start, text.find('\n', at) - line_start);
        return;
      }
    }
  }

  // Reads up to the first '\n' (not included) within kStartTimeout. False on
  // EOF or timeout; `line` then holds what was read.
  bool ReadFirstLine(std::string* line) {
    const auto give_up = std::chrono::steady_clock::now() + kStartTimeout;
    for (;;) {
      const auto left =
          std::chrono::duration_cast<milliseconds>(give_up - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        ADD_FAILURE() << "no output from the server within " << kStartTimeout.count() << " s";
        return false;
      }
      pollfd p{stdout_fd_, POLLIN, 0};
      const int n = poll(&p, 1, static_cast<int>(left.count()));
      if (n < 0) {
        if (errno == EINTR) continue;
        ADD_FAILURE() << "poll: " << std::strerror(errno);
        return false;
      }
      if (n == 0) continue;
      char c;
      const ssize_t got = read(stdout_fd_, &c, 1);
      if (got < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        ADD_FAILURE() << "read: " << std::strerror(errno);
        return false;
      }
      if (got == 0) {
        int status = 0;
        if (waitpid(pid_, &status, 0) == pid_) {
          pid_ = -1;
          ADD_FAILURE() << "server " << DescribeWaitStatus(status) << " before printing its port";
        }
        return false;
      }
      if (c == '\n') return true;
      line->push_back(c);
    }
  }

  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::FILE* stderr_file_ = nullptr;
  int port_ = 0;
};

class InteropTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(server_.Start());
    // A plain channel: no hopbudget client interceptor.
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_.port()),
                                   grpc::InsecureChannelCredentials());
    ASSERT_TRUE(channel_->WaitForConnected(In(kCallTimeout)))
        << "cannot connect to 127.0.0.1:" << server_.port();
    stub_ = TestService::NewStub(channel_);
  }

  void TearDown() override {
    if (stub_ != nullptr) {
      // Whatever the test did, the server must still answer: this catches a
      // server that crashes shortly after the call that upset it.
      ClientContext ctx;
      Bound(&ctx, seconds(5));
      Empty empty;
      EXPECT_TRUE(IsOk(stub_->EmptyCall(&ctx, empty, &empty)))
          << "the server no longer answers after the test";
    }
    stub_.reset();
    channel_.reset();
    server_.Stop();
  }

  // A context with a deadline, so that a server that hangs fails the test
  // instead of running into CTest's timeout.
  static void Bound(ClientContext* ctx, std::chrono::system_clock::duration d = kCallTimeout) {
    ctx->set_deadline(In(d));
  }

  InteropServerProcess server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<TestService::Stub> stub_;
};

using interop = InteropTest;

TEST_F(interop, empty_unary) {
  ClientContext ctx;
  Bound(&ctx);
  Empty request;
  Empty response;
  ASSERT_TRUE(IsOk(stub_->EmptyCall(&ctx, request, &response)));
  EXPECT_EQ(response.ByteSizeLong(), 0u);
}

TEST_F(interop, large_unary) {
  ClientContext ctx;
  Bound(&ctx);
  SimpleRequest request;
  request.set_response_size(314159);
  request.mutable_payload()->set_body(Zeros(271828));
  SimpleResponse response;
  ASSERT_TRUE(IsOk(stub_->UnaryCall(&ctx, request, &response)));
  EXPECT_EQ(response.payload().type(), grpc::testing::COMPRESSABLE);
  EXPECT_TRUE(IsZeros(response.payload().body(), 314159));
}

TEST_F(interop, client_streaming) {
  ClientContext ctx;
  Bound(&ctx);
  StreamingInputCallResponse response;
  auto stream = stub_->StreamingInputCall(&ctx, &response);
  for (int size : {27182, 8, 1828, 45904}) {
    StreamingInputCallRequest request;
    request.mutable_payload()->set_body(Zeros(size));
    ASSERT_TRUE(stream->Write(request)) << "size " << size;
  }
  ASSERT_TRUE(stream->WritesDone());
  ASSERT_TRUE(IsOk(stream->Finish()));
  EXPECT_EQ(response.aggregated_payload_size(), 74922);
}

TEST_F(interop, server_streaming) {
  const std::vector<int> sizes = {31415, 9, 2653, 58979};
  ClientContext ctx;
  Bound(&ctx);
  StreamingOutputCallRequest request;
  for (int size : sizes) request.add_response_parameters()->set_size(size);
  auto stream = stub_->StreamingOutputCall(&ctx, request);
  std::vector<std::string> bodies;
  StreamingOutputCallResponse response;
  while (stream->Read(&response)) bodies.push_back(response.payload().body());
  ASSERT_TRUE(IsOk(stream->Finish()));
  ASSERT_EQ(bodies.size(), sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_TRUE(IsZeros(bodies[i], sizes[i])) << "response " << i;
  }
}

TEST_F(interop, ping_pong) {
  const int request_sizes[] = {27182, 8, 1828, 45904};
  const int response_sizes[] = {31415, 9, 2653, 58979};
  ClientContext ctx;
  Bound(&ctx);
  auto stream = stub_->FullDuplexCall(&ctx);
  for (int i = 0; i < 4; ++i) {
    StreamingOutputCallRequest request;
    request.add_response_parameters()->set_size(response_sizes[i]);
    request.mutable_payload()->set_body(Zeros(request_sizes[i]));
    ASSERT_TRUE(stream->Write(request)) << "ping " << i;
    StreamingOutputCallResponse response;
    ASSERT_TRUE(stream->Read(&response))
        << "pong " << i << ": " << stream->Finish().error_message();
    EXPECT_TRUE(IsZeros(response.payload().body(), response_sizes[i])) << "pong " << i;
  }
  ASSERT_TRUE(stream->WritesDone());
  StreamingOutputCallResponse extra;
  EXPECT_FALSE(stream->Read(&extra)) << "more than four responses";
  ASSERT_TRUE(IsOk(stream->Finish()));
}

TEST_F(interop, empty_stream) {
  ClientContext ctx;
  Bound(&ctx);
  auto stream = stub_->FullDuplexCall(&ctx);
  ASSERT_TRUE(stream->WritesDone());
  StreamingOutputCallResponse response;
  EXPECT_FALSE(stream->Read(&response)) << "a response to no request";
  ASSERT_TRUE(IsOk(stream->Finish()));
}

TEST_F(interop, cancel_after_begin) {
  ClientContext ctx;
  Bound(&ctx);
  StreamingInputCallResponse response;
  auto stream = stub_->StreamingInputCall(&ctx, &response);
  ctx.TryCancel();
  EXPECT_TRUE(IsStatus(stream->Finish(), StatusCode::CANCELLED));
}

TEST_F(interop, cancel_after_first_response) {
  ClientContext ctx;
  Bound(&ctx);
  auto stream = stub_->FullDuplexCall(&ctx);
  StreamingOutputCallRequest request;
  request.add_response_parameters()->set_size(31415);
  request.mutable_payload()->set_body(Zeros(27182));
  ASSERT_TRUE(stream->Write(request));
  StreamingOutputCallResponse response;
  ASSERT_TRUE(stream->Read(&response)) << stream->Finish().error_message();
  EXPECT_TRUE(IsZeros(response.payload().body(), 31415));
  ctx.TryCancel();
  EXPECT_TRUE(IsStatus(stream->Finish(), StatusCode::CANCELLED));
}

// FullDuplexCall with one request that asks for no response and no
// half-close: the server waits for more, the deadline ends the call.
Status SleepingServerCall(TestService::Stub* stub, ClientContext* ctx) {
  auto stream = stub->FullDuplexCall(ctx);
  StreamingOutputCallRequest request;
  request.mutable_payload()->set_body(Zeros(27182));
  stream->Write(request);  // may already fail: the deadline is that short
  return stream->Finish();
}

TEST_F(interop, timeout_on_sleeping_server) {
  ClientContext ctx;
  ctx.set_deadline(In(milliseconds(1)));
  EXPECT_TRUE(IsStatus(SleepingServerCall(stub_.get(), &ctx), StatusCode::DEADLINE_EXCEEDED));
}

TEST_F(interop, custom_metadata) {
  {
    SCOPED_TRACE("UnaryCall");
    ClientContext ctx;
    Bound(&ctx);
    ctx.AddMetadata(kEchoInitialKey, kEchoInitialValue);
    ctx.AddMetadata(kEchoTrailingKey, kEchoTrailingValue);
    SimpleRequest request;
    request.set_response_size(314159);
    request.mutable_payload()->set_body(Zeros(271828));
    SimpleResponse response;
    ASSERT_TRUE(IsOk(stub_->UnaryCall(&ctx, request, &response)));
    EXPECT_TRUE(IsZeros(response.payload().body(), 314159));
    EXPECT_EQ(Values(ctx.GetServerInitialMetadata(), kEchoInitialKey),
              std::vector<std::string>{kEchoInitialValue});
    EXPECT_EQ(Values(ctx.GetServerTrailingMetadata(), kEchoTrailingKey),
              std::vector<std::string>{kEchoTrailingValue});
  }
  {
    SCOPED_TRACE("FullDuplexCall");
    ClientContext ctx;
    Bound(&ctx);
    ctx.AddMetadata(kEchoInitialKey, kEchoInitialValue);
    ctx.AddMetadata(kEchoTrailingKey, kEchoTrailingValue);
    auto stream = stub_->FullDuplexCall(&ctx);
    StreamingOutputCallRequest request;
    request.add_response_parameters()->set_size(314159);
    request.mutable_payload()->set_body(Zeros(271828));
    ASSERT_TRUE(stream->Write(request));
    ASSERT_TRUE(stream->WritesDone());
    StreamingOutputCallResponse response;
    int responses = 0;
    while (stream->Read(&response)) {
      ++responses;
      EXPECT_TRUE(IsZeros(response.payload().body(), 314159));
    }
    ASSERT_TRUE(IsOk(stream->Finish()));
    EXPECT_EQ(responses, 1);
    EXPECT_EQ(Values(ctx.GetServerInitialMetadata(), kEchoInitialKey),
              std::vector<std::string>{kEchoInitialValue});
    EXPECT_EQ(Values(ctx.GetServerTrailingMetadata(), kEchoTrailingKey),
              std::vector<std::string>{kEchoTrailingValue});
  }
}

TEST_F(interop, status_code_and_message) {
  const std::string message = "test status message";
  {
    SCOPED_TRACE("UnaryCall");
    ClientContext ctx;
    Bound(&ctx);
    SimpleRequest request;
    request.mutable_response_status()->set_code(2);
    request.mutable_response_status()->set_message(message);
    SimpleResponse response;
    const Status s = stub_->UnaryCall(&ctx, request, &response);
    EXPECT_TRUE(IsStatus(s, StatusCode::UNKNOWN));
    EXPECT_EQ(s.error_message(), message);
  }
  {
    SCOPED_TRACE("FullDuplexCall");
    ClientContext ctx;
    Bound(&ctx);
    auto stream = stub_->FullDuplexCall(&ctx);
    StreamingOutputCallRequest request;
    request.mutable_response_status()->set_code(2);
    request.mutable_response_status()->set_message(message);
    ASSERT_TRUE(stream->Write(request));
    stream->WritesDone();  // may fail if the status has already arrived
    StreamingOutputCallResponse response;
    int responses = 0;
    while (stream->Read(&response)) ++responses;
    const Status s = stream->Finish();
    EXPECT_TRUE(IsStatus(s, StatusCode::UNKNOWN));
    EXPECT_EQ(s.error_message(), message);
    EXPECT_EQ(responses, 0);
  }
}

TEST_F(interop, special_status_message) {
  // "\t\ntest with whitespace\r\nand Unicode BMP <U+263A> and non-BMP <U+1F608>\t\n"
  const std::string message =
      "\t\ntest with whitespace\r\nand Unicode BMP \xE2\x98\xBA and non-BMP \xF0\x9F\x98\x88\t\n";
  ClientContext ctx;
  Bound(&ctx);
  SimpleRequest request;
  request.mutable_response_status()->set_code(2);
  request.mutable_response_status()->set_message(message);
  SimpleResponse response;
  const Status s = stub_->UnaryCall(&ctx, request, &response);
  EXPECT_TRUE(IsStatus(s, StatusCode::UNKNOWN));
  EXPECT_EQ(s.error_message(), message);
}

TEST_F(interop, unimplemented_method) {
  ClientContext ctx;
  Bound(&ctx);
  Empty request;
  Empty response;
  EXPECT_TRUE(
      IsStatus(stub_->UnimplementedCall(&ctx, request, &response), StatusCode::UNIMPLEMENTED));
}

TEST_F(interop, unimplemented_service) {
  auto stub = UnimplementedService::NewStub(channel_);
  ClientContext ctx;
  Bound(&ctx);
  Empty request;
  Empty response;
  EXPECT_TRUE(
      IsStatus(stub->UnimplementedCall(&ctx, request, &response), StatusCode::UNIMPLEMENTED));
}

// hopbudget only annotates DEADLINE_EXCEEDED answers: calls with a deadline
// that succeed carry no hopbudget-* metadata, and a call that runs out of
// time still ends with DEADLINE_EXCEEDED.
// A successful answer carries nothing of hopbudget's unless its caller asked
// for the per-hop trace: the attribution trailers are for DEADLINE_EXCEEDED
// only, the trace for failures and callers that ask.
TEST_F(interop, hopbudget_adds_nothing_to_successful_answers_unless_asked) {
  {
    SCOPED_TRACE("UnaryCall, 1 s deadline");
    ClientContext ctx;
    ctx.set_deadline(In(seconds(1)));
    SimpleRequest request;
    request.set_response_size(314159);
    request.mutable_payload()->set_body(Zeros(271828));
    SimpleResponse response;
    ASSERT_TRUE(IsOk(stub_->UnaryCall(&ctx, request, &response)));
    EXPECT_EQ(response.payload().body().size(), 314159u);
    EXPECT_EQ(HopbudgetKeys(ctx.GetServerTrailingMetadata()), std::vector<std::string>{});
    EXPECT_EQ(HopbudgetKeys(ctx.GetServerInitialMetadata()), std::vector<std::string>{});
  }
  {
    SCOPED_TRACE("UnaryCall, 1 s deadline, trace requested");
    ClientContext ctx;
    ctx.set_deadline(In(seconds(1)));
    ctx.AddMetadata("hopbudget-trace-request", "1");
    SimpleRequest request;
    SimpleResponse response;
    ASSERT_TRUE(IsOk(stub_->UnaryCall(&ctx, request, &response)));
    EXPECT_EQ(HopbudgetKeys(ctx.GetServerTrailingMetadata()),
              std::vector<std::string>{"hopbudget-trace-bin"});
  }
  {
    SCOPED_TRACE("FullDuplexCall, 1 s deadline");
    ClientContext ctx;
    ctx.set_deadline(In(seconds(1)));
    auto stream = stub_->FullDuplexCall(&ctx);
    StreamingOutputCallRequest request;
    request.add_response_parameters()->set_size(31415);
    request.mutable_payload()->set_body(Zeros(27182));
    ASSERT_TRUE(stream->Write(request));
    StreamingOutputCallResponse response;
    ASSERT_TRUE(stream->Read(&response)) << stream->Finish().error_message();
    ASSERT_TRUE(stream->WritesDone());
    ASSERT_TRUE(IsOk(stream->Finish()));
    EXPECT_EQ(HopbudgetKeys(ctx.GetServerTrailingMetadata()), std::vector<std::string>{});
    EXPECT_EQ(HopbudgetKeys(ctx.GetServerInitialMetadata()), std::vector<std::string>{});
  }
  {
    // timeout_on_sleeping_server: with 1 ms the call may arrive with less
    // than hopbudget's min_attempt_budget and be refused on arrival.
    SCOPED_TRACE("timeout_on_sleeping_server, 1 ms deadline");
    ClientContext ctx;
    ctx.set_deadline(In(milliseconds(1)));
    EXPECT_TRUE(IsStatus(SleepingServerCall(stub_.get(), &ctx), StatusCode::DEADLINE_EXCEEDED));
  }
  {
    // Long enough for hopbudget to accept the call and the handler to wait.
    SCOPED_TRACE("timeout_on_sleeping_server, 300 ms deadline");
    ClientContext ctx;
    ctx.set_deadline(In(milliseconds(300)));
    const auto start = std::chrono::steady_clock::now();
    EXPECT_TRUE(IsStatus(SleepingServerCall(stub_.get(), &ctx), StatusCode::DEADLINE_EXCEEDED));
    EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(250));
  }
}

}  // namespace
