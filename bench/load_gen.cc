// Copyright hopbudget authors.
//
// load_gen: the client process of the overhead benchmark. A closed loop over
// the callback client API: `--inflight` calls are outstanding at all times
// (each completion issues the next call), on one channel built in `--mode`
// (bench_modes.h; in mode retry-loop every call goes through a RetryLoop). Every call carries a 1 s
// deadline, in every mode, so the only difference between modes is the interceptors. Runs
// `--warmup`, then measures for `--duration`: calls that started and ended inside that window
// count. With --server-pid it also reports CPU time per call (user + sys of
// this process and of the server, over the window, divided by the calls that
// ended in it): far less sensitive to other load on the machine than QPS and
// latency; and the server's context switches per call (every thread's, from
// /proc/PID/task/*/status, same window and divisor). `--answer` says what
// echo_server was told to answer (its --answer): every call must get that
// answer (OK, RESOURCE_EXHAUSTED, or DEADLINE_EXCEEDED for a hopbudget
// refusal), else the exit status is 1. With --answer=expired every call
// says, in hopbudget's budget header, that its budget is spent (as a call
// that waited its whole budget on the way does): the server refuses it on
// arrival. Prints a table row and a RESULT line:
//
//   load_gen --target=127.0.0.1:PORT --mode=plain --inflight=32 --duration=5s
//            [--warmup=1s] [--server-pid=PID] [--api=callback --round=1] [--answer=echo]
#include <grpcpp/grpcpp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "bench_modes.h"
#include "bench_util.h"
#include "echo/relay.grpc.pb.h"
#include "hopbudget/advanced/wire.h"

ABSL_FLAG(std::string, target, "", "the echo server, HOST:PORT (required)");
ABSL_FLAG(std::string, mode, "plain", "what the client installs (bench_modes.h)");
ABSL_FLAG(int, inflight, 1, "calls in flight, 1..10000");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(5), "how long to measure");
ABSL_FLAG(absl::Duration, warmup, absl::Seconds(1), "how long to call before measuring");
ABSL_FLAG(std::string, api, "?", "the server's API, for the RESULT line only");
ABSL_FLAG(int, round, 1, "the round, for the RESULT line, 0..1000");
ABSL_FLAG(int, server_pid, 0,
          "the server's pid: its CPU time and context switches are measured too (0 = not)");
ABSL_FLAG(std::string, answer, "echo",
          "what the server answers (echo_server --answer): echo, error, refuse, expired "
          "(every call's budget header says its budget is spent; --mode=plain only) or shed "
          "(RESOURCE_EXHAUSTED, OK for the few admitted); for the "
          "RESULT line, and the answer every call must get");
ABSL_FLAG(bool, budget_header, true,
          "hopbudget modes: send hopbudget-budget-us (ClientOptions::send_budget_header)");
ABSL_FLAG(bool, core_retries, true,
          "gRPC core retries on the client channel (GRPC_ARG_ENABLE_RETRIES; gRPC's default, and "
          "hopbudget's, is on: its transparent retries); off spares every call core's retry "
          "filter");
HOPBUDGET_BENCH_DEADLOCK_DETECTION_FLAG();

namespace hopbudget {
namespace bench {
namespace {

// CPU seconds (user + sys) of this process.
double SelfCpu() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

// CPU seconds (utime + stime) of process `pid` from /proc; -1 if unreadable.
double ProcCpu(int pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');  // the command name may hold spaces
  if (paren == std::string::npos) return -1;
  std::vector<std::string> f = absl::StrSplit(stat.substr(paren + 2), ' ');
  // After ")": field 3 (state) is f[0], so utime (14) is f[11], stime (15) f[12].
  int64_t ut = 0, st = 0;
  if (f.size() < 13 || !absl::SimpleAtoi(f[11], &ut) || !absl::SimpleAtoi(f[12], &st)) return -1;
  return static_cast<double>(ut + st) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// Context switches (voluntary + nonvoluntary) of every thread of process
// `pid` so far, summed over /proc/PID/task/*/status; -1 if the process is
// unreadable. A thread that ends between two readings takes its switches
// with it (gRPC's pools keep theirs for the process's life).
int64_t ProcContextSwitches(int pid) {
  const std::string dir_path = absl::StrCat("/proc/", pid, "/task");
  DIR* dir = opendir(dir_path.c_str());
  if (dir == nullptr) return -1;
  int64_t total = 0;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream in(absl::StrCat(dir_path, "/", e->d_name, "/status"));  // gone if it ended
    std::string line;
    while (std::getline(in, line)) {
      for (const std::string key : {"voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:"}) {
        int64_t n = 0;
        if (line.rfind(key, 0) == 0 && absl::SimpleAtoi(line.substr(key.size()), &n)) total += n;
      }
    }
  }
  closedir(dir);
  return total;
}

// The status every call gets from echo_server --answer=`answer`, and its name.
grpc::StatusCode ExpectedCode(const std::string& answer) {
  if (answer == "error" || answer == "shed") return grpc::StatusCode::RESOURCE_EXHAUSTED;
  if (answer == "refuse" || answer == "expired") {
    return grpc::StatusCode::DEADLINE_EXCEEDED;  // hopbudget's refusal
  }
  return grpc::StatusCode::OK;
}
const char* ExpectedName(const std::string& answer) {
  if (answer == "error") return "RESOURCE_EXHAUSTED";
  if (answer == "shed") return "RESOURCE_EXHAUSTED (or OK: the few admission let in)";
  if (answer == "refuse" || answer == "expired") return "DEADLINE_EXCEEDED";
  return "OK";
}

// Sleeps until MonoSeconds() >= t.
void SleepUntil(double t) {
  const double d = t - MonoSeconds();
  if (d > 0) absl::SleepFor(absl::Seconds(d));
}

class ClosedLoop {
 public:
  // `loop`: make every call through this RetryLoop (mode retry-loop), or
  // nullptr. `expected`: the status every call must end with, or OK too
  // when `also_ok`. `spent_budget`: every call's budget header says its
  // budget is spent.
  ClosedLoop(echo::Relay::Stub* stub, RetryLoop* loop, int inflight, double measure_start,
             double measure_end, grpc::StatusCode expected, bool also_ok, bool spent_budget)
      : stub_(stub),
        loop_(loop),
        expected_(expected),
        also_ok_(also_ok),
        spent_budget_(spent_budget),
        slots_(inflight),
        measure_start_(measure_start),
        measure_end_(measure_end) {
    for (auto& s : slots_) {
      s.req.set_payload("0123456789abcdef");
      s.lat.reserve(1 << 16);
    }
  }

  // Starts every slot, calls `window_start` and `window_end` (on this thread)
  // at the window's edges, waits until every outstanding call has come back.
  template <typename F, typename G>
  void Run(F window_start, G window_end) {
    {
      absl::MutexLock lock(&mu_);
      active_ = static_cast<int>(slots_.size());
    }
    for (auto& s : slots_) Issue(&s);
    SleepUntil(measure_start_);
    window_start();
    SleepUntil(measure_end_);
    window_end();
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](int* active) { return *active == 0; }, &active_));
  }

  std::vector<double> Latencies() const {
    std::vector<double> all;
    for (const auto& s : slots_) all.insert(all.end(), s.lat.begin(), s.lat.end());
    return all;
  }
  int64_t errors() const { return errors_.load(); }
  int64_t unexpected() const { return unexpected_.load(); }
  int64_t ended_in_window() const { return ended_in_window_.load(); }

 private:
  struct Slot {
    std::unique_ptr<grpc::ClientContext> ctx;
    echo::RelayRequest req;
    echo::RelayReply reply;
    double start = 0;
    std::vector<double> lat;  // seconds; only this slot's callback touches it
  };

  void Issue(Slot* s) {
    s->reply.Clear();
    s->start = MonoSeconds();
    if (loop_ != nullptr) {
      // The loop owns each attempt's context, deadline from the logical call.
      loop_->Start(
          LogicalCall::WithDeadline(absl::Now() + absl::Seconds(1)),
          [this, s](grpc::ClientContext* attempt, std::function<void(grpc::Status)> done) {
            stub_->async()->Call(attempt, &s->req, &s->reply, std::move(done));
          },
          [this, s](grpc::Status status) { Done(s, status); });
      return;
    }
    s->ctx = std::make_unique<grpc::ClientContext>();
    s->ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
    if (spent_budget_) s->ctx->AddMetadata(std::string(kBudgetHeader), "0");
    stub_->async()->Call(s->ctx.get(), &s->req, &s->reply,
                         [this, s](grpc::Status status) { Done(s, status); });
  }

  void Done(Slot* s, const grpc::Status& status) {
    const double now = MonoSeconds();
    if (now >= measure_start_ && now <= measure_end_) ended_in_window_++;
    if (status.error_code() != expected_ && !(also_ok_ && status.ok())) unexpected_++;
    if (!status.ok()) {
      errors_++;
    } else if (s->start >= measure_start_ && now <= measure_end_) {
      s->lat.push_back(now - s->start);
    }
    if (now < measure_end_) {
      Issue(s);
      return;
    }
    absl::MutexLock lock(&mu_);
    --active_;
  }

  echo::Relay::Stub* stub_;
  RetryLoop* loop_;
  const grpc::StatusCode expected_;
  const bool also_ok_;  // OK is expected too (--answer=shed)
  const bool spent_budget_;
  std::vector<Slot> slots_;
  const double measure_start_;
  const double measure_end_;
  std::atomic<int64_t> errors_{0};
  std::atomic<int64_t> unexpected_{0};  // not answered expected_
  std::atomic<int64_t> ended_in_window_{0};
  absl::Mutex mu_;
  int active_ ABSL_GUARDED_BY(mu_) = 0;
};

int Main(int argc, char** argv) {
  cli::ParseOrExit(argc, argv, "load_gen",
                   "load_gen: closed-loop load on the echo server; prints a RESULT line.\n\n"
                   "  load_gen --target=HOST:PORT [--mode=MODE] [--inflight=1] [--duration=5s] "
                   "[--warmup=1s] [--answer=echo]");
  const std::string target = absl::GetFlag(FLAGS_target);
  const std::string mode = absl::GetFlag(FLAGS_mode);
  const int inflight = absl::GetFlag(FLAGS_inflight);
  const absl::Duration duration = absl::GetFlag(FLAGS_duration);
  const absl::Duration warmup = absl::GetFlag(FLAGS_warmup);
  const std::string api = absl::GetFlag(FLAGS_api);
  const int round = absl::GetFlag(FLAGS_round);
  const int server_pid = absl::GetFlag(FLAGS_server_pid);
  const std::string answer = absl::GetFlag(FLAGS_answer);
  cli::ExitIfBad(
      "load_gen",
      cli::FirstError(
          {ApplyDeadlockDetectionFlag(absl::GetFlag(FLAGS_deadlock_detection)),
           cli::Required("target", target), CheckMode(mode),
           cli::InRange("inflight", inflight, 1, 10000), cli::Positive("duration", duration),
           cli::Positive("warmup", warmup), cli::InRange("round", round, 0, 1000),
           cli::InRange("server-pid", server_pid, 0, 1 << 30),
           cli::OneOf("answer", answer, {"echo", "error", "refuse", "expired", "shed"})}));
  if (answer == "expired" && mode != "plain") {
    // A hopbudget client would send its own budget header, not ours.
    cli::ExitIfBad("load_gen", absl::InvalidArgumentError(absl::StrCat(
                                   "--answer=expired needs --mode=plain, not ", mode)));
  }
  if (server_pid > 0 && ProcCpu(server_pid) < 0) {
    Die(absl::StrCat("--server-pid=", server_pid, ": cannot read /proc/", server_pid, "/stat"));
  }
  if (server_pid > 0 && ProcContextSwitches(server_pid) < 0) {
    Die(absl::StrCat("--server-pid=", server_pid, ": cannot read /proc/", server_pid, "/task"));
  }

  BenchClientOptions client;
  client.send_budget_header = absl::GetFlag(FLAGS_budget_header);
  const bool core_retries = absl::GetFlag(FLAGS_core_retries);
  grpc::ChannelArguments args;
  if (!core_retries) args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  std::shared_ptr<grpc::Channel> channel = MakeClientChannel(mode, target, args, client);
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(5))) {
    Die(absl::StrCat("could not connect to ", target));
  }
  std::unique_ptr<echo::Relay::Stub> stub = echo::Relay::NewStub(channel);
  std::unique_ptr<RetryLoop> retry_loop = mode == "retry-loop" ? MakeRetryLoop() : nullptr;

  const double start = MonoSeconds() + absl::ToDoubleSeconds(warmup);
  const double end = start + absl::ToDoubleSeconds(duration);
  ClosedLoop loop(stub.get(), retry_loop.get(), inflight, start, end, ExpectedCode(answer),
                  answer == "shed", answer == "expired");
  double self0 = 0, self1 = 0, server0 = 0, server1 = 0;
  int64_t cs0 = 0, cs1 = 0;
  loop.Run(
      [&] {
        self0 = SelfCpu();
        if (server_pid > 0) {
          server0 = ProcCpu(server_pid);
          cs0 = ProcContextSwitches(server_pid);
        }
      },
      [&] {
        self1 = SelfCpu();
        if (server_pid > 0) {
          server1 = ProcCpu(server_pid);
          cs1 = ProcContextSwitches(server_pid);
        }
      });
  const double ended = static_cast<double>(std::max<int64_t>(1, loop.ended_in_window()));
  const double client_cpu_us = (self1 - self0) * 1e6 / ended;
  const double server_cpu_us = server_pid > 0 ? (server1 - server0) * 1e6 / ended : 0;
  const double server_cs_per_call =
      server_pid > 0 ? static_cast<double>(std::max<int64_t>(0, cs1 - cs0)) / ended : 0;

  std::vector<double> lat = loop.Latencies();
  const Stats s = Summarize(lat);
  const double qps = static_cast<double>(s.n) / absl::ToDoubleSeconds(duration);
  std::printf(
      "%-9s %-10s inflight=%-3d round=%-2d qps=%9.0f p50=%7.1fus p99=%7.1fus "
      "cpu/call=%6.1fus (client %.1f + server %.1f) errors=%lld server cs/call=%.2f\n",
      api.c_str(), mode.c_str(), inflight, round, qps, s.p50 * 1e6, s.p99 * 1e6,
      client_cpu_us + server_cpu_us, client_cpu_us, server_cpu_us,
      static_cast<long long>(loop.errors()), server_cs_per_call);
  std::printf(
      "RESULT bench=overhead api=%s mode=%s inflight=%d round=%d qps=%.1f p50_us=%.1f "
      "p99_us=%.1f calls=%zu errors=%lld cpu_us_per_call=%.2f client_cpu_us=%.2f "
      "server_cpu_us=%.2f budget_header=%d server_cs_per_call=%.2f answer=%s core_retries=%d\n",
      api.c_str(), mode.c_str(), inflight, round, qps, s.p50 * 1e6, s.p99 * 1e6, s.n,
      static_cast<long long>(loop.errors()), client_cpu_us + server_cpu_us, client_cpu_us,
      server_cpu_us, client.send_budget_header ? 1 : 0, server_cs_per_call, answer.c_str(),
      core_retries ? 1 : 0);
  if (loop.unexpected() > 0) {
    std::fprintf(stderr, "load_gen: %lld calls not answered %s (--answer=%s)\n",
                 static_cast<long long>(loop.unexpected()), ExpectedName(answer), answer.c_str());
  }
  return loop.unexpected() == 0 ? 0 : 1;
}

}  // namespace
}  // namespace bench
}  // namespace hopbudget

int main(int argc, char** argv) { return hopbudget::bench::Main(argc, argv); }
