#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace kiln {

/// After `app` failed to parse: when the first word it could not place is no command of the
/// command it reached (or no option of it), one line that says so and names the closest one
/// ("kiln: 'reprot' is not a kiln command; did you mean 'report'?"), else "".
std::string command_suggestion(const CLI::App& app);

} // namespace kiln
