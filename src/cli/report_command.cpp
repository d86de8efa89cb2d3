#include "cli/report_command.h"

#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/records_folder.h"
#include "driver/run_loop.h"
#include "forensics/junit.h"
#include "forensics/report.h"
#include "util/fs.h"

namespace kiln {

CLI::App* add_report_command(CLI::App& app, ReportArgs& args) {
  CLI::App* report =
      app.add_subcommand("report", "Write a run's record as one self-contained HTML page");
  add_run_options(report, args.where);
  report
      ->add_option("--format", args.format,
                   "html (default: the page) or junit (JUnit XML: a test case per stage, for "
                   "a CI server's test results)")
      ->check(CLI::IsMember({"html", "junit"}));
  report->add_option("-o,--output", args.output,
                     "Where to write it (default: report.html, or junit.xml, in the run folder; "
                     "- for standard output)");
  return report;
}

int report_command(const ReportArgs& args) {
  auto folder = run_folder(args.where);
  if (!folder) {
    fmt::print(stderr, "kiln: error: {}\n", folder.error());
    return k_exit_usage;
  }
  auto in = read_run_record(*folder);
  if (!in) {
    fmt::print(stderr, "kiln: error: {}; nothing was written\n", in.error());
    return k_exit_usage;
  }
  const bool junit = args.format == "junit";
  // The logs a failure names are under the run's own folder: `latest` moves with the next run.
  std::filesystem::path run_dir = *folder;
  if (std::error_code error; std::filesystem::is_symlink(run_dir, error)) {
    run_dir =
        (run_dir.parent_path() / std::filesystem::read_symlink(run_dir, error)).lexically_normal();
  }
  std::string page = junit ? render_junit(*in, run_dir) : render_report(*in);
  if (args.output == "-") {
    std::fwrite(page.data(), 1, page.size(), stdout);
    return std::fflush(stdout) == 0 ? k_exit_ok : k_exit_failed;
  }
  std::filesystem::path out = args.output.empty() ? *folder / (junit ? "junit.xml" : "report.html")
                                                  : std::filesystem::path(args.output);
  if (auto written = write_file_atomic(out, page, Durability::rename_only); !written) {
    fmt::print(stderr, "kiln: error: {}\n", written.error());
    return k_exit_failed;
  }
  fmt::print("kiln: report: {}\n", out.string());
  return k_exit_ok;
}

} // namespace kiln
