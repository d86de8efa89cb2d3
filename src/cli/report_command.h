#pragma once

#include <filesystem>
#include <string>

#include <CLI/CLI.hpp>
#include <tl/expected.hpp>

namespace kiln {

struct ReportArgs {
  std::string run;                 // a run id, `latest`, or a run folder
  std::string format = "html";     // html or junit
  std::string output;              // "": <run folder>/report.html (junit.xml); "-": stdout
  std::string records = "records"; // where a run id is looked up: <records>/runs/<id>
};

/// `kiln report RUN`: register the subcommand and its options, filling `args`.
CLI::App* add_report_command(CLI::App& app, ReportArgs& args);

/// Write the HTML report (or the JUnit XML) of a run; returns the process exit code.
int report_command(const ReportArgs& args);

} // namespace kiln
