#include "dockerfile/parents.h"

#include <algorithm>

#include "util/strings.h"

namespace kiln {

std::vector<ParentImage> parent_images(const Dockerfile& df,
                                       const std::map<std::string, std::string>& build_args) {
  std::vector<ParentImage> parents;
  std::vector<std::string> earlier;
  for (const auto& scope : stage_scopes(df, build_args)) {
    std::string base = lower(scope.base);
    bool own = std::find(earlier.begin(), earlier.end(), base) != earlier.end();
    bool seen = std::any_of(parents.begin(), parents.end(),
                            [&](const ParentImage& p) { return p.ref == scope.base; });
    if (!base.empty() && base != "scratch" && !own && !seen) {
      parents.push_back({scope.base, scope.from});
    }
    if (!scope.name.empty()) {
      earlier.push_back(scope.name);
    }
  }
  return parents;
}

} // namespace kiln
