#include "dockerfile/references.h"

#include <cctype>

namespace kiln {

std::vector<std::string_view> referenced_names(std::string_view text) {
  std::vector<std::string_view> names;
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t at = text.find('$'); at != std::string_view::npos; at = text.find('$', at + 1)) {
    size_t begin = at + 1 + (at + 1 < text.size() && text[at + 1] == '{' ? 1 : 0);
    size_t end = begin;
    while (end < text.size() && word(text[end])) {
      ++end;
    }
    if (end > begin) {
      names.push_back(text.substr(begin, end - begin));
    }
  }
  return names;
}

} // namespace kiln
