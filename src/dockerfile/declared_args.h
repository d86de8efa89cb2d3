#pragma once

#include <string>
#include <vector>

#include "dockerfile/parser.h"

namespace kiln {

/// Every name a Dockerfile declares with ARG, global or per stage, in first-seen order.
std::vector<std::string> declared_args(const Dockerfile& df);

} // namespace kiln
