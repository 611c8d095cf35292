// Copyright hopbudget authors.
//
// The minimal drop-in (examples/minimal_server.cc, minimal_client.cc) run as
// a user runs it: two hopbudget_minimal_server processes on loopback port 0,
// a -> b, each read for its "listening on PORT" line, and
// hopbudget_minimal_client against a, checked by its exit status and what it
// prints: OK for a budget the chain meets; DEADLINE_EXCEEDED with the
// attribution naming the budget and the hop when it cannot.
#include <stdio.h>
#include <sys/wait.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "child_process.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hopbudget::demo {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// Bounds that only stop a hung test (ASan on a loaded 2-core machine).
constexpr absl::Duration kStart = absl::Seconds(60);

std::unique_ptr<ChildProcess> StartHop(const std::vector<std::string>& args) {
  auto p = ChildProcess::Spawn(HOPBUDGET_MINIMAL_SERVER, args);
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return nullptr;
  const absl::Status ready = (*p)->WaitReady(kStart);
  EXPECT_TRUE(ready.ok()) << ready;
  if (!ready.ok()) return nullptr;
  return *std::move(p);
}

struct ClientRun {
  int status = -1;     // the exit status
  std::string output;  // stdout, then stderr
};

// Runs the client to its end (its arguments need no shell quoting).
ClientRun RunClient(const std::vector<std::string>& args) {
  std::string command = HOPBUDGET_MINIMAL_CLIENT;
  for (const std::string& arg : args) absl::StrAppend(&command, " ", arg);
  absl::StrAppend(&command, " 2>&1");
  ClientRun run;
  FILE* out = popen(command.c_str(), "r");
  if (out == nullptr) return run;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), out)) > 0) run.output.append(buf, n);
  const int status = pclose(out);
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

// a -> b; b works `work` per call, with at most `cap` per request.
class MinimalChainTest : public ::testing::Test {
 protected:
  void StartChain(const std::string& work, const std::string& cap) {
    b_ = StartHop({"--port=0", "--hop=b", "--work=" + work, "--cap=" + cap});
    ASSERT_NE(b_, nullptr);
    a_ = StartHop({"--port=0", "--hop=a", "--next=" + b_->address()});
    ASSERT_NE(a_, nullptr);
  }
  ClientRun Call(const std::string& budget) {
    return RunClient({"--target=" + a_->address(), "--budget=" + budget});
  }

  std::unique_ptr<ChildProcess> b_;
  std::unique_ptr<ChildProcess> a_;
};

TEST_F(MinimalChainTest, AGenerousBudgetIsOk) {
  StartChain("20ms", "30s");
  const ClientRun run = Call("30s");
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_THAT(run.output, StartsWith("OK after "));
}

// The client's budget runs out while b works: b answers it, its work cut
// at its budget, or a, b's caller, when gRPC ended b's call at its deadline
// first (it answers for b then, bare; docs/deadline-sources.md), or, when
// neither answer is back before the client's own timer fires at the same
// instant (an ASan CI run, 2026-12-07), the client itself. Every deadline is
// the client's, so which hop reports it is a race; the attribution always
// names the client's budget and the hop where it was seen.
TEST_F(MinimalChainTest, AClientBudgetTheChainCannotMeetNamesItsHop) {
  StartChain("30s", "60s");
  const ClientRun run = Call("1s");
  EXPECT_EQ(run.status, 1) << run.output;
  EXPECT_THAT(run.output, StartsWith("DEADLINE_EXCEEDED after ")) << run.output;
  EXPECT_THAT(run.output, HasSubstr(": hopbudget/1: source=client hop=")) << run.output;
  EXPECT_THAT(
      run.output,
      ContainsRegex(
          "\nattribution: source=client hop=(a|b|minimal-client) budget=[^ ]+ elapsed=[^ ]+\n"))
      << run.output;
}

// b's own request cap (--cap) fires first: b is named, with its cap.
TEST_F(MinimalChainTest, AHopsRequestCapNamesThatHop) {
  StartChain("30s", "100ms");
  const ClientRun run = Call("30s");
  EXPECT_EQ(run.status, 1) << run.output;
  EXPECT_THAT(run.output, StartsWith("DEADLINE_EXCEEDED after ")) << run.output;
  EXPECT_THAT(run.output, HasSubstr("\nattribution: source=request hop=b budget=100ms elapsed="))
      << run.output;
}

TEST(MinimalServerTest, APortInUseIsRefused) {
  auto first = StartHop({"--port=0", "--hop=a"});
  ASSERT_NE(first, nullptr);
  auto second =
      ChildProcess::Spawn(HOPBUDGET_MINIMAL_SERVER, {"--port=" + std::to_string(first->port())});
  ASSERT_TRUE(second.ok()) << second.status();
  const absl::StatusOr<int> status = (*second)->WaitExit(kStart);
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(*status, 1);
  EXPECT_THAT((*second)->Stderr(),
              HasSubstr(absl::StrCat("cannot listen on 127.0.0.1:", first->port())));
}

}  // namespace
}  // namespace hopbudget::demo
