#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace kiln {

struct DiskArgs {
  std::string chain_file;
  std::string engine;
  double target_gb = 0;
  bool dry_run = false;
};

/// `kiln disk status CHAIN` and `kiln disk reclaim CHAIN --target-gb N [--dry-run]`; returns
/// the two subcommands through `status` and `reclaim`.
void add_disk_command(CLI::App& app, DiskArgs& args, CLI::App*& status, CLI::App*& reclaim);

int disk_status_command(const DiskArgs& args);
int disk_reclaim_command(const DiskArgs& args);

} // namespace kiln
