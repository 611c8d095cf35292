// Copyright hopbudget authors.
#include "chain_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace hopbudget::e2e {

std::string MakeTempDir() {
  std::string templ = "/tmp/hopbudget-e2e-XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) return "/tmp";
  return templ;
}

absl::StatusOr<std::string> HttpGet(int port, const std::string& path, absl::Duration timeout) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError("socket failed");
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  timeval tv{static_cast<time_t>(absl::ToInt64Seconds(timeout)), 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot connect to port ", port));
  }
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  if (write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    return absl::UnavailableError("write failed");
  }
  std::string response;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) response.append(buf, static_cast<size_t>(n));
  const size_t body = response.find("\r\n\r\n");
  if (response.compare(0, 12, "HTTP/1.1 200") != 0 && response.compare(0, 12, "HTTP/1.0 200") != 0) {
    return absl::UnavailableError(absl::StrCat("GET ", path, ": ", response.substr(0, 40)));
  }
  if (body == std::string::npos) return absl::UnavailableError("no HTTP body");
  return response.substr(body + 4);
}

std::string ChainProcess::address() const { return absl::StrCat("127.0.0.1:", port_); }

absl::StatusOr<std::unique_ptr<ChainProcess>> ChainProcess::Start(
    const std::string& binary, const std::vector<std::string>& args,
    absl::Duration ready_timeout) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(1);
    dup2(fds[1], STDOUT_FILENO);
    std::vector<std::string> argv_s = {binary};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  close(fds[1]);
  std::unique_ptr<ChainProcess> p(new ChainProcess());
  p->pid_ = pid;
  std::string out;
  const absl::Time deadline = absl::Now() + ready_timeout;
  while (true) {
    const size_t nl = out.find('\n');
    if (nl != std::string::npos) {
      const std::string line = out.substr(0, nl);
      out.erase(0, nl + 1);
      char name[65] = {0};
      int port = 0, metrics = 0;
      if (std::sscanf(line.c_str(), "%64s listening on %d metrics on %d", name, &port, &metrics) ==
          3) {
        p->port_ = port;
        p->metrics_port_ = metrics;
        break;
      }
      continue;
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      p->stdout_fd_ = fds[0];
      return absl::DeadlineExceededError(absl::StrCat(binary, " printed no ready line in time"));
    }
    pollfd pfd{fds[0], POLLIN, 0};
    const int ms = static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1000));
    if (poll(&pfd, 1, ms) <= 0) continue;
    char buf[512];
    const ssize_t n = read(fds[0], buf, sizeof(buf));
    if (n <= 0) {
      p->stdout_fd_ = fds[0];
      return absl::InternalError(absl::StrCat(binary, " exited before it was ready (see stderr)"));
    }
    out.append(buf, static_cast<size_t>(n));
  }
  // Kept open until the process ends: a write to a closed pipe would kill it.
  p->stdout_fd_ = fds[0];
  return p;
}

ChainProcess::~ChainProcess() {
  struct Closer {
    ChainProcess* p;
    ~Closer() { p->CloseStdout(); }
  } closer{this};
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (absl::Now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) return;
    absl::SleepFor(absl::Milliseconds(10));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
}

void ChainProcess::CloseStdout() {
  if (stdout_fd_ >= 0) close(stdout_fd_);
  stdout_fd_ = -1;
}

}  // namespace hopbudget::e2e
