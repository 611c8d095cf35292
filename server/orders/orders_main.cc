// Copyright hopbudget authors.
//
// orders: validates an order and commits it at the ledger, with retries.
//   hopbudget mode: a typed retry loop (hopbudget::RetryLoop) around the
//     generated Commit call, one real call per attempt: every attempt's
//     budget is derived from what is left of the request.
//   baseline mode: the loop most code has: up to --baseline-attempts
//     attempts, each with the constant --baseline-timeout, whatever the
//     caller has left (the seeds' incident: an outer scope shorter than
//     attempts x timeout, so a retry after a timeout never runs in time).
//
//   orders --port=0 --ledger=127.0.0.1:PORT [--attempt-cap=300ms --max-attempts=3]
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/cli/cli_flags.h"
#include "demo/demo.grpc.pb.h"
#include "hopbudget/client.h"
#include "hopbudget/retry_loop.h"
#include "server/common/demo_server.h"
#include "server/common/service_flag_defs.h"

HOPBUDGET_DEMO_DEFINE_COMMON_FLAGS("orders", absl::Seconds(2), absl::Milliseconds(300));
ABSL_FLAG(std::string, ledger, "", "ledger service HOST:PORT (required)");
ABSL_FLAG(int, max_attempts, 3, "hopbudget mode: attempts per commit (1..10)");
ABSL_FLAG(int, baseline_attempts, 3, "baseline mode: attempts per commit (1..10)");
// Looser than gRFC A6's defaults (10, 0.1), so that retries keep running at
// the demo's fault rates (20 % errors would close the default bucket).
ABSL_FLAG(int, throttle_max_tokens, 20,
          "hopbudget mode: retry throttle bucket size, 1..1000 (gRFC A6)");
ABSL_FLAG(double, throttle_token_ratio, 0.5,
          "hopbudget mode: tokens a success adds back, 0.001..1 (gRFC A6)");

namespace hopbudget::demo {
namespace {

class OrdersService final : public Orders::Service {
 public:
  // `retry`: hopbudget mode's loop (nullptr in baseline mode).
  OrdersService(DemoProcess& process, std::unique_ptr<Ledger::Stub> ledger,
                std::unique_ptr<RetryLoop> retry, int baseline_attempts)
      : process_(process),
        ledger_(std::move(ledger)),
        retry_(std::move(retry)),
        baseline_attempts_(baseline_attempts) {}

  grpc::Status CreateOrder(grpc::ServerContext* ctx, const Order* request,
                           OrderResult* reply) override {
    CallStart call = process_.Begin(*ctx);
    if (call.done) return call.status;
    if (grpc::Status invalid = Validate(*request); !invalid.ok()) return invalid;

    grpc::Status status;
    if (process_.mode() == Mode::kHopbudget) {
      status = retry_->Call(LogicalCall::Of(*ctx), [&](grpc::ClientContext* attempt) {
        process_.outgoing().ForwardDemoHeader(*ctx, *attempt);
        return ledger_->Commit(attempt, *request, reply);
      });
    } else {
      status = BaselineCommit(*ctx, *request, reply);
    }
    if (process_.flags().verbose) {
      std::cerr << "orders: " << request->key() << " -> " << status.error_code() << " "
                << status.error_message() << "\n";
    }
    return status;
  }

 private:
  static grpc::Status Validate(const Order& order) {
    if (order.key().empty() || order.key().size() > 128) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "order key must be 1..128 bytes");
    }
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
  const std::unique_ptr<RetryLoop> retry_;
  const int baseline_attempts_;
};

int Main(int argc, char** argv) {
  BlockShutdownSignals();
  cli::ParseOrExit(argc, argv, "orders",
                   "orders: validates an order and commits it at the ledger, with "
                   "budget-aware retries (baseline: a naive loop).\n\n"
                   "  orders --ledger=HOST:PORT [--port=0] [--mode=hopbudget|baseline]");
  const std::string ledger_target = absl::GetFlag(FLAGS_ledger);
  const int max_attempts = absl::GetFlag(FLAGS_max_attempts);
  const int baseline_attempts = absl::GetFlag(FLAGS_baseline_attempts);
  const int throttle_max_tokens = absl::GetFlag(FLAGS_throttle_max_tokens);
  const double throttle_token_ratio = absl::GetFlag(FLAGS_throttle_token_ratio);
  CommonFlags common = CommonFlagsFromCommandLine();
  FaultConfig faults;
  cli::ExitIfBad("orders",
                 cli::FirstError({
                     cli::Required("ledger", ledger_target),
                     cli::InRange("max-attempts", max_attempts, 1, 10),
                     cli::InRange("baseline-attempts", baseline_attempts, 1, 10),
                     cli::InRange("throttle-max-tokens", throttle_max_tokens, 1, 1000),
                     cli::InRange("throttle-token-ratio", throttle_token_ratio, 0.001, 1.0),
                 }));
  if (absl::Status t = ValidateTarget(ledger_target); !t.ok()) {
    cli::ExitIfBad("orders", absl::InvalidArgumentError(
                                 absl::StrCat("--ledger=", ledger_target, ": ", t.message())));
  }
  cli::ExitIfBad("orders", FinishCommonFlags(&common, &faults));
  cli::ExitIfBad("orders", CheckFaultsSupported(faults, FaultSupport(), common.name));
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<RetryLoop> retry;
  std::optional<RetryPolicy> retry_policy;
  if (common.mode == Mode::kHopbudget) {
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
    ClientOptions client;
    client.hop = common.name;
    auto c = CreateChannel(ledger_target, grpc::InsecureChannelCredentials(), client,
                           DownstreamChannelArguments());
    if (!c.ok()) {
      std::cerr << "orders: " << c.status().message() << "\n";
      return 2;
    }
    channel = *std::move(c);
  } else {
    channel = grpc::CreateCustomChannel(ledger_target, grpc::InsecureChannelCredentials(),
                                        DownstreamChannelArguments());
  }
  DemoProcess process(common, faults);
  if (retry_policy.has_value()) process.SetRetryPolicy(*retry_policy);
  OrdersService service(process, Ledger::NewStub(channel), std::move(retry), baseline_attempts);
  return process.Serve({&service}, nullptr);
}

}  // namespace
}  // namespace hopbudget::demo

int main(int argc, char** argv) { return hopbudget::demo::Main(argc, argv); }
