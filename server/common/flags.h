// Copyright hopbudget authors.
//
// flags.h: the demo's command-line flags and durations. Pure, no gRPC.
//
//   hopbudget::demo::FlagSet flags("orders");
//   int port = 0;
//   absl::Duration cap = absl::Seconds(2);
//   flags.Int("port", &port, "gRPC port (0 = any free port)");
//   flags.Duration("request-cap", &cap, "most time one request may take");
//   absl::Status s = flags.Parse(argc, argv);   // --name=value or --name value
//   if (!s.ok()) { std::cerr << s.message() << "\n" << flags.Usage(); return 2; }
//
// Every bad input is an InvalidArgument naming the flag and the value:
// unknown flags, missing values, numbers with trailing garbage, durations
// without a unit, negative or infinite durations, repeated flags.
//
// Thread safety: a FlagSet is used by one thread at start-up.
#ifndef HOPBUDGET_DEMO_FLAGS_H_
#define HOPBUDGET_DEMO_FLAGS_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace hopbudget::demo {

// "800ms", "2s", "1.5s", "250us", "1m30s", and "0". Not negative, not
// infinite, and a unit is required for anything but 0 (is "800" ms or s?).
absl::StatusOr<absl::Duration> ParseDuration(absl::string_view text);

// "800ms", "1.5s", "inf": the shortest readable form.
std::string DurationText(absl::Duration d);

// A probability: a decimal number in [0, 1].
absl::StatusOr<double> ParseProbability(absl::string_view text);

// Checks a gRPC target given on the command line, so that a typo is refused
// at start (gRPC itself accepts any string and only fails each call later).
// Accepted: HOST:PORT (a DNS name, an IPv4 address or a [bracketed] IPv6
// address, and a port 1..65535: the port is required, gRPC's default of 443
// is never what a demo hop means), the same after dns:/// or dns:,
// ipv4:ADDR:PORT[,ADDR:PORT...], ipv6:[ADDR]:PORT[,...], and unix:PATH or
// unix-abstract:NAME (no spaces). InvalidArgument saying what is wrong and
// what is expected otherwise; the caller prefixes the flag's name.
absl::Status ValidateTarget(absl::string_view target);

class FlagSet {
 public:
  explicit FlagSet(std::string program) : program_(std::move(program)) {}

  void String(const std::string& name, std::string* out, std::string help);
  // Integers in [min, max].
  void Int(const std::string& name, int* out, std::string help, int min = 0,
           int max = 1 << 30);
  void Int64(const std::string& name, int64_t* out, std::string help, int64_t min = 0,
             int64_t max = int64_t{1} << 62);
  void Probability(const std::string& name, double* out, std::string help);
  void Double(const std::string& name, double* out, std::string help, double min, double max);
  void Duration(const std::string& name, absl::Duration* out, std::string help);
  // --name (true), --name=true|false.
  void Bool(const std::string& name, bool* out, std::string help);

  // Parses args (argv[first..]); arguments not starting with "--" are
  // positional and returned in `positional` when it is given, else an error.
  absl::Status Parse(int argc, const char* const* argv, int first = 1,
                     std::vector<std::string>* positional = nullptr);
  absl::Status Parse(const std::vector<std::string>& args,
                     std::vector<std::string>* positional = nullptr);
  // True when the flag was given on the command line.
  bool WasSet(const std::string& name) const;

  std::string Usage() const;

 private:
  struct Flag {
    std::function<absl::Status(absl::string_view)> set;
    std::string help;
    std::string default_value;
    bool is_bool = false;
  };
  void Add(const std::string& name, Flag flag);

  std::string program_;
  std::map<std::string, Flag> flags_;
  std::vector<std::string> order_;
  std::map<std::string, int> seen_;
};

}  // namespace hopbudget::demo

#endif  // HOPBUDGET_DEMO_FLAGS_H_
