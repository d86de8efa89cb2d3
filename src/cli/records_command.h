#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/records_folder.h"

namespace kiln {

struct ReplayArgs {
  RecordsArgs where;        // the run, and the records folder a run id is looked up in
  std::string output = "-"; // a file, or - for standard output
  bool check = false;       // compare with the run's manifest.json instead of writing
};

struct PruneArgs {
  RecordsArgs where;
  std::optional<int> keep; // the newest runs to keep
  std::string older_than;  // an age: 90m, 12h, 30d, 2w
  bool dry_run = false;
};

/// `kiln records replay RUN` and `kiln records prune`: register the subcommands and their
/// options, filling the args.
void add_records_command(CLI::App& app, ReplayArgs& replay_args, PruneArgs& prune_args,
                         CLI::App*& replay, CLI::App*& prune);

/// Rebuild a run's manifest from its events.jsonl; returns the process exit code.
int records_replay_command(const ReplayArgs& args);

/// Remove old run folders and their history rows; returns the process exit code.
int records_prune_command(const PruneArgs& args);

} // namespace kiln
