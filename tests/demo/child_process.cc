// Copyright hopbudget authors.
#include "child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace hopbudget::demo {

namespace {

absl::Mutex made_mu;
std::vector<std::string>* made ABSL_GUARDED_BY(made_mu) = nullptr;

void RemoveMade() {
  absl::MutexLock lock(&made_mu);
  for (const std::string& dir : *made) {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
}

}  // namespace

std::string TempDir() {
  std::string templ = "/tmp/hopbudget-demo-XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) return "/tmp";
  absl::MutexLock lock(&made_mu);
  if (made == nullptr) {
    made = new std::vector<std::string>;
    std::atexit(RemoveMade);
  }
  made->push_back(templ);
  return templ;
}

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Spawn(
    const std::string& binary, const std::vector<std::string>& args) {
  std::unique_ptr<ChildProcess> p(new ChildProcess());
  p->stderr_path_ = TempDir() + "/stderr";
  const int err_fd = open(p->stderr_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (err_fd < 0) return absl::InternalError("cannot create the stderr file");
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    dup2(fds[1], STDOUT_FILENO);
    dup2(err_fd, STDERR_FILENO);
    std::vector<std::string> argv_s = {binary};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
    // Said on the child's stderr, or a failed exec looks like a child that
    // exited without a word (dprintf only formats: safe after fork).
    const int e = errno;
    dprintf(STDERR_FILENO, "execv %s failed: errno %d\n", binary.c_str(), e);
    _exit(127);
  }
  close(fds[1]);
  close(err_fd);
  p->pid_ = pid;
  p->stdout_fd_ = fds[0];
  p->pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  return p;
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !exited_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (pidfd_ >= 0) close(pidfd_);
  if (stdout_fd_ >= 0) close(stdout_fd_);
}

std::string ChildProcess::address() const { return absl::StrCat("127.0.0.1:", port_); }

std::string ChildProcess::Stderr() const {
  std::ifstream in(stderr_path_);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void ChildProcess::Signal(int sig) {
  if (!exited_) kill(pid_, sig);
}

int ChildProcess::Threads() const {
  std::ifstream in(absl::StrCat("/proc/", pid_, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    int n = 0;
    if (std::sscanf(line.c_str(), "Threads: %d", &n) == 1) return n;
  }
  return -1;
}

absl::Status ChildProcess::WaitReady(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    const size_t nl = stdout_buffer_.find('\n');
    if (nl != std::string::npos) {
      const std::string line = stdout_buffer_.substr(0, nl);
      stdout_buffer_.erase(0, nl + 1);
      char name[65] = {0};
      int port = 0, metrics = 0;
      if (std::sscanf(line.c_str(), "%64s listening on %d metrics on %d", name, &port, &metrics) ==
              3 ||
          std::sscanf(line.c_str(), "listening on %d", &port) == 1) {  // the examples
        port_ = port;
        metrics_port_ = metrics;
        return absl::OkStatus();
      }
      continue;
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(absl::StrCat("no ready line in time; stderr: ", Stderr()));
    }
    pollfd pfd{stdout_fd_, POLLIN, 0};
    if (poll(&pfd, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1) <= 0) continue;
    char buf[512];
    const ssize_t n = read(stdout_fd_, buf, sizeof(buf));
    if (n <= 0) {
      // Its exit status, if it exits within a second of closing stdout.
      absl::StatusOr<int> exit = WaitExit(absl::Seconds(1));
      const std::string how =
          exit.ok() ? absl::StrCat("exit status ", *exit) : std::string("stdout closed");
      return absl::UnavailableError(
          absl::StrCat("exited before it was ready (", how, "); stderr: ", Stderr()));
    }
    stdout_buffer_.append(buf, static_cast<size_t>(n));
  }
}

absl::StatusOr<int> ChildProcess::WaitExit(absl::Duration timeout) {
  if (!exited_) {
    const absl::Time deadline = absl::Now() + timeout;
    while (true) {
      int status = 0;
      const pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        exited_ = true;
        exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;
      }
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) return absl::DeadlineExceededError("still running");
      // A pidfd becomes readable when the process ends; without one (old
      // kernels) wake up now and then.
      const int ms = static_cast<int>(absl::ToInt64Milliseconds(left)) + 1;
      if (pidfd_ >= 0) {
        pollfd pfd{pidfd_, POLLIN, 0};
        poll(&pfd, 1, ms);
      } else {
        absl::SleepFor(std::min(left, absl::Milliseconds(20)));
      }
    }
  }
  return exit_status_;
}

}  // namespace hopbudget::demo
