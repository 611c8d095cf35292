// Copyright hopbudget authors.
#include "chain_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace hopbudget::e2e {

ChainProcesses::ChainProcesses() {
  std::string templ = "/tmp/hopbudget-e2e-XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) {
    error_ = absl::StrCat("mkdtemp ", templ, ": ", std::strerror(errno));
    return;
  }
  dir_ = templ;
}

ChainProcesses::~ChainProcesses() {
  // One by one from the back: a vector's own destructor promises no order.
  while (!started_.empty()) started_.pop_back();
  if (dir_.empty()) return;
  std::error_code ignored;  // a leftover folder under /tmp fails no test
  std::filesystem::remove_all(dir_, ignored);
}

ChainProcess* ChainProcesses::Start(const std::string& binary,
                                    const std::vector<std::string>& args) {
  if (!error_.empty()) return nullptr;
  absl::StatusOr<std::unique_ptr<ChainProcess>> p = ChainProcess::Start(binary, args);
  if (!p.ok()) {
    error_ = p.status().ToString();
    return nullptr;
  }
  started_.push_back(*std::move(p));
  return started_.back().get();
}

std::map<chainctl::Hop, ChainProcess*> ChainProcesses::StartChain(const chainctl::ChainSpec& spec) {
  std::map<chainctl::Hop, ChainProcess*> hops;
  std::map<chainctl::Hop, std::string> addresses;
  for (chainctl::Hop hop : chainctl::StartOrder(spec)) {
    if (!error_.empty()) return {};
    absl::StatusOr<chainctl::HopCommand> command = chainctl::CommandFor(spec, hop, addresses);
    if (!command.ok()) {
      error_ = absl::StrCat(chainctl::HopName(hop), ": ", command.status().ToString());
      return {};
    }
    ChainProcess* p = Start(DemoBinary(command->binary), command->args);
    if (p == nullptr) {
      error_ = absl::StrCat(chainctl::HopName(hop), ": ", error_);
      return {};
    }
    hops[hop] = p;
    addresses[hop] = p->address();
  }
  return hops;
}

std::string DemoBinary(const std::string& binary) {
  if (binary == "gateway") return HOPBUDGET_DEMO_GATEWAY;
  if (binary == "orders") return HOPBUDGET_DEMO_ORDERS;
  if (binary == "ledger") return HOPBUDGET_DEMO_LEDGER;
  return "";
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
  if (response.compare(0, 12, "HTTP/1.1 200") != 0 &&
      response.compare(0, 12, "HTTP/1.0 200") != 0) {
    return absl::UnavailableError(absl::StrCat("GET ", path, ": ", response.substr(0, 40)));
  }
  if (body == std::string::npos) return absl::UnavailableError("no HTTP body");
  return response.substr(body + 4);
}

absl::StatusOr<std::unique_ptr<ChainProcess>> ChainProcess::Start(
    const std::string& binary, const std::vector<std::string>& args, absl::Duration ready_timeout) {
  std::vector<std::string> checked = args;
  checked.push_back("--mutex-deadlock-detection");
  absl::StatusOr<std::unique_ptr<demo::ChildProcess>> child =
      demo::ChildProcess::Spawn(binary, checked);
  if (!child.ok()) return child.status();
  if (absl::Status ready = (*child)->WaitReady(ready_timeout); !ready.ok()) {
    return absl::Status(ready.code(), absl::StrCat(binary, ": ", ready.message()));
  }
  return std::unique_ptr<ChainProcess>(new ChainProcess(*std::move(child)));
}

ChainProcess::~ChainProcess() {
  // A clean stop first (shielded commits drain); the child's own
  // destructor kills what still runs.
  child_->Signal(SIGTERM);
  (void)child_->WaitExit(absl::Seconds(20));
}

}  // namespace hopbudget::e2e
