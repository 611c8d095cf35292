// Copyright hopbudget authors.
#include "chain.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <iostream>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "demo/client_deadline.h"
#include "hopbudget/advanced/budget.h"
#include "hopbudget/advanced/exposition.h"
#include "hopbudget/advanced/trace.h"
#include "hopbudget/client.h"
#include "stats_delta.h"

namespace hopbudget::chainctl {

std::shared_ptr<grpc::Channel> EdgeChannel(const std::string& target) {
  ClientOptions options;
  options.hop = "chainctl";
  // Watches the edge's health, as the hops watch each other's: a gateway
  // restarting says NOT_SERVING first (its lame duck), and this channel
  // holds its calls for the new process instead of sending them until the
  // old one's Shutdown() answers them CANCELLED (gRPC 1.51).
  grpc::ChannelArguments args;
  args.SetServiceConfigJSON(
      R"({"loadBalancingConfig":[{"round_robin":{}}],"healthCheckConfig":{"serviceName":""}})");
  auto channel = CreateChannel(target, grpc::InsecureChannelCredentials(), options, args);
  if (!channel.ok()) {  // only for invalid options, which are constant here
    std::cerr << "chainctl: " << channel.status() << "\n";
    return grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  }
  return *channel;
}

namespace {

// This process's CPU time so far (user + system).
absl::Duration ProcessCpu() {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return absl::ZeroDuration();
  return absl::DurationFromTimeval(u.ru_utime) + absl::DurationFromTimeval(u.ru_stime);
}

void Describe(OrderOutcome& o, grpc::ClientContext& ctx) {
  absl::optional<Attribution> a = AttributionOf(o.status);
  if (a.has_value()) {
    o.source = std::string(DeadlineSourceName(a->source));
    o.hop = a->hop;
    o.attribution =
        absl::StrCat("source=", o.source, " hop=", a->hop.empty() ? "?" : a->hop,
                     " budget=", FormatBudget(a->budget), " elapsed=", FormatBudget(a->elapsed));
  }
  BudgetTrace trace = TraceOf(ctx);
  if (!trace.hops.empty()) o.waterfall = FormatWaterfall(trace);
}

// `claimed` is what the demo header says the client deadline is (the real
// one unless a probe says otherwise).
void SetUpContext(grpc::ClientContext& ctx, absl::Time start, absl::Duration budget,
                  absl::optional<absl::Time> claimed = absl::nullopt) {
  const absl::Time deadline = start + budget;
  ctx.set_deadline(absl::ToChronoTime(deadline));
  ctx.AddMetadata(demo::kClientDeadlineHeader,
                  demo::FormatClientDeadline(claimed.value_or(deadline)));
}

}  // namespace

OrderOutcome PlaceOrder(demo::Gateway::Stub& stub, const demo::Order& order, absl::Duration budget,
                        absl::optional<absl::Duration> cancel_after) {
  OrderOutcome o;
  grpc::ClientContext ctx;
  const absl::Time start = absl::Now();
  SetUpContext(ctx, start, budget);
  // One order at a time (`order`, the scenarios): its waterfall is shown
  // whatever the outcome, so every hop is asked for its trace.
  RequestTrace(ctx);
  absl::Notification done;
  stub.async()->PlaceOrder(&ctx, &order, &o.result, [&](grpc::Status s) {
    o.status = std::move(s);
    o.latency = absl::Now() - start;
    done.Notify();
  });
  if (cancel_after.has_value() && !done.WaitForNotificationWithTimeout(*cancel_after)) {
    ctx.TryCancel();
  }
  done.WaitForNotification();
  Describe(o, ctx);
  return o;
}

WatchOutcome WatchOrder(
    demo::Gateway::Stub& stub, const std::string& key, absl::Duration budget,
    const std::function<void(const demo::OrderStatus&, absl::Duration)>& on_message) {
  WatchOutcome o;
  grpc::ClientContext ctx;
  const absl::Time start = absl::Now();
  SetUpContext(ctx, start, budget);
  demo::OrderKey request;
  request.set_key(key);
  std::unique_ptr<grpc::ClientReader<demo::OrderStatus>> reader = stub.WatchOrder(&ctx, request);
  absl::Time last = start;
  demo::OrderStatus message;
  while (reader->Read(&message)) {
    last = absl::Now();
    ++o.messages;
    on_message(message, last - start);
  }
  o.status = reader->Finish();
  const absl::Time end = absl::Now();
  o.latency = end - start;
  o.silence = end - last;
  if (absl::optional<Attribution> a = AttributionOf(o.status); a.has_value()) {
    o.source = std::string(DeadlineSourceName(a->source));
    o.hop = a->hop;
    o.attribution =
        absl::StrCat("source=", o.source, " hop=", a->hop.empty() ? "?" : a->hop,
                     " budget=", FormatBudget(a->budget), " elapsed=", FormatBudget(a->elapsed));
  }
  return o;
}

bool WatchLastedItsBudget(const WatchOutcome& o) {
  if (o.status.ok()) return true;
  return o.status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED &&
         (o.source == DeadlineSourceName(DeadlineSource::kClient) ||
          o.source == DeadlineSourceName(DeadlineSource::kRequest));
}

namespace {
grpc::Status AdminCall(
    const std::string& admin,
    const std::function<grpc::Status(demo::Admin::Stub&, grpc::ClientContext&)>& f) {
  auto stub = demo::Admin::NewStub(grpc::CreateChannel(admin, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  return f(*stub, ctx);
}

absl::Status ToStatus(const grpc::Status& s, const std::string& admin) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat("admin ", admin, ": ", s.error_message()));
}
}  // namespace

std::string FormatStatsJson(
    const std::vector<std::pair<std::string, absl::StatusOr<demo::Stats>>>& rows) {
  std::vector<std::string> out;
  for (const auto& [target, stats] : rows) {
    if (!stats.ok()) {
      out.push_back(absl::StrCat("{\"target\":", JsonString(target), ",\"ok\":false,\"error\":",
                                 JsonString(stats.status().ToString()), "}"));
      continue;
    }
    const demo::Stats& s = *stats;
    const demo::Faults& f = s.faults();
    out.push_back(absl::StrCat(
        "{\"target\":", JsonString(target), ",\"ok\":true,\"hop\":", JsonString(s.hop()),
        ",\"mode\":", JsonString(s.mode()), ",\"calls\":", s.calls(),
        ",\"calls_started_after_deadline\":", s.calls_started_after_deadline(),
        ",\"work_after_deadline_ms\":", absl::StrFormat("%.3f", s.work_after_deadline_ms()),
        ",\"retries_received\":", s.retries_received(), ",\"commits\":", s.commits(),
        ",\"replays\":", s.replays(), ",\"commits_stopped\":", s.commits_stopped(),
        ",\"in_flight\":", s.in_flight(), ",\"faults_injected\":", s.faults_injected(),
        ",\"reads\":", s.reads(), ",\"read_hedges\":", s.read_hedges(),
        ",\"slot_refusals\":", s.slot_refusals(), ",\"refused\":", s.refused(),
        ",\"cpu_us\":", s.cpu_us(), ",\"last_end_unix_us\":", s.last_end_unix_us(),
        ",\"faults\":{\"latency\":", JsonString(f.latency()), ",\"error_rate\":", f.error_rate(),
        ",\"hang_rate\":", f.hang_rate(), ",\"hang_next\":", f.hang_next(),
        ",\"slow_commit_ms\":", f.slow_commit_ms(), "}}"));
  }
  return absl::StrCat("{\"stats\":[", absl::StrJoin(out, ","), "]}\n");
}

absl::StatusOr<demo::Stats> GetStats(const std::string& admin, bool reset) {
  demo::Stats stats;
  grpc::Status s = AdminCall(admin, [&](demo::Admin::Stub& stub, grpc::ClientContext& ctx) {
    demo::GetStatsRequest req;
    return reset ? stub.ResetStats(&ctx, req, &stats) : stub.GetStats(&ctx, req, &stats);
  });
  if (!s.ok()) return ToStatus(s, admin);
  return stats;
}

absl::StatusOr<demo::Faults> SetFaults(const std::string& admin, const demo::Faults& faults) {
  demo::Faults out;
  grpc::Status s = AdminCall(admin, [&](demo::Admin::Stub& stub, grpc::ClientContext& ctx) {
    demo::SetFaultsRequest req;
    *req.mutable_faults() = faults;
    return stub.SetFaults(&ctx, req, &out);
  });
  if (!s.ok()) return ToStatus(s, admin);
  return out;
}

absl::StatusOr<demo::Faults> GetFaults(const std::string& admin) {
  demo::Faults out;
  grpc::Status s = AdminCall(admin, [&](demo::Admin::Stub& stub, grpc::ClientContext& ctx) {
    return stub.GetFaults(&ctx, demo::GetStatsRequest(), &out);
  });
  if (!s.ok()) return ToStatus(s, admin);
  return out;
}

namespace {

// Shared by the callbacks of one load run.
struct LoadState {
  absl::Mutex mu;
  SummaryBuilder builder ABSL_GUARDED_BY(mu);
  int64_t in_flight ABSL_GUARDED_BY(mu) = 0;
  int64_t done ABSL_GUARDED_BY(mu) = 0;
  int64_t ok ABSL_GUARDED_BY(mu) = 0;
  int64_t failed ABSL_GUARDED_BY(mu) = 0;
  std::vector<RequestRecord> requests ABSL_GUARDED_BY(mu);
};

struct LoadCall {
  grpc::ClientContext ctx;
  demo::Order order;
  demo::OrderKey read;  // kGetOrder
  demo::OrderResult result;
  absl::Time start;
  std::vector<ItemSpec> items;
};

// Ends a load call when its answer `s` arrives: adds its record (code,
// latency since its start, the budget that fired and where) to the summary,
// keeps its request for --requests-out when `keep_request` (PlaceOrder
// only), counts it, and deletes `call` (allocated with new, owned from here).
void EndLoadCall(LoadCall* call, const grpc::Status& s, bool keep_request, LoadState& state) {
  CallRecord r;
  r.code = static_cast<absl::StatusCode>(s.error_code());
  r.latency = absl::Now() - call->start;
  if (absl::optional<Attribution> a = AttributionOf(s)) {
    r.source = std::string(DeadlineSourceName(a->source));
    r.hop = a->hop;
  }
  absl::optional<RequestRecord> sent;
  if (keep_request) {
    sent = RequestRecord{call->order.key(), std::move(call->items), r.code,
                         s.ok() ? call->result.order_id() : 0};
  }
  delete call;
  absl::MutexLock lock(&state.mu);
  if (sent.has_value()) state.requests.push_back(*std::move(sent));
  state.builder.Add(r);
  --state.in_flight;
  ++state.done;
  (s.ok() ? state.ok : state.failed)++;
}

}  // namespace

absl::StatusOr<LoadSummary> RunLoad(const LoadOptions& o, std::ostream& err) {
  if (o.rps <= 0) return absl::InvalidArgumentError("--rps must be > 0");
  if (o.concurrency < 1) return absl::InvalidArgumentError("--concurrency must be >= 1");
  const bool reads = o.method == LoadMethod::kGetOrder;
  if (reads && o.read_keys < 1) return absl::InvalidArgumentError("--read-keys must be >= 1");
  std::vector<demo::Stats> before;
  for (const std::string& admin : o.admin) {
    absl::StatusOr<demo::Stats> s = GetStats(admin);
    if (!s.ok()) return s.status();
    before.push_back(*s);
  }
  auto stub = demo::Gateway::NewStub(EdgeChannel(o.gateway));
  const std::string prefix =
      o.key_prefix.empty() ? absl::StrCat("load-", absl::ToUnixMicros(absl::Now())) : o.key_prefix;
  if (reads) {
    // The orders the reads will find (placed with a long budget: a slow
    // chain must not leave the read load without rows).
    for (int k = 0; k < o.read_keys; ++k) {
      demo::Order order;
      order.set_key(absl::StrCat(prefix, "-row-", k));
      for (const ItemSpec& item : o.items) {
        demo::Item* it = order.add_items();
        it->set_sku(item.sku);
        it->set_quantity(item.quantity);
      }
      OrderOutcome placed = PlaceOrder(*stub, order, absl::Seconds(5));
      if (!placed.status.ok()) {
        return absl::UnavailableError(absl::StrCat("placing the order ", order.key(),
                                                   " to read: ", placed.status.error_message()));
      }
    }
    for (size_t k = 0; k < o.admin.size(); ++k) {
      absl::StatusOr<demo::Stats> s = GetStats(o.admin[k]);  // without the orders placed
      if (!s.ok()) return s.status();
      before[k] = *s;
    }
  }
  std::unique_ptr<ClientThrottle> throttle;
  if (o.client_throttle.has_value()) {
    auto t = ClientThrottle::Create(*o.client_throttle, &Clock::Real());
    if (!t.ok()) return t.status();
    throttle = *std::move(t);
  }
  // The throttle's draws: only the loop's thread decides.
  std::mt19937_64 rng(0x6f70656e6c6f6f70);
  std::uniform_real_distribution<double> uniform01(0.0, 1.0);
  // What the gateway did with a call, for the throttle.
  auto teach = [t = throttle.get()](const grpc::Status& s) {
    if (t != nullptr) t->Record(BackendAnswerOf(static_cast<absl::StatusCode>(s.error_code())));
  };
  LoadState state;
  const absl::Duration cpu_at_start = ProcessCpu();
  const absl::Time start = absl::Now();
  const absl::Time end = start + o.duration;
  const absl::Duration interval = absl::Seconds(1) / o.rps;
  absl::Time next_progress = start + absl::Milliseconds(500);
  int64_t i = 0;
  auto progress = [&](bool final) {
    absl::MutexLock lock(&state.mu);
    err << absl::StrFormat("\r  load: %.1fs  started %d  in flight %d  ok %d  failed %d   ",
                           absl::ToDoubleSeconds(absl::Now() - start), i, state.in_flight, state.ok,
                           state.failed)
        << (final ? "\n" : "") << std::flush;
  };
  for (;; ++i) {
    const absl::Time due = start + interval * static_cast<double>(i);
    if (due >= end) break;
    const absl::Time now = absl::Now();
    if (due > now) absl::SleepFor(due - now);
    if (o.progress && absl::Now() >= next_progress) {
      progress(false);
      next_progress += absl::Milliseconds(500);
    }
    {
      absl::MutexLock lock(&state.mu);
      if (state.in_flight >= o.concurrency) {
        state.builder.CountNotSent();
        continue;
      }
      if (throttle != nullptr &&
          throttle->Decide(uniform01(rng)) == ThrottleDecision::kRejectLocally) {
        state.builder.CountClientThrottled();
        continue;
      }
      ++state.in_flight;
      state.builder.AddSendLag(absl::Now() - due);
    }
    auto* call = new LoadCall;
    if (reads) {
      call->read.set_key(absl::StrCat(prefix, "-row-", i % o.read_keys));
      call->start = absl::Now();
      SetUpContext(call->ctx, call->start, o.budget);
      stub->async()->GetOrder(&call->ctx, &call->read, &call->result,
                              [call, &state, &teach](grpc::Status s) {
                                teach(s);
                                EndLoadCall(call, s, /*keep_request=*/false, state);
                              });
      continue;
    }
    call->order.set_key(absl::StrCat(prefix, "-", i));
    call->items = o.requests != nullptr ? WithOrderReference(o.items, call->order.key()) : o.items;
    for (const ItemSpec& item : call->items) {
      demo::Item* it = call->order.add_items();
      it->set_sku(item.sku);
      it->set_quantity(item.quantity);
    }
    call->start = absl::Now();
    SetUpContext(call->ctx, call->start, o.budget);
    const bool record = o.requests != nullptr;
    stub->async()->PlaceOrder(&call->ctx, &call->order, &call->result,
                              [call, &state, &teach, record](grpc::Status s) {
                                teach(s);
                                EndLoadCall(call, s, record, state);
                              });
  }
  // Every call ends by its deadline (the budget), so this wait is bounded.
  {
    absl::MutexLock lock(&state.mu);
    state.mu.Await(absl::Condition(
        +[](LoadState* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) { return s->in_flight == 0; },
        &state));
  }
  if (o.progress) progress(true);
  state.builder.SetTotal(absl::Now() - start);
  state.builder.SetClientCpu(ProcessCpu() - cpu_at_start);
  // Let work that goes on after the client left finish before reading the
  // services' accounting (it is what the summary measures). Not for reads:
  // orders counts a read (and its hedge) before it answers it.
  if (!reads) absl::SleepFor(absl::Milliseconds(1500));
  absl::MutexLock lock(&state.mu);
  for (size_t k = 0; k < o.admin.size(); ++k) {
    absl::StatusOr<demo::Stats> after = StatsAfterRun([&] { return GetStats(o.admin[k]); });
    if (!after.ok()) return after.status();
    state.builder.AddService(StatsDelta(before[k], *after));
  }
  if (o.requests != nullptr) *o.requests = std::move(state.requests);
  return state.builder.Build();
}

absl::StatusOr<ProbeResult> ProbeClientDeadline(const std::string& gateway,
                                                const std::vector<std::string>& admin,
                                                absl::Duration budget, absl::Duration late_by) {
  std::vector<demo::Stats> before;
  for (const std::string& a : admin) {
    absl::StatusOr<demo::Stats> s = GetStats(a);
    if (!s.ok()) return s.status();
    before.push_back(*s);
  }
  demo::Order order;
  order.set_key(absl::StrCat("probe-", absl::ToUnixMicros(absl::Now())));
  demo::Item* item = order.add_items();
  item->set_sku("probe");
  item->set_quantity(1);
  auto stub = demo::Gateway::NewStub(EdgeChannel(gateway));
  grpc::ClientContext ctx;
  const absl::Time start = absl::Now();
  SetUpContext(ctx, start, budget, start - late_by);
  demo::OrderResult result;
  absl::Notification done;
  grpc::Status status;
  stub->async()->PlaceOrder(&ctx, &order, &result, [&](grpc::Status s) {
    status = std::move(s);
    done.Notify();
  });
  done.WaitForNotification();  // bounded by `budget`
  if (!status.ok()) {
    return absl::UnavailableError(absl::StrCat("the probe order failed: ", status.error_message()));
  }
  ProbeResult r;
  r.ok = true;
  for (size_t k = 0; k < admin.size(); ++k) {
    absl::StatusOr<demo::Stats> after = GetStats(admin[k]);
    if (!after.ok()) return after.status();
    const int64_t late =
        after->calls_started_after_deadline() - before[k].calls_started_after_deadline();
    const double work = after->work_after_deadline_ms() - before[k].work_after_deadline_ms();
    // Counted when the work starts, before any hop answers; the work after
    // the deadline is counted when it ends (a shielded commit may end just
    // after the reply), so it is reported, not required.
    const bool seen = late >= 1;
    if (!seen) r.ok = false;
    absl::StrAppend(&r.report, seen ? "ok  " : "!!  ", after->hop(),
                    absl::StrFormat(": %d call(s) started after the client deadline, %.1f ms "
                                    "of work after it%s\n",
                                    late, work, seen ? "" : " (the header did not arrive)"));
  }
  return r;
}

}  // namespace hopbudget::chainctl
