#pragma once

#include <string>
#include <string_view>

namespace kiln {

// What kiln writes into a chain file it makes (`kiln init`, `kiln import bake`): strings TOML
// reads back as they were, names the loader takes.

/// `text` as a TOML basic string, quotes included.
std::string toml_string(std::string_view text);

/// A name kiln takes as a stage or lane name (`is_lower_name`) made of `text`: lower case,
/// every other character '-', `t-` in front when it starts with no letter. `${var}` references
/// of a matrix stay as they are.
std::string as_stage_name(std::string_view text);

} // namespace kiln
