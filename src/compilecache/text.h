#pragma once

#include <string>
#include <string_view>

namespace kiln::cc {

/// ASCII lower case: variable values, schemes and sccache's messages are ASCII.
std::string lower(std::string_view text);

std::string_view trim(std::string_view text);

/// What an unset PATH means, as execvp reads it.
constexpr const char* k_default_path = "/usr/local/bin:/usr/bin:/bin";

/// The executable `name` in the `:`-separated folders of `path` (an empty entry is the current
/// folder, as a shell reads it), or "" when there is none.
std::string find_on_path(std::string_view name, std::string_view path);

} // namespace kiln::cc
