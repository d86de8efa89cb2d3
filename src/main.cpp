#include <CLI/CLI.hpp>

#include "cli/cache_command.h"
#include "cli/run_command.h"
#include "driver/run_loop.h"

int main(int argc, char** argv) {
  CLI::App app("kiln: drive long container-image build chains", "kiln");
  app.set_version_flag("--version", KILN_VERSION);
  app.require_subcommand(1);
  kiln::RunArgs run_args;
  CLI::App* run = kiln::add_run_command(app, run_args);
  kiln::SnapshotArgs snapshot_args;
  CLI::App* snapshot = kiln::add_cache_command(app, snapshot_args);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kiln::k_exit_usage;
  }
  if (run->parsed()) {
    return kiln::run_command(run_args);
  }
  if (snapshot->parsed()) {
    return kiln::snapshot_command(snapshot_args);
  }
  return kiln::k_exit_usage;
}
