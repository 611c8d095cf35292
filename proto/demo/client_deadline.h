// Copyright hopbudget authors.
//
// client_deadline.h: the one part of the demo chain's wire that is not a
// message of demo.proto. A demo load client (chainctl, h2_load) sends its
// absolute deadline in `x-demo-client-deadline-us`; the services forward it
// downstream and use it for their accounting ONLY (how much work went on
// after the client left: server/common/accounting.h), never to decide
// anything, or the baseline would become a hopbudget.
//
//   ctx.AddMetadata(hopbudget::demo::kClientDeadlineHeader,
//                   hopbudget::demo::FormatClientDeadline(deadline));
//
// Thread safety: pure functions.
#ifndef HOPBUDGET_DEMO_CLIENT_DEADLINE_H_
#define HOPBUDGET_DEMO_CLIENT_DEADLINE_H_

#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"

namespace hopbudget::demo {

inline constexpr char kClientDeadlineHeader[] = "x-demo-client-deadline-us";

// 1..19 ASCII digits, unix microseconds. nullopt for anything else (the
// header is untrusted like any other: a bad value means "no deadline known").
absl::optional<absl::Time> ParseClientDeadline(absl::string_view value);
// Unix microseconds, 0 for a time before the epoch.
std::string FormatClientDeadline(absl::Time deadline);

}  // namespace hopbudget::demo

#endif  // HOPBUDGET_DEMO_CLIENT_DEADLINE_H_
