// Copyright hopbudget authors.
#include "deadlinez_page.h"

namespace hopbudget::internal {
namespace {

// deadlinez.html, one literal at build time (embed_file.cmake): the page is
// one response with nothing else to load. Its renderer builds the DOM with
// textContent/setAttribute only, so hop and method names from the JSON can
// never inject markup.
constexpr char kPage[] =
#include "deadlinez.html.inc"
    ;

}  // namespace

absl::string_view DeadlinezPageHtml() { return absl::string_view(kPage, sizeof(kPage) - 1); }

}  // namespace hopbudget::internal
