#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kiln {

/// A position in a user's file; line and column count from 1, 0 means "unknown". The column
/// counts bytes, as BuildKit's and toml++'s positions do.
struct SourcePos {
  std::string file;
  int line = 0;
  int column = 0;

  bool operator==(const SourcePos&) const = default;
};

/// An error in user input: where it is, what is wrong and what to do about it.
struct Diagnostic {
  SourcePos pos;
  std::string message;
  std::string hint;
};

using Diagnostics = std::vector<Diagnostic>;

/// Render as `file:line:col: error: message`, the offending line with a caret under the
/// column, and `hint: ...` when there is one. Reads the file to show the line.
std::string format_diagnostic(const Diagnostic& diagnostic);

/// How wide an excerpt of a source line may be: a 10 MB line is shown around its caret.
constexpr size_t k_excerpt_columns = 200;

/// `line` as a terminal may show it, with a caret line under byte column `column` (1-based; 0:
/// no caret), each indented by two spaces and ending in a newline. Control characters, escape
/// sequences and bytes that are not UTF-8 are shown as `\xNN`, never sent to the terminal; a
/// line wider than k_excerpt_columns is clipped to a window around the caret, marked `...`.
std::string excerpt(std::string_view line, int column);

/// `text` with every byte a terminal would act on (control characters, escape sequences,
/// invalid UTF-8) shown as `\xNN`, newlines kept: for messages that quote user input.
std::string printable(std::string_view text);

} // namespace kiln
