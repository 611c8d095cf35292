// Copyright hopbudget authors.
//
// scripted_server.h: a callback Relay server on 127.0.0.1 port 0, behind
// hopbudget's server interceptor, whose answer to its n-th call follows a
// script (answer now, after a delay, hang until cancelled, fail with a code,
// push back; any of them only once a condition holds). It waits on gRPC
// alarms, not on threads, and records when each
// call arrived and when each hanging or delayed call saw its cancel, so that
// tests can tell how fast a cancel reached the callee.
#ifndef HOPBUDGET_TESTS_SCRIPTED_SERVER_H_
#define HOPBUDGET_TESTS_SCRIPTED_SERVER_H_

#include <dirent.h>
#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "echo/relay.grpc.pb.h"
#include "hopbudget/client.h"
#include "relay_fixture.h"
#include "sync.h"

namespace hopbudget {
namespace testing {

struct Action {
  enum Kind { kOk, kDelay, kHang, kFail };
  Kind kind = kOk;
  absl::Duration delay;                          // kDelay
  grpc::StatusCode code = grpc::StatusCode::OK;  // kFail
  std::string pushback_ms;                       // kFail: grpc-retry-pushback-ms, if set
  // Set (When): the action starts only once ready() holds, asked every
  // millisecond; until then the call hangs (a cancel still ends it). For a
  // winner that must not answer before the losers have reached their
  // callees: a cancel that overtakes a call still on its way leaves the
  // callee nothing to cancel.
  std::function<bool()> ready;
  Action When(std::function<bool()> r) && {
    ready = std::move(r);
    return std::move(*this);
  }
  static Action Ok() { return Action(); }
  static Action After(absl::Duration d) {
    Action a;
    a.kind = kDelay;
    a.delay = d;
    return a;
  }
  static Action Hang() {
    Action a;
    a.kind = kHang;
    return a;
  }
  static Action Fail(grpc::StatusCode c, std::string pushback = "") {
    Action a;
    a.kind = kFail;
    a.code = c;
    a.pushback_ms = std::move(pushback);
    return a;
  }
};

class ScriptedServer {
 public:
  // `script(n)` is the action for the n-th call (0-based).
  ScriptedServer(std::string hop, std::function<Action(int)> script)
      : service_(this), script_(std::move(script)) {
    ServerOptions options;
    options.hop = std::move(hop);
    options.policy.hop_reserve = absl::Milliseconds(2);
    server_ = ServeBehindHopbudget(&service_, options, &address_);
  }
  ~ScriptedServer() {
    if (server_) server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  }

  const std::string& address() const { return address_; }
  int calls() const { return calls_.load(); }
  int in_flight() const { return in_flight_.load(); }
  int max_in_flight() const { return max_in_flight_.load(); }
  // Calls that saw their cancel (OnCancel) before they answered.
  int cancels() const {
    hopbudget::internal::MutexLock lock(&mu_);
    return static_cast<int>(cancel_times_.size());
  }
  std::vector<absl::Time> cancel_times() const {
    hopbudget::internal::MutexLock lock(&mu_);
    return cancel_times_;
  }
  std::vector<std::string> previous_attempts() const {
    hopbudget::internal::MutexLock lock(&mu_);
    return previous_attempts_;
  }
  bool WaitForCancels(int n, absl::Duration timeout) const {
    hopbudget::internal::MutexLock lock(&mu_);
    auto enough = [&] { return static_cast<int>(cancel_times_.size()) >= n; };
    return mu_.AwaitWithTimeout(hopbudget::internal::Condition(&enough), timeout);
  }
  bool WaitForCalls(int n, absl::Duration timeout) const {
    hopbudget::internal::MutexLock lock(&mu_);
    auto enough = [&] { return calls_.load() >= n; };
    return mu_.AwaitWithTimeout(hopbudget::internal::Condition(&enough), timeout);
  }

 private:
  class Reactor final : public grpc::ServerUnaryReactor {
   public:
    Reactor(ScriptedServer* server, grpc::CallbackServerContext* ctx, echo::RelayReply* reply,
            Action action)
        : server_(server), ctx_(ctx), reply_(reply), action_(std::move(action)) {}
    void Begin() {
      reply_->set_payload(server_->address_);
      if (action_.ready) {
        Poll(true);
        return;
      }
      Perform();
    }
    void OnCancel() override {
      std::vector<grpc::Alarm*> polls;
      {
        hopbudget::internal::MutexLock lock(&server_->mu_);
        if (answered_) return;
        server_->cancel_times_.push_back(absl::Now());
        for (auto& a : polls_) polls.push_back(a.get());
      }
      alarm_.Cancel();
      for (grpc::Alarm* a : polls) a->Cancel();
      Answer(grpc::Status::CANCELLED);
    }
    void OnDone() override { Unref(); }

   private:
    void Perform() {
      switch (action_.kind) {
        case Action::kOk:
          Answer(grpc::Status::OK);
          break;
        case Action::kFail:
          if (!action_.pushback_ms.empty()) {
            ctx_->AddTrailingMetadata("grpc-retry-pushback-ms", action_.pushback_ms);
          }
          Answer(grpc::Status(action_.code, "scripted failure"));
          break;
        case Action::kDelay:
          refs_.fetch_add(1);  // the alarm's callback runs even when cancelled
          alarm_.Set(absl::ToChronoTime(absl::Now() + action_.delay), [this](bool fired) {
            if (fired) Answer(grpc::Status::OK);
            Unref();
          });
          break;
        case Action::kHang:
          break;  // until OnCancel
      }
    }
    // Each poll on a fresh alarm (one that fired is not set again); the
    // reactor owns them all until it goes.
    void Poll(bool fired) {
      if (!fired) return;  // cancelled: OnCancel answers
      if (action_.ready()) {
        Perform();
        return;
      }
      grpc::Alarm* next;
      {
        hopbudget::internal::MutexLock lock(&server_->mu_);
        if (answered_) return;
        polls_.push_back(std::make_unique<grpc::Alarm>());
        next = polls_.back().get();
      }
      refs_.fetch_add(1);
      next->Set(absl::ToChronoTime(absl::Now() + absl::Milliseconds(1)), [this](bool f) {
        Poll(f);
        Unref();
      });
    }
    void Unref() {
      if (refs_.fetch_sub(1) == 1) delete this;
    }
    void Answer(grpc::Status s) {
      {
        hopbudget::internal::MutexLock lock(&server_->mu_);
        if (answered_) return;
        answered_ = true;
      }
      // In flight from the handler's start to its answer (OnDone comes
      // later, after the client may already have its answer).
      server_->in_flight_.fetch_sub(1);
      Finish(std::move(s));
    }
    ScriptedServer* const server_;
    grpc::CallbackServerContext* const ctx_;
    echo::RelayReply* const reply_;
    const Action action_;
    grpc::Alarm alarm_;
    std::vector<std::unique_ptr<grpc::Alarm>> polls_;  // guarded by server_->mu_
    bool answered_ = false;                            // guarded by server_->mu_
    std::atomic<int> refs_{1};
  };

  class Service final : public echo::Relay::CallbackService {
   public:
    explicit Service(ScriptedServer* server) : server_(server) {}
    grpc::ServerUnaryReactor* Call(grpc::CallbackServerContext* ctx, const echo::RelayRequest*,
                                   echo::RelayReply* reply) override {
      ScriptedServer& s = *server_;
      const int in = s.in_flight_.fetch_add(1) + 1;
      int seen = s.max_in_flight_.load();
      while (in > seen && !s.max_in_flight_.compare_exchange_weak(seen, in)) {
      }
      int n;
      {
        hopbudget::internal::MutexLock lock(&s.mu_);
        n = s.calls_.fetch_add(1);
        auto it = ctx->client_metadata().find("grpc-previous-rpc-attempts");
        s.previous_attempts_.push_back(it == ctx->client_metadata().end()
                                           ? ""
                                           : std::string(it->second.data(), it->second.size()));
      }
      auto* r = new Reactor(server_, ctx, reply, s.script_(n));
      r->Begin();
      return r;
    }

   private:
    ScriptedServer* const server_;
  };

  Service service_;
  std::function<Action(int)> script_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  std::atomic<int> calls_{0};
  std::atomic<int> in_flight_{0};
  std::atomic<int> max_in_flight_{0};
  mutable hopbudget::internal::Mutex mu_;
  std::vector<absl::Time> cancel_times_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> previous_attempts_ ABSL_GUARDED_BY(mu_);
};

// A stub for hop `hop` on a channel with hopbudget's client interceptor and
// gRPC core retries off (they would replace grpc-previous-rpc-attempts).
inline std::unique_ptr<echo::Relay::Stub> AttemptStub(const std::string& target,
                                                      const std::string& hop, Metrics* metrics) {
  ClientOptions client;
  client.hop = hop;
  client.metrics = metrics;
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  auto channel = CreateChannel(target, grpc::InsecureChannelCredentials(), client, args);
  EXPECT_TRUE(channel.ok()) << channel.status();
  return echo::Relay::NewStub(*channel);
}

// Threads of this process, from /proc/self/task.
inline int ThreadCount() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') ++n;
    }
    closedir(d);
  }
  return n;
}

}  // namespace testing
}  // namespace hopbudget

#endif  // HOPBUDGET_TESTS_SCRIPTED_SERVER_H_
