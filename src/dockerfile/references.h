#pragma once

#include <string_view>
#include <vector>

namespace kiln {

/// The names `text` refers to as `$NAME` or `${NAME...}`, in order, repeats kept, read in one
/// pass. Quotes are not considered: a RUN's single-quoted `sh -c '... $NAME'` still reads the
/// name, from the environment the engine hands every ARG in scope to.
std::vector<std::string_view> referenced_names(std::string_view text);

} // namespace kiln
