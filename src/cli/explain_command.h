#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/records_folder.h"

namespace kiln {

struct ExplainArgs {
  RecordsArgs where;          // the run, the records folder, and the chain (--plan judges it)
  std::string against;        // a run to compare with instead of each stage's last good build
  std::string format = "tty"; // tty | json
  bool plan = false;          // which stages a run would rebuild now, and why
  std::vector<std::string> build_args;
  std::vector<std::string> only;
  std::string from;
  std::vector<std::string> lanes;
  bool no_cache = false;
  std::string engine; // with --plan: the engine instead of the chain's
};

/// `kiln explain [RUN]` and `kiln explain --plan --chain FILE`.
CLI::App* add_explain_command(CLI::App& app, ExplainArgs& args);

int explain_command(const ExplainArgs& args);

} // namespace kiln
