#include "cli/explain_command.h"

#include <cstdio>

#include <fmt/format.h>

#include "cli/chain_file.h"
#include "cli/records_folder.h"
#include "cli/run_command.h"
#include "driver/console.h"
#include "driver/run_loop.h"
#include "engine/engine.h"
#include "explain/run_explain.h"

namespace kiln {

CLI::App* add_explain_command(CLI::App& app, ExplainArgs& args) {
  CLI::App* explain = app.add_subcommand(
      "explain", "Why each stage of a run was built instead of reused, and what that cost; with "
                 "--plan, which stages a run would rebuild now");
  add_run_options(explain, args.where);
  explain->add_option("--against", args.against,
                      "Compare with this run's inputs instead of each stage's last good build");
  explain->add_option("--format", args.format, "tty (default) or json")
      ->check(CLI::IsMember({"tty", "json"}));
  explain->add_flag("--plan", args.plan,
                    "Judge the chain as it is now against each stage's last good build, as "
                    "`kiln run --dry-run --explain` does; nothing is built (needs --chain)");
  explain->add_option("--build-arg", args.build_args,
                      "With --plan: KEY=VALUE, as kiln run takes it");
  explain->add_option("--only", args.only, "With --plan: only these stages")->delimiter(',');
  explain->add_option("--from", args.from, "With --plan: this stage and every one after it");
  explain->add_option("--lane", args.lanes, "With --plan: only these lanes")->delimiter(',');
  explain->add_flag("--no-cache", args.no_cache, "With --plan: as a run with --no-cache");
  explain->add_option("--engine", args.engine, "With --plan: the engine instead of the chain's")
      ->check(CLI::IsMember({"buildah", "buildkit"}));
  return explain;
}

namespace {

int explain_plan_command(const ExplainArgs& args) {
  if (args.where.chain_file.empty()) {
    fmt::print(stderr, "kiln: error: explain --plan judges a chain: name it with --chain FILE\n");
    return k_exit_usage;
  }
  auto chain = load_chain_or_report(args.where.chain_file, args.engine, "nothing was judged");
  if (!chain) {
    return k_exit_usage;
  }
  auto overrides = parse_build_args(args.build_args);
  if (!overrides) {
    fmt::print(stderr, "kiln: error: {}\n", overrides.error());
    return k_exit_usage;
  }
  RunOptions options;
  options.selection.only = args.only;
  options.selection.from = args.from;
  options.selection.lanes = args.lanes;
  options.build_arg_overrides = std::move(*overrides);
  options.no_cache = args.no_cache;
  options.dry_run = true;
  options.explain = args.format;
  auto engine = make_engine(*chain);
  Console console(stderr, false);
  return run_chain(*chain, *engine, options, console, stderr);
}

} // namespace

int explain_command(const ExplainArgs& args) {
  if (args.plan) {
    return explain_plan_command(args);
  }
  auto run = run_folder(args.where);
  if (!run) {
    fmt::print(stderr, "kiln: error: {}\n", run.error());
    return k_exit_usage;
  }
  std::optional<std::filesystem::path> against;
  if (!args.against.empty()) {
    RecordsArgs other_run = args.where;
    other_run.run = args.against;
    auto other = run_folder(other_run);
    if (!other) {
      fmt::print(stderr, "kiln: error: {}\n", other.error());
      return k_exit_usage;
    }
    against = *other;
  }
  auto explanation = explain_run(*run, against ? &*against : nullptr);
  if (!explanation) {
    fmt::print(stderr, "kiln: error: {}\n", explanation.error());
    return k_exit_usage;
  }
  if (args.format == "json") {
    fmt::print("{}\n", explanation_json(*explanation).dump(2));
  } else {
    fmt::print("{}", explanation_text(*explanation));
  }
  return k_exit_ok;
}

} // namespace kiln
