#include "dockerfile/declared_args.h"

#include <unordered_set>

namespace kiln {

std::vector<std::string> declared_args(const Dockerfile& df) {
  std::vector<std::string> names;
  std::unordered_set<std::string_view> seen;
  for (const auto& ins : df.instructions) {
    if (!keyword_is(ins, "arg")) {
      continue;
    }
    for (std::size_t i = 0; i < ins.args.size(); i += 2) {
      if (seen.insert(ins.args[i]).second) {
        names.push_back(ins.args[i]);
      }
    }
  }
  return names;
}

} // namespace kiln
