#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "cli/records_folder.h"

namespace kiln {

struct TraceArgs {
  RecordsArgs where;           // the run, and the records folder a run id is looked up in
  std::string format = "otlp"; // otlp | chrome
  std::string output = "-";    // a file, or - for standard output
};

/// `kiln trace RUN`: register the subcommand and its options, filling `args`.
CLI::App* add_trace_command(CLI::App& app, TraceArgs& args);

/// Write a run's spans, read from its events.jsonl; returns the process exit code.
int trace_command(const TraceArgs& args);

} // namespace kiln
