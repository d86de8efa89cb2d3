#include "cli/trace_command.h"

#include <cstdio>

#include <fmt/format.h>

#include "cli/records_folder.h"
#include "driver/run_loop.h"
#include "forensics/trace.h"
#include "util/fs.h"

namespace kiln {

CLI::App* add_trace_command(CLI::App& app, TraceArgs& args) {
  CLI::App* trace = app.add_subcommand(
      "trace", "Write a run's spans (run, lane, stage, attempt, step) as a trace");
  add_run_options(trace, args.where);
  trace
      ->add_option("--format", args.format,
                   "otlp: OTLP/JSON, what an OpenTelemetry collector reads (default); chrome: "
                   "Chrome's trace-event JSON (about:tracing, Perfetto)")
      ->check(CLI::IsMember({"otlp", "chrome"}));
  trace->add_option("-o,--output", args.output,
                    "Where to write it (default: - for standard output)");
  return trace;
}

int trace_command(const TraceArgs& args) {
  auto folder = run_folder(args.where);
  if (!folder) {
    fmt::print(stderr, "kiln: error: {}\n", folder.error());
    return k_exit_usage;
  }
  std::filesystem::path events = *folder / "events.jsonl";
  auto text = read_file(events);
  if (!text) {
    fmt::print(stderr,
               "kiln: error: {}: {}; a run recorded by a kiln older than its events has no trace\n",
               events.string(), text.error());
    return k_exit_usage;
  }
  auto trace = forensics::trace_from_events(*text, events.string());
  if (!trace) {
    fmt::print(stderr, "kiln: error: {}\n", trace.error());
    return k_exit_usage;
  }
  nlohmann::json doc =
      args.format == "chrome" ? forensics::chrome_trace(*trace) : forensics::otlp_trace(*trace);
  std::string out = doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  if (args.output == "-") {
    std::fwrite(out.data(), 1, out.size(), stdout);
    return std::fflush(stdout) == 0 ? k_exit_ok : k_exit_failed;
  }
  if (auto written = write_file_atomic(args.output, out, Durability::rename_only); !written) {
    fmt::print(stderr, "kiln: error: {}\n", written.error());
    return k_exit_failed;
  }
  fmt::print(stderr, "kiln: trace: {} span(s) of run {} in {}\n", trace->spans.size(),
             trace->run_id, args.output);
  return k_exit_ok;
}

} // namespace kiln
