#include "util/diagnostic.h"

#include <algorithm>
#include <cstdio>

#include "util/fs.h"
#include "util/strings.h"

namespace kiln {

namespace {

/// One shown piece of a line: the bytes it stands for and how it is shown.
struct Glyph {
  size_t offset; // of its first byte in the line
  std::string shown;
};

std::vector<Glyph> glyphs(std::string_view line) {
  std::vector<Glyph> out;
  size_t i = 0;
  while (i < line.size()) {
    unsigned char c = static_cast<unsigned char>(line[i]);
    size_t length = utf8_length(line.substr(i));
    if (c == '\t' || (c >= 0x20 && c < 0x7F) || length > 1) {
      length = std::max<size_t>(length, 1);
      out.push_back({i, std::string(line.substr(i, length))});
      i += length;
      continue;
    }
    char hex[8];
    std::snprintf(hex, sizeof hex, "\\x%02X", c);
    out.push_back({i, hex});
    ++i;
  }
  return out;
}

size_t width(const Glyph& glyph) {
  // A UTF-8 sequence is one column (wide scripts would need a width table; a caret a column
  // off under them is the only cost), an escape as many as it has characters.
  return glyph.shown.size() > 1 && static_cast<unsigned char>(glyph.shown[0]) >= 0x80
             ? 1
             : glyph.shown.size();
}

/// The line of `file` numbered `line` (1-based), or "" when it cannot be read.
std::string line_of(const std::string& file, int line) {
  // A chain file or Dockerfile larger than this is not worth reading again for an excerpt.
  auto text = read_file(file, uint64_t{64} << 20);
  return text ? std::string(line_at(*text, line)) : std::string();
}

} // namespace

std::string printable(std::string_view text) {
  std::string out;
  for (const Glyph& glyph : glyphs(text)) {
    out += glyph.shown == "\\x0A" ? std::string("\n") : glyph.shown;
  }
  return out;
}

std::string excerpt(std::string_view line, int column) {
  std::vector<Glyph> shown = glyphs(line);
  // The glyph the caret points at: the one holding byte column - 1 (past the end: after it).
  size_t target = shown.size();
  if (column > 0) {
    size_t byte = static_cast<size_t>(column - 1);
    target = static_cast<size_t>(
        std::upper_bound(shown.begin(), shown.end(), byte,
                         [](size_t b, const Glyph& g) { return b < g.offset; }) -
        shown.begin());
    target = target > 0 ? target - 1 : 0;
    if (byte >= line.size()) {
      target = shown.size();
    }
  }
  // Widen a window around the target glyph until it holds k_excerpt_columns.
  size_t first = column > 0 ? std::min(target, shown.size()) : 0;
  size_t last = first; // one past
  size_t used = 0;
  bool grew = true;
  while (grew) {
    grew = false;
    if (last < shown.size() && used + width(shown[last]) <= k_excerpt_columns) {
      used += width(shown[last++]);
      grew = true;
    }
    // Keep the caret about a third of the way in: what led up to it matters more.
    if (first > 0 && used + width(shown[first - 1]) <= k_excerpt_columns &&
        (last == shown.size() || (target - first) * 2 < (last - target))) {
      used += width(shown[--first]);
      grew = true;
    }
  }
  std::string text = first > 0 ? "..." : "";
  std::string pad = first > 0 ? "   " : "";
  for (size_t i = first; i < last; ++i) {
    text += shown[i].shown;
    if (i < target) {
      pad += shown[i].shown == "\t" ? std::string("\t") : std::string(width(shown[i]), ' ');
    }
  }
  if (last < shown.size()) {
    text += "...";
  }
  std::string out = "  " + text + "\n";
  if (column > 0) {
    out += "  " + pad + "^\n";
  }
  return out;
}

std::string format_diagnostic(const Diagnostic& d) {
  std::string out = printable(d.pos.file);
  if (d.pos.line > 0) {
    out += ":" + std::to_string(d.pos.line);
    if (d.pos.column > 0) {
      out += ":" + std::to_string(d.pos.column);
    }
  }
  out += ": error: " + printable(d.message) + "\n";
  if (d.pos.line > 0) {
    std::string text = line_of(d.pos.file, d.pos.line);
    if (!text.empty()) {
      out += excerpt(text, d.pos.column);
    }
  }
  if (!d.hint.empty()) {
    out += "  hint: " + printable(d.hint) + "\n";
  }
  return out;
}

} // namespace kiln
