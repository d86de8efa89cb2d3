#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "cli/records_folder.h"

namespace kiln {

/// `kiln resources summarize [CSV | RUN]`: returns the subcommand.
CLI::App* add_resources_command(CLI::App& app, RecordsArgs& args);

/// Summarize a resources.csv: the file named, else the one in the run named.
int resources_summarize_command(const RecordsArgs& args);

} // namespace kiln
