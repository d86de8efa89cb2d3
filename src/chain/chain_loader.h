#pragma once

#include <filesystem>
#include <string>

#include <tl/expected.hpp>

#include "chain/chain.h"
#include "util/diagnostic.h"

namespace kiln {

struct LoadOptions {
  std::string engine; // overrides [chain] engine when set (`--engine`); must be a known engine
};

/// Read, parse and validate a chain file, its versions file and its Dockerfiles (each read and
/// parsed once, kept on the stages that build from it, its ARGs checked against build_args).
/// Returns every problem found (not only the first) so one edit fixes them all.
tl::expected<Chain, Diagnostics> load_chain(const std::filesystem::path& file,
                                            const LoadOptions& options = {});

} // namespace kiln
