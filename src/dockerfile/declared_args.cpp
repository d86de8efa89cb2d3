#include "dockerfile/declared_args.h"

#include <algorithm>

#include "dockerfile/instructions.h"
#include "util/fs.h"

namespace kiln {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t';
}

// Names from the arguments of one ARG instruction: `name` or `name=default`, where a default
// may hold quoted whitespace.
std::vector<std::string> arg_names(std::string_view args, char escape) {
  std::vector<std::string> names;
  size_t i = 0;
  while (i < args.size()) {
    while (i < args.size() && is_space(args[i])) {
      ++i;
    }
    size_t name_begin = i;
    while (i < args.size() && !is_space(args[i]) && args[i] != '=') {
      ++i;
    }
    if (i > name_begin) {
      names.emplace_back(args.substr(name_begin, i - name_begin));
    }
    if (i < args.size() && args[i] == '=') {
      char quote = 0;
      for (++i; i < args.size() && (quote != 0 || !is_space(args[i])); ++i) {
        if (args[i] == escape && quote != '\'') {
          ++i;
        } else if (quote == 0 && (args[i] == '"' || args[i] == '\'')) {
          quote = args[i];
        } else if (args[i] == quote) {
          quote = 0;
        }
      }
    }
  }
  return names;
}

} // namespace

std::vector<std::string> declared_args(std::string_view dockerfile_text) {
  Instructions instructions = logical_instructions(dockerfile_text);
  std::vector<std::string> names;
  for (const auto& instruction : instructions.lines) {
    if (instruction_keyword(instruction) != "arg") {
      continue;
    }
    for (auto& name : arg_names(instruction_arguments(instruction), instructions.escape)) {
      if (std::find(names.begin(), names.end(), name) == names.end()) {
        names.push_back(std::move(name));
      }
    }
  }
  return names;
}

tl::expected<std::vector<std::string>, std::string>
declared_args_in_file(const std::filesystem::path& file) {
  return read_file(file).map([](const std::string& text) { return declared_args(text); });
}

} // namespace kiln
