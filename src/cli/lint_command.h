#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace kiln {

struct LintArgs {
  std::vector<std::string> files;
  std::string chain_file; // lint its stages' Dockerfiles with its [gates] options
  std::string format = "tty";
  std::vector<std::string> names;
  std::vector<std::string> cache_targets;
  std::string cache_arg;
  std::vector<std::string> per_file_dirs;
  bool errors_only = false; // only what stops a `kiln run`
  std::string context;      // the build context of the FILES, for their .dockerignore
};

/// `kiln lint [--chain CHAIN] [FILES...]`: returns the subcommand.
CLI::App* add_lint_command(CLI::App& app, LintArgs& args);

int lint_command(const LintArgs& args);

} // namespace kiln
