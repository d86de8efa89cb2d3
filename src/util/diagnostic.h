#pragma once

#include <string>
#include <vector>

namespace kiln {

/// A position in a user's file; line and column count from 1, 0 means "unknown".
struct SourcePos {
  std::string file;
  int line = 0;
  int column = 0;
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

} // namespace kiln
