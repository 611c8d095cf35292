// Copyright hopbudget authors.
#include "chromium.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace hopbudget::testing {
namespace {

std::string Tail(const std::string& path, size_t n) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  return s.size() > n ? s.substr(s.size() - n) : s;
}

// `class="a b"` in a tag matches the wanted `class="b"` by word.
bool TagHas(const std::string& tag, const std::string& attr) {
  if (absl::StartsWith(attr, "class=\"")) {
    const std::string want = attr.substr(7, attr.size() - 8);
    const size_t at = tag.find(" class=\"");
    if (at == std::string::npos) return false;
    const size_t start = at + 8;
    const size_t end = tag.find('"', start);
    for (absl::string_view word : absl::StrSplit(tag.substr(start, end - start), ' ')) {
      if (word == want) return true;
    }
    return false;
  }
  return absl::StrContains(tag, " " + attr);
}

// The environment of chromium: ours, with the fontconfig variables replaced
// when `fontconfig_file` is set.
std::vector<std::string> ChromiumEnvironment(const std::string& fontconfig_file) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const absl::string_view var(*e);
    if (!fontconfig_file.empty() &&
        (absl::StartsWith(var, "FONTCONFIG_FILE=") || absl::StartsWith(var, "FONTCONFIG_PATH=") ||
         absl::StartsWith(var, "FONTCONFIG_SYSROOT="))) {
      continue;
    }
    env.emplace_back(var);
  }
  if (!fontconfig_file.empty()) env.push_back("FONTCONFIG_FILE=" + fontconfig_file);
  return env;
}

}  // namespace

absl::Status CheckFontconfigFile(const std::string& fontconfig_file) {
  if (fontconfig_file.empty() || fontconfig_file[0] != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("fontconfig file '", fontconfig_file, "' is not an absolute path"));
  }
  std::ifstream in(fontconfig_file);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", fontconfig_file));
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string conf = ss.str();
  std::vector<std::string> missing;
  const std::regex glob("<glob>([^<*?\\[]+)</glob>");
  for (auto it = std::sregex_iterator(conf.begin(), conf.end(), glob); it != std::sregex_iterator();
       ++it) {
    const std::string file = (*it)[1];
    if (access(file.c_str(), R_OK) != 0) missing.push_back(file);
  }
  if (!missing.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        fontconfig_file, " pins fonts this machine does not have: ", absl::StrJoin(missing, ", "),
        " (for tests/browser/testdata/fonts.conf: apt-get install -y fonts-dejavu-core; "
        "scripts/test.sh installs it)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> FindChromium() {
  if (const char* env = std::getenv("HOPBUDGET_CHROMIUM"); env != nullptr && *env != '\0') {
    if (access(env, X_OK) == 0) return std::string(env);
    return absl::NotFoundError(absl::StrCat("HOPBUDGET_CHROMIUM=", env, " is not executable"));
  }
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path ? path : "/usr/bin:/bin", ':')) {
    for (const char* name : {"chromium", "chromium-browser"}) {
      const std::string candidate = absl::StrCat(dir, "/", name);
      if (!dir.empty() && access(candidate.c_str(), X_OK) == 0) return candidate;
    }
  }
  return absl::NotFoundError(
      "chromium not found on PATH: the /deadlinez browser test needs Debian's chromium "
      "(apt-get install -y chromium; scripts/test.sh installs it), or set HOPBUDGET_CHROMIUM");
}

absl::StatusOr<std::string> DumpDom(const std::string& url, const DumpDomOptions& options) {
  const int virtual_time_ms = options.virtual_time_ms;
  const absl::Duration limit = options.limit;
  absl::StatusOr<std::string> chromium = FindChromium();
  if (!chromium.ok()) return chromium.status();
  if (!options.fontconfig_file.empty()) {
    if (absl::Status fonts = CheckFontconfigFile(options.fontconfig_file); !fonts.ok()) {
      return fonts;
    }
  }
  char dir_template[] = "/tmp/hopbudget-chromium-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) return absl::InternalError("mkdtemp failed");
  const std::string dir = dir_template;
  const std::string log = dir + "/stderr.log";
  std::vector<std::string> args = {*chromium,
                                   "--headless",
                                   "--no-sandbox",
                                   "--disable-gpu",
                                   "--disable-quic",
                                   "--no-first-run",
                                   "--disable-background-networking",
                                   "--disable-component-update",
                                   "--disable-sync",
                                   "--disable-dev-shm-usage",
                                   absl::StrCat("--user-data-dir=", dir, "/profile"),
                                   absl::StrCat("--virtual-time-budget=", virtual_time_ms)};
  if (options.window_width > 0 && options.window_height > 0) {
    args.push_back(
        absl::StrCat("--window-size=", options.window_width, ",", options.window_height));
    args.push_back("--hide-scrollbars");
  }
  args.push_back("--dump-dom");
  args.push_back(url);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // Built before fork: the child of a threaded process only calls
  // async-signal-safe functions.
  std::vector<std::string> env = ChromiumEnvironment(options.fontconfig_file);
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    // Its own process group, so that a kill reaches chromium's helpers too.
    setpgid(0, 0);
    dup2(out[1], STDOUT_FILENO);
    const int err = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (err >= 0) dup2(err, STDERR_FILENO);
    const int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, STDIN_FILENO);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  close(out[1]);
  std::string dom;
  const absl::Time deadline = absl::Now() + limit;
  bool timed_out = false;
  char buf[65536];
  while (true) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      timed_out = true;
      break;
    }
    pollfd p{out[0], POLLIN, 0};
    const int r = poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      timed_out = r == 0;
      if (timed_out) break;
      continue;
    }
    const ssize_t n = read(out[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    dom.append(buf, static_cast<size_t>(n));
  }
  close(out[0]);
  if (timed_out) kill(-pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  kill(-pid, SIGKILL);  // helpers left behind, if any
  const std::string stderr_tail = Tail(log, 2000);
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  if (timed_out) {
    return absl::DeadlineExceededError(absl::StrCat("chromium did not finish within ",
                                                    absl::FormatDuration(limit), "; stderr:\n",
                                                    stderr_tail));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || dom.empty()) {
    return absl::InternalError(absl::StrCat("chromium failed (status ", status, ", ", dom.size(),
                                            " bytes of DOM); stderr:\n", stderr_tail));
  }
  return dom;
}

namespace {

// The position just past the '>' of the next opening tag at or after `pos`
// that has every one of `attrs`, or npos.
size_t NextMatchingTag(const std::string& dom, const std::vector<std::string>& attrs, size_t pos) {
  while ((pos = dom.find('<', pos)) != std::string::npos) {
    const size_t end = dom.find('>', pos);
    if (end == std::string::npos) break;
    const std::string tag = dom.substr(pos, end - pos);
    pos = end;
    if (tag.size() < 2 || tag[1] == '/' || tag[1] == '!') continue;
    bool all = true;
    for (const std::string& a : attrs) all = all && TagHas(tag, a);
    if (all) return end + 1;
  }
  return std::string::npos;
}

}  // namespace

int CountElements(const std::string& dom, const std::vector<std::string>& attrs) {
  int count = 0;
  for (size_t pos = NextMatchingTag(dom, attrs, 0); pos != std::string::npos;
       pos = NextMatchingTag(dom, attrs, pos)) {
    ++count;
  }
  return count;
}

std::string TextOf(const std::string& dom, const std::vector<std::string>& attrs) {
  const size_t pos = NextMatchingTag(dom, attrs, 0);
  if (pos == std::string::npos) return "";
  return dom.substr(pos, dom.find('<', pos) - pos);
}

}  // namespace hopbudget::testing
