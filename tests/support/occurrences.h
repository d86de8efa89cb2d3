#pragma once

#include <cstddef>
#include <string_view>

namespace kiln::testing {

/// How many times `needle` occurs in `text`, overlapping occurrences included.
inline std::size_t occurrences(std::string_view text, std::string_view needle) {
  std::size_t count = 0;
  for (auto at = text.find(needle); at != std::string_view::npos; at = text.find(needle, at + 1)) {
    ++count;
  }
  return count;
}

} // namespace kiln::testing
