// Copyright hopbudget authors.
//
// The internal source tag's codec (grpc_glue.h): what a helper puts on a
// downstream context for the client interceptor reads back exactly, and a
// value that is not a tag reads back as none. And its in-process handoff
// (ScopedAttemptTag): seen for its own context, on its own thread, while
// the scope lives.
#include <grpcpp/client_context.h>
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "absl/time/time.h"
#include "grpc_glue.h"

namespace hopbudget {
namespace internal {
namespace {

void ExpectSame(const SourceTag& a, const SourceTag& b) {
  EXPECT_EQ(a.source, b.source);
  EXPECT_EQ(a.budget, b.budget);
  EXPECT_EQ(a.logical_deadline, b.logical_deadline);
  EXPECT_EQ(a.logical_source, b.logical_source);
  EXPECT_EQ(a.logical_budget, b.logical_budget);
  EXPECT_EQ(a.has_logical, b.has_logical);
  EXPECT_EQ(a.inbound_key, b.inbound_key);
  EXPECT_EQ(a.inbound_id, b.inbound_id);
  EXPECT_EQ(a.budget_start, b.budget_start);
  EXPECT_EQ(a.logical_start, b.logical_start);
  EXPECT_EQ(a.call_kind, b.call_kind);
  EXPECT_EQ(a.shadow, b.shadow);
  EXPECT_EQ(a.shadow_would_fail_fast, b.shadow_would_fail_fast);
}

TEST(SourceTagTest, EveryFieldReadsBackExactly) {
  const absl::Time t = absl::FromUnixNanos(1'796'000'000'123'456'789);
  SourceTag full;
  full.source = DeadlineSource::kAttempt;
  full.budget = absl::Nanoseconds(300'000'001);
  full.logical_deadline = t + absl::Seconds(2);
  full.logical_source = DeadlineSource::kRequest;
  full.logical_budget = absl::Milliseconds(1800);
  full.has_logical = true;
  full.inbound_key = static_cast<uintptr_t>(0x7f00deadbeef);
  full.inbound_id = ~uint64_t{0};
  full.budget_start = t;
  full.logical_start = t - absl::Microseconds(7);
  full.call_kind = ClientCallKind::kRetryAttempt;
  full.shadow = true;
  full.shadow_would_fail_fast = true;

  SourceTag infinite;  // the defaults: no deadline, nothing known
  infinite.source = DeadlineSource::kNone;
  SourceTag extremes = full;
  extremes.budget = -absl::InfiniteDuration();
  extremes.logical_deadline = absl::InfinitePast();
  extremes.budget_start = absl::InfiniteFuture();
  extremes.has_logical = false;  // the flags apart: a retry attempt without a logical part
  extremes.shadow_would_fail_fast = false;  // shadow alone

  for (const SourceTag& tag : {full, infinite, extremes}) {
    absl::optional<SourceTag> back = ParseSourceTag(FormatSourceTag(tag));
    ASSERT_TRUE(back.has_value());
    ExpectSame(*back, tag);
  }
}

TEST(SourceTagTest, ValuesThatAreNotATagReadAsNone) {
  SourceTag tag;
  tag.source = DeadlineSource::kAttempt;
  const std::string good = FormatSourceTag(tag);
  std::string bad_source = good;
  bad_source[0] = static_cast<char>(kDeadlineSourceCount);
  std::string bad_logical_source = good;
  bad_logical_source[1] = '\xff';
  std::string bad_flag = good;
  bad_flag[2] = 16;  // bits 0-3: has_logical, retry attempt, shadow, would fail fast
  const struct {
    const char* what;
    std::string value;
  } cases[] = {
      {"empty", ""},
      {"the old text form", "attempt/100000"},
      {"one byte short", good.substr(0, good.size() - 1)},
      {"one byte long", good + "x"},
      {"a source out of range", bad_source},
      {"a logical source out of range", bad_logical_source},
      {"an unknown flag", bad_flag},
  };
  for (const auto& c : cases) {
    EXPECT_FALSE(ParseSourceTag(c.value).has_value()) << c.what;
  }
}

TEST(ScopedAttemptTagTest, HandsTheTagForItsContextOnlyWhileItLives) {
  grpc::ClientContext mine;
  grpc::ClientContext other;
  SourceTag tag;
  tag.source = DeadlineSource::kAttempt;
  tag.budget = absl::Milliseconds(300);
  EXPECT_EQ(HandedAttemptTag(&mine), nullptr);
  {
    ScopedAttemptTag handed(&mine, tag);
    const SourceTag* seen = HandedAttemptTag(&mine);
    ASSERT_NE(seen, nullptr);
    ExpectSame(*seen, tag);
    EXPECT_EQ(HandedAttemptTag(&other), nullptr);  // another call started meanwhile
    EXPECT_EQ(HandedAttemptTag(nullptr), nullptr);
  }
  EXPECT_EQ(HandedAttemptTag(&mine), nullptr);  // a call started after the scope
}

TEST(ScopedAttemptTagTest, AnInnerScopeHidesTheOuterUntilItEnds) {
  grpc::ClientContext outer_ctx;
  grpc::ClientContext inner_ctx;
  SourceTag outer_tag;
  outer_tag.source = DeadlineSource::kRequest;
  SourceTag inner_tag;
  inner_tag.source = DeadlineSource::kAttempt;
  ScopedAttemptTag outer(&outer_ctx, outer_tag);
  {
    ScopedAttemptTag inner(&inner_ctx, inner_tag);
    ASSERT_NE(HandedAttemptTag(&inner_ctx), nullptr);
    EXPECT_EQ(HandedAttemptTag(&inner_ctx)->source, DeadlineSource::kAttempt);
    EXPECT_EQ(HandedAttemptTag(&outer_ctx), nullptr);
  }
  ASSERT_NE(HandedAttemptTag(&outer_ctx), nullptr);
  EXPECT_EQ(HandedAttemptTag(&outer_ctx)->source, DeadlineSource::kRequest);
}

TEST(ScopedAttemptTagTest, AnotherThreadSeesNoTag) {
  grpc::ClientContext ctx;
  SourceTag tag;
  tag.source = DeadlineSource::kAttempt;
  ScopedAttemptTag handed(&ctx, tag);
  const SourceTag* seen_elsewhere = &tag;
  std::thread([&] { seen_elsewhere = HandedAttemptTag(&ctx); }).join();
  EXPECT_EQ(seen_elsewhere, nullptr);
  EXPECT_NE(HandedAttemptTag(&ctx), nullptr);
}

}  // namespace
}  // namespace internal
}  // namespace hopbudget
