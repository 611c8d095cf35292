// Copyright hopbudget authors.
//
// hopbudget-lint: says, for every method a gRPC service config names,
// whether its budgets nest and how many attempts fit in its timeout
// (lint.h).
//
//   hopbudget-lint [--json] CONFIG.json     (CONFIG "-": standard input)
//
// Exit status: 0 every entry fits, 1 one does not, 2 the config cannot be
// read (bad JSON with its line and column, an unknown field, a value gRPC
// refuses) or the command line is wrong.
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "client/cli/cli_flags.h"
#include "hopbudget/advanced/service_config.h"
#include "lint.h"

ABSL_FLAG(bool, json, false, "print the report as JSON on stdout instead of text");

namespace {

constexpr char kUsage[] =
    "hopbudget-lint: says, for every method a gRPC service config names, whether its budgets\n"
    "nest (attempt < timeout - reserve), how many attempts fit in its timeout, and where retries\n"
    "never run. Reads methodConfig and retryThrottling, and hopbudget's own section\n"
    "(\"hopbudget\": hopReserve, minBudget, ...).\n\n"
    "  hopbudget-lint [--json] CONFIG.json     (CONFIG - reads standard input)\n\n"
    "Exit status: 0 every entry fits, 1 one does not, 2 the config cannot be read.";

// The whole of `path` ("-": stdin), or an error naming it.
absl::StatusOr<std::string> ReadAll(const std::string& path) {
  if (path == "-") {
    return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("cannot read ", path));
  return text.str();
}

}  // namespace

int main(int argc, char** argv) {
  namespace cli = hopbudget::cli;
  const cli::CommandLine cl = cli::ParseOrExit(argc, argv, "hopbudget-lint", kUsage);
  if (cl.positional.size() != 1) {
    cli::ExitIfBad(
        "hopbudget-lint",
        absl::InvalidArgumentError(
            cl.positional.empty()
                ? "give one service config file (or - for standard input)"
                : absl::StrCat("give one service config file, not ", cl.positional.size())));
  }
  const std::string& file = cl.positional[0];
  const bool json = absl::GetFlag(FLAGS_json);
  absl::StatusOr<std::string> text = ReadAll(file);
  absl::StatusOr<hopbudget::ServiceConfigEntries> config =
      text.ok() ? hopbudget::ReadServiceConfig(*text, hopbudget::MethodPolicy{})
                : absl::StatusOr<hopbudget::ServiceConfigEntries>(text.status());
  if (!config.ok()) {
    const std::string error(config.status().message());
    if (json) std::cout << hopbudget::lint::FormatJsonError(file, error);
    std::cerr << "hopbudget-lint: " << file << ": " << error << "\n";
    return 2;
  }
  const hopbudget::lint::Report report = hopbudget::lint::LintServiceConfig(*config);
  std::cout << (json ? hopbudget::lint::FormatJson(file, report)
                     : hopbudget::lint::FormatText(file, report));
  return report.AllFit() ? 0 : 1;
}
