// Copyright hopbudget authors.
#include "demo/client_deadline.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace hopbudget::demo {

absl::optional<absl::Time> ParseClientDeadline(absl::string_view value) {
  if (value.empty() || value.size() > 19) return absl::nullopt;
  for (char c : value) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return absl::nullopt;
  }
  int64_t us = 0;
  if (!absl::SimpleAtoi(value, &us)) return absl::nullopt;
  return absl::FromUnixMicros(us);
}

std::string FormatClientDeadline(absl::Time deadline) {
  return absl::StrCat(std::max<int64_t>(0, absl::ToUnixMicros(deadline)));
}

}  // namespace hopbudget::demo
