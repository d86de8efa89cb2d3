#include "chain/versions.h"

#include <map>

#include <fmt/format.h>

#include "util/strings.h"

namespace kiln {

namespace {

std::string_view unquote(std::string_view value) {
  if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
      value.back() == value.front()) {
    return value.substr(1, value.size() - 2);
  }
  return value;
}

} // namespace

tl::expected<KeyValues, Diagnostics> load_versions(const std::filesystem::path& file) {
  std::string name = file.string();
  std::error_code error;
  if (std::filesystem::is_directory(file, error)) {
    return tl::unexpected(Diagnostics{{{name},
                                       "cannot read versions file: it is a directory",
                                       "name a file of KEY=VALUE lines"}});
  }
  auto content = read_chain_input(file);
  if (!content) {
    return tl::unexpected(
        Diagnostics{{{name}, fmt::format("cannot read versions file: {}", content.error()), ""}});
  }

  KeyValues versions;
  Diagnostics diagnostics;
  std::map<std::string, int, std::less<>> first_line;
  std::string_view rest = *content;
  for (int number = 1; !rest.empty(); ++number) {
    size_t end = rest.find('\n');
    std::string_view text = rest.substr(0, end);
    rest.remove_prefix(end == std::string_view::npos ? rest.size() : end + 1);
    if (!text.empty() && text.back() == '\r') {
      text.remove_suffix(1);
    }
    size_t begin = text.find_first_not_of(" \t");
    if (begin == std::string_view::npos || text[begin] == '#') {
      continue;
    }
    if (text.substr(begin, 7) == "export " || text.substr(begin, 7) == "export\t") {
      begin = text.find_first_not_of(" \t", begin + 7);
    }
    if (begin == std::string_view::npos) {
      begin = text.find_first_not_of(" \t");
    }
    size_t equals = text.find('=', begin);
    if (equals == std::string_view::npos) {
      diagnostics.push_back({{name, number, static_cast<int>(begin) + 1},
                             "expected KEY=VALUE but the line has no '='",
                             "write it as KEY=VALUE, or start it with '#' to make it a comment"});
      continue;
    }
    std::string key(trim(text.substr(begin, equals - begin)));
    SourcePos pos{name, number, static_cast<int>(begin) + 1};
    if (!is_identifier(key)) {
      diagnostics.push_back({pos, fmt::format("'{}' is not a valid variable name", key),
                             "use letters, digits and '_', not starting with a digit"});
      continue;
    }
    if (auto first = first_line.find(key); first != first_line.end()) {
      diagnostics.push_back(
          {pos, fmt::format("duplicate key '{}' in versions file", key),
           fmt::format("'{}' is first set on line {}; keep one of them", key, first->second)});
      continue;
    }
    first_line.emplace(key, number);
    // Blanks around a value are invisible in an editor and would silently change a pin.
    versions.emplace_back(key, unquote(trim(text.substr(equals + 1))));
  }
  if (!diagnostics.empty()) {
    return tl::unexpected(diagnostics);
  }
  return versions;
}

} // namespace kiln
