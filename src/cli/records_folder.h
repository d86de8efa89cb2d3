#pragma once

#include <filesystem>
#include <string>

#include <CLI/CLI.hpp>
#include <tl/expected.hpp>

#include "chain/chain.h"

namespace kiln {

/// The records folder a reading command works on: `records` when given, else the one the chain
/// file names (`[chain] records`), else `./records`. An error names what is missing and how to
/// point at it.
/// With a chain file, `history` (when given) gets its [history] settings.
tl::expected<std::filesystem::path, std::string> records_folder(const std::string& records,
                                                                const std::string& chain_file,
                                                                HistorySettings* history = nullptr);

/// The folder of `run`: itself when it is a folder, else `<records>/latest` for `latest`, else
/// `<records>/runs/<run>`, resolved to its real path. An error names the path looked at and
/// what to give instead.
tl::expected<std::filesystem::path, std::string> resolve_run_folder(const std::string& run,
                                                                    const std::string& records);

/// Where a command that reads records finds them, the same way for every such command.
struct RecordsArgs {
  std::string records;        // --records DIR: "" for the chain's, else ./records
  std::string chain_file;     // --chain FILE: its `[chain] records`
  std::string run = "latest"; // a run id, `latest`, or a run folder
};

/// Give `command` the options --records DIR and --chain FILE.
void add_records_options(CLI::App* command, RecordsArgs& args);

/// ... and the positional RUN (`latest` when left out), described by `what`.
void add_run_options(CLI::App* command, RecordsArgs& args,
                     const std::string& what = "A run id, `latest` (default), or a run folder");

/// The run folder `args` names: a folder given as RUN is itself; a run id or `latest` is looked
/// up in records_folder(). An error says what to give instead.
tl::expected<std::filesystem::path, std::string> run_folder(const RecordsArgs& args);

} // namespace kiln
