#include "util/diagnostic.h"

#include <fstream>

#include <fmt/format.h>

namespace kiln {

namespace {

std::string line_of(const std::string& file, int line) {
  std::ifstream in(file);
  std::string text;
  for (int i = 1; i <= line && std::getline(in, text); ++i) {
    if (i == line) {
      return text;
    }
  }
  return {};
}

} // namespace

std::string format_diagnostic(const Diagnostic& d) {
  std::string out = d.pos.file;
  if (d.pos.line > 0) {
    out += fmt::format(":{}", d.pos.line);
    if (d.pos.column > 0) {
      out += fmt::format(":{}", d.pos.column);
    }
  }
  out += fmt::format(": error: {}\n", d.message);
  if (d.pos.line > 0) {
    std::string text = line_of(d.pos.file, d.pos.line);
    if (!text.empty()) {
      out += "  " + text + "\n";
      if (d.pos.column > 0) {
        // Keep tabs so the caret lines up under the same glyph in a terminal.
        std::string pad;
        for (int i = 0; i + 1 < d.pos.column && i < static_cast<int>(text.size()); ++i) {
          pad += text[i] == '\t' ? '\t' : ' ';
        }
        out += "  " + pad + "^\n";
      }
    }
  }
  if (!d.hint.empty()) {
    out += "  hint: " + d.hint + "\n";
  }
  return out;
}

} // namespace kiln
