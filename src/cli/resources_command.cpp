#include "cli/resources_command.h"

#include <fmt/format.h>

#include "driver/run_loop.h"
#include "resources/sampler.h"

namespace kiln {

CLI::App* add_resources_command(CLI::App& app, RecordsArgs& args) {
  CLI::App* resources = app.add_subcommand("resources", "What a run's host resources did");
  resources->require_subcommand(1);
  CLI::App* summarize = resources->add_subcommand(
      "summarize", "Per-phase minutes, CPU, minimum free RAM and disk of a run's resources.csv");
  add_run_options(summarize, args,
                  "A resources.csv, or the run whose resources.csv to read: a run id, `latest` "
                  "(default) or a run folder");
  return summarize;
}

int resources_summarize_command(const RecordsArgs& args) {
  std::filesystem::path csv = args.run;
  std::error_code error;
  if (!std::filesystem::is_regular_file(csv, error)) {
    auto folder = run_folder(args);
    if (!folder) {
      fmt::print(stderr, "kiln: error: {}\n", folder.error());
      return k_exit_usage;
    }
    csv = *folder / "resources.csv";
  }
  auto rows = read_resource_csv(csv);
  if (!rows) {
    fmt::print(stderr, "kiln: error: {}\n", rows.error());
    return k_exit_usage;
  }
  fmt::print("{}", format_summary(summarize(*rows)));
  return k_exit_ok;
}

} // namespace kiln
