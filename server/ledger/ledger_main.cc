// Copyright hopbudget authors.
//
// ledger: commits orders to SQLite (WAL mode), exactly once per idempotency
// key, answering the original result for a repeated key.
//   hopbudget mode: the commit runs as shield-plus-bound work
//     (hopbudget::Shield): a caller that leaves does not abandon a commit,
//     and a commit held up (--slow-commit, a dead peer) is stopped at its
//     bound (the --service-config's shieldBound for Commit, else
//     --shield-bound) instead of running forever. Shutdown drains it.
//   baseline mode: the commit runs on the handler's thread and cannot be
//     interrupted: shielded, but without a bound.
//
// GetOrder answers a committed order by key, from the same table. A second
// ledger started with --replica on the same file opens it read-only (WAL
// lets it read beside the primary's writer), serves GetOrder only and
// refuses Commit with FAILED_PRECONDITION: orders hedges its reads across
// the two.
//
// WatchOrder streams the state of one order's row (PENDING or COMMITTED):
// a message when the watch starts, then one every --watch-interval, until
// the call ends (its deadline or its caller's cancel); the `silence` fault
// (--silence, chainctl faults --silence) stops the messages but keeps the
// stream open, the silence a relaying hop's stream idle budget is for.
//
//   ledger --port=0 --db=/tmp/ledger.db [--shield-bound=2s --slow-commit=5s]
//   ledger --port=0 --db=/tmp/ledger.db --replica
#include <atomic>
#include <deque>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "client/cli/cli_flags.h"
#include "demo/demo.grpc.pb.h"
#include "hopbudget/advanced/shield.h"
#include "hopbudget/advanced/shield_grpc.h"
#include "hopbudget/hop.h"
#include "hopbudget/server.h"
#include "server/common/callback_call.h"
#include "server/common/demo_server.h"
#include "server/common/service_flag_defs.h"

HOPBUDGET_DEMO_DEFINE_COMMON_FLAGS("ledger", absl::Seconds(5), absl::ZeroDuration());
ABSL_FLAG(std::string, db, "", "SQLite database file (required; created if missing)");
ABSL_FLAG(bool, replica, false,
          "a read replica: opens --db read-only (a primary ledger must have made it), "
          "serves GetOrder and refuses Commit");
ABSL_FLAG(absl::Duration, shield_bound, absl::Seconds(2),
          "hopbudget mode: most time one commit may take (a --service-config's shieldBound "
          "for Ledger/Commit wins)");
ABSL_FLAG(int, shield_threads, 8, "threads that run commits, 1..256");
ABSL_FLAG(int, shield_max_in_flight, 256,
          "commits in flight at most, 1..100000 (more are refused)");
ABSL_FLAG(absl::Duration, watch_interval, absl::Milliseconds(100),
          "WatchOrder: time between two messages of a watch (> 0)");
#include "server/common/ledger_store.h"

namespace hopbudget::demo {
namespace {

std::string ItemsText(const Order& order) {
  std::string out;
  for (const Item& item : order.items()) {
    absl::StrAppend(&out, out.empty() ? "" : ", ", item.sku(), " x", item.quantity());
  }
  return out;
}

void FillReply(const CommitResult& r, const std::string& key, OrderResult* reply) {
  reply->set_order_id(r.order_id);
  reply->set_key(key);
  reply->set_replayed(r.replayed);
  reply->set_committed_unix_us(absl::ToUnixMicros(r.committed));
}

class LedgerService final : public Ledger::Service {
 public:
  LedgerService(DemoProcess& process, LedgerStore& store, Shield& shield, absl::Duration bound,
                absl::Duration watch_interval)
      : process_(process),
        store_(store),
        shield_(shield),
        bound_(bound),
        watch_interval_(watch_interval),
        reaper_([this] { Reap(); }) {
    if (process_.mode() == Mode::kHopbudget) {
      // Commit, the hot path, on the callback API: no handler thread waits
      // (the injected latency, the shielded commit) on a call's behalf
      // (callback_call.h). The baseline stays a sync service.
      MarkMethodCallback(DemoMethodIndex("Ledger", "Commit"),
                         NewDemoCallHandler<CommitCall, Order, OrderResult>(*this));
    }
  }

  ~LedgerService() override {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    reaper_.join();
  }

  grpc::Status GetOrder(grpc::ServerContext* ctx, const OrderKey* request,
                        OrderResult* reply) override {
    CallStart call = process_.Begin(*ctx);
    if (call.done) return call.status;
    if (grpc::Status bad = CheckOrderKey(request->key()); !bad.ok()) return bad;
    absl::StatusOr<CommitResult> r = store_.Get(request->key());
    if (!r.ok()) return ToGrpcStatus(r.status());
    FillReply(*r, request->key(), reply);
    return grpc::Status::OK;
  }

  // One handler thread per watch (the sync API), asleep between messages;
  // it ends when the call does. The same in both modes: what differs is how
  // the hops above relay it (their stream idle budget, hopbudget mode).
  grpc::Status WatchOrder(grpc::ServerContext* ctx, const OrderKey* request,
                          grpc::ServerWriter<OrderStatus>* writer) override {
    CallStart call = process_.Begin(*ctx);
    if (call.done) return call.status;
    if (grpc::Status bad = CheckOrderKey(request->key()); !bad.ok()) return bad;
    bool said_silent = false;
    int64_t seq = 0;  // of the messages sent: a silence skips no number
    while (true) {
      if (process_.draining()) {
        return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                            absl::StrCat(process_.flags().name, " is shutting down"));
      }
      // Read at every message: a fault set while the watch runs applies at once.
      if (process_.faults().config().silence) {
        if (!said_silent && process_.flags().verbose) {
          std::cerr << process_.flags().name << ": watch of " << request->key() << " is silent\n";
        }
        said_silent = true;
      } else {
        OrderStatus status;
        status.set_key(request->key());
        status.set_seq(seq++);
        absl::StatusOr<CommitResult> r = store_.Get(request->key());
        if (r.ok()) {
          status.set_state(OrderStatus::COMMITTED);
          FillReply(*r, request->key(), status.mutable_result());
        } else if (absl::IsNotFound(r.status())) {
          status.set_state(OrderStatus::PENDING);
        } else {
          return ToGrpcStatus(r.status());
        }
        status.set_sent_unix_us(absl::ToUnixMicros(absl::Now()));
        if (!writer->Write(status)) return grpc::Status::CANCELLED;  // the caller left
      }
      if (!DemoProcess::SleepUnlessCancelled(*ctx, watch_interval_)) {
        return DemoProcess::StoppedStatus(*ctx);
      }
    }
  }

  grpc::Status Commit(grpc::ServerContext* ctx, const Order* request, OrderResult* reply) override {
    CallStart call = process_.Begin(*ctx);
    if (call.done) return call.status;
    if (grpc::Status refused = CheckCommit(*request); !refused.ok()) return refused;
    if (process_.mode() == Mode::kBaseline) {
      // Shielded without a bound: nothing can stop it, whatever the caller does.
      const absl::Duration slow = process_.faults().config().slow_commit;
      if (slow > absl::ZeroDuration()) absl::SleepFor(slow);
      absl::StatusOr<CommitResult> r =
          store_.Commit(request->key(), ItemsText(*request), absl::Now());
      if (!r.ok()) return ToGrpcStatus(r.status());
      process_.stats().CountCommit(r->replayed);
      FillReply(*r, request->key(), reply);
      return grpc::Status::OK;
    }
    ShieldedCommit commit = StartShieldedCommit(*ctx, *request, call.work);
    if (!commit.handle.ok()) return ToGrpcStatus(commit.handle.status());
    grpc::Status status = AwaitShielded(*ctx, *commit.handle);
    if (status.ok()) {
      commit.Fill(request->key(), reply);
    } else if (!commit.handle->done()) {
      Adopt(*commit.handle);  // the caller left; the commit goes on and someone reads its outcome
    }
    return status;
  }

 private:
  struct Slot {
    absl::Mutex mu;
    CommitResult result;
  };

  // Commit in hopbudget mode: the sync handler's shielded commit, answered
  // from the shield's OnDone instead of a thread that waits for it.
  class CommitCall final : public DemoServiceCall<LedgerService, Order, OrderResult> {
   public:
    CommitCall(LedgerService& service, grpc::CallbackServerContext* ctx, const Order* request,
               OrderResult* reply)
        : DemoServiceCall(service, service.process_, ctx, request, reply),
          waiter_(std::make_shared<Waiter>()) {
      waiter_->call = this;
    }

   private:
    // Who answers: the commit's end or the call's cancel, whichever takes
    // `call` first. Shared with the shield's OnDone, which may run after
    // the call is gone.
    struct Waiter {
      std::mutex mu;
      CommitCall* call = nullptr;           // nullptr once taken
      absl::optional<ShieldHandle> handle;  // once the commit started
    };

    void Work() override {
      if (grpc::Status refused = service_.CheckCommit(*request_); !refused.ok()) {
        Answer(std::move(refused));
        return;
      }
      ShieldedCommit commit = service_.StartShieldedCommit(*ctx(), *request_, work());
      if (!commit.handle.ok()) {
        Answer(ToGrpcStatus(commit.handle.status()));
        return;
      }
      bool cancelled = false;
      {
        std::lock_guard<std::mutex> lock(waiter_->mu);
        waiter_->handle = *commit.handle;
        cancelled = waiter_->call == nullptr;
      }
      if (cancelled) {
        service_.Adopt(*commit.handle);  // CancelWork() answered before the handle was known
        return;
      }
      commit.handle->OnDone([waiter = waiter_, slot = commit.slot, joined = commit.joined,
                             key = request_->key(), reply = reply_](const ShieldRecord& r) {
        CommitCall* self = nullptr;
        {
          std::lock_guard<std::mutex> lock(waiter->mu);
          std::swap(self, waiter->call);
        }
        if (self == nullptr) return false;  // the call ended first; the reaper reads it
        grpc::Status status = StatusOfShieldRecord(r, *self->ctx());
        if (status.ok()) FillFrom(*slot, joined, key, reply);
        self->Answer(std::move(status));
        return true;
      });
    }

    // The caller left: answer now; the commit goes on and the reaper reads
    // its outcome.
    void CancelWork() override {
      CommitCall* self = nullptr;
      absl::optional<ShieldHandle> handle;
      {
        std::lock_guard<std::mutex> lock(waiter_->mu);
        std::swap(self, waiter_->call);
        handle = waiter_->handle;
      }
      if (self == nullptr) return;
      if (handle.has_value()) service_.Adopt(*handle);
      Answer(StatusWhenShieldCallerLeft(*ctx()));
    }

    const std::shared_ptr<Waiter> waiter_;
  };

  // A commit running under the shield, or the one this call joined.
  struct ShieldedCommit {
    absl::StatusOr<ShieldHandle> handle;  // not ok: refused (at capacity, draining)
    std::shared_ptr<Slot> slot;           // where the commit leaves its result
    bool joined = false;                  // a retry joined a commit in flight

    // The reply of a commit that ended OK.
    void Fill(const std::string& key, OrderResult* reply) const {
      FillFrom(*slot, joined, key, reply);
    }
  };

  static void FillFrom(Slot& slot, bool joined, const std::string& key, OrderResult* reply) {
    absl::MutexLock lock(&slot.mu);
    FillReply(slot.result, key, reply);
    if (joined) reply->set_replayed(true);  // this call's answer is the earlier one's
  }

  // A commit this ledger refuses: it is a read replica, or the key is bad.
  grpc::Status CheckCommit(const Order& request) const {
    if (store_.access() == StoreAccess::kReadOnly) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "this ledger is a read replica (--replica): it serves GetOrder only; "
                          "commit at the primary ledger");
    }
    return CheckOrderKey(request.key());
  }

  // Starts the commit of `request` under the shield (hopbudget mode).
  // One shielded commit per key at a time: a retry (or a duplicate) that
  // arrives while its key's commit still runs joins it, and answers with
  // its result, instead of starting a second commit that would only wait
  // on the first (Shield::RunOnce).
  ShieldedCommit StartShieldedCommit(const grpc::ServerContextBase& ctx, const Order& request,
                                     std::shared_ptr<DeadlineAccounting::Work> work) {
    const absl::Duration slow = process_.faults().config().slow_commit;
    ShieldedCommit c;
    c.slot = std::make_shared<Slot>();
    {
      absl::MutexLock lock(&slots_->mu);
      c.handle = shield_.RunOnce(
          request.key(), "commit", CommitBound(),
          // Captures what outlives the Shield (process, store), not `this`:
          // work the drain gave up on may still be returning when the service goes.
          [&process = process_, &store = store_, key = request.key(), items = ItemsText(request),
           slow, slot = c.slot, work = std::move(work)](ShieldContext& shielded) -> absl::Status {
            if (slow > absl::ZeroDuration()) {
              // A slow peer: wait, unless the bound (or a drain) asks us to stop.
              absl::Notification stop;
              const uint64_t id = shielded.AddStopCallback([&stop] { stop.Notify(); });
              const bool stopped = stop.WaitForNotificationWithTimeout(slow);
              shielded.RemoveStopCallback(id);
              if (stopped) {
                process.stats().CountCommitStopped();
                return absl::DeadlineExceededError("commit stopped before it wrote");
              }
            }
            absl::StatusOr<CommitResult> r = store.Commit(key, items, absl::Now());
            if (!r.ok()) return r.status();
            process.stats().CountCommit(r->replayed);
            absl::MutexLock lock(&slot->mu);
            slot->result = *r;
            return absl::OkStatus();
          },
          &c.joined);
      if (c.handle.ok()) {
        if (c.joined) {
          c.slot = slots_->by_key[request.key()];  // the running commit's
        } else {
          slots_->by_key[request.key()] = c.slot;
        }
      }
    }
    if (c.handle.ok() && !c.joined) {
      // Forget the slot with the commit (not an observation of its outcome).
      // Captures the slots, not `this`: it may run while the Shield drains.
      c.handle->OnDone([slots = slots_, key = request.key(), slot = c.slot](const ShieldRecord&) {
        absl::MutexLock lock(&slots->mu);
        auto it = slots->by_key.find(key);
        if (it != slots->by_key.end() && it->second == slot) slots->by_key.erase(it);
        return false;
      });
    }
    if (c.joined) {
      process_.stats().CountCommitJoined();
      ReportJoin(ctx);
    }
    return c;
  }

  // A retry joined a commit still in flight: the caller's attempt budget is
  // shorter than the shield's bound, so its retries can only wait for the
  // first commit. Said once (a policy problem, not a per-call event), with
  // the numbers; counted every time (commits_joined).
  // The commit's shieldBound in the service config in force (a Shield
  // made from the Hop, with --service-config), else --shield-bound.
  absl::Duration CommitBound() const {
    static const std::string* const kCommit =
        new std::string(absl::StrCat("/", Ledger::service_full_name(), "/Commit"));
    return shield_.BoundFor(*kCommit, bound_);
  }

  void ReportJoin(const grpc::ServerContextBase& ctx) {
    if (join_reported_.exchange(true)) return;
    const InboundBudget* budget = InboundBudget::Of(ctx);
    std::cerr << process_.flags().name << ": a retry joined a commit still in flight: the "
              << "caller's attempt budget ("
              << (budget != nullptr ? absl::FormatDuration(budget->budget_on_arrival())
                                    : std::string("unknown"))
              << " on arrival) is shorter than the shield bound ("
              << absl::FormatDuration(CommitBound())
              << "), so its retries can only wait for the first commit\n";
  }

  void Adopt(const ShieldHandle& handle) {
    absl::MutexLock lock(&mu_);
    adopted_.push_back(handle);
  }

  // One thread reads the outcome of every commit whose caller left (each
  // ends by its bound), so none goes unobserved.
  void Reap() {
    while (true) {
      absl::optional<ShieldHandle> next;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](LedgerService* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu_) {
              return s->stopping_ || !s->adopted_.empty();
            },
            this));
        if (adopted_.empty()) return;  // stopping, nothing left
        next = adopted_.front();
        adopted_.pop_front();
      }
      absl::optional<ShieldRecord> r = next->Wait();
      if (r.has_value() && process_.flags().verbose) {
        std::cerr << "ledger: commit whose caller left ended: " << ShieldOutcomeName(r->outcome)
                  << " " << r->status << "\n";
      }
    }
  }

  DemoProcess& process_;
  LedgerStore& store_;
  Shield& shield_;
  std::atomic<bool> join_reported_{false};
  // The result slot of the commit in flight for each key, for the retries
  // that join it.
  struct Slots {
    absl::Mutex mu;
    absl::flat_hash_map<std::string, std::shared_ptr<Slot>> by_key ABSL_GUARDED_BY(mu);
  };
  const std::shared_ptr<Slots> slots_ = std::make_shared<Slots>();
  const absl::Duration bound_;
  const absl::Duration watch_interval_;
  absl::Mutex mu_;
  std::deque<ShieldHandle> adopted_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread reaper_;
};

int Main(int argc, char** argv) {
  BlockShutdownSignals();
  cli::ParseOrExit(argc, argv, "ledger",
                   "ledger: commits orders to SQLite exactly once per idempotency key, "
                   "inside shield-plus-bound.\n\n"
                   "  ledger --db=FILE [--port=0] [--mode=hopbudget|baseline]");
  const std::string db_path = absl::GetFlag(FLAGS_db);
  const bool replica = absl::GetFlag(FLAGS_replica);
  const absl::Duration bound = absl::GetFlag(FLAGS_shield_bound);
  const int shield_threads = absl::GetFlag(FLAGS_shield_threads);
  const int shield_max_in_flight = absl::GetFlag(FLAGS_shield_max_in_flight);
  const absl::Duration watch_interval = absl::GetFlag(FLAGS_watch_interval);
  CommonFlags common = CommonFlagsFromCommandLine();
  FaultConfig faults;
  cli::ExitIfBad("ledger",
                 cli::FirstError({
                     cli::Required("db", db_path),
                     cli::Positive("shield-bound", bound),
                     cli::InRange("shield-threads", shield_threads, 1, 256),
                     cli::InRange("shield-max-in-flight", shield_max_in_flight, 1, 100000),
                     cli::Positive("watch-interval", watch_interval),
                 }));
  cli::ExitIfBad("ledger", FinishCommonFlags(&common, &faults));
  if (replica && faults.slow_commit > absl::ZeroDuration()) {
    cli::ExitIfBad("ledger", absl::InvalidArgumentError(
                                 "--slow-commit: a replica (--replica) does not commit"));
  }
  absl::StatusOr<std::unique_ptr<LedgerStore>> store =
      LedgerStore::Open(db_path, replica ? StoreAccess::kReadOnly : StoreAccess::kReadWrite);
  if (!store.ok()) {
    std::cerr << "ledger: " << store.status().message() << "\n";
    return 1;
  }
  std::cerr << "ledger: database " << db_path << ": schema version " << kSchemaVersion << " "
            << SchemaOutcomeName((*store)->schema_outcome())
            << (replica ? " (read replica: read-only)" : "") << "\n";
  DemoProcess process(common, faults, LedgerFaultSupport());
  absl::StatusOr<const Hop*> hop = process.LoadHop();
  if (!hop.ok()) {
    std::cerr << "ledger: " << hop.status().message() << "\n";
    return 2;
  }
  ShieldOptions shield_options;
  shield_options.threads = shield_threads;
  shield_options.max_in_flight = shield_max_in_flight;
  // With --service-config, made from the Hop: a commit's bound is the
  // file's shieldBound for Ledger/Commit when it sets one (a SIGHUP reload
  // reaches the next commit), --shield-bound otherwise. Destroyed before the
  // store and the process (which owns the Hop).
  std::unique_ptr<Shield> shield = *hop != nullptr ? std::make_unique<Shield>(**hop, shield_options)
                                                   : std::make_unique<Shield>(shield_options);
  LedgerService service(process, **store, *shield, bound, watch_interval);
  return process.Serve({&service}, shield.get());
}

}  // namespace
}  // namespace hopbudget::demo

int main(int argc, char** argv) { return hopbudget::demo::Main(argc, argv); }
