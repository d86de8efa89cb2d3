#include "cli/resources_command.h"

#include <fmt/format.h>

#include "driver/run_loop.h"
#include "resources/sampler.h"

namespace kiln {

CLI::App* add_resources_command(CLI::App& app, std::string& csv) {
  CLI::App* resources = app.add_subcommand("resources", "What a run's host resources did");
  resources->require_subcommand(1);
  CLI::App* summarize = resources->add_subcommand(
      "summarize", "Per-phase minutes, CPU, minimum free RAM and disk of a run's resources.csv");
  summarize->add_option("csv", csv, "A run's resources.csv")->required();
  return summarize;
}

int resources_summarize_command(const std::string& csv) {
  auto rows = read_resource_csv(csv);
  if (!rows) {
    fmt::print(stderr, "kiln: error: {}\n", rows.error());
    return k_exit_usage;
  }
  fmt::print("{}", format_summary(summarize(*rows)));
  return k_exit_ok;
}

} // namespace kiln
