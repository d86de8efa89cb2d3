#pragma once

#include <filesystem>
#include <string>

#include <CLI/CLI.hpp>
#include <tl/expected.hpp>

namespace kiln {

struct ReportArgs {
  std::string run;                 // a run id, `latest`, or a run folder
  std::string output;              // "": <run folder>/report.html; "-": standard output
  std::string records = "records"; // where a run id is looked up: <records>/runs/<id>
  std::string analysis;            // a log analysis (JSON) to add; "" for none
  std::string history;             // regressions against earlier runs (JSON); "" for none
};

/// `kiln report RUN`: register the subcommand and its options, filling `args`.
CLI::App* add_report_command(CLI::App& app, ReportArgs& args);

/// The folder of `run`: itself when it is a folder, else `<records>/latest` for `latest`, else
/// `<records>/runs/<run>`. An error names the path looked at and what to give instead.
tl::expected<std::filesystem::path, std::string> resolve_run_folder(const std::string& run,
                                                                    const std::string& records);

/// Write the HTML report of a run; returns the process exit code.
int report_command(const ReportArgs& args);

} // namespace kiln
