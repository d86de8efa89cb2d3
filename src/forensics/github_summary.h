#pragma once

#include <string>
#include <string_view>

#include "forensics/report.h"

namespace kiln {

/// A run as the Markdown of a GitHub Actions step summary: its status, a table of its stages
/// (lane, result, time, cached or built, the cause of a rebuild), its critical path, the
/// stages the history flags as regressions, and every gate verdict. docs/ci.md shows one.
std::string render_step_summary(const ReportInput& in);

/// `text` as literal Markdown inside a table cell: every ASCII punctuation character
/// backslash-escaped (so no `|`, `*`, `<` or backtick of a record's string formats anything),
/// line breaks and other control characters as spaces, and at most `limit` bytes.
std::string markdown_text(std::string_view text, size_t limit = 300);

} // namespace kiln
