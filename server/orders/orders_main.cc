// Copyright hopbudget authors.
//
// orders: validates an order and commits it at the ledger, with retries.
//   hopbudget mode: a typed retry loop (hopbudget::RetryLoop) around the
//     generated Commit call, one real call per attempt: every attempt's
//     budget is derived from what is left of the request. CreateOrder runs
//     on the callback API (server/common/callback_call.h): no thread waits
//     for the ledger, a backoff or a ledger slot on a call's behalf.
//   baseline mode: the loop most code has: up to --baseline-attempts
//     attempts, each with the constant --baseline-timeout, whatever the
//     caller has left (the seeds' incident: an outer scope shorter than
//     attempts x timeout, so a retry after a timeout never runs in time).
//
// GetOrder reads a committed order from the ledger's read replicas
// (--ledger-replicas, default --ledger). Reads take turns: read n goes
// first to replica n mod N, in both modes.
//   hopbudget mode: hedged (hopbudget::Hedger; reads are idempotent): a
//     second attempt goes to the next replica once the first has been out
//     longer than the read's recent p95, at most 5 % extra load.
//   baseline mode: one attempt to that one replica, no hedge.
// --ledger-slots=N bounds orders' calls in flight towards the ledger
// (hopbudget::DownstreamSlots, hopbudget mode): a call waits for a slot
// inside its budget, and one that cannot get a slot in time fails fast
// with source slot-wait (once less than --ledger-slot-give-up, 50 ms, is
// left) instead of piling up on a slow ledger. One slot
// holds one logical call (a commit with its retries, a read with its hedge).
//
// WatchOrder relays the primary ledger's WatchOrder stream to its caller.
//   hopbudget mode: under a stream idle budget (--stream-idle, 300 ms):
//     a ledger silent that long is cut with DEADLINE_EXCEEDED, source idle,
//     at orders; shorter than the gateway's, so orders, the hop that sees
//     the silence, is the one that cuts and is named.
//   baseline mode: no idle budget: a silent ledger holds the stream until a
//     deadline ends it (the constant --baseline-timeout, or the caller's).
// A watch takes no ledger slot (--ledger-slots): it would hold it for its
// whole life and starve the commits.
//
//   orders --port=0 --ledger=127.0.0.1:PORT [--attempt-cap=300ms --max-attempts=3]
//          [--ledger-replicas=127.0.0.1:P1,127.0.0.1:P2] [--ledger-slots=32]
#include <atomic>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/cli/cli_flags.h"
#include "demo/demo.grpc.pb.h"
#include "hopbudget/advanced/hedge_grpc.h"
#include "hopbudget/advanced/retry_loop.h"
#include "hopbudget/advanced/slots_grpc.h"
#include "hopbudget/client.h"
#include "server/common/callback_call.h"
#include "server/common/demo_server.h"
#include "server/common/service_flag_defs.h"

HOPBUDGET_DEMO_DEFINE_COMMON_FLAGS("orders", absl::Seconds(2), absl::Milliseconds(300));
ABSL_FLAG(std::string, ledger, "", "ledger service HOST:PORT (required)");
ABSL_FLAG(std::string, ledger_replicas, "",
          "ledger replicas for GetOrder, HOST:PORT[,HOST:PORT] (1..3; default: --ledger); "
          "hopbudget mode hedges across them, baseline reads from the first");
ABSL_FLAG(double, hedge_extra_load, 0.05,
          "hopbudget mode: hedged reads per read at most, on average, (0, 1] (0.05: 5 % extra "
          "load)");
ABSL_FLAG(int, ledger_slots, 0,
          "hopbudget mode: calls in flight towards the ledger at most, 0..10000 "
          "(0 = unbounded); a call that cannot get a slot in its budget fails with "
          "source slot-wait");
ABSL_FLAG(absl::Duration, ledger_slot_give_up, absl::Milliseconds(50),
          "hopbudget mode, with --ledger-slots: a call still waiting for a ledger slot when "
          "less than this is left of its budget gives up (slot-wait): a ledger call with less "
          "time is not worth sending");
ABSL_FLAG(absl::Duration, stream_idle, absl::Milliseconds(300),
          "hopbudget mode: most silence allowed on the ledger's WatchOrder stream before "
          "orders cuts it (DEADLINE_EXCEEDED, source idle); shorter than the gateway's "
          "--stream-idle, as budgets nest (0 = no idle budget)");
ABSL_FLAG(int, max_attempts, 3,
          "hopbudget mode: attempts per commit (1..10); with --service-config, Ledger/Commit's "
          "retryPolicy instead");
ABSL_FLAG(int, baseline_attempts, 3, "baseline mode: attempts per commit (1..10)");
// Looser than gRFC A6's defaults (10, 0.1), so that retries keep running at
// the demo's fault rates (20 % errors would close the default bucket).
ABSL_FLAG(int, throttle_max_tokens, 20,
          "hopbudget mode: retry throttle bucket size, 1..1000 (gRFC A6); with "
          "--service-config, its retryThrottling instead");
ABSL_FLAG(double, throttle_token_ratio, 0.5,
          "hopbudget mode: tokens a success adds back, 0.001..1 (gRFC A6); with "
          "--service-config, its retryThrottling instead");

namespace hopbudget::demo {
namespace {

class OrdersService final : public Orders::Service {
 public:
  // What orders calls the ledger with. `retry`, `hedger`: hopbudget mode
  // only (nullptr in baseline mode); `slots`: nullptr when unbounded.
  struct Downstream {
    std::unique_ptr<Ledger::Stub> ledger;
    std::vector<std::unique_ptr<Ledger::Stub>> replicas;  // >= 1
    std::unique_ptr<RetryLoop> retry;
    std::unique_ptr<Hedger> hedger;
    std::unique_ptr<DownstreamSlots> slots;
  };

  OrdersService(DemoProcess& process, Downstream downstream, int baseline_attempts)
      : process_(process),
        ledger_(std::move(downstream.ledger)),
        replicas_(std::move(downstream.replicas)),
        retry_(std::move(downstream.retry)),
        hedger_(std::move(downstream.hedger)),
        slots_(std::move(downstream.slots)),
        baseline_attempts_(baseline_attempts) {
    if (process_.mode() == Mode::kHopbudget) {
      // CreateOrder, the hot path, on the callback API: no thread waits for
      // the ledger, nor for a retry's backoff or a ledger slot, on a call's
      // behalf (callback_call.h). The baseline stays a sync service.
      MarkMethodCallback(DemoMethodIndex("Orders", "CreateOrder"),
                         NewDemoCallHandler<CreateOrderCall, Order, OrderResult>(*this));
    }
  }

  grpc::Status GetOrder(grpc::ServerContext* ctx, const OrderKey* request,
                        OrderResult* reply) override {
    CallStart call = process_.Begin(*ctx);
    if (call.done) return call.status;
    if (grpc::Status bad = CheckOrderKey(request->key()); !bad.ok()) return bad;
    const size_t first = next_read_.fetch_add(1) % replicas_.size();
    if (process_.mode() == Mode::kBaseline) {
      std::unique_ptr<grpc::ClientContext> out = process_.outgoing().NewBaselineContext(*ctx, 0);
      process_.stats().CountRead(1);
      return replicas_[first]->GetOrder(out.get(), *request, reply);
    }
    return WithLedgerSlot(*ctx, [&] {
      OrderResult replies[3];  // one per attempt (HedgePolicy::max_attempts <= 3)
      HedgeResult r = hedger_->Call(
          LogicalCall::Of(*ctx),
          [&](int i, grpc::ClientContext* attempt, std::function<void(grpc::Status)> done) {
            process_.outgoing().PrepareCall(*ctx, *attempt);
            replicas_[(first + i) % replicas_.size()]->async()->GetOrder(
                attempt, request, &replies[i], std::move(done));
          });
      process_.stats().CountRead(r.sent);
      if (r.status.ok() && r.winner >= 0) *reply = replies[r.winner];
      return r.status;
    });
  }

  grpc::Status WatchOrder(grpc::ServerContext* ctx, const OrderKey* request,
                          grpc::ServerWriter<OrderStatus>* writer) override {
    CallStart call = process_.Begin(*ctx);
    if (call.done) return call.status;
    if (grpc::Status bad = CheckOrderKey(request->key()); !bad.ok()) return bad;
    // The idle budget is the ledger channel's (hopbudget mode), enforced by
    // hopbudget's client interceptor on its shared timer; the deadline what
    // is left of the request, not the 300 ms attempt cap of the commits.
    return process_.RelayWatchOrder(*ctx, *request, *writer, [&](grpc::ClientContext* out) {
      return ledger_->WatchOrder(out, *request);
    });
  }

  grpc::Status CreateOrder(grpc::ServerContext* ctx, const Order* request,
                           OrderResult* reply) override {
    CallStart call = process_.Begin(*ctx);
    if (call.done) return call.status;
    if (grpc::Status invalid = Validate(*request); !invalid.ok()) return invalid;

    grpc::Status status;
    if (process_.mode() == Mode::kHopbudget) {
      status = WithLedgerSlot(*ctx, [&] {
        return retry_->Call(LogicalCall::Of(*ctx), [&](grpc::ClientContext* attempt) {
          process_.outgoing().PrepareCall(*ctx, *attempt);
          return ledger_->Commit(attempt, *request, reply);
        });
      });
    } else {
      status = BaselineCommit(*ctx, *request, reply);
    }
    Log(*request, status);
    return status;
  }

 private:
  // CreateOrder in hopbudget mode: the sync handler's commit above, as a
  // chain of callbacks: a ledger slot (with --ledger-slots), then the retry
  // loop's attempts on the callback stub.
  class CreateOrderCall final : public DemoServiceCall<OrdersService, Order, OrderResult> {
   public:
    CreateOrderCall(OrdersService& service, grpc::CallbackServerContext* ctx, const Order* request,
                    OrderResult* reply)
        : DemoServiceCall(service, service.process_, ctx, request, reply) {}

   private:
    void Work() override {
      if (grpc::Status invalid = Validate(*request_); !invalid.ok()) {
        Answer(std::move(invalid));
        return;
      }
      if (service_.slots_ == nullptr) {
        Commit([this](grpc::Status status) { Done(std::move(status)); });
        return;
      }
      // The slot's attempt runs here, or later on the thread of the call
      // that hands its slot on; the slot holds its `on_done` (this call's
      // answer) until the attempt has returned.
      Track(service_.slots_->Start(
          LogicalCall::Of(*ctx()),
          [this](grpc::ClientContext*, std::function<void(grpc::Status)> done) {
            in_slot_.store(true);
            Commit(std::move(done));
          },
          [this](grpc::Status status) {
            // slot-wait, or a full queue
            if (!in_slot_.load()) process().stats().CountSlotRefusal();
            Done(std::move(status));
          }));
    }

    // The commit's retry loop; `done` runs once with its outcome. Tracked,
    // so that a cancel ends its backoff (an attempt in flight ends by itself:
    // its context is a child of this call's).
    void Commit(absl::AnyInvocable<void(grpc::Status)> done) {
      Track(service_.retry_->Start(
          LogicalCall::Of(*ctx()),
          [this](grpc::ClientContext* attempt, std::function<void(grpc::Status)> attempt_done) {
            process().outgoing().PrepareCall(*ctx(), *attempt);
            service_.ledger_->async()->Commit(attempt, request_, reply_, std::move(attempt_done));
          },
          std::move(done)));
    }

    void Done(grpc::Status status) {
      service_.Log(*request_, status);
      Answer(std::move(status));
    }

    std::atomic<bool> in_slot_{false};
  };

  void Log(const Order& order, const grpc::Status& status) const {
    if (process_.flags().verbose) {
      std::cerr << "orders: " << order.key() << " -> " << status.error_code() << " "
                << status.error_message() << "\n";
    }
  }

  // Runs `work` (a logical call to the ledger) holding one of the ledger's
  // slots, waited for inside the call's budget; unbounded without
  // --ledger-slots. The slot's own attempt context is not used: `work` makes
  // its attempts (retries, hedges) with contexts derived from the same
  // logical call, after the wait, so the wait is spent from their budget.
  template <typename Work>
  grpc::Status WithLedgerSlot(const grpc::ServerContext& ctx, Work work) {
    if (slots_ == nullptr) return work();
    bool ran = false;
    grpc::Status status = slots_->Call(LogicalCall::Of(ctx), [&](grpc::ClientContext*) {
      ran = true;
      return work();
    });
    if (!ran) process_.stats().CountSlotRefusal();  // slot-wait, or a full queue
    return status;
  }

  static grpc::Status Validate(const Order& order) {
    if (grpc::Status bad = CheckOrderKey(order.key()); !bad.ok()) return bad;
    if (order.items_size() == 0) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "order has no items");
    }
    for (const Item& item : order.items()) {
      if (item.sku().empty() || item.quantity() <= 0) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            absl::StrCat("bad item \"", item.sku(), "\" x", item.quantity()));
      }
    }
    return grpc::Status::OK;
  }

  // The retry loop of the seeds' incident, as typically written: constant
  // per-attempt timeout, stop when the caller is gone (the outer scope's
  // cancel), never looking at how much time is left.
  grpc::Status BaselineCommit(grpc::ServerContext& ctx, const Order& order, OrderResult* reply) {
    grpc::Status status;
    for (int attempt = 0; attempt < baseline_attempts_; ++attempt) {
      if (attempt > 0) {
        if (ctx.IsCancelled()) break;  // the outer scope fired: the loop ends here
        absl::SleepFor(absl::Milliseconds(10));
      }
      std::unique_ptr<grpc::ClientContext> out =
          process_.outgoing().NewBaselineContext(ctx, attempt);
      status = ledger_->Commit(out.get(), order, reply);
      if (status.ok() || (status.error_code() != grpc::StatusCode::UNAVAILABLE &&
                          status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED)) {
        break;
      }
    }
    return status;
  }

  DemoProcess& process_;
  std::unique_ptr<Ledger::Stub> ledger_;
  const std::vector<std::unique_ptr<Ledger::Stub>> replicas_;
  std::atomic<uint64_t> next_read_{0};  // whose turn it is to be read first
  const std::unique_ptr<RetryLoop> retry_;
  const std::unique_ptr<Hedger> hedger_;
  const std::unique_ptr<DownstreamSlots> slots_;
  const int baseline_attempts_;
};

int Main(int argc, char** argv) {
  BlockShutdownSignals();
  cli::ParseOrExit(argc, argv, "orders",
                   "orders: validates an order and commits it at the ledger, with "
                   "budget-aware retries (baseline: a naive loop).\n\n"
                   "  orders --ledger=HOST:PORT [--port=0] [--mode=hopbudget|baseline]");
  const std::string ledger_target = absl::GetFlag(FLAGS_ledger);
  const std::string replicas_flag = absl::GetFlag(FLAGS_ledger_replicas);
  const int ledger_slots = absl::GetFlag(FLAGS_ledger_slots);
  const double hedge_extra_load = absl::GetFlag(FLAGS_hedge_extra_load);
  const absl::Duration slot_give_up = absl::GetFlag(FLAGS_ledger_slot_give_up);
  const absl::Duration stream_idle = absl::GetFlag(FLAGS_stream_idle);
  const int max_attempts = absl::GetFlag(FLAGS_max_attempts);
  const int baseline_attempts = absl::GetFlag(FLAGS_baseline_attempts);
  const int throttle_max_tokens = absl::GetFlag(FLAGS_throttle_max_tokens);
  const double throttle_token_ratio = absl::GetFlag(FLAGS_throttle_token_ratio);
  CommonFlags common = CommonFlagsFromCommandLine();
  FaultConfig faults;
  cli::ExitIfBad("orders",
                 cli::FirstError({
                     cli::Required("ledger", ledger_target),
                     cli::InRange("ledger-slots", ledger_slots, 0, 10000),
                     cli::InRange("hedge-extra-load", hedge_extra_load, 0.001, 1.0),
                     cli::InRange("max-attempts", max_attempts, 1, 10),
                     cli::InRange("baseline-attempts", baseline_attempts, 1, 10),
                     cli::InRange("throttle-max-tokens", throttle_max_tokens, 1, 1000),
                     cli::InRange("throttle-token-ratio", throttle_token_ratio, 0.001, 1.0),
                     cli::NonNegative("stream-idle", stream_idle),
                 }));
  if (absl::Status t = ValidateTarget(ledger_target); !t.ok()) {
    cli::ExitIfBad("orders", absl::InvalidArgumentError(
                                 absl::StrCat("--ledger=", ledger_target, ": ", t.message())));
  }
  std::vector<std::string> replica_targets;
  if (replicas_flag.empty()) {
    replica_targets.push_back(ledger_target);
  } else {
    replica_targets = absl::StrSplit(replicas_flag, ',');
    if (replica_targets.size() > 3) {
      cli::ExitIfBad("orders", absl::InvalidArgumentError(absl::StrCat(
                                   "--ledger-replicas=", replicas_flag, ": ",
                                   replica_targets.size(), " replicas (1..3: one per attempt)")));
    }
    for (const std::string& t : replica_targets) {
      if (absl::Status v = ValidateTarget(t); !v.ok()) {
        cli::ExitIfBad("orders", absl::InvalidArgumentError(absl::StrCat(
                                     "--ledger-replicas=", replicas_flag, ": ", v.message())));
      }
    }
  }
  cli::ExitIfBad("orders", FinishCommonFlags(&common, &faults));
  cli::ExitIfBad("orders", CheckFaultsSupported(faults, FaultSupport(), common.name));
  DemoProcess process(common, faults);
  absl::StatusOr<const Hop*> hop = process.LoadHop();
  if (!hop.ok()) {
    std::cerr << "orders: " << hop.status().message() << "\n";
    return 2;
  }
  OrdersService::Downstream downstream;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<RetryLoop> retry;
  std::optional<RetryPolicy> retry_policy;
  if (common.mode == Mode::kHopbudget && *hop != nullptr) {
    // The commit's retries are the service config's: Ledger/Commit's
    // retryPolicy (none: one attempt) and retryThrottling.
    auto loop = RetryLoop::Create(**hop, "/hopbudget.demo.Ledger/Commit");
    if (!loop.ok()) {
      std::cerr << "orders: " << loop.status().message() << "\n";
      return 2;
    }
    retry = *std::move(loop);
    retry_policy = retry->options().retry;
  } else if (common.mode == Mode::kHopbudget) {
    RetryLoopOptions options;
    options.hop = common.name;
    options.method = "/hopbudget.demo.Ledger/Commit";
    options.budget = PolicyOf(common);
    options.retry.max_attempts = max_attempts;
    // RESOURCE_EXHAUSTED too: a ledger whose thread bound is reached refuses
    // the call before doing any work (and commits are idempotent by key),
    // so a jittered retry within the budget may find a thread free; the
    // throttle keeps a refusing ledger from a retry storm.
    options.retry.retryable_codes = {absl::StatusCode::kUnavailable,
                                     absl::StatusCode::kResourceExhausted};
    options.retry.initial_backoff = absl::Milliseconds(10);
    options.retry.max_backoff = absl::Milliseconds(100);
    options.throttle.max_tokens = throttle_max_tokens;
    options.throttle.token_ratio = throttle_token_ratio;
    retry_policy = options.retry;
    auto loop = RetryLoop::Create(options);
    if (!loop.ok()) {
      std::cerr << "orders: " << loop.status().message() << "\n";
      return 2;
    }
    retry = *std::move(loop);
  }
  if (common.mode == Mode::kHopbudget) {
    ClientOptions client;
    client.hop = common.name;
    if (common.fail_fast_without_backend) client.backend_wait = BackendWait::kFailFast;
    // The primary's channel carries the watches: their idle budget (the
    // replicas' channels carry unary reads only).
    ClientOptions primary = client;
    if (stream_idle > absl::ZeroDuration()) primary.stream_idle_budget = stream_idle;
    auto c = CreateChannel(ledger_target, grpc::InsecureChannelCredentials(), primary,
                           DownstreamChannelArguments());
    if (!c.ok()) {
      std::cerr << "orders: " << c.status().message() << "\n";
      return 2;
    }
    channel = *std::move(c);
    for (const std::string& t : replica_targets) {
      auto r = CreateChannel(t, grpc::InsecureChannelCredentials(), client,
                             DownstreamChannelArguments());
      if (!r.ok()) {
        std::cerr << "orders: " << r.status().message() << "\n";
        return 2;
      }
      downstream.replicas.push_back(Ledger::NewStub(*r));
    }
    // Reads are idempotent: hedge them after the read's recent p95 (a
    // fixed 50 ms until 32 latencies are known), at most 5 % extra load
    // (--hedge-extra-load).
    HedgerOptions hedge;
    hedge.hop = common.name;
    hedge.budget = PolicyOf(common);
    hedge.hedge.max_attempts = 2;
    hedge.hedge.quantile = 0.95;
    hedge.hedge.max_extra_load = hedge_extra_load;
    auto hedger = Hedger::Create(hedge);
    if (!hedger.ok()) {
      std::cerr << "orders: " << hedger.status().message() << "\n";
      return 2;
    }
    downstream.hedger = *std::move(hedger);
    if (ledger_slots > 0) {
      DownstreamSlotsOptions slot_options;
      slot_options.hop = common.name;
      slot_options.max_in_flight = ledger_slots;
      slot_options.budget = PolicyOf(common);
      // The give-up time is the deadline minus min_attempt_budget: waiting
      // until the last 2 ms would only race the caller's own deadline.
      slot_options.budget.min_attempt_budget = slot_give_up;
      auto slots = DownstreamSlots::Create(slot_options);
      if (!slots.ok()) {
        std::cerr << "orders: --ledger-slot-give-up=" << absl::FormatDuration(slot_give_up) << ": "
                  << slots.status().message() << "\nTry 'orders --help'.\n";
        return 2;
      }
      downstream.slots = *std::move(slots);
    }
  } else {
    channel = grpc::CreateCustomChannel(ledger_target, grpc::InsecureChannelCredentials(),
                                        DownstreamChannelArguments());
    for (const std::string& t : replica_targets) {
      downstream.replicas.push_back(Ledger::NewStub(grpc::CreateCustomChannel(
          t, grpc::InsecureChannelCredentials(), DownstreamChannelArguments())));
    }
  }
  if (retry_policy.has_value()) process.SetRetryPolicy(*retry_policy);
  downstream.ledger = Ledger::NewStub(channel);
  downstream.retry = std::move(retry);
  OrdersService service(process, std::move(downstream), baseline_attempts);
  return process.Serve({&service}, nullptr);
}

}  // namespace
}  // namespace hopbudget::demo

int main(int argc, char** argv) { return hopbudget::demo::Main(argc, argv); }
