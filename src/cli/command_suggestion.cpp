#include "cli/command_suggestion.h"

#include <vector>

#include <fmt/format.h>

#include "chain/loader.h"

namespace kiln {

namespace {

/// The deepest command the parse reached: `kiln`, `kiln records`, ...
const CLI::App* reached(const CLI::App& app) {
  const CLI::App* at = &app;
  for (bool deeper = true; deeper;) {
    deeper = false;
    for (const CLI::App* sub : at->get_subcommands({})) {
      if (sub->parsed()) {
        at = sub;
        deeper = true;
        break;
      }
    }
  }
  return at;
}

std::string command_path(const CLI::App* command) {
  std::string path = command->get_name();
  for (const CLI::App* up = command->get_parent(); up != nullptr; up = up->get_parent()) {
    path = up->get_name() + " " + path;
  }
  return path;
}

} // namespace

std::string command_suggestion(const CLI::App& app) {
  const CLI::App* command = reached(app);
  std::vector<std::string> left = command->remaining();
  if (left.empty()) {
    return "";
  }
  const std::string& word = left.front();
  std::vector<std::string> names;
  if (word.starts_with("-")) {
    for (const CLI::Option* option : command->get_options()) {
      for (const auto& name : option->get_lnames()) {
        names.push_back("--" + name);
      }
    }
    return fmt::format("kiln: '{}' is not an option of {}; {}", word, command_path(command),
                       chain_loading::did_you_mean(word, names, "its options"));
  }
  for (const CLI::App* sub : command->get_subcommands({})) {
    names.push_back(sub->get_name());
  }
  if (names.empty()) {
    return ""; // an extra argument: CLI11 says so
  }
  return fmt::format("kiln: '{}' is not a {} command; {}", word, command_path(command),
                     chain_loading::did_you_mean(word, names, "its commands"));
}

} // namespace kiln
