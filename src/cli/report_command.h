#pragma once

#include <filesystem>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/records_folder.h"
#include <tl/expected.hpp>

namespace kiln {

struct ReportArgs {
  RecordsArgs where;           // the run, and the records folder a run id is looked up in
  std::string format = "html"; // html or junit
  std::string output;          // "": <run folder>/report.html (junit.xml); "-": stdout
};

/// `kiln report RUN`: register the subcommand and its options, filling `args`.
CLI::App* add_report_command(CLI::App& app, ReportArgs& args);

/// Write the HTML report (or the JUnit XML) of a run; returns the process exit code.
int report_command(const ReportArgs& args);

} // namespace kiln
