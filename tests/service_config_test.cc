#include "hopbudget/advanced/service_config.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hopbudget {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

absl::StatusOr<ServiceConfigPolicies> Parse(absl::string_view json) {
  return PolicyTableFromServiceConfig(json, MethodPolicy{});
}

TEST(ServiceConfigTest, EveryMethodConfigFieldIsMapped) {
  absl::StatusOr<ServiceConfigPolicies> p = Parse(R"json({
    "methodConfig": [
      {"name": [{"service": "demo.Orders", "method": "Create"}],
       "timeout": "2s",
       "waitForReady": true,
       "retryPolicy": {"maxAttempts": 4, "initialBackoff": "0.01s", "maxBackoff": "0.3s",
                       "backoffMultiplier": 1.5,
                       "retryableStatusCodes": ["UNAVAILABLE", "RESOURCE_EXHAUSTED"],
                       "perAttemptRecvTimeout": "0.5s"}},
      {"name": [{"service": "demo.Orders", "method": "Get"}],
       "timeout": "0.05s",
       "waitForReady": false,
       "hedgingPolicy": {"maxAttempts": 3, "hedgingDelay": "0.010s",
                         "nonFatalStatusCodes": ["UNAVAILABLE", 4]}}
    ],
    "retryThrottling": {"maxTokens": 20, "tokenRatio": 0.25}
  })json");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(p->table.Keys(), ElementsAre("demo.Orders/Create", "demo.Orders/Get"));

  const MethodPolicy& create = p->table.Resolve("/demo.Orders/Create");
  EXPECT_EQ(create.budget.request_cap, absl::Seconds(2));
  EXPECT_EQ(create.budget.attempt_cap, absl::Milliseconds(500));
  EXPECT_EQ(create.wait_for_ready, true);
  ASSERT_TRUE(create.retry.has_value());
  EXPECT_EQ(create.retry->max_attempts, 4);
  EXPECT_EQ(create.retry->initial_backoff, absl::Milliseconds(10));
  EXPECT_EQ(create.retry->max_backoff, absl::Milliseconds(300));
  EXPECT_EQ(create.retry->backoff_multiplier, 1.5);
  EXPECT_THAT(create.retry->retryable_codes,
              ElementsAre(absl::StatusCode::kUnavailable, absl::StatusCode::kResourceExhausted));
  EXPECT_FALSE(create.hedge.has_value());
  EXPECT_FALSE(create.idempotent);

  const MethodPolicy& get = p->table.Resolve("/demo.Orders/Get");
  EXPECT_EQ(get.budget.request_cap, absl::Milliseconds(50));
  EXPECT_EQ(get.budget.attempt_cap, absl::InfiniteDuration());
  EXPECT_EQ(get.wait_for_ready, false);
  EXPECT_FALSE(get.retry.has_value());
  ASSERT_TRUE(get.hedge.has_value());
  EXPECT_EQ(get.hedge->max_attempts, 3);
  EXPECT_EQ(get.hedge->delay, absl::Milliseconds(10));
  EXPECT_EQ(get.hedge->quantile, 0);
  // Codes by name and by number (4 is DEADLINE_EXCEEDED).
  EXPECT_THAT(get.hedge->non_fatal_codes,
              ElementsAre(absl::StatusCode::kUnavailable, absl::StatusCode::kDeadlineExceeded));
  EXPECT_TRUE(get.idempotent);

  // A method the config does not name: the defaults.
  const MethodPolicy& other = p->table.Resolve("/demo.Orders/List");
  EXPECT_EQ(other.budget.request_cap, absl::InfiniteDuration());
  EXPECT_FALSE(other.retry.has_value());
  EXPECT_FALSE(other.wait_for_ready.has_value());

  ASSERT_TRUE(p->retry_throttling.has_value());
  EXPECT_EQ(p->retry_throttling->max_tokens, 20);
  EXPECT_DOUBLE_EQ(p->retry_throttling->token_ratio, 0.25);
  EXPECT_TRUE(p->notes.empty());
}

TEST(ServiceConfigTest, SnakeCaseNamesAreReadToo) {
  absl::StatusOr<ServiceConfigPolicies> p = Parse(R"json({
    "method_config": [{"name": [{"service": "a.S"}], "timeout": "1s",
                       "retry_policy": {"max_attempts": 2, "initial_backoff": "0.1s",
                                        "max_backoff": "0.1s", "backoff_multiplier": 1,
                                        "retryable_status_codes": ["UNAVAILABLE"],
                                        "per_attempt_recv_timeout": "0.2s"}}]})json");
  ASSERT_TRUE(p.ok()) << p.status();
  const MethodPolicy& m = p->table.Resolve("/a.S/M");
  EXPECT_EQ(m.budget.request_cap, absl::Seconds(1));
  EXPECT_EQ(m.budget.attempt_cap, absl::Milliseconds(200));
  ASSERT_TRUE(m.retry.has_value());
  EXPECT_EQ(m.retry->max_attempts, 2);
}

TEST(ServiceConfigTest, MostSpecificEntryWinsForEachSourceApart) {
  MethodPolicy defaults;
  defaults.budget.hop_reserve = absl::Milliseconds(7);
  absl::StatusOr<ServiceConfigPolicies> p = PolicyTableFromServiceConfig(R"json({
    "methodConfig": [
      {"name": [{}], "timeout": "9s"},
      {"name": [{"service": "demo.Orders"}], "timeout": "2s"},
      {"name": [{"service": "demo.Orders", "method": "Get"}], "timeout": "0.1s"}
    ],
    "hopbudget": {"methodPolicy": [
      {"name": [{"service": "demo.Orders"}], "hopReserve": "0.003s", "shadow": true},
      {"name": [{"service": "demo.Orders", "method": "Create"}], "minBudget": "0.02s",
       "idempotent": false, "streamIdleBudget": "30s", "maxInboundBudget": "10s",
       "shieldBound": "2.5s", "admission": false},
      {"name": [{"service": "demo.Ledger", "method": "Commit"}], "hopReserve": "0s"}
    ]}
  })json",
                                                                         defaults);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(p->table.Keys(), ElementsAre("*", "demo.Orders/*", "demo.Ledger/Commit",
                                           "demo.Orders/Create", "demo.Orders/Get"));
  struct Case {
    const char* full_method;
    absl::Duration request_cap;
    absl::Duration hop_reserve;
    absl::Duration min_budget;
    bool shadow;
  };
  const absl::Duration kDefaultMin = MethodPolicy{}.budget.min_attempt_budget;
  const Case cases[] = {
      // Its own timeout, its service's hopbudget entry.
      {"/demo.Orders/Get", absl::Milliseconds(100), absl::Milliseconds(3), kDefaultMin, true},
      // Its service's timeout, its own hopbudget entry (which does not
      // inherit the service entry's fields: the most specific entry wins).
      {"/demo.Orders/Create", absl::Seconds(2), absl::Milliseconds(7), absl::Milliseconds(20),
       false},
      {"/demo.Orders/List", absl::Seconds(2), absl::Milliseconds(3), kDefaultMin, true},
      // The methodConfig with an empty name, and its own hopbudget entry.
      {"/demo.Ledger/Commit", absl::Seconds(9), absl::ZeroDuration(), kDefaultMin, false},
      {"/demo.Ledger/Read", absl::Seconds(9), absl::Milliseconds(7), kDefaultMin, false},
      {"/x.Y/Z", absl::Seconds(9), absl::Milliseconds(7), kDefaultMin, false},
  };
  for (const Case& c : cases) {
    const MethodPolicy& m = p->table.Resolve(c.full_method);
    EXPECT_EQ(m.budget.request_cap, c.request_cap) << c.full_method;
    EXPECT_EQ(m.budget.hop_reserve, c.hop_reserve) << c.full_method;
    EXPECT_EQ(m.budget.min_attempt_budget, c.min_budget) << c.full_method;
    EXPECT_EQ(m.shadow, c.shadow) << c.full_method;
  }
  const MethodPolicy& create = p->table.Resolve("/demo.Orders/Create");
  EXPECT_EQ(create.stream_idle_budget, absl::Seconds(30));
  EXPECT_EQ(create.budget.max_inbound_budget, absl::Seconds(10));
  EXPECT_FALSE(create.idempotent);
  EXPECT_EQ(create.shield_bound, absl::Milliseconds(2500));
  EXPECT_FALSE(create.admission);
  // Unset: no bound from the config, and held to admission.
  const MethodPolicy& get = p->table.Resolve("/demo.Orders/Get");
  EXPECT_EQ(get.shield_bound, absl::nullopt);
  EXPECT_TRUE(get.admission);
}

TEST(ServiceConfigTest, EmptyConfigGivesTheDefaults) {
  MethodPolicy defaults;
  defaults.budget.request_cap = absl::Seconds(4);
  absl::StatusOr<ServiceConfigPolicies> p = PolicyTableFromServiceConfig("{}", defaults);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->table.Keys().empty());
  EXPECT_EQ(p->table.Resolve("/a.B/C").budget.request_cap, absl::Seconds(4));
  EXPECT_FALSE(p->retry_throttling.has_value());
  EXPECT_EQ(p->core_json, "{}");
}

TEST(ServiceConfigTest, MaxAttemptsAboveFiveCountsAsFiveWithANote) {
  absl::StatusOr<ServiceConfigPolicies> p = Parse(R"json({"methodConfig": [
      {"name": [{"service": "a.S"}], "retryPolicy": {"maxAttempts": 7, "initialBackoff": "0.1s",
       "maxBackoff": "1s", "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]})json");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->table.Resolve("/a.S/M").retry->max_attempts, 5);
  EXPECT_THAT(p->notes,
              ElementsAre("methodConfig[0]: retryPolicy.maxAttempts 7 counts as 5, as in gRPC"));
}

TEST(ServiceConfigTest, CoreGetsTheConfigWithoutRetriesHedgesOrHopbudget) {
  absl::StatusOr<ServiceConfigPolicies> p = Parse(R"json({
    "loadBalancingConfig": [{"round_robin": {}}],
    "methodConfig": [
      {"name": [{"service": "a.S", "method": "W"}], "timeout": "2s", "waitForReady": true,
       "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.01s", "maxBackoff": "0.1s",
                       "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}},
      {"name": [{"service": "a.S", "method": "R"}], "timeout": "1s",
       "hedgingPolicy": {"maxAttempts": 2, "hedgingDelay": "0.01s"}}],
    "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1},
    "hopbudget": {"methodPolicy": [{"name": [{}], "hopReserve": "0.002s"}]}
  })json");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->core_json,
            R"({"methodConfig":[{"name":[{"service":"a.S","method":"W"}],"waitForReady":true,)"
            R"("timeout":"2s"},{"name":[{"service":"a.S","method":"R"}],"timeout":"1s"}],)"
            R"("loadBalancingConfig":[{"round_robin":{}}]})");
  // What core gets is a service config core can read again.
  absl::StatusOr<ServiceConfigPolicies> again = Parse(p->core_json);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->table.Resolve("/a.S/W").retry.has_value());
}

// hopbudget leaves a method in shadow mode alone: gRPC core keeps its
// retryPolicy (and the config's retryThrottling), as without hopbudget.
TEST(ServiceConfigTest, CoreKeepsTheRetriesOfMethodsInShadowMode) {
  absl::StatusOr<ServiceConfigPolicies> p = Parse(R"json({
    "methodConfig": [
      {"name": [{"service": "a.S", "method": "W"}], "timeout": "2s",
       "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.01s", "maxBackoff": "0.1s",
                       "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}},
      {"name": [{"service": "a.S", "method": "R"}, {"service": "a.S", "method": "Q"}],
       "timeout": "1s", "hedgingPolicy": {"maxAttempts": 2, "hedgingDelay": "0.01s"}}],
    "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1},
    "hopbudget": {"methodPolicy": [
      {"name": [{"service": "a.S", "method": "W"}, {"service": "a.S", "method": "R"}],
       "shadow": true}]}
  })json");
  ASSERT_TRUE(p.ok()) << p.status();
  // R is in shadow mode, Q is not: their shared entry loses its hedge.
  EXPECT_EQ(p->core_json,
            R"({"methodConfig":[{"name":[{"service":"a.S","method":"W"}],"timeout":"2s",)"
            R"("retryPolicy":{"maxAttempts":3,"initialBackoff":"0.010s","maxBackoff":"0.100s",)"
            R"("backoffMultiplier":2,"retryableStatusCodes":["UNAVAILABLE"]}},)"
            R"({"name":[{"service":"a.S","method":"R"},{"service":"a.S","method":"Q"}],)"
            R"("timeout":"1s"}],"retryThrottling":{"maxTokens":10,"tokenRatio":0.1}})");
  EXPECT_TRUE(p->table.Resolve("/a.S/W").shadow);
  EXPECT_FALSE(p->table.Resolve("/a.S/Q").shadow);
}

TEST(ServiceConfigTest, TheSeedsIncidentIsRefusedNamingTheMethod) {
  absl::StatusOr<ServiceConfigPolicies> p = Parse(R"json({"methodConfig": [
      {"name": [{"service": "demo.Orders", "method": "Create"}], "timeout": "5s",
       "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.1s", "maxBackoff": "1s",
                       "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"],
                       "perAttemptRecvTimeout": "10s"}}]})json");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(),
              HasSubstr("service config: method demo.Orders/Create: retry policy: attempt_cap "
                        "(10s)"));
  EXPECT_THAT(p.status().message(), HasSubstr("at most 1 of 3 attempts can run"));
}

// Every malformed input, with the error it gets.
TEST(ServiceConfigTest, MalformedInputsGetClearErrors) {
  const std::string kRetry =
      R"("initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2,
         "retryableStatusCodes": ["UNAVAILABLE"])";
  struct Case {
    std::string name;
    std::string json;
    std::string error;
  };
  const Case cases[] = {
      {"empty input", "", "service config: line 1, column 1: Unexpected end of string"},
      {"bad JSON", "{\"methodConfig\": [\n  {\"name\" [{}]}\n]}",
       "service config: line 2, column 11: Expected : between key:value pair."},
      {"unterminated", "{\"methodConfig\": [{}",
       "service config: line 1, column 21: Unexpected end of string"},
      {"unterminated string", "{\"a\": 1,\n \"b", "service config: line 2, column 4: "},
      {"not an object", "[1, 2]", "service config: the top level must be a JSON object"},
      {"unknown field", R"({"methodConfg": []})", "methodConfg"},
      {"unknown field in a methodConfig", R"({"methodConfig": [{"name": [{}], "timeot": "1s"}]})",
       "timeot"},
      {"unknown hopbudget field",
       R"({"hopbudget": {"methodPolicy": [{"name": [{}], "hopReserv": "1s"}]}})",
       "service config: hopbudget: "},
      {"timeout of the wrong type", R"({"methodConfig": [{"name": [{}], "timeout": 5}]})",
       "timeout"},
      {"duration without its unit", R"({"methodConfig": [{"name": [{}], "timeout": "5"}]})",
       "duration"},
      {"negative timeout", R"({"methodConfig": [{"name": [{}], "timeout": "-1s"}]})",
       "service config: methodConfig[0]: timeout must be > 0, got -1s"},
      {"zero timeout", R"({"methodConfig": [{"name": [{}], "timeout": "0s"}]})",
       "service config: methodConfig[0]: timeout must be > 0, got 0"},
      {"unknown code", R"({"methodConfig": [{"name": [{}], "retryPolicy": {"maxAttempts": 2,
         "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2,
         "retryableStatusCodes": ["UNAVAILABEL"]}}]})",
       "UNAVAILABEL"},
      {"maxAttempts 1",
       R"({"methodConfig": [{"name": [{}], "retryPolicy": {"maxAttempts": 1, )" + kRetry + "}}]}",
       "service config: methodConfig[0]: retryPolicy.maxAttempts must be > 1, got 1"},
      {"maxAttempts missing",
       R"({"methodConfig": [{"name": [{}], "retryPolicy": {)" + kRetry + "}}]}",
       "retryPolicy.maxAttempts must be > 1, got 0"},
      {"negative maxAttempts",
       R"({"methodConfig": [{"name": [{}], "retryPolicy": {"maxAttempts": -2, )" + kRetry + "}}]}",
       "service config: (method_config[0].retry_policy.max_attempts): invalid value -2"},
      {"no initialBackoff",
       R"({"methodConfig": [{"name": [{}], "retryPolicy": {"maxAttempts": 2, "maxBackoff": "1s",
          "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]})",
       "retryPolicy.initialBackoff must be > 0, got 0"},
      {"negative maxBackoff",
       R"({"methodConfig": [{"name": [{}], "retryPolicy": {"maxAttempts": 2,
          "initialBackoff": "0.1s", "maxBackoff": "-1s", "backoffMultiplier": 2,
          "retryableStatusCodes": ["UNAVAILABLE"]}}]})",
       "retryPolicy.maxBackoff must be > 0, got -1s"},
      {"zero multiplier",
       R"({"methodConfig": [{"name": [{}], "retryPolicy": {"maxAttempts": 2,
          "initialBackoff": "0.1s", "maxBackoff": "1s", "retryableStatusCodes": ["UNAVAILABLE"]}}]})",
       "retryPolicy.backoffMultiplier must be > 0, got 0"},
      {"multiplier below 1",
       R"({"methodConfig": [{"name": [{}], "retryPolicy": {"maxAttempts": 2,
          "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 0.5,
          "retryableStatusCodes": ["UNAVAILABLE"]}}]})",
       "service config: default: retry policy: backoff_multiplier"},
      {"no retryable codes",
       R"({"methodConfig": [{"name": [{}], "retryPolicy": {"maxAttempts": 2,
          "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2}}]})",
       "retryPolicy.retryableStatusCodes must not be empty"},
      {"OK is retryable",
       R"({"methodConfig": [{"name": [{}], "retryPolicy": {"maxAttempts": 2,
          "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2,
          "retryableStatusCodes": ["OK"]}}]})",
       "service config: default: retry policy: "},
      {"negative perAttemptRecvTimeout",
       R"({"methodConfig": [{"name": [{}], "retryPolicy": {"maxAttempts": 2, )" + kRetry +
           R"(, "perAttemptRecvTimeout": "-0.5s"}}]})",
       "retryPolicy.perAttemptRecvTimeout must be > 0, got -500ms"},
      {"perAttemptRecvTimeout not a duration",
       R"({"methodConfig": [{"name": [{}], "retryPolicy": {"maxAttempts": 2, )" + kRetry +
           R"(, "perAttemptRecvTimeout": true}}]})",
       "service config: methodConfig[0]: retryPolicy.perAttemptRecvTimeout must be a duration "
       "such as \"0.5s\", got true"},
      {"perAttemptRecvTimeout outside retryPolicy",
       R"({"methodConfig": [{"name": [{}], "perAttemptRecvTimeout": "1s"}]})",
       "perAttemptRecvTimeout"},
      {"retry and hedge",
       R"({"methodConfig": [{"name": [{}], "retryPolicy": {"maxAttempts": 2, )" + kRetry +
           R"(}, "hedgingPolicy": {"maxAttempts": 2, "hedgingDelay": "0.01s"}}]})",
       "retry_or_hedging_policy"},
      {"hedge of 1", R"({"methodConfig": [{"name": [{}], "hedgingPolicy": {"maxAttempts": 1,
         "hedgingDelay": "0.01s"}}]})",
       "service config: methodConfig[0]: hedgingPolicy.maxAttempts must be > 1, got 1"},
      {"hedge of 4", R"({"methodConfig": [{"name": [{}], "hedgingPolicy": {"maxAttempts": 4,
         "hedgingDelay": "0.01s"}}]})",
       "hedgingPolicy.maxAttempts 4: hopbudget sends at most 3 copies of a call"},
      {"hedge at once",
       R"({"methodConfig": [{"name": [{}], "hedgingPolicy": {"maxAttempts": 2}}]})",
       "hedgingPolicy.hedgingDelay must be > 0"},
      {"hedged but not idempotent",
       R"({"methodConfig": [{"name": [{"service": "a.S", "method": "W"}],
          "hedgingPolicy": {"maxAttempts": 2, "hedgingDelay": "0.01s"}}],
          "hopbudget": {"methodPolicy": [{"name": [{"service": "a.S"}], "idempotent": false}]}})",
       "service config: method a.S/W: a hedged method runs more than once"},
      {"method without service",
       R"({"methodConfig": [{"name": [{"method": "Get"}], "timeout": "1s"}]})",
       "service config: methodConfig[0]: name {method: \"Get\"} has no service"},
      {"slash in a name",
       R"({"methodConfig": [{"name": [{"service": "a.S/Get"}], "timeout": "1s"}]})",
       "a name holds no '/'"},
      {"a name twice",
       R"({"methodConfig": [{"name": [{"service": "a.S"}], "timeout": "1s"},
                            {"name": [{"service": "a.S", "method": ""}], "timeout": "2s"}]})",
       "service config: methodConfig[1]: a.S/* is named by methodConfig[0] already"},
      {"a hopbudget name twice",
       R"({"hopbudget": {"methodPolicy": [{"name": [{}, {}], "shadow": true}]}})",
       "service config: hopbudget.methodPolicy[0]: * is named by hopbudget.methodPolicy[0] "
       "already"},
      {"hopbudget entry without a name", R"({"hopbudget": {"methodPolicy": [{"shadow": true}]}})",
       "hopbudget.methodPolicy[0]: names no method"},
      {"negative hopReserve",
       R"({"hopbudget": {"methodPolicy": [{"name": [{}], "hopReserve": "-0.001s"}]}})",
       "service config: hopbudget.methodPolicy[0]: hopReserve must be >= 0, got -1ms"},
      {"zero minBudget", R"({"hopbudget": {"methodPolicy": [{"name": [{}], "minBudget": "0s"}]}})",
       "minBudget must be > 0"},
      {"zero shieldBound",
       R"({"hopbudget": {"methodPolicy": [{"name": [{}], "shieldBound": "0s"}]}})",
       "service config: hopbudget.methodPolicy[0]: shieldBound must be > 0, got 0"},
      {"admission not a bool",
       R"({"hopbudget": {"methodPolicy": [{"name": [{}], "admission": "off"}]}})", "admission"},
      {"reserve eats the request",
       R"({"methodConfig": [{"name": [{"service": "a.S"}], "timeout": "0.01s"}],
          "hopbudget": {"methodPolicy": [{"name": [{}], "hopReserve": "0.02s"}]}})",
       "service config: service a.S: "},
      {"throttle without tokens", R"({"retryThrottling": {"tokenRatio": 0.1}})",
       "service config: retryThrottling: "},
      {"throttle without ratio", R"({"retryThrottling": {"maxTokens": 10}})",
       "service config: retryThrottling: "},
      {"newline in an unknown key", "{\"methodConfig\": [{\"na\nme\": []}]}",
       "na\\nme: Cannot find field."},
      {"hopbudget not an object", R"({"hopbudget": [1]})",
       "service config: hopbudget must be a JSON object"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<ServiceConfigPolicies> p = Parse(c.json);
    ASSERT_FALSE(p.ok()) << c.name;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
    const std::string message(p.status().message());
    EXPECT_THAT(message, HasSubstr(c.error)) << c.name;
    EXPECT_THAT(message, Not(HasSubstr("\n"))) << c.name;
  }
}

}  // namespace
}  // namespace hopbudget
