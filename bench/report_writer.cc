// Copyright hopbudget authors.
//
// report_writer.cc: the prose of the report is kept here as the report
// shows it, {key} standing for a setting (bench_report.cc's header), so that
// a change of wording is a change of one visible block.
#include "report_writer.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace hopbudget {
namespace bench {
namespace {

namespace fs = std::filesystem;

// bench.sh's sections in its own order: `sections` equal to this is a full run.
constexpr char kAllSections[] =
    "overhead,precision,cancel,scale,micro,chain,hedge,admission,slots,overload,refusal,reload";

// The order of the summary table: the chain's verdicts come last.
const std::vector<std::string>& SummaryOrder() {
  static const std::vector<std::string> order = {"overhead", "precision", "cancel", "scale",
                                                 "hedge",    "admission", "slots",  "overload",
                                                 "refusal",  "reload",    "chain"};
  return order;
}

// The settings file's keys, every one required; `failure` (repeatable) aside.
const std::vector<std::string>& SettingKeys() {
  static const std::vector<std::string> keys = absl::StrSplit(
      "quick sections started_at git_rev nproc cpu_model mem_total kernel grpc_version "
      "load_before load_after elapsed deadlock overhead_placement rounds duration warmup "
      "scale_levels micro_min_time hedge_rounds hedge_calls hedge_warmup hedge_service "
      "hedge_service_sigma slots_rounds overload_gateway_streams overload_edge_limit "
      "overload_levels "
      "overload_rounds "
      "overload_duration chain_client_throttle chain_budget chain_duration chain_rounds "
      "chain_ramp_step chain_latency_gateway chain_latency_orders chain_latency_ledger "
      "refusal_duration refusal_warmup "
      "reload_rounds reload_duration",
      ' ');
  return keys;
}

constexpr char kHeaderMachine[] = R"md(| machine | |
| --- | --- |
| CPUs (nproc) | {nproc} |
| CPU model | {cpu_model} |
| RAM | {mem_total} |
| kernel | {kernel} |
| gRPC (libgrpc++-dev) | {grpc_version} |
| load average before / after | {load_before} / {load_after} |
| benchmark time | {elapsed} s (build excluded) |

Absolute numbers depend on the machine and on its load that day (the overhead
section gives server and load generator a core each; the others share both cores):
the ratios between modes measured in the same round are the result.

)md";

constexpr char kFailed[] = R"md(## Failed runs

These benchmark runs failed (the script exits 1); the sections below use what the
other runs measured.

)md";

constexpr char kTargets[] = R"md(## Targets

Judged by code (`bench/bench_report.cc`):
"not measured" when a section has no samples or its runs cannot support the claim;
lost or wrongly answered calls count as infinitely late, never dropped.

)md";

constexpr char kAfterTargets[] =
    R"md(Why the missed targets are missed, measured: docs/benchmarks.md, the notes
after the table.

)md";

constexpr char kOverhead[] = R"md(## 1. Overhead per call

Echo server (`bench/echo_server`) and closed-loop load generator (`bench/load_gen`,
callback client API, one channel; the server's API sync or callback) in separate
processes over loopback; every call has
a 1 s deadline in every mode. Modes (`bench/bench_modes.h`): (a) plain, no interceptors;
(b) noop, a no-op client + server interceptor pair; (c) budget-only, hopbudget's server
interceptor and its client budget interceptor (`CreateChannel`), budget header sent,
no cap or retry triggered; (d) retry-loop, as (c) with every call made through the typed
`RetryLoop` (policy configured, never triggered); (e) retrying-channel, as (c) with the
client on `CreateRetryingChannel`. {rounds} rounds x (sync, callback) x (a..e), modes
alternating, {duration} per run after {warmup} warm-up. {overhead_placement} CPU per call =
user + sys time of each process over the window / calls. absl::Mutex deadlock detection:
{deadlock} (Debian's libabsl is
built without NDEBUG, so it is on by default in every process, gRPC's locks included).

)md";

constexpr char kPrecision[] = R"md(## 2. Enforcement precision

How late after its budget expires a blocking call returns DEADLINE_EXCEEDED to its
caller (`bench/precision_bench`, in-process callback server whose handler hangs
until cancelled; calls one at a time). Lateness = return time - deadline, on
`absl::Now()` because deadlines are `absl::Time`. For `attempt` the deadline is taken
as call start + attempt cap, an upper bound. `client` is gRPC's own deadline timer
with hopbudget's interceptor installed, the reference for the other two.

)md";

constexpr char kCancel[] = R"md(## 3. Cancellation across three hops

client -> A -> B -> C, three real gRPC servers **in one process** (callback API,
hopbudget installed; A and B relay with `NewDownstreamContext()`). Time from the
client's `TryCancel()` to C's reactor `OnCancel()`, steady clock.

)md";

constexpr char kChain[] = R"md(## 4. Saved work under overload (demo chain)

)md";

// {capacity} and {hopbudget_capacity} are the run's (its setup line).
constexpr char kChainIntro[] =
    R"md(Two demo chains side by side (gateway -> orders -> ledger, separate processes):
**baseline** (sync services: a thread per call; constant 1 s timeout per hop, naive
retry loop of 3 x 1 s, no cancellation) and **hopbudget** (as in the demo:
the order path on the callback API, no thread waiting on a call's behalf; request
cap 2 s, attempt cap 300 ms x 3, shield bound 600 ms). Latency mix injected: gateway
{chain_latency_gateway}, orders {chain_latency_orders}, ledger {chain_latency_ledger}.
Client budget {chain_budget}, open loop (`chainctl load`, run by `chainctl saved-work`),
{chain_duration} per run.
The hopbudget chain's client throttles itself as the SRE book's clients do
(`--client-throttle={chain_client_throttle}`, hopbudget's ClientThrottle: it sends about
{chain_client_throttle} times what the gateway accepts and refuses the rest itself, unsent;
those count as failed calls); at 2x and 4x the same chain also runs under a client
that does not back off (`hopbudget-client-unthrottled`), judged separately.
Measured capacity (each chain on its own: the highest rate with >= 90 % OK, from a
doubling ramp of {chain_ramp_step} steps and two bisection steps): baseline
**{capacity}/s**, hopbudget **{hopbudget_capacity}/s**. Load levels are multiples of the
baseline's capacity.
Goodput = OK responses (all within the client budget) per second. Work after
deadline = handler time spent past the client deadline, summed over the hops
(each service's accounting, read 1.5 s after the run: baseline work still running
then is not counted, so the baseline figure is a lower bound).

At 2x and 4x each mode runs {chain_rounds} rounds (modes alternating); the targets
are judged on each level's median goodput (min..max beside it), the sum of its
late calls and work after the deadline, and the highest p99.
)md";

constexpr char kScale[] = R"md(## 5. Scale: {scale_levels} concurrent calls

`bench/scale_bench`, one process per mode and concurrency: a callback server parks
each call until cancelled; a callback-API client keeps N calls in flight on one
channel with distinct deadlines. plain (and no-op pair): each call ends at its client deadline.
hopbudget: the server's request cap is tighter than the client deadline, so every
call arms hopbudget's shared timer and ends when it fires (the worst case: one
hopbudget timer per call; on the common path none is armed). The timer's own cost
as pending timers grow is `BM_TimerArmCancel/N` in the micro-benchmarks.

)md";

constexpr char kMicro[] = R"md(## 6. Micro-benchmarks

Google Benchmark (`bench/micro_bench`), min time {micro_min_time}s per benchmark.

)md";

constexpr char kHedge[] = R"md(## 7. Hedged requests and races

`bench/hedge_bench`: two in-process callback replicas; replica A answers in 1 s for
5 % of its calls. Closed loop, 16 in flight: both unhedged (primaries alternate) once,
then {hedge_rounds} round(s) of a healthy replica alone and hedged (delay from the recent p95,
extra load capped at 5 %), their order alternating; each run counts {hedge_calls} calls
after {hedge_warmup} that warm it up (a new hedger uses its fixed delay and an empty
bucket at first). The p99 target is judged on the median of the rounds' ratios.
It is judged on replicas that do work: every answer that is not slow takes a
log-normal service time (median {hedge_service}, sigma {hedge_service_sigma}; gRPC's alarms add
up to 1 ms). The same runs with replicas that answer at once follow, not judged:
there the healthy p99 (about 1 ms on 2 cores) is below the hedge's least delay
(1 ms) plus one more call under the same load, so the ratio sits near 2 whatever
the hedger does.
Then races of 3 where one target hangs: how long after the winner's answer the hung
callee sees its cancel.

)md";

constexpr char kAdmission[] = R"md(## 8. Admission: queued calls and the common path

`bench/admission_bench`: 10 000 calls wait behind a full limit (1, one call parked in
its handler) on a callback and on a sync server, each arm its own process; gRPC's own
cost of a waiting call is the same 10 000 calls parked inside callback handlers with
admission off. Memory per call is RSS (and heap in use) from before the calls to all
waiting, over 10 000. The common path: a closed loop, 16 in flight, admission on with
room to spare against off, alternating rounds.

)md";

constexpr char kSlots[] = R"md(## 9. Slots: calls waiting for a downstream's slots

`bench/slots_bench`: 100 calls through `DownstreamSlots` (max_in_flight 100) park at an
in-process callback server and hold every slot; then 10 000 more callers (callback form,
no thread each) wait for a slot, with budgets spread evenly over 1..2 s and
min_attempt_budget 20 ms, so each wait must fail with `slot-wait` at its deadline less
20 ms. {slots_rounds} round(s). Lateness = the answer's time in `on_done` minus that
give-up time; a caller answered otherwise or never counts as infinitely late.

)md";

constexpr char kOverload[] =
    R"md(## 10. Overload: the hopbudget chain at multiples of its own capacity

The hopbudget chain of section 4 alone (same flags and latency mix; the gateway bounds
each client connection to {overload_gateway_streams} calls in progress, `--max-concurrent-streams`), behind
its edge (`server/edge`: libnghttp2 on one thread, admission with a fixed limit of
{overload_edge_limit} calls in progress, a refusal answered without gRPC; the hops behind it
keep a fixed limit of twice that as a backstop), the edge and the three services
on CPU 0 and the load generator on CPU 1 (when there are two CPUs), so that the load
generator's cost never takes the chain's CPU. The generator is `client/h2load`: gRPC's
unary call written over libnghttp2 on one thread, one connection, a plain gRPC caller (no
hopbudget headers: the edge reads only `grpc-timeout`), calls above the stream bound waiting in its own first-in-first-out queue until a stream frees or their
deadline passes (`expired unsent`), as in a gRPC client's transport; `chainctl load` fills
its core near 9 500 calls/s. Its capacity is measured first (open loop,
3 s steps, the highest rate with >= 90 % OK); then {overload_levels} times it, each
{overload_rounds} round(s) of {overload_duration}, from a client that does not back off
(`unthrottled`) and one that throttles itself (`--client-throttle={chain_client_throttle}`),
their order alternating, budget {chain_budget}. In the same rounds the client that does
not back off also calls the same chain's gateway directly (`gateway=direct`): what the
edge is worth, shown, never judged. Every round is listed; the targets are judged on
every round through the edge. Each round starts once the chain's processes are quiet
(under 5 % of a core: `idle_wait_s` in the raw lines); `edge_cpu_ms` in the raw lines is
the edge's CPU in the round. The CPU per call at each hop is a least-squares fit of each
round's CPU (Admin Stats `cpu_us`, read before and 1.5 s after the round) to its served
calls (`calls`: handlers that did work) and refused calls (`refused`: answered
without work, on arrival or shed). A judged round below its target is listed again
with what each hop's admission shed in it (`hopbudget_admission_shed_total` by
reason, read from each hop's /metrics before and after the round).

)md";

constexpr char kRefusal[] = R"md(## 11. Refusal cost

What a call refused on arrival costs a gRPC server against one it serves: the overhead
section's processes, pinned as there, each arm its own server told what to answer
(`echo_server --answer`). Arms (mode/answer): plain/echo, served without interceptors
(the reference); plain/error, the handler answers RESOURCE_EXHAUSTED at once (gRPC's own
error answer); budget-only/echo, served through hopbudget's interceptors; budget-only/refuse,
hopbudget's server interceptor refuses every call on arrival as one that cannot finish
(`min_attempt_budget` 2 s above the 1 s client deadline; the handler only returns);
budget-only/expired, each call's budget header says its budget is already spent (as after
a wait on its way): refused on arrival, its backstop cancel 100 ms later.
{rounds} rounds x (sync, callback) x the five arms, in that order (reversed in even rounds),
{refusal_duration} per run after {refusal_warmup} warm-up, 1 and 32 in flight. Server CPU per call and
context switches per call (every server thread's, `/proc/PID/task/*/status`) count every
call that ended in the window, answered OK or not; the ratio is to the same round's
plain/echo run.

)md";

constexpr char kInstructions[] = R"md(### In instructions

The same arms with the callback API, each server under callgrind: its instructions
while load_gen keeps 8 calls in flight (after a warm-up, counters zeroed), divided by
the calls that ended in the window. A count, not a time: the noise of the machine does
not reach it; the calls in flight at the window's edges do (8 at most, against the calls
column).

| arm | calls | instructions per call | of plain/echo | of plain/error |
|---|---:|---:|---:|---:|
)md";

constexpr char kReload[] = R"md(## 12. Reload: a Hop's table swapped under load

`bench/reload_bench`: one process, a callback server made from a Hop and an open loop of
unary calls at 2 000/s from a plain gRPC client (1 s deadline each). Rounds alternate
`reload` (the Hop's service config swapped between two tables every 50 ms) and
`steady` (never swapped), their order swapped every round; {reload_rounds} rounds of
{reload_duration}. The tables give the called method different request caps and reserves;
the handler counts a call whose budget mixes them (`mixed`), and one whose downstream
deadline is not its request deadline less its own table's reserve.

)md";

constexpr char kRawData[] = R"md(## Raw data

Every binary's output is in `raw/` next to this report (RESULT lines are the
machine-readable form).
)md";

struct Settings {
  std::map<std::string, std::string> values;
  std::vector<std::string> failures;  // in the order the runs failed
};

absl::StatusOr<Settings> ReadSettings(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("--settings=", path, ": cannot read it"));
  const std::set<std::string> known(SettingKeys().begin(), SettingKeys().end());
  Settings settings;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const size_t eq = line.find('=');
    const std::string where = absl::StrCat("--settings=", path, ", line ", n, ": ");
    if (eq == std::string::npos || eq == 0) {
      return absl::InvalidArgumentError(absl::StrCat(where, "not key=value: \"", line, "\""));
    }
    const std::string key = line.substr(0, eq);
    std::string value = line.substr(eq + 1);
    if (key == "failure") {
      settings.failures.push_back(std::move(value));
    } else if (known.count(key) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(where, "unknown key \"", key, "\""));
    } else if (!settings.values.emplace(key, std::move(value)).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, "\"", key, "\" given twice"));
    }
  }
  if (in.bad()) return absl::DataLossError(absl::StrCat("--settings=", path, ": cannot read it"));
  for (const std::string& key : SettingKeys()) {
    if (settings.values.count(key) == 0) {
      return absl::InvalidArgumentError(absl::StrCat("--settings=", path, ": no \"", key,
                                                     "\" (every key but failure is required)"));
    }
  }
  const std::string& quick = settings.values["quick"];
  if (quick != "0" && quick != "1") {
    return absl::InvalidArgumentError(
        absl::StrCat("--settings=", path, ": quick=", quick, ": must be 0 or 1"));
  }
  return settings;
}

// `text` with each {key} replaced by the setting's value.
std::string Fill(absl::string_view text, const Settings& settings) {
  std::vector<std::pair<std::string, std::string>> replacements;
  for (const auto& [key, value] : settings.values) {
    replacements.emplace_back(absl::StrCat("{", key, "}"), value);
  }
  return absl::StrReplaceAll(text, replacements);
}

// The file's bytes; false when it cannot be opened (absent, most often).
bool ReadIfPresent(const fs::path& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream text;
  text << in.rdbuf();
  *out = text.str();
  return true;
}

absl::Status WriteFile(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::UnavailableError(absl::StrCat(path.string(), ": cannot write it"));
  return absl::OkStatus();
}

// The RESULT lines of every *.txt in `raw`, files in name order (as bench.sh's
// glob listed them in the C locale), lines as `cat | grep` saw them: a file
// without a final newline runs into the next one.
absl::StatusOr<std::string> ResultLines(const fs::path& raw) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(raw, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name[0] != '.' && absl::EndsWith(name, ".txt") && it->is_regular_file(ec)) {
      names.push_back(name);
    }
  }
  if (ec) return absl::UnavailableError(absl::StrCat(raw.string(), ": ", ec.message()));
  std::sort(names.begin(), names.end());
  std::string all;
  for (const std::string& name : names) {
    std::string text;
    if (ReadIfPresent(raw / name, &text)) all += text;
  }
  std::string results;
  for (absl::string_view line : absl::StrSplit(all, '\n')) {
    if (absl::StartsWith(line, "RESULT")) absl::StrAppend(&results, line, "\n");
  }
  return results;
}

// The lines of `log` that start with `prefix`, without it.
std::vector<std::string> LinesAfter(const std::string& log, absl::string_view prefix) {
  std::vector<std::string> out;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (absl::ConsumePrefix(&line, prefix)) out.emplace_back(line);
  }
  return out;
}

// A number as jq 1.6 prints it (the micro table was jq's): the shortest
// digits that read back the same, in fixed notation unless the point falls
// more than 15 places past them or 4 before.
std::string JqNumber(double v) {
  if (v == 0) return std::signbit(v) ? "-0" : "0";
  char buf[64];
  const std::to_chars_result r =
      std::to_chars(buf, buf + sizeof(buf), std::fabs(v), std::chars_format::scientific);
  const std::string sci(buf, r.ptr);  // d[.ddd]e±XX
  const size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exponent = std::atoi(sci.c_str() + e + 1);
  const int point = exponent + 1;  // digits before the decimal point
  const int n = static_cast<int>(digits.size());
  std::string out = v < 0 ? "-" : "";
  if (point <= -4 || point > n + 15) {
    absl::StrAppend(&out, digits.substr(0, 1), n > 1 ? "." : "", digits.substr(1), "e",
                    exponent < 0 ? "-" : "+", absl::StrFormat("%02d", std::abs(exponent)));
  } else if (point <= 0) {
    absl::StrAppend(&out, "0.", std::string(-point, '0'), digits);
  } else if (point >= n) {
    absl::StrAppend(&out, digits, std::string(point - n, '0'));
  } else {
    absl::StrAppend(&out, digits.substr(0, point), ".", digits.substr(point));
  }
  return out;
}

double RoundedToTenth(double v) { return std::round(v * 10) / 10; }

// Section 6: Google Benchmark's JSON (--benchmark_out), one row a benchmark.
absl::StatusOr<std::string> MicroTable(const fs::path& raw) {
  const fs::path path = raw / "micro.json";
  std::string json;
  if (!ReadIfPresent(path, &json) || json.empty()) return std::string("_not run_\n");
  google::protobuf::Struct root;
  if (const auto parsed = google::protobuf::util::JsonStringToMessage(json, &root); !parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), ": ", parsed.ToString()));
  }
  const auto benchmarks = root.fields().find("benchmarks");
  if (benchmarks == root.fields().end() || !benchmarks->second.has_list_value()) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), ": no \"benchmarks\" list"));
  }
  std::string table =
      "| benchmark | time (ns) | CPU (ns) | iterations |\n| --- | --- | --- | --- |\n";
  int i = 0;
  for (const google::protobuf::Value& b : benchmarks->second.list_value().values()) {
    const auto& fields = b.struct_value().fields();
    auto field = [&](const std::string& key, google::protobuf::Value::KindCase kind,
                     const google::protobuf::Value** out) -> absl::Status {
      const auto it = fields.find(key);
      if (it == fields.end() || it->second.kind_case() != kind) {
        return absl::InvalidArgumentError(
            absl::StrCat(path.string(), ": benchmark ", i, " has no ", key));
      }
      *out = &it->second;
      return absl::OkStatus();
    };
    const google::protobuf::Value *name, *real_time, *cpu_time, *iterations;
    for (const absl::Status& s :
         {field("name", google::protobuf::Value::kStringValue, &name),
          field("real_time", google::protobuf::Value::kNumberValue, &real_time),
          field("cpu_time", google::protobuf::Value::kNumberValue, &cpu_time),
          field("iterations", google::protobuf::Value::kNumberValue, &iterations)}) {
      if (!s.ok()) return s;
    }
    absl::StrAppend(&table, "| ", name->string_value(), " | ",
                    JqNumber(RoundedToTenth(real_time->number_value())), " | ",
                    JqNumber(RoundedToTenth(cpu_time->number_value())), " | ",
                    JqNumber(iterations->number_value()), " |\n");
    ++i;
  }
  return table;
}

// A value as awk reads a number: its leading numeric part, else 0.
double AwkNumber(const std::string& s) { return std::strtod(s.c_str(), nullptr); }

// awk's %d: toward zero, clamped to the 64-bit range.
int64_t AwkInt(double v) {
  if (std::isnan(v)) return 0;
  if (v >= 9.2233720368547758e18) return INT64_MAX;
  if (v <= -9.2233720368547758e18) return INT64_MIN;
  return static_cast<int64_t>(v);
}

// Section 11's instruction counts, one row an arm (the last count of an arm
// is the one the ratios divide by), from what run_refusal_instructions wrote.
std::string InstructionsRows(const fs::path& raw) {
  std::string text;
  if (!ReadIfPresent(raw / "refusal-instructions.txt", &text)) return "| (not run) | | | | |\n";
  struct Row {
    std::string arm, calls, per_call;
  };
  std::vector<Row> rows;
  std::map<std::string, std::string> per_call_of;
  // As awk's, the fields carry over from line to line: a line without a key
  // keeps the previous line's value.
  std::map<std::string, std::string> v;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::StartsWith(line, "RESULT bench=refusal-instructions ")) continue;
    for (absl::string_view field :
         absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty())) {
      std::vector<std::string> kv = absl::StrSplit(field, '=');
      v[kv[0]] = kv.size() > 1 ? kv[1] : "";
    }
    rows.push_back({v["arm"], v["calls"], v["per_call"]});
    per_call_of[v["arm"]] = v["per_call"];
  }
  if (rows.empty()) return "| (not measured) | | | | |\n";
  auto ratio = [&per_call_of](const Row& row, const std::string& arm) -> std::string {
    const double of = AwkNumber(per_call_of[arm]);
    if (of == 0) return "-";
    return absl::StrFormat("%.2f", AwkNumber(row.per_call) / of);
  };
  std::string out;
  for (const Row& row : rows) {
    absl::StrAppend(&out, "| ", row.arm, " | ", AwkInt(AwkNumber(row.calls)), " | ",
                    AwkInt(AwkNumber(row.per_call)), " | ", ratio(row, "plain/echo"), " | ",
                    ratio(row, "plain/error"), " |\n");
  }
  return out;
}

}  // namespace

absl::Status WriteReport(const std::string& raw_dir, const std::string& report_path,
                         const std::string& settings_path, const SectionRunner& run_section) {
  const fs::path raw(raw_dir);
  std::error_code ec;
  if (!fs::is_directory(raw, ec)) {
    return absl::NotFoundError(absl::StrCat("--raw=", raw_dir, ": not a directory"));
  }
  absl::StatusOr<Settings> read = ReadSettings(settings_path);
  if (!read.ok()) return read.status();
  const Settings& settings = *read;
  absl::StatusOr<std::string> results = ResultLines(raw);
  if (!results.ok()) return results.status();

  std::map<std::string, std::string> tables;
  std::string log;
  for (const std::string& section : SummaryOrder()) {
    SectionOutput out = run_section(section, *results);
    if (absl::Status s = WriteFile(raw / (section + ".md"), out.tables); !s.ok()) return s;
    log += out.log;
    tables[section] = std::move(out.tables);
  }
  if (absl::Status s = WriteFile(raw / "verdicts.log", log); !s.ok()) return s;
  std::string chart;
  for (const std::string& line : LinesAfter(log, "CHART chain "))
    absl::StrAppend(&chart, line, "\n");
  if (absl::Status s = WriteFile(raw / "chain.dat", chart); !s.ok()) return s;
  absl::StatusOr<std::string> micro = MicroTable(raw);
  if (!micro.ok()) return micro.status();

  const std::map<std::string, std::string>& v = settings.values;
  const bool quick = v.at("quick") == "1";
  std::string report = absl::StrCat("# hopbudget benchmarks\n\nGenerated by `scripts/bench.sh",
                                    quick ? " --quick" : "", "` on ", v.at("started_at"), "\n");
  if (quick) {
    absl::StrAppend(&report, "(commit ", v.at("git_rev"),
                    ", QUICK smoke run: short rounds, numbers are indicative only).\n");
  } else if (v.at("sections") != kAllSections) {
    absl::StrAppend(&report, "(commit ", v.at("git_rev"), ", sections ", v.at("sections"),
                    " only).\n");
  } else {
    absl::StrAppend(&report, "(commit ", v.at("git_rev"), ", full run).\n");
  }
  absl::StrAppend(&report, "\n", Fill(kHeaderMachine, settings));
  if (!settings.failures.empty()) {
    report += kFailed;
    for (const std::string& failure : settings.failures)
      absl::StrAppend(&report, "- ", failure, "\n");
    report += "\n";
  }
  absl::StrAppend(&report, kTargets, "| target | result | verdict |\n| --- | --- | --- |\n");
  for (const std::string& verdict : LinesAfter(log, "VERDICT ")) {
    absl::StrAppend(&report, "| ", verdict, " |\n");
  }
  absl::StrAppend(&report, "\n", kAfterTargets);
  // Prose, then the section's tables.
  auto section = [&](const char* prose, const std::string& name) {
    absl::StrAppend(&report, Fill(prose, settings), tables[name], "\n");
  };
  section(kOverhead, "overhead");
  section(kPrecision, "precision");
  section(kCancel, "cancel");
  report += kChain;
  // The chain section ran when it wrote its setup line.
  Settings chain = settings;
  bool chain_ran = false;
  for (absl::string_view line : absl::StrSplit(*results, '\n')) {
    if (!absl::StartsWith(line, "RESULT bench=chain kind=setup ")) continue;
    chain_ran = true;
    for (absl::string_view field : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
      std::pair<std::string, std::string> kv = absl::StrSplit(field, absl::MaxSplits('=', 1));
      if (kv.first == "capacity" || kv.first == "hopbudget_capacity") {
        chain.values[kv.first] = kv.second;
      }
    }
  }
  if (chain_ran) {
    absl::StrAppend(&report, Fill(kChainIntro, chain), "\n", tables["chain"]);
    if (!chart.empty()) report += "\n<!-- chart -->\n";
  } else {
    report += "**Not run (--only left it out).**\n";
  }
  report += "\n";
  section(kScale, "scale");
  absl::StrAppend(&report, Fill(kMicro, settings), *micro, "\n");
  section(kHedge, "hedge");
  section(kAdmission, "admission");
  section(kSlots, "slots");
  section(kOverload, "overload");
  section(kRefusal, "refusal");
  absl::StrAppend(&report, kInstructions, InstructionsRows(raw), "\n");
  section(kReload, "reload");
  report += kRawData;
  return WriteFile(report_path, report);
}

}  // namespace bench
}  // namespace hopbudget
