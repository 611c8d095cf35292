#include "hopbudget/hop.h"

#include <atomic>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test_hop.h"

namespace hopbudget {
namespace {

using ::testing::HasSubstr;

// demo.Orders/Get with its own timeout and reserve; every other method the
// default entry's.
std::string Config(absl::Duration get_timeout, absl::Duration get_reserve,
                   absl::Duration default_timeout = absl::Seconds(9)) {
  return absl::StrCat(R"({"methodConfig": [{"name": [{"service": "demo.Orders", "method": "Get"}],
                           "timeout": ")",
                      absl::ToDoubleSeconds(get_timeout), R"(s"},
                          {"name": [{}], "timeout": ")",
                      absl::ToDoubleSeconds(default_timeout), R"(s"}],
      "hopbudget": {"methodPolicy": [{"name": [{"service": "demo.Orders", "method": "Get"}],
                                      "hopReserve": ")",
                      absl::ToDoubleSeconds(get_reserve), R"(s"}]}})");
}

// Names demo.Orders, which this test does not link: names are not checked.
std::unique_ptr<Hop> MakeHop(Metrics* metrics, std::string config) {
  HopOptions options;
  options.name = "orders";
  options.metrics = metrics;
  options.service_config = std::move(config);
  options.check_names = NameCheck::kNone;
  return testing::MakeTestHop(std::move(options));
}

TEST(HopTest, WithoutAServiceConfigEveryMethodGetsTheDefaults) {
  Metrics metrics;
  HopOptions options;
  options.name = "orders";
  options.metrics = &metrics;
  options.defaults.budget.request_cap = absl::Seconds(3);
  absl::StatusOr<std::unique_ptr<Hop>> hop = Hop::Create(std::move(options));
  ASSERT_TRUE(hop.ok()) << hop.status();
  EXPECT_EQ((*hop)->name(), "orders");
  EXPECT_EQ(&(*hop)->metrics(), &metrics);
  EXPECT_EQ(&(*hop)->clock(), &Clock::Real());
  const char* kGet = "/demo.Orders/Get";
  EXPECT_EQ((*hop)->PolicyFor(metrics.Method(kGet), kGet).budget.request_cap, absl::Seconds(3));
  EXPECT_EQ((*hop)->generation(), 1u);
  EXPECT_EQ((*hop)->core_service_config(), "{}");
  EXPECT_FALSE((*hop)->retry_throttling().has_value());
}

TEST(HopTest, BadNameOrConfigIsRefusedAtCreate) {
  HopOptions bad_name;
  bad_name.name = "orders service";
  absl::StatusOr<std::unique_ptr<Hop>> hop = Hop::Create(bad_name);
  ASSERT_FALSE(hop.ok());
  EXPECT_THAT(std::string(hop.status().message()), HasSubstr("orders service"));

  HopOptions bad_config;
  bad_config.name = "orders";
  bad_config.check_names = NameCheck::kNone;
  bad_config.service_config = R"({"methodConfig": [{"name": [{}], "timeout": "-1s"}]})";
  hop = Hop::Create(bad_config);
  ASSERT_FALSE(hop.ok());
  EXPECT_THAT(std::string(hop.status().message()), HasSubstr("timeout must be > 0"));

  HopOptions bad_defaults;
  bad_defaults.name = "orders";
  bad_defaults.defaults.budget.request_cap = absl::ZeroDuration();
  hop = Hop::Create(bad_defaults);
  ASSERT_FALSE(hop.ok());
  EXPECT_THAT(std::string(hop.status().message()), HasSubstr("default: "));
}

// This test links no gRPC service: every name is unknown to it.
TEST(HopTest, NamesThisProgramDoesNotLinkAreRefusedAtCreateAndReload) {
  HopOptions options;
  options.name = "orders";
  options.service_config = Config(absl::Milliseconds(50), absl::Milliseconds(2));
  absl::StatusOr<std::unique_ptr<Hop>> hop = Hop::Create(options);
  ASSERT_FALSE(hop.ok());
  EXPECT_EQ(hop.status().message(),
            "service config: policy table names what this program does not link (no generated "
            "code for it; HopOptions::check_names): method demo.Orders/Get");
  // Only the default entry: nothing to check.
  options.service_config = R"({"methodConfig": [{"name": [{}], "timeout": "1s"}]})";
  hop = Hop::Create(options);
  ASSERT_TRUE(hop.ok()) << hop.status();
  const absl::Status s =
      (*hop)->ReloadServiceConfig(Config(absl::Milliseconds(50), absl::Milliseconds(2)));
  EXPECT_THAT(std::string(s.message()), HasSubstr("does not link"));
  EXPECT_EQ((*hop)->generation(), 1u);
  EXPECT_EQ(NameCheckName(NameCheck::kLinked), "linked");
  EXPECT_EQ(::testing::PrintToString(NameCheck::kNone), "none");
}

TEST(HopTest, EachMethodGetsItsOwnPolicyAndKeepsItsResolution) {
  Metrics metrics;
  std::unique_ptr<Hop> hop =
      MakeHop(&metrics, Config(absl::Milliseconds(50), absl::Milliseconds(2)));
  ASSERT_NE(hop, nullptr);
  const char* kGet = "/demo.Orders/Get";
  const char* kCreate = "/demo.Orders/Create";
  const MethodPolicy& get = hop->PolicyFor(metrics.Method(kGet), kGet);
  EXPECT_EQ(get.budget.request_cap, absl::Milliseconds(50));
  EXPECT_EQ(get.budget.hop_reserve, absl::Milliseconds(2));
  const MethodPolicy& create = hop->PolicyFor(metrics.Method(kCreate), kCreate);
  EXPECT_EQ(create.budget.request_cap, absl::Seconds(9));
  // The second call of a method gets the very same policy object.
  EXPECT_EQ(&hop->PolicyFor(metrics.Method(kGet), kGet), &get);
  // A method without a label of its own ("other", index 0) by name.
  EXPECT_EQ(hop->PolicyFor(MethodId{}, kGet).budget.request_cap, absl::Milliseconds(50));
  EXPECT_EQ(hop->PolicyFor(MethodId{}, kCreate).budget.request_cap, absl::Seconds(9));
}

TEST(HopTest, ReloadReplacesTheTableAndOldPoliciesStayValid) {
  Metrics metrics;
  std::unique_ptr<Hop> hop =
      MakeHop(&metrics, Config(absl::Milliseconds(50), absl::Milliseconds(2)));
  ASSERT_NE(hop, nullptr);
  const char* kGet = "/demo.Orders/Get";
  const MethodId id = metrics.Method(kGet);
  const MethodPolicy& before = hop->PolicyFor(id, kGet);
  EXPECT_EQ(metrics.Snapshot().config_generation, 1);
  ASSERT_TRUE(hop->ReloadServiceConfig(Config(absl::Milliseconds(80), absl::Milliseconds(3))).ok());
  EXPECT_EQ(hop->generation(), 2u);
  EXPECT_EQ(metrics.Snapshot().config_reload(ConfigReload::kApplied), 1u);
  EXPECT_EQ(metrics.Snapshot().config_reload(ConfigReload::kRefused), 0u);
  EXPECT_EQ(metrics.Snapshot().config_generation, 2);
  EXPECT_EQ(hop->PolicyFor(id, kGet).budget.request_cap, absl::Milliseconds(80));
  // A call that resolved before the reload keeps its policy, still alive.
  EXPECT_EQ(before.budget.request_cap, absl::Milliseconds(50));
  EXPECT_EQ(before.budget.hop_reserve, absl::Milliseconds(2));
}

TEST(HopTest, ReloadThatDoesNotValidateKeepsTheTableInForce) {
  Metrics metrics;
  std::unique_ptr<Hop> hop =
      MakeHop(&metrics, Config(absl::Milliseconds(50), absl::Milliseconds(2)));
  ASSERT_NE(hop, nullptr);
  const char* kGet = "/demo.Orders/Get";
  // A reserve larger than the timeout: no downstream call could start.
  const absl::Status s =
      hop->ReloadServiceConfig(Config(absl::Milliseconds(5), absl::Milliseconds(9)));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("method demo.Orders/Get"));
  EXPECT_EQ(hop->ReloadServiceConfig("{").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(hop->generation(), 1u);
  EXPECT_EQ(metrics.Snapshot().config_reload(ConfigReload::kRefused), 2u);
  EXPECT_EQ(metrics.Snapshot().config_reload(ConfigReload::kApplied), 0u);
  EXPECT_EQ(metrics.Snapshot().config_generation, 1);
  EXPECT_EQ(hop->PolicyFor(metrics.Method(kGet), kGet).budget.request_cap, absl::Milliseconds(50));
}

// A SIGHUP handler's reload reads the file itself: a file that cannot be
// opened is refused like a config that does not read (the table kept, one
// count), and a good one replaces the table.
TEST(HopTest, ReloadFromAFileThatCannotBeOpenedKeepsTheTableInForce) {
  Metrics metrics;
  std::unique_ptr<Hop> hop =
      MakeHop(&metrics, Config(absl::Milliseconds(50), absl::Milliseconds(2)));
  ASSERT_NE(hop, nullptr);
  const char* kGet = "/demo.Orders/Get";
  const std::string missing = ::testing::TempDir() + "/no_such_service_config.json";
  const absl::Status s = hop->ReloadServiceConfigFile(missing);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), HasSubstr(missing + ": cannot open it"));
  EXPECT_EQ(hop->generation(), 1u);
  EXPECT_EQ(metrics.Snapshot().config_reload(ConfigReload::kRefused), 1u);

  const std::string path = ::testing::TempDir() + "/hop_test_service_config.json";
  {
    std::ofstream out(path);
    out << Config(absl::Milliseconds(80), absl::Milliseconds(2));
  }
  EXPECT_TRUE(hop->ReloadServiceConfigFile(path).ok());
  std::remove(path.c_str());
  EXPECT_EQ(hop->generation(), 2u);
  EXPECT_EQ(metrics.Snapshot().config_reload(ConfigReload::kApplied), 1u);
  EXPECT_EQ(hop->PolicyFor(metrics.Method(kGet), kGet).budget.request_cap, absl::Milliseconds(80));
}

// Readers resolve while a writer reloads two tables in turn: every policy a
// reader gets is wholly one table's (the timeout and the reserve agree).
TEST(HopTest, ReadersSeeOneTableOrTheOtherNeverAMix) {
  Metrics metrics;
  const std::string a = Config(absl::Milliseconds(100), absl::Milliseconds(1), absl::Seconds(9));
  const std::string b = Config(absl::Milliseconds(200), absl::Milliseconds(2), absl::Seconds(8));
  std::unique_ptr<Hop> hop = MakeHop(&metrics, a);
  ASSERT_NE(hop, nullptr);
  const char* kGet = "/demo.Orders/Get";
  const MethodId id = metrics.Method(kGet);
  std::atomic<bool> stop{false};
  std::atomic<int> mixed{0}, seen_a{0}, seen_b{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&] {
      while (!stop.load()) {
        // The method's entry and the default entry, as the server reads
        // them: both from one table.
        const Hop::Resolved r = hop->Resolve(id, kGet);
        const MethodPolicy& p = *r.method;
        const absl::Duration default_cap = r.table_default->budget.request_cap;
        if (p.budget.request_cap == absl::Milliseconds(100) &&
            p.budget.hop_reserve == absl::Milliseconds(1) && default_cap == absl::Seconds(9)) {
          seen_a.fetch_add(1);
        } else if (p.budget.request_cap == absl::Milliseconds(200) &&
                   p.budget.hop_reserve == absl::Milliseconds(2) &&
                   default_cap == absl::Seconds(8)) {
          seen_b.fetch_add(1);
        } else {
          mixed.fetch_add(1);
        }
      }
    });
  }
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(hop->ReloadServiceConfig(i % 2 == 0 ? b : a).ok());
  }
  stop.store(true);
  for (std::thread& t : readers) t.join();
  EXPECT_EQ(mixed.load(), 0);
  EXPECT_GT(seen_a.load() + seen_b.load(), 0);
  EXPECT_EQ(hop->generation(), 201u);
}

}  // namespace
}  // namespace hopbudget
