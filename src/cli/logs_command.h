#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "cli/records_folder.h"

#include "forensics/log_analysis.h"

namespace kiln {

struct LogsArgs {
  RecordsArgs where; // its run: an attempt log, a run folder, a run id or `latest`
  std::string format = "tty";
  std::string noise;  // comma list replacing the default noise classes
  std::string signal; // comma list replacing the default signal classes
  forensics::Options options;
};

/// `kiln logs analyze [log | run-dir | run-id | latest] [--format tty|json] [--records DIR]
/// [--chain FILE] [--top N]
/// [--idle-threshold S] [--flood-lines N] [--noise LIST] [--signal LIST]`.
CLI::App* add_logs_command(CLI::App& app, LogsArgs& args);

int logs_analyze_command(LogsArgs& args);

} // namespace kiln
