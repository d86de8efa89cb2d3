#include "cli/run_command.h"

#include <cstdlib>
#include <cstring>
#include <optional>

#include <unistd.h>

#include <fmt/format.h>

#include "cli/chain_file.h"
#include "cli/github_actions.h"
#include "driver/console.h"
#include "driver/run_loop.h"
#include "engine/engine.h"
#include "forensics/report.h"
#include "util/cancel.h"

namespace kiln {

namespace {

// More compile jobs than any machine has cores: a larger number is a typo.
constexpr int k_max_jobs = 4096;

} // namespace

CLI::App* add_run_command(CLI::App& app, RunArgs& args) {
  CLI::App* run = app.add_subcommand("run", "Build the stages of a chain");
  run->add_option("chain", args.chain_file, "The chain file (TOML)")->required();
  run->add_option("--only", args.only, "Build only these stages (comma-separated)")->delimiter(',');
  run->add_option("--from", args.from, "Build this stage and every stage after it");
  run->add_option("--lane", args.lanes, "Build only these lanes (comma-separated)")->delimiter(',');
  run->add_option("--build-arg", args.build_args,
                  "K=V overriding versions pins and chain build args (repeatable)");
  run->add_flag("--dry-run", args.dry_run, "Print each stage's engine command; run nothing");
  run->add_flag("--explain", args.explain,
                "With --dry-run: which stages would rebuild, from which step and why, and what "
                "that is expected to cost, in place of the commands");
  run->add_option("--engine", args.engine, "Build with this engine instead of the chain's")
      ->check(CLI::IsMember({"buildah", "buildkit"}));
  run->add_flag("--no-cache-export", args.no_cache_export,
                "Leave out every registry-facing cache import and export (BuildKit)");
  run->add_option("--jobs", args.jobs,
                  "Share this many jobs among the stages building at once instead of the "
                  "memory budget (or KILN_JOBS)")
      ->check(CLI::Range(1, k_max_jobs));
  run->add_option("--parallel", args.parallel,
                  "Build at most this many stages at once (default: the chain's max_parallel, "
                  "else as many as the memory budget has slots)")
      ->check(CLI::Range(1, k_max_jobs));
  run->add_flag("--no-cache", args.no_cache,
                "Build every stage afresh: no step comes from the engine's layer cache");
  run->add_flag("--fail-fast", args.fail_fast,
                "Start no stage after the first failure (default: build every stage that does "
                "not depend on it)");
  run->add_flag("--no-salvage", args.no_salvage,
                "Do not re-drive a failed stage's finished targets to land its cache export");
  run->add_option("--progress", args.progress,
                  "How the run shows itself: auto (a live view on a terminal, else plain lines), "
                  "tty, plain, or json (its events as JSON lines on stdout, docs/events.md; the "
                  "human view goes to stderr)")
      ->check(CLI::IsMember({"auto", "tty", "plain", "json"}));
  run->add_flag("--report", args.report,
                "When the run ends, however it ends, write report.html beside its manifest "
                "(see kiln report)");
  return run;
}

tl::expected<KeyValues, std::string> parse_build_args(const std::vector<std::string>& pairs) {
  KeyValues values;
  for (const auto& pair : pairs) {
    size_t equals = pair.find('=');
    if (equals == std::string::npos) {
      return tl::unexpected(fmt::format("--build-arg {}: expected KEY=VALUE", pair));
    }
    values.emplace_back(pair.substr(0, equals), pair.substr(equals + 1));
  }
  return values;
}

int run_command(const RunArgs& args) {
  auto chain = load_chain_or_report(args.chain_file, args.engine, "nothing was built");
  if (!chain) {
    return k_exit_usage;
  }
  RunOptions options;
  options.selection.only = args.only;
  options.selection.from = args.from;
  options.selection.lanes = args.lanes;
  options.dry_run = args.dry_run;
  options.explain = args.explain ? "tty" : "";
  options.no_cache_export = args.no_cache_export;
  options.no_salvage = args.no_salvage;
  options.fail_fast = args.fail_fast;
  options.no_cache = args.no_cache;
  if (args.parallel > 0) {
    options.parallel = args.parallel;
  }
  if (args.jobs > 0) {
    options.jobs = args.jobs;
  } else if (const char* env = std::getenv("KILN_JOBS"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    long jobs = std::strtol(env, &end, 10);
    if (*end != '\0' || jobs < 1 || jobs > k_max_jobs) {
      fmt::print(stderr,
                 "kiln: error: KILN_JOBS={} is not a job count; set a whole number from "
                 "1 or unset it\n",
                 env);
      return k_exit_usage;
    }
    options.jobs = static_cast<int>(jobs);
  }
  auto overrides = parse_build_args(args.build_args);
  if (!overrides) {
    fmt::print(stderr, "kiln: error: {}\n", overrides.error());
    return k_exit_usage;
  }
  options.build_arg_overrides = std::move(*overrides);
  install_interrupt_handlers();
  auto engine = make_engine(*chain);
  // With json, stdout carries the events alone and the human view moves to stderr.
  const bool json = args.progress == "json";
  std::FILE* human = json ? stderr : stdout;
  const char* term = std::getenv("TERM");
  bool live = args.progress == "tty" || (args.progress != "plain" && ::isatty(::fileno(human)) &&
                                         !(term != nullptr && std::strcmp(term, "dumb") == 0));
  Console console(human, live);
  std::optional<Console> events;
  if (json) {
    events.emplace(stdout, false);
    options.progress_json = &*events;
  }
  const GithubActions github = github_actions();
  RunOutput output;
  if (args.report || github.on) {
    options.output = &output;
  }
  int code = run_chain(*chain, *engine, options, console, stderr);
  write_github_run_outputs(github, *chain, output, console);
  if (!args.report) {
    return code;
  }
  if (!output.folder.empty()) {
    // The run's outcome stands whatever happens to its report.
    std::filesystem::path page = output.folder / "report.html";
    const nlohmann::json* analysis = output.log_analysis ? &*output.log_analysis : nullptr;
    if (auto written = write_run_report(output.folder, page, analysis); written) {
      fmt::print(human, "kiln: report: {}\n", page.string());
    } else {
      fmt::print(stderr, "kiln: warning: no report was written: {}\n", written.error());
    }
  }
  return code;
}

} // namespace kiln
