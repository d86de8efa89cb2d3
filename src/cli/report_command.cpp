#include "cli/report_command.h"

#include <cstdio>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "driver/run_loop.h"
#include "forensics/report.h"
#include "util/fs.h"

namespace kiln {

namespace {

/// The JSON object in `path`, for `--analysis` and `--history`.
tl::expected<nlohmann::json, std::string> read_json_object(const std::string& path,
                                                           const char* option) {
  auto text = read_file(path);
  if (!text) {
    return tl::unexpected(fmt::format("{} {}: {}", option, path, text.error()));
  }
  auto json = nlohmann::json::parse(*text, nullptr, false);
  if (json.is_discarded() || !json.is_object()) {
    return tl::unexpected(fmt::format("{} {}: not a JSON object", option, path));
  }
  return json;
}

} // namespace

CLI::App* add_report_command(CLI::App& app, ReportArgs& args) {
  CLI::App* report =
      app.add_subcommand("report", "Write a run's record as one self-contained HTML page");
  report->add_option("run", args.run, "A run id, `latest`, or a run folder")->required();
  report->add_option("-o,--output", args.output,
                     "Where to write the page (default: report.html in the run folder; - for "
                     "standard output)");
  report->add_option("--records", args.records,
                     "The records folder a run id is looked up in (default: ./records)");
  report->add_option("--analysis", args.analysis,
                     "A log analysis of the run (JSON, kiln logs analyze --format json) to add");
  report->add_option("--history", args.history,
                     "Regressions of the run against earlier runs (JSON) to add");
  return report;
}

tl::expected<std::filesystem::path, std::string> resolve_run_folder(const std::string& run,
                                                                    const std::string& records) {
  std::error_code error;
  std::filesystem::path folder = run;
  if (!std::filesystem::is_directory(folder, error)) {
    folder = run == "latest" ? std::filesystem::path(records) / "latest"
                             : std::filesystem::path(records) / "runs" / run;
  }
  if (!std::filesystem::is_directory(folder, error)) {
    return tl::unexpected(fmt::format(
        "no run folder {} ({} is neither a folder nor a run under {}/runs); name a run id "
        "from {}/runs, `latest` or a run folder, and --records DIR when the records are "
        "elsewhere",
        folder.string(), run, records, records));
  }
  if (!std::filesystem::exists(folder / "manifest.json", error)) {
    return tl::unexpected(
        fmt::format("{} holds no manifest.json, so it is not a run folder; name a folder "
                    "under <records>/runs",
                    folder.string()));
  }
  // `latest` is a link: the page, and the line that names it, belong to the run it points at.
  if (auto real = std::filesystem::canonical(folder, error); !error) {
    folder = real;
  }
  return folder;
}

int report_command(const ReportArgs& args) {
  auto folder = resolve_run_folder(args.run, args.records);
  if (!folder) {
    fmt::print(stderr, "kiln: error: {}\n", folder.error());
    return k_exit_usage;
  }
  auto in = read_run_record(*folder);
  if (!in) {
    fmt::print(stderr, "kiln: error: {}; nothing was written\n", in.error());
    return k_exit_usage;
  }
  for (auto [path, option, slot] : {std::tuple{&args.analysis, "--analysis", &in->analysis},
                                    std::tuple{&args.history, "--history", &in->history}}) {
    if (path->empty()) {
      continue;
    }
    auto json = read_json_object(*path, option);
    if (!json) {
      fmt::print(stderr, "kiln: error: {}; nothing was written\n", json.error());
      return k_exit_usage;
    }
    *slot = std::move(*json);
  }
  std::string page = render_report(*in);
  if (args.output == "-") {
    std::fwrite(page.data(), 1, page.size(), stdout);
    return std::fflush(stdout) == 0 ? k_exit_ok : k_exit_failed;
  }
  std::filesystem::path out =
      args.output.empty() ? *folder / "report.html" : std::filesystem::path(args.output);
  if (auto written = write_file_atomic(out, page, Durability::rename_only); !written) {
    fmt::print(stderr, "kiln: error: {}\n", written.error());
    return k_exit_failed;
  }
  fmt::print("kiln: report: {}\n", out.string());
  return k_exit_ok;
}

} // namespace kiln
