#include "lint/check_directive.h"

#include <cctype>
#include <vector>

#include <fmt/format.h>

#include "lint/catalog.h"
#include "util/strings.h"

namespace kiln {
namespace {

// Go's strconv.ParseBool.
std::optional<bool> parse_bool(std::string_view v) {
  for (std::string_view t : {"1", "t", "T", "TRUE", "true", "True"}) {
    if (v == t) {
      return true;
    }
  }
  for (std::string_view f : {"0", "f", "F", "FALSE", "false", "False"}) {
    if (v == f) {
      return false;
    }
  }
  return std::nullopt;
}

std::vector<std::string_view> split(std::string_view s, char sep, std::size_t max_parts) {
  std::vector<std::string_view> parts;
  while (parts.size() + 1 < max_parts) {
    auto at = s.find(sep);
    if (at == std::string_view::npos) {
      break;
    }
    parts.push_back(s.substr(0, at));
    s.remove_prefix(at + 1);
  }
  parts.push_back(s);
  return parts;
}

} // namespace

CheckParse parse_check_value(std::string_view value) {
  value = trim_space(value.substr(0, value.find(' ')));
  CheckConfig config;
  if (value.empty()) {
    return {config, ""};
  }
  for (auto part : split(value, ';', 3)) {
    auto eq = part.find('=');
    if (eq == std::string_view::npos) {
      return {std::nullopt, fmt::format("invalid check option \"{}\"", part)};
    }
    auto key = trim_space(part.substr(0, eq));
    auto v = trim_space(part.substr(eq + 1));
    if (key == "skip") {
      if (v == "all") {
        config.skip_all = true;
        continue;
      }
      for (auto name : split(v, ',', std::string_view::npos)) {
        if (const RuleInfo* rule = find_rule(trim_space(name))) {
          config.skip.emplace(rule->id);
        }
      }
    } else if (key == "error") {
      auto b = parse_bool(v);
      if (!b) {
        return {std::nullopt,
                fmt::format("failed to parse check option \"{}\": invalid syntax", part)};
      }
      config.error = *b;
    } else if (key != "experimental") {
      // BuildKit's experimental rules are not among kiln's: naming them changes nothing.
      return {std::nullopt, fmt::format("invalid check option \"{}\"", key)};
    }
  }
  return {config, ""};
}

std::optional<std::string_view> check_comment_value(std::string_view line) {
  auto at = line.find_first_not_of(" \t");
  if (at == std::string_view::npos || line[at] != '#') {
    return std::nullopt;
  }
  auto body = trim_space(line.substr(at + 1));
  std::size_t i = 0;
  while (i < body.size() && std::isalnum(static_cast<unsigned char>(body[i]))) {
    ++i;
  }
  if (i != 5) {
    return std::nullopt;
  }
  for (std::size_t k = 0; k < 5; ++k) {
    if (std::tolower(static_cast<unsigned char>(body[k])) != "check"[k]) {
      return std::nullopt;
    }
  }
  auto rest = trim_space(body.substr(i));
  if (rest.empty() || rest.front() != '=') {
    return std::nullopt;
  }
  auto value = trim_space(rest.substr(1));
  if (value.empty()) {
    return std::nullopt;
  }
  return value;
}

} // namespace kiln
