#pragma once

#include <filesystem>
#include <string>

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

} // namespace kiln
