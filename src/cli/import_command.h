#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace kiln {

struct ImportArgs {
  std::string file;                  // the bake JSON
  std::string output = "chain.toml"; // "-": stdout
  std::string group;                 // "": the default group
};

/// `kiln import bake FILE [-o OUTPUT] [--group NAME]`: returns the `bake` subcommand.
CLI::App* add_import_command(CLI::App& app, ImportArgs& args);

int import_bake_command(const ImportArgs& args);

} // namespace kiln
