#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <tl/expected.hpp>

#include "chain/chain.h"

namespace kiln {

struct RunArgs {
  std::string chain_file;
  std::vector<std::string> only;
  std::vector<std::string> lanes;
  std::string from;
  std::vector<std::string> build_args;
  bool dry_run = false;
  std::string engine; // empty: the chain's
  bool no_cache_export = false;
  bool no_salvage = false;
  int jobs = 0;     // 0: not given
  int parallel = 0; // 0: not given
  bool fail_fast = false;
  bool no_cache = false;
  bool explain = false;          // with dry_run
  bool report = false;           // write report.html beside the manifest when the run ends
  std::string progress = "auto"; // auto | tty | plain | json
};

/// `kiln run CHAIN`: register the subcommand and its options, filling `args`.
CLI::App* add_run_command(CLI::App& app, RunArgs& args);

/// `--build-arg` values as KEY=VALUE pairs, in command-line order.
tl::expected<KeyValues, std::string> parse_build_args(const std::vector<std::string>& pairs);

/// Load the chain, then run or dry-run it; returns the process exit code.
int run_command(const RunArgs& args);

} // namespace kiln
