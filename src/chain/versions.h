#pragma once

#include <filesystem>

#include <tl/expected.hpp>

#include "chain/chain.h"
#include "util/diagnostic.h"

namespace kiln {

/// Parse a versions file: `KEY=VALUE` lines, `#` comments, blank lines, an optional `export `
/// prefix and optional matching single or double quotes around the value.
tl::expected<KeyValues, Diagnostics> load_versions(const std::filesystem::path& file);

} // namespace kiln
