#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "cli/records_folder.h"

namespace kiln {

struct ReplayArgs {
  RecordsArgs where;        // the run, and the records folder a run id is looked up in
  std::string output = "-"; // a file, or - for standard output
  bool check = false;       // compare with the run's manifest.json instead of writing
};

/// `kiln records replay RUN`: register the subcommand and its options, filling `args`.
CLI::App* add_records_command(CLI::App& app, ReplayArgs& args);

/// Rebuild a run's manifest from its events.jsonl; returns the process exit code.
int records_replay_command(const ReplayArgs& args);

} // namespace kiln
