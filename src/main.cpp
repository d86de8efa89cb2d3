#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/attest_command.h"
#include "cli/cache_command.h"
#include "cli/command_suggestion.h"
#include "cli/disk_command.h"
#include "cli/explain_command.h"
#include "cli/gate_command.h"
#include "cli/history_command.h"
#include "cli/import_command.h"
#include "cli/init_command.h"
#include "cli/lint_command.h"
#include "cli/logs_command.h"
#include "cli/records_command.h"
#include "cli/report_command.h"
#include "cli/resources_command.h"
#include "cli/run_command.h"
#include "cli/trace_command.h"
#include "driver/crash.h"
#include "driver/run_loop.h"

namespace {

int dispatch(int argc, char** argv) {
  CLI::App app("kiln: drive long container-image build chains", "kiln");
  app.set_version_flag("--version", KILN_VERSION);
  app.require_subcommand(1);
  // Registered in the order `kiln --help` shows them, grouped by what they are for.
  kiln::InitArgs init_args;
  CLI::App* init = kiln::add_init_command(app, init_args);
  kiln::ImportArgs import_args;
  CLI::App* import_bake = kiln::add_import_command(app, import_args);
  kiln::RunArgs run_args;
  CLI::App* run = kiln::add_run_command(app, run_args);
  kiln::LintArgs lint_args;
  CLI::App* lint = kiln::add_lint_command(app, lint_args);
  kiln::ReportArgs report_args;
  CLI::App* report = kiln::add_report_command(app, report_args);
  kiln::ExplainArgs explain_args;
  CLI::App* explain = kiln::add_explain_command(app, explain_args);
  kiln::TraceArgs trace_args;
  CLI::App* trace = kiln::add_trace_command(app, trace_args);
  kiln::LogsArgs logs_args;
  CLI::App* logs_analyze = kiln::add_logs_command(app, logs_args);
  kiln::HistoryArgs history_args;
  CLI::App* history = nullptr;
  CLI::App* history_prune = nullptr;
  kiln::add_history_command(app, history_args, history, history_prune);
  kiln::RecordsArgs resources_args;
  CLI::App* summarize = kiln::add_resources_command(app, resources_args);
  kiln::ReplayArgs replay_args;
  kiln::PruneArgs prune_args;
  CLI::App* replay = nullptr;
  CLI::App* records_prune = nullptr;
  kiln::add_records_command(app, replay_args, prune_args, replay, records_prune);
  kiln::GateArgs gate_args;
  CLI::App* image_env_gate = nullptr;
  CLI::App* residue_gate = nullptr;
  kiln::add_gate_command(app, gate_args, image_env_gate, residue_gate);
  kiln::AttestArgs attest_args;
  CLI::App* attest_verify = kiln::add_attest_command(app, attest_args);
  kiln::SnapshotArgs snapshot_args;
  CLI::App* snapshot = kiln::add_cache_command(app, snapshot_args);
  kiln::DiskArgs disk_args;
  CLI::App* disk_status = nullptr;
  CLI::App* disk_reclaim = nullptr;
  kiln::add_disk_command(app, disk_args, disk_status, disk_reclaim);
  for (const auto& [group, names] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"Start a chain", {"init", "import"}},
           {"Build", {"run", "lint"}},
           {"Inspect a run", {"report", "explain", "trace", "logs", "history", "resources"}},
           {"Records", {"records"}},
           {"Images and gates", {"gate", "attest"}},
           {"Cache and disk", {"cache", "disk"}}}) {
    for (const auto& name : names) {
      app.get_subcommand(name)->group(group);
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (std::string hint = kiln::command_suggestion(app); !hint.empty()) {
      std::fprintf(stderr, "%s\n", hint.c_str());
    } else {
      app.exit(e);
    }
    return kiln::k_exit_usage;
  }
  if (run->parsed()) {
    return kiln::run_command(run_args);
  }
  if (init->parsed()) {
    return kiln::init_command(init_args);
  }
  if (snapshot->parsed()) {
    return kiln::snapshot_command(snapshot_args);
  }
  if (disk_status->parsed()) {
    return kiln::disk_status_command(disk_args);
  }
  if (disk_reclaim->parsed()) {
    return kiln::disk_reclaim_command(disk_args);
  }
  if (lint->parsed()) {
    return kiln::lint_command(lint_args);
  }
  if (image_env_gate->parsed()) {
    return kiln::image_env_gate_command(gate_args);
  }
  if (residue_gate->parsed()) {
    return kiln::residue_gate_command(gate_args);
  }
  if (history_prune->parsed()) {
    return kiln::history_prune_command(history_args);
  }
  if (history->parsed()) {
    return kiln::history_command(history_args);
  }
  if (logs_analyze->parsed()) {
    return kiln::logs_analyze_command(logs_args);
  }
  if (summarize->parsed()) {
    return kiln::resources_summarize_command(resources_args);
  }
  if (report->parsed()) {
    return kiln::report_command(report_args);
  }
  if (explain->parsed()) {
    return kiln::explain_command(explain_args);
  }
  if (trace->parsed()) {
    return kiln::trace_command(trace_args);
  }
  if (replay->parsed()) {
    return kiln::records_replay_command(replay_args);
  }
  if (records_prune->parsed()) {
    return kiln::records_prune_command(prune_args);
  }
  if (attest_verify->parsed()) {
    return kiln::attest_verify_command(attest_args);
  }
  if (import_bake->parsed()) {
    return kiln::import_bake_command(import_args);
  }
  return kiln::k_exit_usage;
}

} // namespace

int main(int argc, char** argv) {
  kiln::install_crash_handler();
  try {
    return dispatch(argc, argv);
  } catch (const std::exception& error) {
    return kiln::report_crash(error.what());
  } catch (...) {
    return kiln::report_crash("an exception of unknown type");
  }
}
