#include "dockerfile/stage_names.h"

#include <algorithm>
#include <cctype>

#include "dockerfile/instructions.h"
#include "util/strings.h"

namespace kiln {

std::vector<std::string> named_stages(std::string_view dockerfile_text) {
  std::vector<std::string> names;
  for (const auto& instruction : logical_instructions(dockerfile_text).lines) {
    if (instruction_keyword(instruction) != "from") {
      continue;
    }
    // FROM [--platform=...] image [AS name]: the name is the word after a last `AS`.
    std::string arguments(instruction_arguments(instruction));
    std::replace(arguments.begin(), arguments.end(), '\t', ' ');
    std::vector<std::string> words;
    for (const auto& word : split(arguments, ' ')) {
      if (!trim(word).empty()) {
        words.emplace_back(trim(word));
      }
    }
    if (words.size() >= 3) {
      std::string as = words[words.size() - 2];
      for (auto& c : as) {
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      }
      if (as == "as") {
        std::string name = words.back();
        for (auto& c : name) {
          c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        }
        names.push_back(std::move(name));
      }
    }
  }
  return names;
}

} // namespace kiln
