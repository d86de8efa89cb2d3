#pragma once

#include <map>
#include <string>
#include <vector>

#include "dockerfile/parser.h"

namespace kiln {

/// An image a Dockerfile builds on that it does not build itself.
struct ParentImage {
  std::string ref; // as FROM names it, global ARGs expanded
  Position from;
};

/// The FROM images that are neither `scratch` nor an earlier stage of the same file, each once,
/// in file order. A chain stage handed over as a named context appears under its stage name.
std::vector<ParentImage> parent_images(const Dockerfile& df,
                                       const std::map<std::string, std::string>& build_args);

} // namespace kiln
