// Copyright hopbudget authors.
//
// cli_flags.h: how every hopbudget binary (the demo services, chainctl,
// hopbudget-inspect, the examples, the benchmarks) reads its command line.
// The flags themselves are absl::flags (ABSL_FLAG in the binary's main
// file: a library never defines one); this header only parses argv into
// them, with one behaviour everywhere:
//   --help, -h, --helpfull    the usage message and this command's flags,
//                             on stdout, exit status 0;
//   a bad command line        "<program>: <what is wrong>" naming the flag and
//                             the value, then "Try --help", on stderr, exit 2
//                             (absl::ParseCommandLine would exit 1, and
//                             answers --help with status 1);
//   --name=value, --name value, --name / --noname for bools, -- ends flags;
//   dashes and underscores alike: ABSL_FLAG(int, metrics_port, ...) is
//   --metrics-port (absl names are identifiers; hopbudget's flags have
//   always been written with dashes), and help and errors say --metrics-port.
// A flag given twice is an error (which one did the user mean?), so is a
// flag another subcommand of the same binary owns.
//
//   ABSL_FLAG(int, port, 0, "gRPC port (0 = any free port)");
//   ABSL_FLAG(absl::Duration, budget, absl::Seconds(2), "each call's deadline");
//   int main(int argc, char** argv) {
//     hopbudget::cli::CommandLine cl = hopbudget::cli::ParseOrExit(
//         argc, argv, "server", "server: serves ...\n\n  server --port=N");
//     hopbudget::cli::ExitIfBad("server", hopbudget::cli::InRange("port",
//         absl::GetFlag(FLAGS_port), 0, 65535));
//
// Header-only (inline), so that every binary, in any folder, can use it
// without a library target of its own; link absl::flags, absl::flags_parse,
// absl::flags_reflection, absl::flags_marshalling and absl::flags_usage.
//
// Thread safety: call from main's thread before any other thread starts.
#ifndef HOPBUDGET_CLIENT_CLI_CLI_FLAGS_H_
#define HOPBUDGET_CLIENT_CLI_CLI_FLAGS_H_

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <iostream>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace hopbudget::cli {

struct CliOptions {
  // How errors and help name the command ("chainctl load").
  std::string program;
  // The first lines of --help: what the command does and its synopsis.
  std::string usage;
  // The flags this command takes, as in ABSL_FLAG (metrics_port). Empty:
  // every flag the binary defines
  // (absl's own flags excepted). A binary with subcommands lists each
  // subcommand's flags, so that another subcommand's flag is refused.
  std::vector<std::string> flags;
  // Flags (as in ABSL_FLAG) that may be given without a value, meaning `implicit_value`
  // (chainctl's --json alone means --json=-: JSON on stdout). The next
  // argument is taken as the value unless it starts with "-".
  std::vector<std::string> value_optional;
  std::string implicit_value = "-";
  // argv[first] is the first argument parsed (2 after a subcommand).
  int first = 1;
};

enum class ParseOutcome { kRun, kHelp, kBadCommandLine };

struct CommandLine {
  ParseOutcome outcome = ParseOutcome::kRun;
  std::string error;                    // kBadCommandLine: what is wrong
  std::vector<std::string> positional;  // arguments that are not flags, in order
  std::set<std::string> given;          // flags given on the command line

  // `name` as in ABSL_FLAG (metrics_port).
  bool WasSet(absl::string_view name) const { return given.count(std::string(name)) > 0; }
};

namespace internal {

inline bool IsAbseilsOwn(const absl::CommandLineFlag& flag) {
  return absl::StrContains(flag.Filename(), "absl/");
}

inline bool Allowed(const CliOptions& options, absl::string_view name) {
  if (options.flags.empty()) return true;
  return std::find(options.flags.begin(), options.flags.end(), name) != options.flags.end();
}

inline bool IsBool(const absl::CommandLineFlag& flag) { return flag.IsOfType<bool>(); }

// What a value of `flag` looks like, for help and errors.
inline std::string Kind(const absl::CommandLineFlag& flag) {
  if (flag.IsOfType<absl::Duration>()) return "DURATION";
  if (flag.IsOfType<int>() || flag.IsOfType<int64_t>() || flag.IsOfType<uint64_t>()) return "INT";
  if (flag.IsOfType<double>()) return "NUMBER";
  if (flag.IsOfType<bool>()) return "BOOL";
  return "STRING";
}

inline std::string KindError(const absl::CommandLineFlag& flag, const std::string& absl_error) {
  const std::string kind = Kind(flag);
  if (kind == "DURATION") return "not a duration (a number and a unit: 800ms, 2s, 1m30s; or 0)";
  if (kind == "INT") return "not an integer";
  if (kind == "NUMBER") return "not a number";
  if (kind == "BOOL") return "not a bool (true or false)";
  return absl_error;
}

inline std::string Underscored(absl::string_view name) {
  std::string out(name);
  std::replace(out.begin(), out.end(), '-', '_');
  return out;
}

}  // namespace internal

// How a flag is written on the command line: metrics_port -> metrics-port.
inline std::string DashName(absl::string_view name) {
  std::string out(name);
  std::replace(out.begin(), out.end(), '_', '-');
  return out;
}

namespace internal {

inline absl::CommandLineFlag* Find(const CliOptions& options, absl::string_view written) {
  const std::string name = Underscored(written);
  if (!Allowed(options, name)) return nullptr;
  absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
  if (flag == nullptr || flag->IsRetired() || IsAbseilsOwn(*flag)) return nullptr;
  return flag;
}

}  // namespace internal

// The --help text: the usage message, then each of this command's flags
// with its help and default, sorted by name.
inline std::string HelpText(const CliOptions& options) {
  std::vector<const absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (flag->IsRetired() || internal::IsAbseilsOwn(*flag)) continue;
    if (!internal::Allowed(options, name)) continue;
    flags.push_back(flag);
  }
  std::sort(flags.begin(), flags.end(),
            [](const auto* a, const auto* b) { return a->Name() < b->Name(); });
  std::string out = options.usage;
  if (!out.empty() && out.back() != '\n') out += '\n';
  absl::StrAppend(&out, "\nFlags:\n");
  for (const absl::CommandLineFlag* f : flags) {
    const std::string def = f->DefaultValue();
    absl::StrAppend(&out, "  --", DashName(f->Name()),
                    internal::IsBool(*f) ? "" : "=" + internal::Kind(*f), "\n      ", f->Help(),
                    " (default: ", def.empty() ? "\"\"" : def, ")\n");
  }
  absl::StrAppend(&out, "  --help\n      this text, then exit 0\n");
  return out;
}

// Parses argv[options.first..] into the binary's absl flags. Never exits,
// never prints: the caller decides (ParseOrExit does both).
inline CommandLine Parse(int argc, const char* const* argv, const CliOptions& options) {
  CommandLine cl;
  auto bad = [&cl](std::string message) {
    cl.outcome = ParseOutcome::kBadCommandLine;
    cl.error = std::move(message);
    return cl;
  };
  bool flags_ended = false;
  for (int i = options.first; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (flags_ended || arg.size() < 2 || arg[0] != '-') {
      cl.positional.emplace_back(arg);
      continue;
    }
    if (arg == "--") {
      flags_ended = true;
      continue;
    }
    absl::string_view body = arg.substr(arg[1] == '-' ? 2 : 1);
    absl::string_view name = body;
    absl::string_view value;
    bool has_value = false;
    if (const size_t eq = body.find('='); eq != absl::string_view::npos) {
      name = body.substr(0, eq);
      value = body.substr(eq + 1);
      has_value = true;
    }
    if (name == "help" || name == "h" || name == "helpfull" || name == "helpshort") {
      cl.outcome = ParseOutcome::kHelp;
      return cl;
    }
    absl::CommandLineFlag* flag = internal::Find(options, name);
    bool negated = false;
    if (flag == nullptr && absl::StartsWith(name, "no") && !has_value) {
      absl::CommandLineFlag* positive = internal::Find(options, name.substr(2));
      if (positive != nullptr && internal::IsBool(*positive)) {
        flag = positive;
        negated = true;
      }
    }
    if (flag == nullptr) {
      return bad(absl::StrCat("unknown flag ", arg.substr(0, arg.size() - body.size()), name));
    }
    const std::string flag_name = DashName(flag->Name());
    if (!cl.given.insert(std::string(flag->Name())).second) {
      return bad(absl::StrCat("--", flag_name, " given twice"));
    }
    std::string text;
    if (negated) {
      text = "false";
    } else if (has_value) {
      text = std::string(value);
    } else if (internal::IsBool(*flag)) {
      text = "true";
    } else if (std::find(options.value_optional.begin(), options.value_optional.end(),
                         flag->Name()) != options.value_optional.end() &&
               (i + 1 >= argc || (argv[i + 1][0] == '-' && argv[i + 1][1] != '\0'))) {
      text = options.implicit_value;
    } else if (i + 1 < argc) {
      text = argv[++i];
    } else {
      return bad(absl::StrCat("--", flag_name, " needs a value"));
    }
    std::string error;
    if (!flag->ParseFrom(text, &error)) {
      return bad(absl::StrCat("--", flag_name, "=", text, ": ", internal::KindError(*flag, error)));
    }
  }
  return cl;
}

// Parse, then: on --help print HelpText on stdout and exit 0; on a bad
// command line print the error and "Try --help" on stderr and exit 2.
inline CommandLine ParseOrExit(int argc, const char* const* argv, const CliOptions& options) {
  absl::SetProgramUsageMessage(options.usage);
  CommandLine cl = Parse(argc, argv, options);
  if (cl.outcome == ParseOutcome::kHelp) {
    std::cout << HelpText(options) << std::flush;
    std::exit(0);
  }
  if (cl.outcome == ParseOutcome::kBadCommandLine) {
    std::cerr << options.program << ": " << cl.error << "\nTry '" << options.program
              << " --help'.\n";
    std::exit(2);
  }
  return cl;
}

// The same for a binary without subcommands that takes all of its flags.
inline CommandLine ParseOrExit(int argc, const char* const* argv, std::string program,
                               std::string usage) {
  CliOptions options;
  options.program = std::move(program);
  options.usage = std::move(usage);
  return ParseOrExit(argc, argv, options);
}

// After parsing: a value absl accepted but this binary does not (a
// negative duration, a port out of range). Prints it like a parse error
// and exits 2 when `status` is not OK.
inline void ExitIfBad(absl::string_view program, const absl::Status& status) {
  if (status.ok()) return;
  std::cerr << program << ": " << status.message() << "\nTry '" << program << " --help'.\n";
  std::exit(2);
}

// The checks ExitIfBad usually gets, each naming the flag and the value.
template <typename Int, std::enable_if_t<std::is_integral_v<Int>, int> = 0>
absl::Status InRange(absl::string_view flag, Int value, int64_t min, int64_t max) {
  if (value >= min && value <= max) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, "=", value, ": must be in [", min, ", ", max, "]"));
}
inline absl::Status InRange(absl::string_view flag, double value, double min, double max) {
  if (value >= min && value <= max) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, "=", value, ": must be in [", min, ", ", max, "]"));
}
// Durations: finite and >= 0 (or > 0 with `positive`).
inline absl::Status NonNegative(absl::string_view flag, absl::Duration value,
                                bool positive = false) {
  if (value == absl::InfiniteDuration() || value == -absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, "=", absl::FormatDuration(value), ": must be finite"));
  }
  if (positive ? value > absl::ZeroDuration() : value >= absl::ZeroDuration()) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("--", flag, "=", absl::FormatDuration(value),
                                                 positive ? ": must be > 0" : ": must be >= 0"));
}
inline absl::Status Positive(absl::string_view flag, absl::Duration value) {
  return NonNegative(flag, value, /*positive=*/true);
}
// > 0; `inf` (no bound) is allowed.
inline absl::Status PositiveOrInfinite(absl::string_view flag, absl::Duration value) {
  if (value == absl::InfiniteDuration()) return absl::OkStatus();
  return Positive(flag, value);
}
inline absl::Status OneOf(absl::string_view flag, absl::string_view value,
                          std::initializer_list<absl::string_view> allowed) {
  for (absl::string_view a : allowed) {
    if (value == a) return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, "=", value, ": must be one of ", absl::StrJoin(allowed, ", ")));
}
inline absl::Status Required(absl::string_view flag, absl::string_view value) {
  if (!value.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--", flag, " is required"));
}

// The first error of several checks, in order.
inline absl::Status FirstError(std::initializer_list<absl::Status> checks) {
  for (const absl::Status& s : checks) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace hopbudget::cli

#endif  // HOPBUDGET_CLIENT_CLI_CLI_FLAGS_H_
