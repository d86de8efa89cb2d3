#include "dockerfile/stage_names.h"

#include "util/strings.h"

namespace kiln {

std::vector<std::string> named_stages(const Dockerfile& df) {
  std::vector<std::string> names;
  for (const auto& ins : df.instructions) {
    // The parser holds FROM to one word, or three with `AS` second.
    if (keyword_is(ins, "from") && ins.args.size() == 3) {
      names.push_back(lower(ins.args[2]));
    }
  }
  return names;
}

} // namespace kiln
