// Copyright hopbudget authors.
//
// The prometheus-cpp adapter serves the same series as hopbudget's own
// exposition: every sample of FormatPrometheusText(), read back from what
// prometheus-cpp's TextSerializer writes of Collect(), with the same HELP
// and TYPE; over a registry that saw calls, latencies, budgets, retries and
// expiries.
#include "hopbudget/advanced/prometheus_collectable.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "hopbudget/advanced/exposition.h"
#include "metrics_recorder.h"

namespace hopbudget {
namespace {

using ::testing::HasSubstr;

// A text exposition as (series -> value) and (family -> "TYPE t HELP h"):
// label order kept, `le` and values compared as numbers (the two writers
// format floats differently).
struct Series {
  std::map<std::string, double> samples;
  std::map<std::string, std::string> families;
};

Series Read(const std::string& text) {
  Series out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (absl::ConsumePrefix(&line, "# HELP ")) {
      const size_t sp = line.find(' ');
      out.families[std::string(line.substr(0, sp))] += absl::StrCat("HELP ", line.substr(sp + 1));
      continue;
    }
    if (absl::ConsumePrefix(&line, "# TYPE ")) {
      const size_t sp = line.find(' ');
      out.families[std::string(line.substr(0, sp))] += absl::StrCat(" TYPE ", line.substr(sp + 1));
      continue;
    }
    const size_t sp = line.rfind(' ');
    std::string key(line.substr(0, sp));
    size_t le = key.find(",le=\"");  // not the tail of role="
    if (le == std::string::npos) le = key.find("{le=\"");
    if (le != std::string::npos) {
      ++le;
      const size_t end = key.find('"', le + 4);
      const std::string bound = key.substr(le + 4, end - le - 4);
      double v = INFINITY;
      if (bound != "+Inf") {
        EXPECT_TRUE(absl::SimpleAtod(bound, &v)) << line;
      }
      key = key.substr(0, le) + "le=" + absl::StrCat(v) + key.substr(end + 1);
    }
    double value = 0;
    const absl::string_view v = line.substr(sp + 1);
    if (v == "+Inf") {
      value = INFINITY;
    } else {
      EXPECT_TRUE(absl::SimpleAtod(v, &value)) << line;
    }
    EXPECT_TRUE(out.samples.emplace(key, value).second) << "duplicate series: " << line;
  }
  return out;
}

TEST(PrometheusCollectableTest, ServesTheSameSeriesAsHopbudgetsOwnExposition) {
  Metrics m;
  const MethodId other{};
  internal::Record(m).EndServerCall(other, absl::StatusCode::kOk, absl::Milliseconds(12));
  internal::Record(m).EndServerCall(other, absl::StatusCode::kDeadlineExceeded,
                                    absl::Milliseconds(800));
  internal::Record(m).EndClientAttempt(other, absl::StatusCode::kUnavailable, absl::Milliseconds(3),
                                       ClientCallKind::kRetryAttempt);
  internal::Record(m).EndRetryingCall(other, absl::StatusCode::kOk, 2, absl::Milliseconds(9));
  internal::Record(m).ObserveBudgetAtArrival(other, absl::Milliseconds(800));
  internal::Record(m).ObserveRequestBudget(other, absl::Milliseconds(300));
  internal::Record(m).ObserveBudgetRemaining(other, absl::Milliseconds(20));
  internal::Record(m).CountRetry(other, absl::StatusCode::kUnavailable);
  internal::Record(m).CountRetryDecision(RetryOutcome::kThrottled);
  internal::Record(m).CountDeadlineExceeded(Side::kServer, DeadlineSource::kRequest, "a\"b");
  internal::Record(m).CountShield(ShieldEvent::kRefused);
  internal::Record(m).AddShieldInFlight(2);

  PrometheusOptions options;
  options.hop = "orders";
  options.metrics = &m;
  absl::StatusOr<std::shared_ptr<prometheus::Collectable>> collectable =
      NewPrometheusCollectable(options);
  ASSERT_TRUE(collectable.ok()) << collectable.status();
  const std::string theirs = prometheus::TextSerializer().Serialize((*collectable)->Collect());
  const std::string ours = FormatPrometheusText(m.Snapshot(), "orders");
  const Series a = Read(ours), b = Read(theirs);
  EXPECT_EQ(a.families, b.families);
  EXPECT_EQ(a.samples.size(), b.samples.size());
  for (const auto& [key, value] : a.samples) {
    auto it = b.samples.find(key);
    ASSERT_NE(it, b.samples.end()) << "missing from prometheus-cpp's output: " << key;
    EXPECT_DOUBLE_EQ(it->second, value) << key;
  }
  EXPECT_THAT(theirs, HasSubstr("hopbudget_server_call_duration_seconds_count{method=\"other\","
                                "role=\"application\",code=\"OK\"} 1"));
}

TEST(PrometheusCollectableTest, ProcessFamiliesOnlyWhenAsked) {
  Metrics m;
  PrometheusOptions options;
  options.hop = "orders";
  options.metrics = &m;
  auto without = NewPrometheusCollectable(options);
  options.process_metrics = true;
  auto with = NewPrometheusCollectable(options);
  ASSERT_TRUE(without.ok() && with.ok());
  prometheus::TextSerializer serializer;
  EXPECT_THAT(serializer.Serialize((*without)->Collect()),
              ::testing::Not(HasSubstr("process_resident_memory_bytes")));
  EXPECT_THAT(serializer.Serialize((*with)->Collect()),
              HasSubstr("# TYPE process_resident_memory_bytes gauge"));
}

TEST(PrometheusCollectableTest, BadHopIsRefused) {
  PrometheusOptions options;
  options.hop = "no spaces";
  auto c = NewPrometheusCollectable(options);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PrometheusCollectableTest, TextThatIsNotHopbudgetsIsRefusedNamingTheLine) {
  auto f = ParseHopbudgetText("# HELP a x\n# TYPE a counter\nb 1\n");
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(std::string(f.status().message()), HasSubstr("sample of another family: \"b 1\""));
  EXPECT_FALSE(ParseHopbudgetText("x 1\n").ok());
}

}  // namespace
}  // namespace hopbudget
