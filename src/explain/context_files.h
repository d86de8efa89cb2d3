#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "dockerfile/dockerignore.h"

namespace kiln {

/// The files of the build context `context` a COPY or ADD source (its words already expanded)
/// sends to the engine, as relative `/`-separated paths, sorted: a file itself, a directory every
/// file under it, a pattern (`*`, `?`, `[...]`, part by part as Go's filepath.Match) every path
/// it matches and everything under a matching directory; a path `ignore` ignores is left out.
/// A source outside the context or naming nothing selects nothing.
std::vector<std::string> selected_files(const std::filesystem::path& context,
                                        std::string_view source, const DockerIgnore* ignore);

} // namespace kiln
