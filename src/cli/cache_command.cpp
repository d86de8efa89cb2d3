#include "cli/cache_command.h"

#include <chrono>

#include <fmt/format.h>

#include "cli/chain_file.h"
#include "cli/run_command.h"
#include "driver/console.h"
#include "driver/records_lock.h"
#include "driver/run_loop.h"
#include "driver/snapshot.h"
#include "engine/engine.h"
#include "util/cancel.h"
#include "util/time.h"

namespace kiln {

CLI::App* add_cache_command(CLI::App& app, SnapshotArgs& args) {
  CLI::App* cache = app.add_subcommand("cache", "Work with a chain's cache tiers");
  cache->require_subcommand(1);
  CLI::App* snapshot = cache->add_subcommand(
      "snapshot", "Re-drive a stage that built green with its registry mode=max export, off the "
                  "critical path");
  snapshot->add_option("chain", args.chain_file, "The chain file (TOML)")->required();
  snapshot->add_option("stage", args.stage, "The stage to snapshot")->required();
  snapshot->add_option("--engine", args.engine, "Use this engine instead of the chain's")
      ->check(CLI::IsMember({"buildah", "buildkit"}));
  snapshot->add_option("--build-arg", args.build_args,
                       "K=V as given to the green build (repeatable)");
  return snapshot;
}

int snapshot_command(const SnapshotArgs& args) {
  auto chain = load_chain_or_report(args.chain_file, args.engine, "nothing was pushed");
  if (!chain) {
    return k_exit_usage;
  }
  auto overrides = parse_build_args(args.build_args);
  if (!overrides) {
    fmt::print(stderr, "kiln: error: {}\n", overrides.error());
    return k_exit_usage;
  }
  // A snapshot re-drives a build and exports its cache: not beside a run of this checkout.
  auto lock = RecordsLock::acquire(chain->records);
  if (!lock) {
    fmt::print(stderr, "kiln: error: {}\n", lock.error());
    return k_exit_usage;
  }
  lock->describe("kiln cache snapshot", utc_iso8601(std::chrono::system_clock::now()));
  install_interrupt_handlers();
  auto engine = make_engine(*chain);
  Console console(stdout, false);
  return snapshot_stage(*chain, *engine, args.stage, *overrides, console, stderr);
}

} // namespace kiln
