#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace kiln {

/// `kiln resources summarize CSV`: returns the subcommand.
CLI::App* add_resources_command(CLI::App& app, std::string& csv);

int resources_summarize_command(const std::string& csv);

} // namespace kiln
