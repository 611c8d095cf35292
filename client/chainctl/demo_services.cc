// Copyright hopbudget authors.
#include "demo_services.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <deque>
#include <fstream>
#include <regex>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "processes.h"

namespace hopbudget::chainctl {

DemoServices::DemoServices(std::string bin, std::string work)
    : bin_(std::move(bin)), work_(std::move(work)) {}

const DemoServices::Service& DemoServices::at(const std::string& label) const {
  static const Service kNone;
  auto it = services_.find(label);
  return it == services_.end() ? kNone : it->second;
}

std::string DemoServices::address(const std::string& label) const {
  return absl::StrCat("127.0.0.1:", port(label));
}

std::string DemoServices::err_file(const std::string& label) const {
  return absl::StrCat(work_, "/", label, ".err");
}

absl::Status DemoServices::Start(const std::string& label, const ChainSpec& spec, Hop hop,
                                 const std::map<Hop, std::string>& callees) {
  absl::StatusOr<HopCommand> command = CommandFor(spec, hop, callees);
  if (!command.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no command line for ", label, ": ", command.status().message()));
  }
  Service s;
  s.binary = absl::StrCat(bin_, "/", command->binary);
  s.args = std::move(command->args);
  order_.push_back(label);
  Service& placed = services_[label] = std::move(s);
  return Launch(label, placed, 0, 0);
}

absl::Status DemoServices::Launch(const std::string& label, Service& s, int port,
                                  int metrics_port) {
  // The description asks for free ports (--port=0, --metrics-port=0); a
  // restart asks for the ones it had.
  std::vector<std::string> args = s.args;
  for (std::string& a : args) {
    if (a == "--port=0") a = absl::StrCat("--port=", port);
    if (a == "--metrics-port=0") a = absl::StrCat("--metrics-port=", metrics_port);
  }
  const std::string out = absl::StrCat(work_, "/", label, ".out");
  absl::StatusOr<pid_t> pid = Spawn(s.binary, args, out, err_file(label));
  if (!pid.ok()) return absl::InternalError(absl::StrCat(label, ": ", pid.status().message()));
  s.pid = *pid;
  s.exit_code.reset();
  absl::StatusOr<ReadyPorts> ready = WaitReady(*pid, out, err_file(label), absl::Seconds(30));
  if (!ready.ok()) {
    if (absl::IsUnavailable(ready.status())) {
      s.exit_code = 1;
    } else {
      kill(*pid, SIGKILL);
      waitpid(*pid, nullptr, 0);
      s.exit_code = 128 + SIGKILL;
    }
    return absl::UnavailableError(
        absl::StrCat(label, " did not start: ", ready.status().message()));
  }
  s.port = ready->port;
  s.metrics_port = ready->metrics_port;
  return absl::OkStatus();
}

absl::Status DemoServices::Restart(const std::string& label, int64_t* stop_ms, int64_t* down_ms,
                                   std::ostream& out) {
  Service& s = services_.at(label);
  const absl::Time t0 = absl::Now();
  // One that died on its own is reported with the status it died with.
  int code = Died(label).value_or(-1);
  if (code == -1) {
    code = Stop(s.pid);
    s.exit_code = code;
  }
  const absl::Time t1 = absl::Now();
  StopChecked(label, code, out);
  absl::Status started = Launch(label, s, s.port, s.metrics_port);
  *stop_ms = absl::ToInt64Milliseconds(t1 - t0);
  *down_ms = absl::ToInt64Milliseconds(absl::Now() - t1);
  return started;
}

std::vector<pid_t> DemoServices::Pids() const {
  std::vector<pid_t> pids;
  for (const std::string& label : order_) {
    const Service& s = at(label);
    if (!s.exit_code.has_value()) pids.push_back(s.pid);
  }
  return pids;
}

std::vector<std::string> DemoServices::Labels() const { return order_; }

absl::optional<int> DemoServices::Died(const std::string& label) {
  auto it = services_.find(label);
  if (it == services_.end()) return absl::nullopt;
  Service& s = it->second;
  if (s.exit_code.has_value()) return s.exit_code;
  int status = 0;
  if (waitpid(s.pid, &status, WNOHANG) == s.pid) s.exit_code = ExitCode(status);
  return s.exit_code;
}

std::string DemoServices::ErrTail(const std::string& label, int lines) const {
  std::ifstream in(err_file(label));
  std::deque<std::string> last;
  std::string line;
  while (std::getline(in, line)) {
    last.push_back(line);
    if (static_cast<int>(last.size()) > lines) last.pop_front();
  }
  std::string text;
  for (const std::string& l : last) absl::StrAppend(&text, "        ", l, "\n");
  return text;
}

void DemoServices::StopChecked(const std::string& label, int exit_code, std::ostream& out) {
  static const std::regex kReport(
      "ERROR: (Address|Leak)Sanitizer|runtime error:|WARNING: ThreadSanitizer");
  std::string report;
  {
    std::ifstream in(err_file(label));
    std::string line;
    while (report.empty() && std::getline(in, line)) {
      if (std::regex_search(line, kReport)) report = line;
    }
  }
  if (exit_code != 0 || !report.empty()) {
    out << "   !!   " << label << " did not stop cleanly (exit status " << exit_code << ")"
        << (report.empty() ? "" : ": ") << report << "\n"
        << ErrTail(label) << std::flush;
    ++crashed_;
  }
  Service& s = services_.at(label);
  const std::string kept = absl::StrCat(err_file(label), ".", ++s.kept_errs);
  std::rename(err_file(label).c_str(), kept.c_str());
}

void DemoServices::StopAllChecked(std::ostream& out) { StopEvery(&out); }

void DemoServices::StopAll() { StopEvery(nullptr); }

void DemoServices::StopEvery(std::ostream* check) {
  // SIGTERM to all first: they stop side by side, each its lame duck.
  for (const std::string& label : order_) {
    if (!Died(label).has_value()) kill(services_.at(label).pid, SIGTERM);
  }
  for (const std::string& label : order_) {
    Service& s = services_.at(label);
    if (s.exit_code.has_value()) continue;
    int status = 0;
    while (waitpid(s.pid, &status, 0) < 0 && errno == EINTR) {
    }
    s.exit_code = ExitCode(status);
    if (check != nullptr) StopChecked(label, *s.exit_code, *check);
  }
}

}  // namespace hopbudget::chainctl
