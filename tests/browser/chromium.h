// Copyright hopbudget authors.
//
// chromium.h: runs Debian's chromium headless on a URL and returns the DOM
// after the page's scripts ran (--dump-dom), for the /deadlinez tests.
//
// The browser is `chromium` on PATH (or $HOPBUDGET_CHROMIUM). A fresh
// --user-data-dir per run, no sandbox (tests run as root in CI), no network
// but the URL's. --virtual-time-budget lets the page's timers and fetches run
// to completion in virtual time, so no real waiting is needed for renders.
// The whole run is bounded by `limit`; past it the browser is killed.
//
// Fonts: by default the machine's (its fontconfig setup). With
// DumpDomOptions::fontconfig_file, chromium runs with FONTCONFIG_FILE set to
// that file instead, so that the fonts it lists are the only ones there are
// (tests/browser/testdata/fonts.conf, for the layout tests).
#ifndef HOPBUDGET_TESTS_BROWSER_CHROMIUM_H_
#define HOPBUDGET_TESTS_BROWSER_CHROMIUM_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace hopbudget::testing {

// The chromium binary, or NotFound with what to install.
absl::StatusOr<std::string> FindChromium();

struct DumpDomOptions {
  int virtual_time_ms = 5000;
  absl::Duration limit = absl::Seconds(90);
  // The window (the layout viewport), without scrollbars so that the
  // width is exactly this; 0: chromium's default.
  int window_width = 0;
  int window_height = 0;
  // A fontconfig configuration (absolute path) that replaces the machine's:
  // FONTCONFIG_FILE for chromium, FONTCONFIG_PATH and FONTCONFIG_SYSROOT
  // unset. "": the machine's fonts. Every font file it names in <glob>
  // (without wildcards) must exist, or DumpDom fails with the ones missing.
  std::string fontconfig_file;
};

// OK if `fontconfig_file` is readable and every font file it names in a
// <glob> without wildcards exists; FailedPrecondition with those missing.
absl::Status CheckFontconfigFile(const std::string& fontconfig_file);

// The serialized DOM of `url` after `virtual_time_ms` of virtual time.
absl::StatusOr<std::string> DumpDom(const std::string& url, const DumpDomOptions& options);
inline absl::StatusOr<std::string> DumpDom(const std::string& url, int virtual_time_ms = 5000,
                                           absl::Duration limit = absl::Seconds(90)) {
  DumpDomOptions options;
  options.virtual_time_ms = virtual_time_ms;
  options.limit = limit;
  return DumpDom(url, options);
}

// Number of start tags in `dom` whose attributes contain every one of
// `attrs` (each a literal such as `class="hop-bar"` or `data-hop="ledger"`).
// Class lists are matched by word: `class="hop-bar"` matches
// class="hop-bar failed".
int CountElements(const std::string& dom, const std::vector<std::string>& attrs);

// The text inside the first element whose start tag contains all `attrs`
// (up to the next '<'), or "" when there is none.
std::string TextOf(const std::string& dom, const std::vector<std::string>& attrs);

}  // namespace hopbudget::testing

#endif  // HOPBUDGET_TESTS_BROWSER_CHROMIUM_H_
