#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace kiln {

struct TraceArgs {
  std::string run;                 // a run id, `latest`, or a run folder
  std::string format = "otlp";     // otlp | chrome
  std::string output = "-";        // a file, or - for standard output
  std::string records = "records"; // where a run id is looked up: <records>/runs/<id>
};

/// `kiln trace RUN`: register the subcommand and its options, filling `args`.
CLI::App* add_trace_command(CLI::App& app, TraceArgs& args);

/// Write a run's spans, read from its events.jsonl; returns the process exit code.
int trace_command(const TraceArgs& args);

} // namespace kiln
