#pragma once

#include <string>
#include <vector>

#include "dockerfile/parser.h"

namespace kiln {

/// The names a Dockerfile gives its stages (`FROM image AS name`), lower-cased as BuildKit
/// matches them, in file order: the targets a build can stop at.
std::vector<std::string> named_stages(const Dockerfile& df);

} // namespace kiln
