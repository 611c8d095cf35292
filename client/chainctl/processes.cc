// Copyright hopbudget authors.
#include "processes.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace hopbudget::chainctl {

absl::StatusOr<pid_t> Spawn(const std::string& binary, const std::vector<std::string>& args,
                            const std::string& out, const std::string& err, int cpu) {
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
    if (cpu >= 0) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      if (sched_setaffinity(0, sizeof(one), &one) != 0) _exit(126);
    }
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

std::string SelfPath(const std::string& argv0) {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : argv0;
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

absl::StatusOr<std::vector<StartedHop>> StartChain(const ChainSpec& spec, const std::string& bin,
                                                   const std::string& work, int cpu) {
  std::vector<StartedHop> started;
  std::map<Hop, std::string> addresses;
  for (Hop hop : StartOrder(spec)) {
    const std::string name(HopName(hop));
    absl::StatusOr<HopCommand> command = CommandFor(spec, hop, addresses);
    if (!command.ok()) {
      StopChain(started);
      return absl::InvalidArgumentError(absl::StrCat(name, ": ", command.status().message()));
    }
    const std::string binary = absl::StrCat(bin, "/", command->binary);
    const std::string out = absl::StrCat(work, "/", name, ".out");
    const std::string err = absl::StrCat(work, "/", name, ".err");
    absl::StatusOr<pid_t> pid = Spawn(binary, command->args, out, err, cpu);
    if (!pid.ok()) {
      StopChain(started);
      return absl::InternalError(absl::StrCat(name, ": ", pid.status().message()));
    }
    absl::StatusOr<ReadyPorts> ready = WaitReady(*pid, out, err, absl::Seconds(30));
    if (!ready.ok()) {
      if (!absl::IsUnavailable(ready.status())) Stop(*pid);  // not reaped yet
      StopChain(started);
      return absl::UnavailableError(
          absl::StrCat(name, " (", binary, ") did not start: ", ready.status().message()));
    }
    started.push_back({hop, *pid, ready->port, ready->metrics_port});
    addresses[hop] = absl::StrCat("127.0.0.1:", ready->port);
  }
  return started;
}

std::string StopChain(const std::vector<StartedHop>& hops) {
  std::string failed;
  for (auto it = hops.rbegin(); it != hops.rend(); ++it) {
    const int code = Stop(it->pid);
    if (code != 0) absl::StrAppend(&failed, HopName(it->hop), " exited ", code, "\n");
  }
  return failed;
}

absl::Duration CpuTime(const std::vector<pid_t>& pids) {
  static const double kTicksPerSecond = static_cast<double>(sysconf(_SC_CLK_TCK));
  int64_t ticks = 0;
  for (pid_t pid : pids) {
    std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // The fields after the command name, which is in parentheses and may
    // hold spaces: utime and stime are fields 14 and 15, f[11] and f[12].
    const size_t close = stat.rfind(')');
    if (close == std::string::npos || close + 2 > stat.size()) continue;
    std::vector<std::string> f = absl::StrSplit(stat.substr(close + 2), ' ');
    int64_t utime = 0, stime = 0;
    if (f.size() > 12 && absl::SimpleAtoi(f[11], &utime) && absl::SimpleAtoi(f[12], &stime)) {
      ticks += utime + stime;
    }
  }
  return absl::Seconds(ticks / kTicksPerSecond);
}

absl::Duration WaitQuiet(const std::vector<pid_t>& pids, absl::Duration max,
                         const std::function<bool()>& stop) {
  constexpr absl::Duration kSample = absl::Milliseconds(200);
  absl::Duration waited = absl::ZeroDuration();
  absl::Duration before = CpuTime(pids);
  while (waited < max && !(stop && stop())) {
    absl::SleepFor(kSample);
    waited += kSample;
    const absl::Duration after = CpuTime(pids);
    // 5 % of 200 ms is 10 ms of CPU.
    if (after - before < absl::Milliseconds(10)) break;
    before = after;
  }
  return waited;
}

}  // namespace hopbudget::chainctl
