#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace kiln {

struct SnapshotArgs {
  std::string chain_file;
  std::string stage;
  std::string engine;
  std::vector<std::string> build_args;
};

/// `kiln cache snapshot CHAIN STAGE`: register the subcommands, filling `args`; returns the
/// `snapshot` subcommand.
CLI::App* add_cache_command(CLI::App& app, SnapshotArgs& args);

int snapshot_command(const SnapshotArgs& args);

} // namespace kiln
