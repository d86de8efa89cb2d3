#include "driver/salvage.h"

#include <algorithm>

#include "dockerfile/stage_names.h"

namespace kiln {

std::vector<std::string> salvage_targets(std::string_view dockerfile_text,
                                         const std::vector<std::string>& finished_stages) {
  std::vector<std::string> targets;
  for (const auto& name : named_stages(dockerfile_text)) {
    bool finished =
        std::find(finished_stages.begin(), finished_stages.end(), name) != finished_stages.end();
    if (finished && std::find(targets.begin(), targets.end(), name) == targets.end()) {
      targets.push_back(name);
    }
  }
  return targets;
}

} // namespace kiln
