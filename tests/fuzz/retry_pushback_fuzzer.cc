// Copyright hopbudget authors.
//
// libFuzzer target: `grpc-retry-pushback-ms` is read from an untrusted
// server. Whatever the bytes, a present value is either a delay the client
// could wait (0 .. INT32_MAX ms, the exact number sent) or "do not retry";
// never "absent", never a negative or a larger delay.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>

#include "hopbudget/advanced/retry_policy.h"
#include "hopbudget/advanced/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view in(reinterpret_cast<const char*>(data), size);
  const hopbudget::Pushback p = hopbudget::ParsePushback(in);
  switch (p.kind) {
    case hopbudget::PushbackKind::kAbsent:
      std::abort();
    case hopbudget::PushbackKind::kDoNotRetry:
      if (p.delay != absl::ZeroDuration()) std::abort();
      break;
    case hopbudget::PushbackKind::kDelay: {
      if (p.delay < absl::ZeroDuration() ||
          p.delay > absl::Milliseconds(std::numeric_limits<int32_t>::max())) {
        std::abort();
      }
      // Only digits are accepted, and they are the number of milliseconds.
      int64_t ms = 0;
      for (char c : in) {
        if (c < '0' || c > '9') std::abort();
        ms = ms * 10 + (c - '0');
      }
      if (in.empty() || p.delay != absl::Milliseconds(ms)) std::abort();
      break;
    }
  }
  return 0;
}
