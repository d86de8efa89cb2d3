#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace kiln {

struct InitArgs {
  std::string dir = ".";
  bool per_target = false;
};

/// `kiln init [DIR] [--per-target]`: returns the subcommand.
CLI::App* add_init_command(CLI::App& app, InitArgs& args);

int init_command(const InitArgs& args);

} // namespace kiln
