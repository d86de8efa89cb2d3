#pragma once

#include <optional>
#include <string>

#include "chain/chain.h"

namespace kiln {

/// The chain a subcommand names, or nullopt after every problem in it went to stderr followed
/// by "kiln: N error(s) in FILE; <consequence>".
std::optional<Chain> load_chain_or_report(const std::string& file, const std::string& engine,
                                          const std::string& consequence);

} // namespace kiln
