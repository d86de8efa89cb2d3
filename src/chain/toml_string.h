#pragma once

#include <string>
#include <string_view>

namespace kiln {

/// `text` as a TOML basic string, quotes included: what kiln writes into a chain file it makes
/// (`kiln init`, `kiln import bake`) reads back as `text`.
std::string toml_string(std::string_view text);

} // namespace kiln
