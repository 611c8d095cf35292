#include "hopbudget/advanced/policy_table.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hopbudget {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

MethodPolicy WithRequestCap(absl::Duration cap) {
  MethodPolicy p;
  p.budget.request_cap = cap;
  return p;
}

MethodPolicy WithCaps(absl::Duration request_cap, absl::Duration max_inbound) {
  MethodPolicy p = WithRequestCap(request_cap);
  p.budget.max_inbound_budget = max_inbound;
  return p;
}

TEST(PolicyTableTest, ResolvesMethodThenServiceThenDefault) {
  absl::StatusOr<PolicyTable> table =
      PolicyTable::Create(WithRequestCap(absl::Seconds(9)),
                          {{"demo.Orders/*", WithRequestCap(absl::Seconds(2))},
                           {"demo.Orders/Get", WithRequestCap(absl::Milliseconds(50))},
                           {"demo.Ledger/Commit", WithRequestCap(absl::Seconds(1))}});
  ASSERT_TRUE(table.ok()) << table.status();
  struct Case {
    const char* full_method;
    absl::Duration request_cap;
    PolicyScope scope;
  };
  const Case cases[] = {
      {"/demo.Orders/Get", absl::Milliseconds(50), PolicyScope::kMethod},
      {"/demo.Orders/Create", absl::Seconds(2), PolicyScope::kService},
      {"/demo.Ledger/Commit", absl::Seconds(1), PolicyScope::kMethod},
      {"/demo.Ledger/Read", absl::Seconds(9), PolicyScope::kDefault},
      {"/other.Svc/M", absl::Seconds(9), PolicyScope::kDefault},
      // Not "/service/method": the default, never a crash.
      {"", absl::Seconds(9), PolicyScope::kDefault},
      {"demo.Orders/Get", absl::Seconds(9), PolicyScope::kDefault},
      {"/demo.Orders", absl::Seconds(9), PolicyScope::kDefault},
      {"/demo.Orders/", absl::Seconds(9), PolicyScope::kDefault},
      {"//Get", absl::Seconds(9), PolicyScope::kDefault},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(table->Resolve(c.full_method).budget.request_cap, c.request_cap) << c.full_method;
    EXPECT_EQ(table->ScopeOf(c.full_method), c.scope) << c.full_method;
  }
}

TEST(PolicyTableTest, StarEntryReplacesTheDefaultPolicy) {
  absl::StatusOr<PolicyTable> table = PolicyTable::Create(
      WithRequestCap(absl::Seconds(9)), {{"*", WithRequestCap(absl::Seconds(3))}});
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->Resolve("/a.B/C").budget.request_cap, absl::Seconds(3));
}

TEST(PolicyTableTest, EmptyTableResolvesEverythingToTheDefault) {
  absl::StatusOr<PolicyTable> table = PolicyTable::Create(MethodPolicy{}, {});
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->Resolve("/a.B/C").budget.request_cap, absl::InfiniteDuration());
  EXPECT_TRUE(table->Keys().empty());
}

TEST(PolicyTableTest, KeysAreListedDefaultThenServicesThenMethods) {
  absl::StatusOr<PolicyTable> table =
      PolicyTable::Create(MethodPolicy{}, {{"b.S/M", MethodPolicy{}},
                                           {"a.S/*", MethodPolicy{}},
                                           {"*", MethodPolicy{}},
                                           {"a.S/M", MethodPolicy{}}});
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_THAT(table->Keys(), ElementsAre("*", "a.S/*", "a.S/M", "b.S/M"));
  EXPECT_NE(table->Find("a.S/*"), nullptr);
  EXPECT_EQ(table->Find("a.S/X"), nullptr);
}

TEST(PolicyTableTest, MalformedKeysAreRefusedByName) {
  for (const char* key : {"", "/", "a.S", "/a.S/M", "a.S/", "/M", "a.S/M/x", "a*/M", "a.S/M*"}) {
    absl::StatusOr<PolicyTable> table =
        PolicyTable::Create(MethodPolicy{}, {{key, MethodPolicy{}}});
    ASSERT_FALSE(table.ok()) << key;
    EXPECT_THAT(table.status().message(), HasSubstr(absl::StrCat("\"", key, "\""))) << key;
  }
}

TEST(PolicyTableTest, DuplicateKeyIsRefused) {
  absl::StatusOr<PolicyTable> table =
      PolicyTable::Create(MethodPolicy{}, {{"a.S/M", MethodPolicy{}}, {"a.S/M", MethodPolicy{}}});
  ASSERT_FALSE(table.ok());
  EXPECT_EQ(table.status().message(), "policy table: method a.S/M is given twice");
}

TEST(PolicyTableTest, EveryEntryIsValidatedAndNamed) {
  MethodPolicy incident;  // the seeds' incident: 5 s around three 10 s attempts
  incident.budget.request_cap = absl::Seconds(5);
  incident.budget.attempt_cap = absl::Seconds(10);
  incident.retry = RetryPolicy{};
  absl::StatusOr<PolicyTable> table =
      PolicyTable::Create(MethodPolicy{}, {{"demo.Orders/Create", incident}});
  ASSERT_FALSE(table.ok());
  EXPECT_THAT(table.status().message(), HasSubstr("method demo.Orders/Create: retry policy: "));
  EXPECT_THAT(table.status().message(), HasSubstr("at most 1 of 3 attempts can run"));

  MethodPolicy bad_default;
  bad_default.budget.hop_reserve = -absl::Milliseconds(1);
  table = PolicyTable::Create(bad_default, {});
  ASSERT_FALSE(table.ok());
  EXPECT_THAT(table.status().message(), HasSubstr("default: "));

  table = PolicyTable::Create(MethodPolicy{}, {{"demo.Orders/*", bad_default}});
  ASSERT_FALSE(table.ok());
  EXPECT_THAT(table.status().message(), HasSubstr("service demo.Orders: "));
}

TEST(PolicyTableTest, ValidateMethodPolicyTable) {
  MethodPolicy hedged;
  hedged.hedge = HedgePolicy{};
  hedged.idempotent = true;
  MethodPolicy hedged_write = hedged;
  hedged_write.idempotent = false;
  MethodPolicy both = hedged;
  both.retry = RetryPolicy{};
  MethodPolicy idle_zero;
  idle_zero.stream_idle_budget = absl::ZeroDuration();
  MethodPolicy shield_zero;
  shield_zero.shield_bound = absl::ZeroDuration();
  MethodPolicy shield_forever;
  shield_forever.shield_bound = absl::InfiniteDuration();
  MethodPolicy shield_2s;
  shield_2s.shield_bound = absl::Seconds(2);
  MethodPolicy bad_hedge = hedged;
  bad_hedge.hedge->max_attempts = 4;
  struct Case {
    const char* name;
    MethodPolicy policy;
    const char* error;  // "" for OK
  };
  const Case cases[] = {
      {"defaults", MethodPolicy{}, ""},
      {"hedged idempotent", hedged, ""},
      {"hedged write", hedged_write, "must be idempotent"},
      {"retried and hedged", both, "not both"},
      {"idle zero", idle_zero, "stream_idle_budget must be > 0"},
      {"shield bound zero", shield_zero, "shield_bound must be > 0 and finite"},
      {"shield bound infinite", shield_forever, "shield_bound must be > 0 and finite"},
      {"shield bound 2s", shield_2s, ""},
      {"hedge of 4", bad_hedge, "hedge policy: max_attempts must be 1..3, got 4"},
  };
  for (const Case& c : cases) {
    const absl::Status s = ValidateMethodPolicy(c.policy);
    if (*c.error == '\0') {
      EXPECT_TRUE(s.ok()) << c.name << ": " << s;
    } else {
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.name;
      EXPECT_THAT(s.message(), HasSubstr(c.error)) << c.name;
    }
  }
}

TEST(PolicyTableTest, NamesThatMatchNoRegisteredMethodAreListed) {
  absl::StatusOr<PolicyTable> table =
      PolicyTable::Create(MethodPolicy{}, {{"*", MethodPolicy{}},
                                           {"demo.Orders/*", MethodPolicy{}},
                                           {"demo.Orders/Get", MethodPolicy{}},
                                           {"demo.Orders/Gte", MethodPolicy{}},
                                           {"demo.Ordres/*", MethodPolicy{}}});
  ASSERT_TRUE(table.ok()) << table.status();
  const std::vector<std::string> registered = {"/demo.Orders/Get", "/demo.Orders/Create"};
  const absl::Status s = table->CheckNamesExist(registered);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "policy table names what this server does not serve: service demo.Ordres, method "
            "demo.Orders/Gte");
  absl::StatusOr<PolicyTable> good = PolicyTable::Create(
      MethodPolicy{}, {{"demo.Orders/*", MethodPolicy{}}, {"demo.Orders/Get", MethodPolicy{}}});
  ASSERT_TRUE(good.ok());
  EXPECT_TRUE(good->CheckNamesExist(registered).ok());
}

TEST(PolicyTableTest, GrpcServicesAreUncappedUnlessAnEntryNamesThem) {
  absl::StatusOr<PolicyTable> table = PolicyTable::Create(
      WithCaps(absl::Seconds(5), absl::Seconds(6)),
      {{"grpc.reflection.v1alpha.ServerReflection/*", WithRequestCap(absl::Seconds(30))},
       {"grpc.health.v1.Health/Check", WithRequestCap(absl::Seconds(1))}});
  ASSERT_TRUE(table.ok()) << table.status();
  struct Case {
    const char* full_method;
    bool with_table;
    absl::Duration request_cap;  // of InboundPolicy(table's entry)
    absl::Duration max_inbound;
  };
  const Case cases[] = {
      // A health watch, a stream without a deadline, is never cut by a
      // default cap or clamp: with one policy, or with a table that does not
      // name it.
      {"/grpc.health.v1.Health/Watch", false, absl::InfiniteDuration(), absl::InfiniteDuration()},
      {"/grpc.health.v1.Health/Watch", true, absl::InfiniteDuration(), absl::InfiniteDuration()},
      {"/grpc.channelz.v1.Channelz/GetTopChannels", true, absl::InfiniteDuration(),
       absl::InfiniteDuration()},
      // An entry of its own, for the method or its service, is kept.
      {"/grpc.health.v1.Health/Check", true, absl::Seconds(1), absl::InfiniteDuration()},
      {"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", true, absl::Seconds(30),
       absl::InfiniteDuration()},
      // Application methods keep their cap and clamp, however they are named.
      {"/demo.Orders/Create", false, absl::Seconds(5), absl::Seconds(6)},
      {"/demo.Orders/Create", true, absl::Seconds(5), absl::Seconds(6)},
      {"/grpcx.Svc/M", true, absl::Seconds(5), absl::Seconds(6)},
      {"/my.grpc.Svc/M", true, absl::Seconds(5), absl::Seconds(6)},
      {"grpc.health.v1.Health/Watch", true, absl::Seconds(5), absl::Seconds(6)},  // not a full name
      {"", true, absl::Seconds(5), absl::Seconds(6)},
  };
  for (const Case& c : cases) {
    const PolicyTable* t = c.with_table ? &*table : nullptr;
    const BudgetPolicy& resolved = table->Resolve(c.full_method).budget;
    const BudgetPolicy p = InboundPolicy(resolved, c.full_method, t);
    EXPECT_EQ(p.request_cap, c.request_cap) << c.full_method << " table=" << c.with_table;
    EXPECT_EQ(p.max_inbound_budget, c.max_inbound) << c.full_method << " table=" << c.with_table;
    // Nothing else changes.
    EXPECT_EQ(p.attempt_cap, resolved.attempt_cap) << c.full_method;
    EXPECT_EQ(p.hop_reserve, resolved.hop_reserve) << c.full_method;
    EXPECT_EQ(p.min_attempt_budget, resolved.min_attempt_budget) << c.full_method;
  }
  EXPECT_TRUE(IsGrpcServiceMethod("/grpc.health.v1.Health/Watch"));
  EXPECT_FALSE(IsGrpcServiceMethod("/grpcx.Svc/M"));
  EXPECT_FALSE(IsGrpcServiceMethod(""));
}

TEST(PolicyTableTest, ScopeNamesAreStable) {
  EXPECT_EQ(PolicyScopeName(PolicyScope::kDefault), "default");
  EXPECT_EQ(PolicyScopeName(PolicyScope::kService), "service");
  EXPECT_EQ(PolicyScopeName(PolicyScope::kMethod), "method");
  EXPECT_EQ(::testing::PrintToString(PolicyScope::kService), "service");
}

}  // namespace
}  // namespace hopbudget
