// Copyright hopbudget authors.
#include "hopbudget/advanced/shield.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "eventually.h"
#include "hopbudget/advanced/attribution.h"
#include "hopbudget/hop.h"
#include "sync.h"
#include "test_hop.h"

namespace hopbudget {
namespace {

using ::hopbudget::testing::Eventually;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Bound arithmetic runs on a FakeClock with manual timers; the work runs on
// the Shield's real threads and blocks on notifications, never on sleeps.
// Every test releases its work before the Shield is destroyed: ~Shield waits
// for it, and with manual timers no bound would ever stop it.
class ShieldTest : public ::testing::Test {
 protected:
  ShieldOptions Manual(int threads = 2, int max_in_flight = 64) {
    ShieldOptions options;
    options.clock = &clock_;
    options.manual_timers = true;
    options.threads = threads;
    options.max_in_flight = max_in_flight;
    return options;
  }

  FakeClock clock_;
};

// What blocked work waits for. Declared after the Shield, it opens when the
// test ends, so that a failed ASSERT cannot leave ~Shield waiting forever.
class Gate {
 public:
  Gate() = default;
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;
  ~Gate() { Open(); }

  void Open() {
    if (!opened_.HasBeenNotified()) opened_.Notify();
  }
  void Wait() { opened_.WaitForNotification(); }

 private:
  hopbudget::internal::Notification opened_;
};

// Work that blocks until `gate` opens and then returns `status`.
absl::AnyInvocable<absl::Status(ShieldContext&)> BlockUntil(
    Gate& gate, absl::Status status = absl::OkStatus()) {
  return [&gate, status](ShieldContext&) {
    gate.Wait();
    return status;
  };
}

TEST_F(ShieldTest, CompletesExactlyOnceWithItsRecord) {
  Shield shield(Manual());
  const absl::Time t0 = clock_.Now();
  int calls = 0;
  absl::StatusOr<ShieldHandle> handle =
      shield.Run("commit-1", absl::Milliseconds(100), [&](ShieldContext& ctx) {
        ++calls;
        EXPECT_EQ(ctx.name(), "commit-1");
        EXPECT_EQ(ctx.deadline(), t0 + absl::Milliseconds(100));
        clock_.Advance(absl::Milliseconds(7));
        EXPECT_EQ(ctx.remaining(), absl::Milliseconds(93));
        EXPECT_FALSE(ctx.stop_requested());
        return absl::OkStatus();
      });
  ASSERT_TRUE(handle.ok()) << handle.status();
  EXPECT_EQ(handle->name(), "commit-1");

  absl::optional<ShieldRecord> record = handle->Wait();
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(handle->done());
  EXPECT_EQ(record->name, "commit-1");
  EXPECT_EQ(record->outcome, ShieldOutcome::kCompleted);
  EXPECT_TRUE(record->status.ok()) << record->status;
  EXPECT_EQ(record->started, t0);
  EXPECT_EQ(record->ended, t0 + absl::Milliseconds(7));
  EXPECT_EQ(record->bound, absl::Milliseconds(100));

  // The bound timer went with the work: nothing fires later.
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(shield.RunDueTimers(), 0);
  absl::optional<ShieldRecord> again = handle->WaitUntil(absl::InfinitePast());
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->outcome, ShieldOutcome::kCompleted);

  ShieldStats stats = shield.stats();
  EXPECT_EQ(stats.started, 1u);
  EXPECT_EQ(stats.in_flight, 0u);
  EXPECT_EQ(stats.completed, 1u);
  EXPECT_EQ(stats.failed, 0u);
  EXPECT_EQ(stats.exceeded_bound, 0u);
  EXPECT_EQ(stats.refused, 0u);
  EXPECT_EQ(stats.unobserved, 0u);
}

TEST_F(ShieldTest, FailureIsRecordedWithItsStatus) {
  Shield shield(Manual());
  absl::StatusOr<ShieldHandle> handle =
      shield.Run("commit-2", absl::Milliseconds(100),
                 [](ShieldContext&) { return absl::NotFoundError("no row 7"); });
  ASSERT_TRUE(handle.ok());
  absl::optional<ShieldRecord> record = handle->Wait();
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->outcome, ShieldOutcome::kFailed);
  EXPECT_EQ(record->status, absl::NotFoundError("no row 7"));
  EXPECT_EQ(shield.stats().failed, 1u);
  EXPECT_EQ(shield.stats().completed, 0u);
}

TEST_F(ShieldTest, HangingWorkIsAskedToStopExactlyAtItsBound) {
  Shield shield(Manual());
  const absl::Time t0 = clock_.Now();
  hopbudget::internal::Notification registered, stopped;
  std::thread::id callback_thread;
  bool stop_seen_by_work = false;
  absl::StatusOr<ShieldHandle> handle =
      shield.Run("flush", absl::Milliseconds(100), [&](ShieldContext& ctx) {
        ctx.AddStopCallback([&] {
          callback_thread = std::this_thread::get_id();
          stopped.Notify();
        });
        registered.Notify();
        stopped.WaitForNotification();  // a peer that never answers
        stop_seen_by_work = ctx.stop_requested();
        return absl::CancelledError("flush interrupted");
      });
  ASSERT_TRUE(handle.ok());
  registered.WaitForNotification();

  clock_.Advance(absl::Milliseconds(100) - absl::Nanoseconds(1));
  EXPECT_EQ(shield.RunDueTimers(), 0);
  EXPECT_FALSE(stopped.HasBeenNotified());
  EXPECT_FALSE(handle->done());
  // Giving up waiting leaves the work alone.
  EXPECT_FALSE(handle->WaitUntil(absl::Now() + absl::Milliseconds(1)).has_value());

  clock_.Advance(absl::Nanoseconds(1));
  EXPECT_EQ(shield.RunDueTimers(), 1);
  EXPECT_TRUE(stopped.HasBeenNotified());  // ran inside RunDueTimers
  EXPECT_EQ(callback_thread, std::this_thread::get_id());

  absl::optional<ShieldRecord> record = handle->Wait();
  ASSERT_TRUE(record.has_value());
  EXPECT_TRUE(stop_seen_by_work);
  EXPECT_EQ(record->outcome, ShieldOutcome::kExceededBound);
  EXPECT_EQ(record->status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(record->status.message(), HasSubstr("shield bound of 100ms exceeded by flush"));
  EXPECT_THAT(record->status.message(), HasSubstr("CANCELLED: flush interrupted"));
  EXPECT_EQ(record->ended, t0 + absl::Milliseconds(100));
  EXPECT_EQ(shield.stats().exceeded_bound, 1u);
}

// Made with a Hop, a Shield reads the Hop's clock and counts in its
// metrics, whatever its options say.
TEST_F(ShieldTest, AShieldMadeWithAHopUsesItsClockAndMetrics) {
  FakeClock hop_clock;
  Metrics hop_metrics;
  std::unique_ptr<Hop> hop =
      testing::MakeTestHop("ledger", &hop_metrics, /*service_config=*/"", &hop_clock);
  ASSERT_NE(hop, nullptr);
  Metrics other_metrics;
  ShieldOptions options = Manual();  // this test's clock_, which the Hop's replaces
  options.metrics = &other_metrics;
  Shield shield(*hop, options);
  hopbudget::internal::Notification registered, stopped;
  absl::StatusOr<ShieldHandle> handle =
      shield.Run("flush", absl::Milliseconds(100), [&](ShieldContext& ctx) {
        ctx.AddStopCallback([&] { stopped.Notify(); });
        registered.Notify();
        stopped.WaitForNotification();
        return absl::CancelledError("flush interrupted");
      });
  ASSERT_TRUE(handle.ok());
  registered.WaitForNotification();
  clock_.Advance(absl::Seconds(1));  // not the Hop's clock: nothing is due
  EXPECT_EQ(shield.RunDueTimers(), 0);
  hop_clock.Advance(absl::Milliseconds(100));
  EXPECT_EQ(shield.RunDueTimers(), 1);
  absl::optional<ShieldRecord> record = handle->Wait();
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->outcome, ShieldOutcome::kExceededBound);
  EXPECT_EQ(hop_metrics.Snapshot().shield(ShieldEvent::kExceededBound), 1u);
  EXPECT_EQ(other_metrics.Snapshot().shield(ShieldEvent::kStarted), 0u);
}

// RunFor takes the bound of the method whose handler shields the work from
// the Hop's config (`shieldBound`): the method's own entry, else its
// service's, else the code's default; a reload reaches the next RunFor.
TEST_F(ShieldTest, RunForTakesEachMethodsShieldBoundFromTheHopsConfig) {
  HopOptions hop_options;
  hop_options.name = "orders";
  hop_options.clock = &clock_;
  hop_options.check_names = NameCheck::kNone;  // demo.Orders is not linked here
  hop_options.service_config = R"({"hopbudget": {"methodPolicy": [
      {"name": [{"service": "demo.Orders"}], "shieldBound": "3s"},
      {"name": [{"service": "demo.Orders", "method": "PlaceOrder"}], "shieldBound": "0.25s"}]}})";
  std::unique_ptr<Hop> hop = testing::MakeTestHop(hop_options);
  ASSERT_NE(hop, nullptr);
  Shield shield(*hop, Manual());
  const absl::Duration code_default = absl::Seconds(2);
  struct Row {
    const char* method;
    absl::Duration bound;
  };
  for (const Row& row :
       {Row{"/demo.Orders/PlaceOrder", absl::Milliseconds(250)},
        Row{"/demo.Orders/GetOrder", absl::Seconds(3)}, Row{"/demo.Ledger/Commit", code_default}}) {
    SCOPED_TRACE(row.method);
    EXPECT_EQ(shield.BoundFor(row.method, code_default), row.bound);
    absl::Duration seen;
    absl::StatusOr<ShieldHandle> handle =
        shield.RunFor(row.method, "commit", code_default, [&](ShieldContext& ctx) {
          seen = ctx.bound();
          return absl::OkStatus();
        });
    ASSERT_TRUE(handle.ok()) << handle.status();
    absl::optional<ShieldRecord> record = handle->Wait();
    ASSERT_TRUE(record.has_value());
    EXPECT_EQ(seen, row.bound);
    EXPECT_EQ(record->bound, row.bound);
  }

  ASSERT_TRUE(hop->ReloadServiceConfig(R"({"hopbudget": {"methodPolicy": [
      {"name": [{"service": "demo.Orders", "method": "PlaceOrder"}], "shieldBound": "1s"}]}})")
                  .ok());
  EXPECT_EQ(shield.BoundFor("/demo.Orders/PlaceOrder", code_default), absl::Seconds(1));
  EXPECT_EQ(shield.BoundFor("/demo.Orders/GetOrder", code_default), code_default);

  // A Shield without a Hop has no table: the code's bound.
  Shield plain(Manual());
  EXPECT_EQ(plain.BoundFor("/demo.Orders/PlaceOrder", code_default), code_default);
  // And RunFor refuses what Run() refuses.
  absl::StatusOr<ShieldHandle> unbounded =
      plain.RunFor("/demo.Orders/PlaceOrder", "commit", absl::ZeroDuration(),
                   [](ShieldContext&) { return absl::OkStatus(); });
  EXPECT_EQ(unbounded.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ShieldTest, ReturningAtTheBoundIsExceededEvenBeforeTheTimerRuns) {
  Shield shield(Manual());
  absl::StatusOr<ShieldHandle> in_time =
      shield.Run("just-in-time", absl::Milliseconds(100), [&](ShieldContext& ctx) {
        clock_.Set(ctx.deadline() - absl::Nanoseconds(1));
        return absl::OkStatus();
      });
  ASSERT_TRUE(in_time.ok());
  ASSERT_TRUE(in_time->Wait().has_value());
  EXPECT_EQ(in_time->Wait()->outcome, ShieldOutcome::kCompleted);

  absl::StatusOr<ShieldHandle> late =
      shield.Run("at-the-bound", absl::Milliseconds(100), [&](ShieldContext& ctx) {
        clock_.Set(ctx.deadline());
        return absl::OkStatus();
      });
  ASSERT_TRUE(late.ok());
  absl::optional<ShieldRecord> record = late->Wait();
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->outcome, ShieldOutcome::kExceededBound);
  EXPECT_THAT(record->status.message(), HasSubstr("work status: OK"));
}

// A downstream call whose deadline is the bound can come back a little
// before our clock reaches the bound: the callee's timer runs on its clock.
// Its DEADLINE_EXCEEDED, attributed to this shield, means the bound fired.
TEST_F(ShieldTest, DownstreamCutByThisBoundJustBeforeOurClockIsExceeded) {
  Shield shield(Manual());
  const absl::Duration bound = absl::Milliseconds(200);
  const Attribution ours{DeadlineSource::kShield, "orders", bound, bound};
  absl::StatusOr<ShieldHandle> cut = shield.Run("commit", bound, [&](ShieldContext& ctx) {
    clock_.Set(ctx.deadline() - absl::Microseconds(300));
    return absl::DeadlineExceededError(FormatAttributionMessage(ours));
  });
  ASSERT_TRUE(cut.ok());
  absl::optional<ShieldRecord> record = cut->Wait();
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->outcome, ShieldOutcome::kExceededBound);
  EXPECT_THAT(record->status.message(), HasSubstr("source=shield"));

  // Any other deadline is the work's own failure.
  const Attribution theirs{DeadlineSource::kRequest, "ledger", absl::Milliseconds(50),
                           absl::Milliseconds(50)};
  const Attribution other_shield{DeadlineSource::kShield, "ledger", absl::Milliseconds(150),
                                 absl::Milliseconds(150)};
  for (const Attribution& a : {theirs, other_shield}) {
    absl::StatusOr<ShieldHandle> failed = shield.Run("commit", bound, [&](ShieldContext&) {
      return absl::DeadlineExceededError(FormatAttributionMessage(a));
    });
    ASSERT_TRUE(failed.ok());
    record = failed->Wait();
    ASSERT_TRUE(record.has_value());
    EXPECT_EQ(record->outcome, ShieldOutcome::kFailed) << FormatAttributionMessage(a);
  }
}

TEST_F(ShieldTest, StopCallbackAddedAfterStopRunsAtOnce) {
  Shield shield(Manual());
  hopbudget::internal::Notification started, go;
  bool ran_inside_add = false;
  absl::Duration remaining_after_stop;
  absl::StatusOr<ShieldHandle> handle =
      shield.Run("late-registration", absl::Milliseconds(100), [&](ShieldContext& ctx) {
        started.Notify();
        go.WaitForNotification();
        EXPECT_TRUE(ctx.stop_requested());
        bool ran = false;
        const uint64_t id = ctx.AddStopCallback([&ran] { ran = true; });
        EXPECT_NE(id, 0u);
        ran_inside_add = ran;
        ctx.RemoveStopCallback(id);  // already ran: ignored
        remaining_after_stop = ctx.remaining();
        return absl::OkStatus();
      });
  ASSERT_TRUE(handle.ok());
  started.WaitForNotification();
  clock_.Advance(absl::Milliseconds(100));
  EXPECT_EQ(shield.RunDueTimers(), 1);
  go.Notify();
  ASSERT_TRUE(handle->Wait().has_value());
  EXPECT_TRUE(ran_inside_add);
  EXPECT_LE(remaining_after_stop, absl::ZeroDuration());
  EXPECT_EQ(handle->Wait()->outcome, ShieldOutcome::kExceededBound);
}

TEST_F(ShieldTest, RemovedStopCallbackIsNeverCalled) {
  Shield shield(Manual());
  hopbudget::internal::Notification registered, kept_ran;
  int removed_calls = 0;
  absl::StatusOr<ShieldHandle> handle =
      shield.Run("remove", absl::Milliseconds(100), [&](ShieldContext& ctx) {
        const uint64_t removed = ctx.AddStopCallback([&removed_calls] { ++removed_calls; });
        ctx.AddStopCallback([&kept_ran] { kept_ran.Notify(); });
        ctx.RemoveStopCallback(removed);
        ctx.RemoveStopCallback(12345);  // unknown: ignored
        registered.Notify();
        kept_ran.WaitForNotification();
        return absl::OkStatus();
      });
  ASSERT_TRUE(handle.ok());
  registered.WaitForNotification();
  clock_.Advance(absl::Milliseconds(100));
  EXPECT_EQ(shield.RunDueTimers(), 1);
  ASSERT_TRUE(handle->Wait().has_value());
  EXPECT_TRUE(kept_ran.HasBeenNotified());
  EXPECT_EQ(removed_calls, 0);
}

TEST_F(ShieldTest, RemoveStopCallbackWaitsForTheCallbackRunningElsewhere) {
  Shield shield(Manual());
  hopbudget::internal::Notification registered, callback_started, release;
  std::atomic<bool> finished{false};
  bool finished_when_removed = false;
  absl::StatusOr<ShieldHandle> handle =
      shield.Run("remove-while-running", absl::Milliseconds(100), [&](ShieldContext& ctx) {
        const uint64_t id = ctx.AddStopCallback([&] {
          callback_started.Notify();
          release.WaitForNotification();
          finished = true;
        });
        registered.Notify();
        callback_started.WaitForNotification();
        std::thread releaser([&release] { release.Notify(); });
        ctx.RemoveStopCallback(id);
        finished_when_removed = finished;
        releaser.join();
        return absl::OkStatus();
      });
  ASSERT_TRUE(handle.ok());
  registered.WaitForNotification();
  clock_.Advance(absl::Milliseconds(100));
  std::thread timer([&shield] { shield.RunDueTimers(); });
  ASSERT_TRUE(handle->Wait().has_value());
  timer.join();
  EXPECT_TRUE(finished_when_removed);  // Remove returned only after the callback did
}

TEST_F(ShieldTest, OutcomeOfADroppedHandleIsLoggedOnceAndCountedUnobserved) {
  ::testing::internal::CaptureStderr();
  {
    Shield shield(Manual());
    Gate release;
    // The handle is dropped at once: nobody can ever see this failure.
    ASSERT_TRUE(shield
                    .Run("fire-and-forget", absl::Milliseconds(100),
                         BlockUntil(release, absl::InternalError("disk full")))
                    .ok());
    release.Open();
    shield.Drain(absl::InfiniteDuration());
    EXPECT_EQ(shield.stats().failed, 1u);
    EXPECT_EQ(shield.stats().unobserved, 1u);
  }  // the pool thread that ended it writes the line, and is joined here
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(log, HasSubstr("hopbudget: shield"));
  EXPECT_THAT(log, HasSubstr("fire-and-forget"));
  EXPECT_THAT(log, HasSubstr("disk full"));
  EXPECT_EQ(log.find("fire-and-forget"), log.rfind("fire-and-forget"));  // once
}

TEST_F(ShieldTest, OutcomeIsUnobservedWhenTheLastHandleCopyGoesUnread) {
  Shield shield(Manual());
  Gate release;
  absl::StatusOr<ShieldHandle> run =
      shield.Run("kept-not-read", absl::Milliseconds(100),
                 BlockUntil(release, absl::InternalError("disk full")));
  ASSERT_TRUE(run.ok());
  absl::optional<ShieldHandle> first(*run);
  absl::optional<ShieldHandle> second(*first);
  run = absl::CancelledError("not a handle any more");
  EXPECT_FALSE(first->WaitUntil(absl::InfinitePast()).has_value());  // not an observation
  release.Open();
  shield.Drain(absl::InfiniteDuration());
  EXPECT_TRUE(first->done());  // done() is not an observation either

  first.reset();
  EXPECT_EQ(shield.stats().unobserved, 0u);  // a copy is left
  ::testing::internal::CaptureStderr();
  second.reset();
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), HasSubstr("kept-not-read"));
  EXPECT_EQ(shield.stats().unobserved, 1u);
}

TEST_F(ShieldTest, ObservedOutcomeIsNotUnobserved) {
  Shield shield(Manual());
  {
    absl::StatusOr<ShieldHandle> run =
        shield.Run("read", absl::Milliseconds(100),
                   [](ShieldContext&) { return absl::InternalError("disk full"); });
    ASSERT_TRUE(run.ok());
    ShieldHandle copy = *run;
    ASSERT_TRUE(copy.Wait().has_value());  // one copy read it: that is enough
  }
  EXPECT_EQ(shield.stats().failed, 1u);
  EXPECT_EQ(shield.stats().unobserved, 0u);
}

TEST_F(ShieldTest, BeyondMaxInFlightRunIsRefusedAndRecovers) {
  Shield shield(Manual(/*threads=*/1, /*max_in_flight=*/2));
  Gate release_a;
  absl::StatusOr<ShieldHandle> a = shield.Run("a", absl::Seconds(1), BlockUntil(release_a));
  absl::StatusOr<ShieldHandle> b =
      shield.Run("b", absl::Seconds(1), [](ShieldContext&) { return absl::OkStatus(); });  // queued
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok());

  // Refused work is destroyed at once; what it captured may take the lock.
  absl::StatusOr<ShieldHandle> c =
      shield.Run("c", absl::Seconds(1), [a_copy = *a](ShieldContext&) { return absl::OkStatus(); });
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(c.status().message(), HasSubstr("max_in_flight"));
  ShieldStats stats = shield.stats();
  EXPECT_EQ(stats.refused, 1u);
  EXPECT_EQ(stats.started, 2u);
  EXPECT_EQ(stats.in_flight, 2u);

  release_a.Open();
  ASSERT_TRUE(a->Wait().has_value());
  c = shield.Run("c", absl::Seconds(1), [](ShieldContext&) { return absl::OkStatus(); });
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(b->Wait().has_value());
  ASSERT_TRUE(c->Wait().has_value());
  EXPECT_EQ(shield.stats().completed, 3u);
  EXPECT_EQ(shield.stats().refused, 1u);
}

TEST_F(ShieldTest, BoundMustBePositiveAndFinite) {
  Shield shield(Manual());
  auto work = [](ShieldContext&) { return absl::OkStatus(); };
  struct Case {
    absl::Duration bound;
    const char* shown;
  };
  for (const Case& c : {Case{absl::ZeroDuration(), "0ms"}, Case{absl::Milliseconds(-5), "-5ms"},
                        Case{absl::InfiniteDuration(), "inf"}}) {
    absl::StatusOr<ShieldHandle> run = shield.Run("commit", c.bound, work);
    EXPECT_EQ(run.status().code(), absl::StatusCode::kInvalidArgument) << c.shown;
    EXPECT_THAT(run.status().message(), HasSubstr(absl::StrCat("is ", c.shown)));
    EXPECT_THAT(run.status().message(), HasSubstr("no way to shield without a bound"));
  }
  EXPECT_EQ(shield.stats().started, 0u);
  EXPECT_EQ(shield.stats().refused, 0u);
}

TEST_F(ShieldTest, NameMustBeOneTo64CharactersAndWorkNonEmpty) {
  Shield shield(Manual());
  auto work = [](ShieldContext&) { return absl::OkStatus(); };
  EXPECT_EQ(shield.Run("", absl::Seconds(1), work).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(shield.Run(std::string(65, 'n'), absl::Seconds(1), work).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(shield.Run("empty", absl::Seconds(1), nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<ShieldHandle> longest = shield.Run(std::string(64, 'n'), absl::Seconds(1), work);
  ASSERT_TRUE(longest.ok()) << longest.status();
  ASSERT_TRUE(longest->Wait().has_value());
}

TEST_F(ShieldTest, QueuedWorkCountsItsBoundFromRun) {
  Shield shield(Manual(/*threads=*/1));
  Gate release_first;
  absl::StatusOr<ShieldHandle> first =
      shield.Run("first", absl::Seconds(1), BlockUntil(release_first));
  const absl::Time t0 = clock_.Now();
  absl::Time deadline_seen;
  absl::Duration remaining_seen;
  absl::StatusOr<ShieldHandle> queued =
      shield.Run("queued", absl::Milliseconds(100), [&](ShieldContext& ctx) {
        deadline_seen = ctx.deadline();
        remaining_seen = ctx.remaining();
        return absl::OkStatus();
      });
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(queued.ok());
  clock_.Advance(absl::Milliseconds(60));  // spent in the queue
  EXPECT_EQ(shield.RunDueTimers(), 0);
  release_first.Open();

  absl::optional<ShieldRecord> record = queued->Wait();
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->outcome, ShieldOutcome::kCompleted);
  EXPECT_EQ(record->started, t0);
  EXPECT_EQ(deadline_seen, t0 + absl::Milliseconds(100));
  EXPECT_EQ(remaining_seen, absl::Milliseconds(40));
  ASSERT_TRUE(first->Wait().has_value());
}

TEST_F(ShieldTest, QueuedWorkWhoseBoundPassedNeverStarts) {
  Shield shield(Manual(/*threads=*/1));
  Gate release_first;
  absl::StatusOr<ShieldHandle> first =
      shield.Run("first", absl::Seconds(1), BlockUntil(release_first));
  bool queued_ran = false;
  absl::StatusOr<ShieldHandle> queued =
      shield.Run("queued", absl::Milliseconds(100), [&queued_ran](ShieldContext&) {
        queued_ran = true;
        return absl::OkStatus();
      });
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(queued.ok());
  clock_.Advance(absl::Milliseconds(150));
  EXPECT_EQ(shield.RunDueTimers(), 1);  // the queued one's bound; first has 1s
  release_first.Open();

  absl::optional<ShieldRecord> record = queued->Wait();
  ASSERT_TRUE(record.has_value());
  EXPECT_FALSE(queued_ran);
  EXPECT_EQ(record->outcome, ShieldOutcome::kExceededBound);
  EXPECT_THAT(record->status.message(),
              HasSubstr("shield bound of 100ms exceeded by queued: never started"));
  ASSERT_TRUE(first->Wait().has_value());
  EXPECT_EQ(first->Wait()->outcome, ShieldOutcome::kCompleted);
}

// Behind a backlog a pool thread may come free long after the bound: the
// caller of queued work gets its outcome at the bound, and what the work
// captured (in the demo ledger, the accounting of work done for a caller)
// is released then, not when a thread would have taken it.
TEST_F(ShieldTest, QueuedWorkEndsAtItsBoundWithoutWaitingForAThread) {
  Shield shield(Manual(/*threads=*/1));
  Gate release_first;
  absl::StatusOr<ShieldHandle> first =
      shield.Run("first", absl::Seconds(1), BlockUntil(release_first));
  auto captured = std::make_shared<int>(0);
  absl::StatusOr<ShieldHandle> queued =
      shield.Run("queued", absl::Milliseconds(100), [captured](ShieldContext&) {
        ++*captured;
        return absl::OkStatus();
      });
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(queued.ok());
  EXPECT_EQ(captured.use_count(), 2);
  clock_.Advance(absl::Milliseconds(150));
  EXPECT_EQ(shield.RunDueTimers(), 1);

  // Ended inside RunDueTimers, while the only thread is still busy.
  EXPECT_TRUE(queued->done());
  EXPECT_EQ(captured.use_count(), 1);
  absl::optional<ShieldRecord> record = queued->WaitUntil(absl::InfinitePast());
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->outcome, ShieldOutcome::kExceededBound);
  EXPECT_THAT(record->status.message(), HasSubstr("never started (waited 150ms in the queue)"));
  EXPECT_EQ(*captured, 0);
  EXPECT_FALSE(first->done());
  release_first.Open();
  ASSERT_TRUE(first->Wait().has_value());
  EXPECT_EQ(first->Wait()->outcome, ShieldOutcome::kCompleted);
  EXPECT_EQ(shield.stats().exceeded_bound, 1u);
}

TEST_F(ShieldTest, DrainCountsWhatEndsWhileItWaitsThenRefusesRun) {
  Shield shield(Manual());
  Gate release_quick;
  absl::StatusOr<ShieldHandle> quick =
      shield.Run("quick", absl::Seconds(1), BlockUntil(release_quick));
  ASSERT_TRUE(quick.ok());
  hopbudget::internal::Notification hanging_registered;
  absl::StatusOr<ShieldHandle> hanging =
      shield.Run("hanging", absl::Milliseconds(100), [&](ShieldContext& ctx) {
        hopbudget::internal::Notification stop;
        const uint64_t id = ctx.AddStopCallback([&stop] { stop.Notify(); });
        hanging_registered.Notify();
        stop.WaitForNotification();
        ctx.RemoveStopCallback(id);
        return absl::CancelledError("stopped");
      });
  ASSERT_TRUE(hanging.ok());
  hanging_registered.WaitForNotification();

  DrainReport report;
  std::thread drainer([&] { report = shield.Drain(absl::InfiniteDuration()); });
  // Only the ordering matters here (end after the drain began), not how long.
  EXPECT_TRUE(Eventually([&] { return shield.stats().draining; }, absl::Seconds(20),
                         absl::Milliseconds(1)));
  release_quick.Open();
  clock_.Advance(absl::Milliseconds(100));
  EXPECT_EQ(shield.RunDueTimers(), 1);
  drainer.join();

  EXPECT_EQ(report.completed, 1);
  EXPECT_EQ(report.exceeded_bound, 1);
  EXPECT_EQ(report.failed, 0);
  EXPECT_TRUE(report.still_running.empty());
  EXPECT_EQ(shield.stats().in_flight, 0u);

  absl::StatusOr<ShieldHandle> late =
      shield.Run("late", absl::Seconds(1), [](ShieldContext&) { return absl::OkStatus(); });
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(shield.stats().refused, 0u);  // refused counts capacity only
  ASSERT_TRUE(quick->Wait().has_value());
  ASSERT_TRUE(hanging->Wait().has_value());
}

TEST_F(ShieldTest, DrainGivesUpNamesWhatStillRunsAndAsksItToStop) {
  Shield shield(Manual(/*threads=*/1));
  absl::StatusOr<ShieldHandle> before =
      shield.Run("before", absl::Seconds(1), [](ShieldContext&) { return absl::OkStatus(); });
  ASSERT_TRUE(before.ok());
  ASSERT_TRUE(before->Wait().has_value());  // ended before the drain: not reported

  hopbudget::internal::Notification registered;
  absl::StatusOr<ShieldHandle> hanging =
      shield.Run("hanging", absl::Seconds(1), [&](ShieldContext& ctx) {
        hopbudget::internal::Notification stop;
        const uint64_t id = ctx.AddStopCallback([&stop] { stop.Notify(); });
        registered.Notify();
        stop.WaitForNotification();
        ctx.RemoveStopCallback(id);
        return absl::CancelledError("drained");
      });
  bool queued_saw_stop = false;
  absl::StatusOr<ShieldHandle> queued =
      shield.Run("queued", absl::Seconds(1), [&queued_saw_stop](ShieldContext& ctx) {
        queued_saw_stop = ctx.stop_requested();
        return absl::OkStatus();
      });
  ASSERT_TRUE(hanging.ok());
  registered.WaitForNotification();

  DrainReport report = shield.Drain(absl::Milliseconds(50));  // real time
  ASSERT_TRUE(queued.ok()) << queued.status();
  EXPECT_THAT(report.still_running, ElementsAre("hanging", "queued"));
  EXPECT_EQ(report.completed, 0);
  EXPECT_EQ(report.failed, 0);
  EXPECT_EQ(report.exceeded_bound, 0);

  // Asked to stop before their bounds: each ends on its own terms.
  absl::optional<ShieldRecord> h = hanging->Wait();
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->outcome, ShieldOutcome::kFailed);
  EXPECT_EQ(h->status, absl::CancelledError("drained"));
  absl::optional<ShieldRecord> q = queued->Wait();
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(q->outcome, ShieldOutcome::kCompleted);
  EXPECT_TRUE(queued_saw_stop);
  EXPECT_EQ(shield.Run("after", absl::Seconds(1), [](ShieldContext&) { return absl::OkStatus(); })
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(ShieldRealTimeTest, DestructorEndsWhenHangingWorkHonoursItsBound) {
  absl::optional<ShieldHandle> handle;
  {
    Shield shield;  // real clock, timer thread
    absl::StatusOr<ShieldHandle> run =
        shield.Run("flush", absl::Milliseconds(20), [](ShieldContext& ctx) {
          hopbudget::internal::Notification stop;
          const uint64_t id = ctx.AddStopCallback([&stop] { stop.Notify(); });
          stop.WaitForNotification();  // only the bound ends this
          ctx.RemoveStopCallback(id);
          return absl::CancelledError("stopped");
        });
    ASSERT_TRUE(run.ok());
    handle.emplace(*run);
  }
  // The handle outlives the Shield.
  EXPECT_EQ(handle->name(), "flush");
  EXPECT_TRUE(handle->done());
  absl::optional<ShieldRecord> record = handle->WaitUntil(absl::InfinitePast());
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->outcome, ShieldOutcome::kExceededBound);
  EXPECT_THAT(record->status.message(), HasSubstr("shield bound of 20ms exceeded by flush"));
}

TEST(ShieldRealTimeTest, ConcurrentRunsEachEndExactlyOnce) {
  ShieldOptions options;
  options.threads = 3;
  options.max_in_flight = 8;
  Shield shield(options);
  std::atomic<int> calls{0};
  std::atomic<int> accepted{0};
  constexpr int kSubmitters = 4;
  constexpr int kRunsEach = 200;
  std::vector<std::thread> submitters;
  for (int s = 0; s < kSubmitters; ++s) {
    submitters.emplace_back([&, s] {
      std::vector<ShieldHandle> handles;
      for (int i = 0; i < kRunsEach; ++i) {
        absl::StatusOr<ShieldHandle> run = shield.Run(
            absl::StrCat("op-", s, "-", i), absl::Seconds(30), [&calls, i](ShieldContext&) {
              calls.fetch_add(1);
              return i % 3 == 0 ? absl::AbortedError("every third") : absl::OkStatus();
            });
        if (!run.ok()) {
          EXPECT_EQ(run.status().code(), absl::StatusCode::kResourceExhausted);
          continue;
        }
        ++accepted;
        handles.push_back(*std::move(run));
      }
      for (const ShieldHandle& h : handles) {
        absl::optional<ShieldRecord> r = h.Wait();
        ASSERT_TRUE(r.has_value());
        EXPECT_NE(r->outcome, ShieldOutcome::kExceededBound) << r->status;
      }
    });
  }
  for (std::thread& t : submitters) t.join();
  shield.Drain(absl::InfiniteDuration());
  ShieldStats stats = shield.stats();
  EXPECT_EQ(stats.started, static_cast<uint64_t>(accepted.load()));
  EXPECT_EQ(stats.started + stats.refused, static_cast<uint64_t>(kSubmitters * kRunsEach));
  EXPECT_EQ(stats.completed + stats.failed, stats.started);
  EXPECT_EQ(stats.exceeded_bound, 0u);
  EXPECT_EQ(calls.load(), accepted.load());
  EXPECT_EQ(stats.in_flight, 0u);
  EXPECT_EQ(stats.unobserved, 0u);
}

TEST(ShieldOptionsTest, ValidatesRangesAndTheConstructorClamps) {
  ShieldOptions options;
  EXPECT_TRUE(ValidateShieldOptions(options).ok());
  options.max_in_flight = 0;
  EXPECT_THAT(ValidateShieldOptions(options).message(), HasSubstr("max_in_flight (0)"));
  options.max_in_flight = 1;
  options.threads = -1;
  EXPECT_THAT(ValidateShieldOptions(options).message(), HasSubstr("threads (-1)"));

  options.max_in_flight = 0;
  Shield shield(options);  // one thread, one operation
  absl::StatusOr<ShieldHandle> run =
      shield.Run("one", absl::Seconds(5), [](ShieldContext&) { return absl::OkStatus(); });
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_TRUE(run->Wait().has_value());
  EXPECT_EQ(run->Wait()->outcome, ShieldOutcome::kCompleted);
}

TEST(ShieldOutcomeTest, NamesAreStableMetricLabels) {
  EXPECT_EQ(ShieldOutcomeName(ShieldOutcome::kCompleted), "completed");
  EXPECT_EQ(ShieldOutcomeName(ShieldOutcome::kFailed), "failed");
  EXPECT_EQ(ShieldOutcomeName(ShieldOutcome::kExceededBound), "exceeded_bound");
  EXPECT_EQ(ShieldOutcomeName(static_cast<ShieldOutcome>(42)), "unknown");
}

TEST_F(ShieldTest, OnDoneRunsOnceWithTheRecordWhenTheWorkEnds) {
  Metrics metrics;
  ShieldOptions options = Manual();
  options.metrics = &metrics;
  Shield shield(options);
  Gate gate;
  absl::StatusOr<ShieldHandle> handle =
      shield.Run("commit", absl::Seconds(1), BlockUntil(gate, absl::InternalError("disk")));
  ASSERT_TRUE(handle.ok());
  hopbudget::internal::Notification delivered;
  std::atomic<int> calls{0};
  ShieldOutcome outcome = ShieldOutcome::kCompleted;
  handle->OnDone([&](const ShieldRecord& r) {
    outcome = r.outcome;
    ++calls;
    delivered.Notify();
    return true;
  });
  EXPECT_FALSE(delivered.HasBeenNotified());
  EXPECT_EQ(metrics.Snapshot().shield_in_flight, 1);
  gate.Open();
  ASSERT_TRUE(delivered.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(outcome, ShieldOutcome::kFailed);
  shield.Drain(absl::Seconds(30));
  EXPECT_EQ(calls.load(), 1);
  handle = absl::InternalError("dropped");  // the last handle goes: taken, not unobserved
  EXPECT_EQ(shield.stats().unobserved, 0u);
  const MetricsSnapshot m = metrics.Snapshot();
  EXPECT_EQ(m.shield(ShieldEvent::kStarted), 1u);
  EXPECT_EQ(m.shield(ShieldEvent::kFailed), 1u);
  EXPECT_EQ(m.shield(ShieldEvent::kUnobserved), 0u);
  EXPECT_EQ(m.shield_in_flight, 0);
}

TEST_F(ShieldTest, OnDoneAfterTheEndRunsAtOnceOnTheCallersThread) {
  Shield shield(Manual());
  absl::StatusOr<ShieldHandle> handle =
      shield.Run("commit", absl::Seconds(1), [](ShieldContext&) { return absl::OkStatus(); });
  ASSERT_TRUE(handle.ok());
  ASSERT_TRUE(handle->WaitUntil(absl::Now() + absl::Seconds(30)).has_value());
  const std::thread::id me = std::this_thread::get_id();
  std::thread::id ran_on;
  handle->OnDone([&](const ShieldRecord& r) {
    ran_on = std::this_thread::get_id();
    EXPECT_EQ(r.outcome, ShieldOutcome::kCompleted);
    return true;
  });
  EXPECT_EQ(ran_on, me);
}

TEST_F(ShieldTest, OutcomeNobodyTookFromOnDoneIsCountedUnobserved) {
  Metrics metrics;
  ShieldOptions options = Manual();
  options.metrics = &metrics;
  Shield shield(options);
  Gate gate;
  {
    absl::StatusOr<ShieldHandle> handle = shield.Run("commit", absl::Seconds(1), BlockUntil(gate));
    ASSERT_TRUE(handle.ok());
    // The caller left: the callback finds nobody to answer.
    handle->OnDone([](const ShieldRecord&) { return false; });
  }
  gate.Open();
  shield.Drain(absl::Seconds(30));
  EXPECT_EQ(shield.stats().unobserved, 1u);
  EXPECT_EQ(metrics.Snapshot().shield(ShieldEvent::kUnobserved), 1u);
  EXPECT_EQ(metrics.Snapshot().shield(ShieldEvent::kDrained), 1u);
}

TEST_F(ShieldTest, MetricsCountRefusalsAndDrainsThatGaveUp) {
  Metrics metrics;
  ShieldOptions options = Manual(/*threads=*/1, /*max_in_flight=*/1);
  options.metrics = &metrics;
  Shield shield(options);
  Gate gate;
  absl::StatusOr<ShieldHandle> first = shield.Run("a", absl::Seconds(1), BlockUntil(gate));
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(shield.Run("b", absl::Seconds(1), BlockUntil(gate)).status().code(),
            absl::StatusCode::kResourceExhausted);
  DrainReport report = shield.Drain(absl::ZeroDuration());
  EXPECT_EQ(report.still_running.size(), 1u);
  gate.Open();
  first->Wait();
  const MetricsSnapshot m = metrics.Snapshot();
  EXPECT_EQ(m.shield(ShieldEvent::kRefused), 1u);
  EXPECT_EQ(m.shield(ShieldEvent::kDrainTimedOut), 1u);
}

// Single flight: a retry of the same request while its shielded work still
// runs joins that work instead of starting it again.
TEST_F(ShieldTest, RunOnceJoinsTheOperationInFlightForTheSameKey) {
  Gate gate;
  Shield shield(Manual());
  std::atomic<int> runs{0};
  auto work = [&](ShieldContext&) {
    runs.fetch_add(1);
    gate.Wait();
    return absl::OkStatus();
  };
  bool joined = true;
  absl::StatusOr<ShieldHandle> first =
      shield.RunOnce("key-1", "commit key-1", absl::Seconds(1), work, &joined);
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE(joined);
  absl::StatusOr<ShieldHandle> retry =
      shield.RunOnce("key-1", "commit key-1", absl::Seconds(1), work, &joined);
  ASSERT_TRUE(retry.ok());
  EXPECT_TRUE(joined);
  bool other_joined = true;
  absl::StatusOr<ShieldHandle> other =
      shield.RunOnce("key-2", "commit key-2", absl::Seconds(1), work, &other_joined);
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other_joined);
  EXPECT_EQ(shield.stats().started, 2u);
  EXPECT_EQ(shield.stats().joined, 1u);
  gate.Open();
  absl::optional<ShieldRecord> a = first->Wait();
  absl::optional<ShieldRecord> b = retry->Wait();
  ASSERT_TRUE(a.has_value() && b.has_value());
  EXPECT_EQ(a->outcome, ShieldOutcome::kCompleted);
  EXPECT_EQ(b->outcome, ShieldOutcome::kCompleted);
  EXPECT_EQ(a->started, b->started);  // one operation, two holders
  ASSERT_TRUE(other->Wait().has_value());
  EXPECT_EQ(runs.load(), 2);
  // Ended: the key is forgotten, and the next RunOnce starts afresh.
  absl::StatusOr<ShieldHandle> later =
      shield.RunOnce("key-1", "commit key-1", absl::Seconds(1), work, &joined);
  ASSERT_TRUE(later.ok());
  EXPECT_FALSE(joined);
  ASSERT_TRUE(later->Wait().has_value());
  EXPECT_EQ(runs.load(), 3);
}

TEST_F(ShieldTest, RunOnceRefusalIsNotRemembered) {
  Gate gate;
  Shield shield(Manual(/*threads=*/1, /*max_in_flight=*/1));
  absl::StatusOr<ShieldHandle> busy = shield.Run("busy", absl::Seconds(1), BlockUntil(gate));
  ASSERT_TRUE(busy.ok());
  bool joined = true;
  absl::StatusOr<ShieldHandle> refused =
      shield.RunOnce("key-1", "commit key-1", absl::Seconds(1), BlockUntil(gate), &joined);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(joined);
  gate.Open();
  ASSERT_TRUE(busy->Wait().has_value());
  absl::StatusOr<ShieldHandle> now =
      shield.RunOnce("key-1", "commit key-1", absl::Seconds(1), BlockUntil(gate), &joined);
  ASSERT_TRUE(now.ok());
  EXPECT_FALSE(joined);
  ASSERT_TRUE(now->Wait().has_value());
}

}  // namespace
}  // namespace hopbudget
