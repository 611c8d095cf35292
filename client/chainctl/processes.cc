// Copyright hopbudget authors.
#include "processes.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace hopbudget::chainctl {

absl::StatusOr<pid_t> Spawn(const std::string& binary, const std::vector<std::string>& args,
                            const std::string& out, const std::string& err) {
  // Built before fork: the child only makes async-signal-safe calls.
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(binary.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  // Opened (and emptied) here, before the child exists: a reader of `out`
  // never finds the line a previous process left there (a restart's ready
  // line would be read before the new process wrote its own).
  auto open_file = [](const std::string& path) {
    return path.empty() ? -1 : open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  };
  const int o = open_file(out), e = open_file(err);
  if ((!out.empty() && o < 0) || (!err.empty() && e < 0)) {
    const std::string what = std::strerror(errno);
    if (o >= 0) close(o);
    if (e >= 0) close(e);
    return absl::InternalError(absl::StrCat("cannot write ", o < 0 ? out : err, ": ", what));
  }
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    if ((o >= 0 && dup2(o, 1) < 0) || (e >= 0 && dup2(e, 2) < 0)) _exit(127);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  const int fork_errno = errno;
  if (o >= 0) close(o);
  if (e >= 0) close(e);
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(fork_errno)));
  return pid;
}

absl::StatusOr<ReadyPorts> WaitReady(pid_t pid, const std::string& out, const std::string& err,
                                     absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    std::ifstream in(out);
    std::string line;
    while (std::getline(in, line)) {
      if (line.find(" listening on ") == std::string::npos) continue;
      std::vector<std::string> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
      ReadyPorts r;
      if (words.size() >= 7 && absl::SimpleAtoi(words[3], &r.port) &&
          absl::SimpleAtoi(words[6], &r.metrics_port)) {
        return r;
      }
      if (words.size() == 4 && absl::SimpleAtoi(words[3], &r.port)) return r;
      return absl::InternalError(absl::StrCat("a ready line without ports: ", line));
    }
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      std::ifstream e(err);
      std::stringstream text;
      text << e.rdbuf();
      return absl::UnavailableError(absl::StrCat("exited (status ", ExitCode(status),
                                                 ") before it was ready:\n", text.str()));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("no ready line in ", absl::FormatDuration(timeout)));
}

int ExitCode(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int Stop(pid_t pid) {
  if (pid < 0) return 1;
  kill(pid, SIGTERM);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return 1;
  }
  return ExitCode(status);
}

}  // namespace hopbudget::chainctl
