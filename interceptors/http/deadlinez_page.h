// Copyright hopbudget authors.
//
// deadlinez_page.h: the /deadlinez page served by HttpExporter.
//
// One self-contained HTML document (inline CSS and JavaScript, no external
// asset; its Content-Security-Policy allows no other origin) that fetches
// /deadlinez.json from the same origin (the page's own path + ".json", so it
// also works behind a path prefix) every 2 s and renders:
//   - the hop name                          #hop
//   - recent calls as budget waterfalls     #calls > .call-row (newest first;
//     data-method, data-code, data-source; class "failed" unless code is
//     OK), each with one .hop-line / .hop-bar[data-hop] per trace entry
//     (bar width proportional to the time spent there, scaled per call) and
//     a .budget-mark[data-hop] at the budget on arrival (none without a
//     deadline); #no-calls ("no calls yet") when the ring is empty
//   - timeouts by source                    #timeouts td[data-source][data-side]
//     (every known source, server and client side)
//   - shielded work                         #shield-in-flight and
//                                           #shield td[data-outcome]
// body[data-state] is "loading", "ok" or "error" (the last fetch failed; the
// last data stays on screen with the reason in #status); body[data-refreshes]
// counts successful renders. Every value from the JSON is inserted as text,
// never as markup.
//
// The JSON it reads is described in docs/metrics.md (/deadlinez.json).
//
// Thread safety: returns a view of a constant.
#ifndef HOPBUDGET_INTERCEPTORS_HTTP_DEADLINEZ_PAGE_H_
#define HOPBUDGET_INTERCEPTORS_HTTP_DEADLINEZ_PAGE_H_

#include "absl/strings/string_view.h"

namespace hopbudget::internal {

// The page, served as "text/html; charset=utf-8".
absl::string_view DeadlinezPageHtml();

}  // namespace hopbudget::internal

#endif  // HOPBUDGET_INTERCEPTORS_HTTP_DEADLINEZ_PAGE_H_
