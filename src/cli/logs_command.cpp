#include "cli/logs_command.h"

#include <fmt/format.h>

#include "driver/run_loop.h"
#include "util/strings.h"

namespace kiln {

namespace {

std::vector<std::string> class_list(const std::string& text) {
  std::vector<std::string> classes;
  for (const auto& part : split(text, ',')) {
    if (std::string klass = forensics::normalize_class(part); !klass.empty()) {
      classes.push_back(std::move(klass));
    }
  }
  return classes;
}

} // namespace

CLI::App* add_logs_command(CLI::App& app, LogsArgs& args) {
  CLI::App* logs = app.add_subcommand("logs", "Read the engine logs a run kept");
  logs->require_subcommand(1);
  CLI::App* analyze = logs->add_subcommand(
      "analyze", "Step times, idle tails, clipped output, compile caches, warnings, the real "
                 "error and silent retries of a log, a run folder or a run id");
  add_run_options(analyze, args.where,
                  "An attempt log, a run folder, a run id, or `latest` (default)");
  analyze->add_option("--format", args.format, "tty (default) or json")
      ->check(CLI::IsMember({"tty", "json"}));
  analyze->add_option("--top", args.options.top, "How many of the slowest steps to list")
      ->check(CLI::NonNegativeNumber);
  analyze
      ->add_option("--idle-threshold", args.options.idle_threshold_seconds,
                   "List idle tails of at least this many seconds (default 10)")
      ->check(CLI::NonNegativeNumber);
  analyze
      ->add_option("--flood-lines", args.options.flood_lines,
                   "A step printing more lines than this floods its log (default 10000)")
      ->check(CLI::NonNegativeNumber);
  analyze->add_option("--noise", args.noise,
                      "Warning classes that are noise, comma-separated (replaces the defaults)");
  analyze->add_option("--signal", args.signal,
                      "Warning classes worth a look, comma-separated (replaces the defaults)");
  return analyze;
}

int logs_analyze_command(LogsArgs& args) {
  if (!args.noise.empty()) {
    args.options.noise = class_list(args.noise);
  }
  if (!args.signal.empty()) {
    args.options.signal = class_list(args.signal);
  }
  // A log or a run folder needs no records folder; a run id is looked up in ./records unless
  // the options name another.
  std::filesystem::path records = args.where.records.empty() ? "records" : args.where.records;
  if (!args.where.chain_file.empty()) {
    auto found = records_folder(args.where.records, args.where.chain_file);
    if (!found) {
      fmt::print(stderr, "kiln: error: {}\n", found.error());
      return k_exit_usage;
    }
    records = *found;
  }
  auto run = forensics::analyze_target(args.where.run, records, args.options);
  if (!run) {
    fmt::print(stderr, "kiln: error: {}\n", run.error());
    return k_exit_usage;
  }
  if (args.format == "json") {
    fmt::print("{}\n", forensics::to_json(*run).dump(2, ' ', false,
                                                     nlohmann::json::error_handler_t::replace));
  } else {
    fmt::print("{}", forensics::format_tty(*run));
  }
  return k_exit_ok;
}

} // namespace kiln
