#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/records_folder.h"

namespace kiln {

struct HistoryArgs {
  std::string stage;
  std::string lane;
  std::string format = "tty";
  RecordsArgs where; // the records folder; no run: the history is of every run
  int limit = 20;
  std::optional<double> percent; // unset: the chain's [history], or its defaults
  std::optional<double> seconds;
  int keep = 1000;
  bool causes = false; // the first causes of rebuilds that cost the most
};

/// `kiln history [STAGE]` and `kiln history prune --keep N`; returns both subcommands.
void add_history_command(CLI::App& app, HistoryArgs& args, CLI::App*& show, CLI::App*& prune);

int history_command(const HistoryArgs& args);
int history_prune_command(const HistoryArgs& args);

} // namespace kiln
