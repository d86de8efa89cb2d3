#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kiln {

/// The named targets a salvage re-drives after a failed build: every stage the Dockerfile
/// names (in file order) whose steps all finished in the failed build, so each re-drive is a
/// pure cache hit and only lands its cache export. A stage that did not finish would compile.
std::vector<std::string> salvage_targets(std::string_view dockerfile_text,
                                         const std::vector<std::string>& finished_stages);

} // namespace kiln
