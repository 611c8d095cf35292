// Copyright hopbudget authors.
//
// What the demo's processes do at start and at exit, with the real binaries:
// a port already in use, a bad downstream target, a database the ledger
// must not serve. Each case checks the exit status and that stderr names
// the problem.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "child_process.h"
#include "demo/demo.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hopbudget/client.h"
#include "ledger_store.h"
#include "server/common/demo_server.h"
#include "tests/eventually.h"

namespace hopbudget::demo {
namespace {

using ::testing::HasSubstr;

// Start-up and exit are slow under ASan on a loaded 2-core machine; these
// bounds only stop a hung test.
constexpr absl::Duration kStart = absl::Seconds(60);

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::unique_ptr<ChildProcess> StartReady(const std::string& binary,
                                         const std::vector<std::string>& args) {
  auto p = ChildProcess::Spawn(binary, args);
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return nullptr;
  absl::Status ready = (*p)->WaitReady(kStart);
  EXPECT_TRUE(ready.ok()) << binary << ": " << ready;
  if (!ready.ok()) return nullptr;
  return *std::move(p);
}

// Runs a process that must exit on its own: its exit status.
int ExitStatusOf(ChildProcess& p) {
  absl::StatusOr<int> code = p.WaitExit(kStart);
  EXPECT_TRUE(code.ok()) << "still running; stderr: " << p.Stderr();
  return code.ok() ? *code : -1;
}

Order MakeOrder(const std::string& key) {
  Order o;
  o.set_key(key);
  Item* item = o.add_items();
  item->set_sku("sku-1");
  item->set_quantity(1);
  return o;
}

TEST(PortInUseTest, ASecondLedgerOnTheSamePortExitsAndCommitsLandInOneDatabase) {
  const std::string dir = TempDir();
  auto first = StartReady(HOPBUDGET_DEMO_LEDGER, {"--port=0", "--db=" + dir + "/a.db"});
  ASSERT_NE(first, nullptr);
  auto second = ChildProcess::Spawn(
      HOPBUDGET_DEMO_LEDGER, {absl::StrCat("--port=", first->port()), "--db=" + dir + "/b.db"});
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(ExitStatusOf(**second), 1);
  EXPECT_THAT((*second)->Stderr(),
              HasSubstr(absl::StrCat("cannot listen on 127.0.0.1:", first->port(),
                                     ": address already in use")));
  // Every new connection reaches the one ledger that kept the port.
  for (int i = 0; i < 20; ++i) {
    auto channel = grpc::CreateChannel(first->address(), grpc::InsecureChannelCredentials());
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
    OrderResult r;
    grpc::Status s = Ledger::NewStub(channel)->Commit(&ctx, MakeOrder(absl::StrCat("k", i)), &r);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  first->Signal(SIGTERM);
  EXPECT_EQ(ExitStatusOf(*first), 0);
  auto a = LedgerStore::Open(dir + "/a.db");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*(*a)->CountRows(), 20);
}

TEST(PortInUseTest, OrdersAndGatewayRefuseAPortInUse) {
  const std::string dir = TempDir();
  auto ledger = StartReady(HOPBUDGET_DEMO_LEDGER, {"--port=0", "--db=" + dir + "/a.db"});
  ASSERT_NE(ledger, nullptr);
  const std::string taken = absl::StrCat("--port=", ledger->port());
  struct Case {
    const char* binary;
    std::vector<std::string> args;
  };
  const Case cases[] = {
      {HOPBUDGET_DEMO_ORDERS, {taken, "--ledger=" + ledger->address()}},
      {HOPBUDGET_DEMO_GATEWAY, {taken, "--orders=" + ledger->address()}},
  };
  for (const Case& k : cases) {
    auto p = ChildProcess::Spawn(k.binary, k.args);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(ExitStatusOf(**p), 1) << k.binary;
    EXPECT_THAT((*p)->Stderr(), HasSubstr("address already in use")) << k.binary;
  }
}

// The relay hop of the tests (tests/relay), and the interop example when the
// examples are built.
TEST(PortInUseTest, TheRelayAndInteropServersRefuseAPortInUse) {
  auto first = StartReady(HOPBUDGET_RELAY_SERVER, {"--port=0", "--hop=c"});
  ASSERT_NE(first, nullptr);
  const std::string taken = absl::StrCat("--port=", first->port());
  std::vector<const char*> binaries = {HOPBUDGET_RELAY_SERVER};
#ifdef HOPBUDGET_INTEROP_SERVER
  binaries.push_back(HOPBUDGET_INTEROP_SERVER);
#endif
  for (const char* binary : binaries) {
    auto p = ChildProcess::Spawn(binary, {taken});
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(ExitStatusOf(**p), 1) << binary;
    EXPECT_THAT((*p)->Stderr(), HasSubstr(absl::StrCat("cannot listen on port ", first->port(),
                                                       " (in use by another server?)")))
        << binary;
  }
}

TEST(BadTargetTest, OrdersAndGatewayExitTwoNamingTheFlag) {
  struct Case {
    const char* binary;
    std::string arg;
    const char* message;
  };
  const Case cases[] = {
      {HOPBUDGET_DEMO_ORDERS, "--ledger=not a target",
       "orders: --ledger=not a target: bad target \"not a target\""},
      {HOPBUDGET_DEMO_ORDERS, "--ledger=127.0.0.1",
       "orders: --ledger=127.0.0.1: bad target \"127.0.0.1\": no :PORT"},
      {HOPBUDGET_DEMO_GATEWAY, "--orders=orders:99999",
       "gateway: --orders=orders:99999: bad target"},
      {HOPBUDGET_DEMO_GATEWAY, "--orders=not a target",
       "gateway: --orders=not a target: bad target"},
  };
  for (const Case& k : cases) {
    auto p = ChildProcess::Spawn(k.binary, {"--port=0", k.arg});
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(ExitStatusOf(**p), 2) << k.arg;
    EXPECT_THAT((*p)->Stderr(), HasSubstr(k.message)) << k.arg;
  }
}

void ExecSql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK)
      << (err != nullptr ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

// The ledger must exit 1 on `db`, naming `why`, and leave the file as it was.
void ExpectLedgerRefuses(const std::string& db, const std::string& why) {
  const std::string before = ReadFile(db);
  auto p = ChildProcess::Spawn(HOPBUDGET_DEMO_LEDGER, {"--port=0", "--db=" + db});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(ExitStatusOf(**p), 1);
  EXPECT_THAT((*p)->Stderr(), HasSubstr("ledger: refusing database " + db));
  EXPECT_THAT((*p)->Stderr(), HasSubstr(why));
  EXPECT_EQ(ReadFile(db), before) << "the ledger wrote into a file it refused";
}

TEST(LedgerDatabaseTest, AForeignOrdersTableIsRefusedAtStart) {
  const std::string db = TempDir() + "/shop.db";
  ExecSql(db,
          "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT, total REAL);"
          "INSERT INTO orders (customer, total) VALUES ('c', 1.5);");
  ExpectLedgerRefuses(db, "table orders has columns (id INTEGER PRIMARY KEY, customer TEXT");
}

TEST(LedgerDatabaseTest, ThreeOverwrittenPagesAreRefusedAtStart) {
  const std::string db = TempDir() + "/ledger.db";
  {
    auto store = LedgerStore::Open(db);
    ASSERT_TRUE(store.ok()) << store.status();
    for (int i = 0; i < 5000; ++i) {
      ASSERT_TRUE((*store)->Commit(absl::StrCat("key-", i), "sku-1 x2", absl::Now()).ok());
    }
  }
  std::string bytes = ReadFile(db);
  const size_t page = 4096;
  std::mt19937 rng(7);
  std::uniform_int_distribution<size_t> pick(1, bytes.size() / page - 1);
  for (int n = 0; n < 3; ++n) {
    const size_t p = pick(rng);
    for (size_t i = 0; i < page; ++i) bytes[p * page + i] = static_cast<char>(rng());
  }
  std::ofstream(db, std::ios::binary | std::ios::trunc) << bytes;
  ExpectLedgerRefuses(db, "corrupt: PRAGMA quick_check");
}

TEST(LedgerDatabaseTest, ASoundDatabaseIsServedAndSaysSo) {
  const std::string db = TempDir() + "/ledger.db";
  for (const char* outcome : {"created", "verified"}) {
    auto p = StartReady(HOPBUDGET_DEMO_LEDGER, {"--port=0", "--db=" + db});
    ASSERT_NE(p, nullptr);
    p->Signal(SIGTERM);
    EXPECT_EQ(ExitStatusOf(*p), 0);
    EXPECT_THAT(p->Stderr(), HasSubstr(absl::StrCat("schema version 1 ", outcome)));
  }
}

// The three services on free ports, front to back.
struct Chain {
  std::string dir = TempDir();
  std::unique_ptr<ChildProcess> ledger, orders, gateway;

  bool Start(const std::vector<std::string>& extra,
             const std::vector<std::string>& ledger_extra = {},
             const std::vector<std::string>& orders_extra = {}) {
    std::vector<std::string> args = {"--port=0", "--db=" + dir + "/ledger.db"};
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), ledger_extra.begin(), ledger_extra.end());
    ledger = StartReady(HOPBUDGET_DEMO_LEDGER, args);
    if (ledger == nullptr) return false;
    args = {"--port=0", "--ledger=" + ledger->address()};
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), orders_extra.begin(), orders_extra.end());
    orders = StartReady(HOPBUDGET_DEMO_ORDERS, args);
    if (orders == nullptr) return false;
    args = {"--port=0", "--orders=" + orders->address()};
    args.insert(args.end(), extra.begin(), extra.end());
    gateway = StartReady(HOPBUDGET_DEMO_GATEWAY, args);
    return gateway != nullptr;
  }
};

// Callers on their own threads, each placing orders one after another
// until stopped; every answer's code is counted.
class Load {
 public:
  Load(std::shared_ptr<grpc::Channel> channel, int callers) : stub_(Gateway::NewStub(channel)) {
    for (int i = 0; i < callers; ++i) {
      threads_.emplace_back([this, i] { Run(i); });
    }
  }
  ~Load() { Stop(); }

  void Stop() {
    stop_ = true;
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }
  std::map<grpc::StatusCode, int> Codes() {
    absl::MutexLock lock(&mu_);
    return codes_;
  }
  std::string Messages() {
    absl::MutexLock lock(&mu_);
    return messages_;
  }
  int Count(grpc::StatusCode code) { return Codes()[code]; }

 private:
  void Run(int caller) {
    for (int n = 0; !stop_; ++n) {
      grpc::ClientContext ctx;
      ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
      OrderResult r;
      grpc::Status s = stub_->PlaceOrder(&ctx, MakeOrder(absl::StrCat("c", caller, "-", n)), &r);
      {
        absl::MutexLock lock(&mu_);
        ++codes_[s.error_code()];
        if (s.error_code() != grpc::StatusCode::OK &&
            s.error_code() != grpc::StatusCode::UNAVAILABLE && messages_.size() < 2000) {
          absl::StrAppend(&messages_, s.error_code(), " ", s.error_message(), "\n");
        }
      }
      // A chain that is down answers at once: do not spin.
      if (!s.ok()) absl::SleepFor(absl::Milliseconds(2));
    }
  }

  std::unique_ptr<Gateway::Stub> stub_;
  std::atomic<bool> stop_{false};
  absl::Mutex mu_;
  std::map<grpc::StatusCode, int> codes_ ABSL_GUARDED_BY(mu_);
  std::string messages_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

// Waits until the load has seen `n` answers with `code`.
bool WaitForAnswers(Load& load, grpc::StatusCode code, int n, absl::Duration timeout) {
  return hopbudget::testing::Eventually([&] { return load.Count(code) >= n; }, timeout);
}

// Runs `command` (stderr into `err_file` when given, else merged into
// stdout): exit status and stdout.
std::pair<int, std::string> RunCommand(const std::string& command,
                                       const std::string& err_file = "") {
  std::string out;
  FILE* f = popen((command + (err_file.empty() ? " 2>&1" : " 2>" + err_file)).c_str(), "r");
  if (f == nullptr) return {-1, ""};
  char buf[512];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  const int status = pclose(f);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// chainctl faults: a fault the hop cannot inject is refused by the hop
// (Admin SetFaults), and chainctl exits 2 saying so; the hop's faults stay
// as they were. The ledger takes it.
TEST(ChainctlTest, AFaultTheHopCannotInjectIsRefusedWithExitTwo) {
  Chain chain;
  ASSERT_TRUE(chain.Start({}));
  const std::string faults = absl::StrCat(HOPBUDGET_CHAINCTL, " faults --admin=");
  for (ChildProcess* p : {chain.gateway.get(), chain.orders.get()}) {
    auto [status, out] = RunCommand(faults + p->address() + " --slow-commit=1s");
    EXPECT_EQ(status, 2) << out;
    EXPECT_THAT(out, HasSubstr("cannot inject slow-commit (1s): only the ledger commits"));
    // Nothing changed there.
    auto [get_status, now] = RunCommand(faults + p->address());
    EXPECT_EQ(get_status, 0) << now;
    EXPECT_THAT(now, HasSubstr("slow_commit_ms=0"));
  }
  auto [status, out] = RunCommand(faults + chain.ledger->address() + " --slow-commit=1s");
  EXPECT_EQ(status, 0) << out;
  EXPECT_THAT(out, HasSubstr("slow_commit_ms=1000"));
}

// chainctl faults --latency: the hop reads the spec (chainctl holds no
// copy of the services' fault parser), refuses a bad one naming it, and
// chainctl exits 2 with its answer; a good one is taken.
TEST(ChainctlTest, ABadLatencySpecIsRefusedByTheHopWithExitTwo) {
  Chain chain;
  ASSERT_TRUE(chain.Start({}));
  const std::string faults =
      absl::StrCat(HOPBUDGET_CHAINCTL, " faults --admin=", chain.gateway->address());
  auto [status, out] = RunCommand(faults + " --latency=uniform:9ms-1ms");
  EXPECT_EQ(status, 2) << out;
  EXPECT_THAT(out, HasSubstr("uniform:9ms-1ms")) << out;
  auto [get_status, now] = RunCommand(faults);
  EXPECT_EQ(get_status, 0) << now;
  EXPECT_THAT(now, HasSubstr("latency=none")) << now;
  auto [good_status, good] = RunCommand(faults + " --latency=fixed:1ms");
  EXPECT_EQ(good_status, 0) << good;
  EXPECT_THAT(good, HasSubstr("latency=fixed:1ms")) << good;
}

// chainctl stats --json: one JSON document, on stdout with - (and nothing
// else there), or in a file.
TEST(ChainctlTest, StatsAsJsonOnStdoutOrInAFile) {
  Chain chain;
  ASSERT_TRUE(chain.Start({}));
  const std::string admin = absl::StrCat(chain.gateway->address(), ",", chain.orders->address(),
                                         ",", chain.ledger->address());
  const std::string stats = absl::StrCat(HOPBUDGET_CHAINCTL, " stats --admin=", admin);
  const std::string dir = TempDir();
  auto [status, out] = RunCommand(stats + " --json -", dir + "/stderr");
  EXPECT_EQ(status, 0) << out << ReadFile(dir + "/stderr");
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out.front(), '{') << out;
  EXPECT_EQ(out.substr(out.size() - 2), "}\n") << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  for (const char* hop : {"gateway", "orders", "ledger"}) {
    EXPECT_THAT(out, HasSubstr(absl::StrCat("\"ok\":true,\"hop\":\"", hop,
                                            "\",\"mode\":\"hopbudget\",\"calls\":0,")));
  }
  EXPECT_THAT(out, HasSubstr("\"faults\":{\"latency\":\"none\",\"error_rate\":0,"));
  // --json alone is stdout too.
  auto [alone_status, alone] = RunCommand(stats + " --json", dir + "/stderr");
  EXPECT_EQ(alone_status, 0);
  EXPECT_EQ(alone.front(), '{') << alone;

  const std::string file = dir + "/stats.json";
  auto [file_status, table] = RunCommand(stats + " --json=" + file);
  EXPECT_EQ(file_status, 0) << table;
  EXPECT_THAT(table, HasSubstr("ledger (hopbudget): calls 0"));  // the table still on stdout
  EXPECT_EQ(ReadFile(file).front(), '{');
  // A path that cannot be written is refused before any call.
  auto [bad_status, bad] = RunCommand(stats + " --json=/nonexistent-dir/stats.json");
  EXPECT_EQ(bad_status, 2) << bad;
  EXPECT_THAT(bad, HasSubstr("--json=/nonexistent-dir/stats.json: cannot write it"));
}

TEST(ShutdownTest, TheWholeChainStoppedUnderLoadAnswersNoCallCancelled) {
  Chain chain;
  ASSERT_TRUE(chain.Start({"--latency=fixed:5ms"}));
  auto channel = grpc::CreateCustomChannel(
      chain.gateway->address(), grpc::InsecureChannelCredentials(), DownstreamChannelArguments());
  Load load(channel, 16);
  ASSERT_TRUE(WaitForAnswers(load, grpc::StatusCode::OK, 200, kStart));
  for (ChildProcess* p : {chain.gateway.get(), chain.orders.get(), chain.ledger.get()}) {
    p->Signal(SIGTERM);
  }
  const absl::Time stopped = absl::Now();
  for (ChildProcess* p : {chain.gateway.get(), chain.orders.get(), chain.ledger.get()}) {
    EXPECT_EQ(ExitStatusOf(*p), 0) << p->Stderr();
    std::cerr << "exited after " << absl::Now() - stopped << ": " << p->Stderr() << "\n";
  }
  load.Stop();
  const std::map<grpc::StatusCode, int> codes = load.Codes();
  std::string histogram;
  for (const auto& [code, n] : codes) absl::StrAppend(&histogram, " ", code, ":", n);
  std::cerr << "answers by code:" << histogram << "\n";
  // The client never cancels: a CANCELLED is the server's shutdown talking.
  EXPECT_EQ(load.Count(grpc::StatusCode::CANCELLED), 0) << histogram << "\n" << load.Messages();
  EXPECT_GT(load.Count(grpc::StatusCode::UNAVAILABLE), 0) << histogram;
}

TEST(KeepaliveTest, AChannelDropsAPeerThatStoppedAnswering) {
  // A stopped process: its kernel still acknowledges every byte, so only an
  // unanswered HTTP/2 ping can tell. hopbudget's channel pings every 10 s
  // and gives 3 s for the answer (client.h); without keepalive the channel
  // stays READY, and a call waits for its deadline, forever.
  auto ledger = StartReady(HOPBUDGET_DEMO_LEDGER, {"--port=0", "--db=" + TempDir() + "/l.db"});
  ASSERT_NE(ledger, nullptr);
  ClientOptions options;
  options.hop = "test";
  auto channel = CreateChannel(ledger->address(), grpc::InsecureChannelCredentials(), options);
  ASSERT_TRUE(channel.ok());
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
    OrderResult r;
    ASSERT_TRUE(Ledger::NewStub(*channel)->Commit(&ctx, MakeOrder("k"), &r).ok());
  }
  ASSERT_EQ((*channel)->GetState(false), GRPC_CHANNEL_READY);
  ledger->Signal(SIGSTOP);
  const absl::Time stopped = absl::Now();
  const bool changed = (*channel)->WaitForStateChange(
      GRPC_CHANNEL_READY, absl::ToChronoTime(stopped + absl::Seconds(40)));
  const absl::Duration noticed = absl::Now() - stopped;
  ledger->Signal(SIGCONT);
  EXPECT_TRUE(changed) << "still READY 40 s after the peer stopped";
  // 10 s + 3 s at most, with room for a loaded machine; gRPC's own default
  // (no keepalive) never notices.
  EXPECT_LT(noticed, absl::Seconds(25));
  std::cerr << "a stopped peer was dropped after " << noticed << "\n";
}

TEST(ThreadBoundTest, CallsBeyondTheBoundAreRefusedAtOnceAndThreadsStayBounded) {
  // Every call hangs until its deadline: each holds a server thread.
  constexpr int kBound = 8;
  constexpr int kCalls = 40;
  auto ledger = StartReady(HOPBUDGET_DEMO_LEDGER, {"--port=0", "--db=" + TempDir() + "/l.db",
                                                   absl::StrCat("--max-threads=", kBound),
                                                   absl::StrCat("--hang-next=", kCalls)});
  ASSERT_NE(ledger, nullptr);
  const int threads_before = ledger->Threads();
  auto channel = grpc::CreateChannel(ledger->address(), grpc::InsecureChannelCredentials());
  ASSERT_TRUE(channel->WaitForConnected(absl::ToChronoTime(absl::Now() + absl::Seconds(20))));
  auto stub = Ledger::NewStub(channel);
  struct Call {
    grpc::ClientContext ctx;
    OrderResult reply;
    grpc::Status status;
    absl::Time ended;
  };
  std::vector<std::unique_ptr<Call>> calls;
  grpc::CompletionQueue cq;
  const absl::Time start = absl::Now();
  for (int i = 0; i < kCalls; ++i) {
    auto c = std::make_unique<Call>();
    c->ctx.set_deadline(absl::ToChronoTime(start + absl::Seconds(3)));
    auto rpc = stub->AsyncCommit(&c->ctx, MakeOrder(absl::StrCat("h", i)), &cq);
    rpc->Finish(&c->reply, &c->status, c.get());
    calls.push_back(std::move(c));
  }
  int peak_threads = 0;
  std::map<grpc::StatusCode, int> codes;
  absl::Duration slowest_refusal = absl::ZeroDuration();
  for (int i = 0; i < kCalls; ++i) {
    void* tag = nullptr;
    bool ok = false;
    ASSERT_TRUE(cq.Next(&tag, &ok));
    Call* c = static_cast<Call*>(tag);
    c->ended = absl::Now();
    ++codes[c->status.error_code()];
    if (c->status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      slowest_refusal = std::max(slowest_refusal, c->ended - start);
    }
    peak_threads = std::max(peak_threads, ledger->Threads());
  }
  std::string histogram;
  for (const auto& [code, n] : codes) absl::StrAppend(&histogram, " ", code, ":", n);
  std::cerr << "threads before " << threads_before << ", peak " << peak_threads
            << "; answers:" << histogram << "; slowest refusal " << slowest_refusal << "\n";
  EXPECT_GT(codes[grpc::StatusCode::RESOURCE_EXHAUSTED], 0) << histogram;
  EXPECT_LT(slowest_refusal, absl::Seconds(1)) << "a refusal waited for a thread";
  // Server threads are bounded by kBound; a few more may start lazily
  // elsewhere (gRPC's executor, the HTTP exporter). Measured: +8; without
  // the bound: +40, one per call.
  EXPECT_LE(peak_threads, threads_before + kBound + 8) << histogram;
  // The bound recovers once the hung calls' handlers have ended (a moment
  // after their callers saw the deadline): clear the hangs not used up,
  // then commit.
  const absl::Time give_up = absl::Now() + absl::Seconds(20);
  grpc::Status s;
  do {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    Faults none;
    s = Admin::NewStub(channel)->SetFaults(&ctx, SetFaultsRequest(), &none);
    if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      absl::SleepFor(absl::Milliseconds(10));
    }
  } while (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED && absl::Now() < give_up);
  ASSERT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
  OrderResult r;
  s = stub->Commit(&ctx, MakeOrder("after"), &r);
  EXPECT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
  cq.Shutdown();
  void* tag;
  bool ok;
  while (cq.Next(&tag, &ok)) {
  }
}

// --max-concurrent-streams: calls beyond the bound wait in the caller's own
// transport and never reach the server. The first kBound calls to arrive
// hang (whichever they are); with the bound every other call waits behind
// them and its deadline passes there; without it (the control) every other
// call is served.
TEST(StreamBoundTest, CallsBeyondTheBoundWaitInTheCallersTransport) {
  constexpr int kBound = 4;
  constexpr int kCalls = 10;
  for (const bool bounded : {true, false}) {
    SCOPED_TRACE(bounded ? "bounded" : "control");
    std::vector<std::string> args = {"--port=0",
                                     "--db=" + TempDir() + (bounded ? "/b.db" : "/c.db"),
                                     absl::StrCat("--hang-next=", kBound)};
    if (bounded) args.push_back(absl::StrCat("--max-concurrent-streams=", kBound));
    auto ledger = StartReady(HOPBUDGET_DEMO_LEDGER, args);
    ASSERT_NE(ledger, nullptr);
    auto channel = grpc::CreateChannel(ledger->address(), grpc::InsecureChannelCredentials());
    ASSERT_TRUE(channel->WaitForConnected(absl::ToChronoTime(absl::Now() + absl::Seconds(20))));
    auto stub = Ledger::NewStub(channel);
    struct Call {
      grpc::ClientContext ctx;
      OrderResult reply;
      grpc::Status status;
    };
    std::vector<std::unique_ptr<Call>> calls;
    grpc::CompletionQueue cq;
    const absl::Time deadline = absl::Now() + absl::Seconds(1);
    for (int i = 0; i < kCalls; ++i) {
      auto c = std::make_unique<Call>();
      c->ctx.set_deadline(absl::ToChronoTime(deadline));
      auto rpc = stub->AsyncCommit(&c->ctx, MakeOrder(absl::StrCat("s", bounded, "-", i)), &cq);
      rpc->Finish(&c->reply, &c->status, c.get());
      calls.push_back(std::move(c));
    }
    int ok = 0, deadline_exceeded = 0;
    for (int i = 0; i < kCalls; ++i) {
      void* tag = nullptr;
      bool got = false;
      ASSERT_TRUE(cq.Next(&tag, &got));
      const grpc::StatusCode code = static_cast<Call*>(tag)->status.error_code();
      if (code == grpc::StatusCode::OK) ++ok;
      if (code == grpc::StatusCode::DEADLINE_EXCEEDED) ++deadline_exceeded;
    }
    if (bounded) {
      EXPECT_EQ(ok, 0);
      EXPECT_EQ(deadline_exceeded, kCalls);
    } else {
      EXPECT_EQ(ok, kCalls - kBound);
      EXPECT_EQ(deadline_exceeded, kBound);
    }
    cq.Shutdown();
    void* tag;
    bool got;
    while (cq.Next(&tag, &got)) {
    }
  }
}

TEST(ThreadBoundTest, OrdersRetriesALedgerThatIsOutOfThreads) {
  // Each commit holds one of the ledger's few threads for 20 ms: of 6
  // concurrent orders some attempts are refused RESOURCE_EXHAUSTED ("Server
  // Threadpool Exhausted"), and orders retries them within the budget until
  // they find a thread. (Many more refusals at once would empty the retry
  // throttle's bucket, gRFC A6, and end in RESOURCE_EXHAUSTED: by design.)
  // The ledger runs in baseline mode, a sync service: hopbudget's ledger
  // commits on the callback API and holds no thread per call.
  Chain chain;
  ASSERT_TRUE(chain.Start({}, {"--max-threads=4", "--mode=baseline"}, {"--max-attempts=10"}));
  {
    grpc::ClientContext ctx;
    SetFaultsRequest req;
    req.mutable_faults()->set_latency("fixed:20ms");
    Faults set;
    ASSERT_TRUE(Admin::NewStub(grpc::CreateChannel(chain.ledger->address(),
                                                   grpc::InsecureChannelCredentials()))
                    ->SetFaults(&ctx, req, &set)
                    .ok());
  }
  auto stub = Orders::NewStub(
      grpc::CreateChannel(chain.orders->address(), grpc::InsecureChannelCredentials()));
  auto admin = Admin::NewStub(
      grpc::CreateChannel(chain.ledger->address(), grpc::InsecureChannelCredentials()));
  std::map<grpc::StatusCode, int> codes;
  Stats stats;
  // Bursts until one had a refusal that a retry got past (a loaded machine
  // may start the callers too far apart for the ledger to fill up).
  for (int burst = 0; burst < 50 && stats.retries_received() == 0; ++burst) {
    std::vector<std::thread> callers;
    absl::Mutex mu;
    for (int i = 0; i < 6; ++i) {
      callers.emplace_back([&, i] {
        grpc::ClientContext ctx;
        ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
        OrderResult r;
        grpc::Status s = stub->CreateOrder(&ctx, MakeOrder(absl::StrCat("o", burst, "-", i)), &r);
        absl::MutexLock lock(&mu);
        ++codes[s.error_code()];
      });
    }
    for (std::thread& t : callers) t.join();
    // The ledger's last handlers may still hold its few threads a moment.
    grpc::Status s;
    const absl::Time give_up = absl::Now() + absl::Seconds(20);
    do {
      grpc::ClientContext ctx;
      ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
      s = admin->GetStats(&ctx, GetStatsRequest(), &stats);
      if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
        absl::SleepFor(absl::Milliseconds(10));
      }
    } while (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED && absl::Now() < give_up);
    ASSERT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
  }
  std::string histogram;
  for (const auto& [code, n] : codes) absl::StrAppend(&histogram, " ", code, ":", n);
  std::cerr << "answers:" << histogram << "; retries at the ledger " << stats.retries_received()
            << "\n";
  EXPECT_GT(stats.retries_received(), 0) << histogram;
  for (const auto& [code, n] : codes) {
    EXPECT_TRUE(code == grpc::StatusCode::OK || code == grpc::StatusCode::RESOURCE_EXHAUSTED ||
                code == grpc::StatusCode::DEADLINE_EXCEEDED)
        << histogram;
  }
  EXPECT_GT(codes[grpc::StatusCode::OK], 0) << histogram;
}

}  // namespace
}  // namespace hopbudget::demo
