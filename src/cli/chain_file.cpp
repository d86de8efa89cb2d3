#include "cli/chain_file.h"

#include <cstdio>

#include <fmt/format.h>

#include "chain/chain_loader.h"

namespace kiln {

std::optional<Chain> load_chain_or_report(const std::string& file, const std::string& engine,
                                          const std::string& consequence) {
  auto chain = load_chain(file, {engine});
  if (!chain) {
    for (const auto& diagnostic : chain.error()) {
      std::fputs(format_diagnostic(diagnostic).c_str(), stderr);
    }
    fmt::print(stderr, "kiln: {} error(s) in {}; {}\n", chain.error().size(), file, consequence);
    return std::nullopt;
  }
  return std::move(*chain);
}

} // namespace kiln
