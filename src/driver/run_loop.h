#pragma once

#include <cstdio>
#include <filesystem>
#include <optional>

#include <nlohmann/json.hpp>

#include "chain/chain.h"
#include "chain/plan.h"
#include "disk/store.h"
#include "driver/console.h"
#include "engine/engine.h"
#include "lint/lint.h"
#include "util/clock.h"

namespace kiln {

constexpr int k_exit_ok = 0;
constexpr int k_exit_failed = 1;
constexpr int k_exit_usage = 2;
constexpr int k_exit_gate = 3;   // a gate refused: image-env, residue, artifacts, smoke floors
constexpr int k_exit_record = 4; // the run's record could not be written whole (a full disk)
constexpr int k_exit_crash = 70; // kiln itself failed (an internal error); the record says so
constexpr int k_exit_interrupted = 130;

/// What a run leaves its caller to read after it, as `kiln run --report` does.
struct RunOutput {
  std::filesystem::path folder; // the run's folder, once it holds the first manifest
  /// The analysis of the run's logs, made for its history (none when the history could not be
  /// opened: a report then makes its own).
  std::optional<nlohmann::json> log_analysis;
  /// What the lint preflight found, each Dockerfile's result, also when it refused the run: for
  /// a caller that shows findings in another form (GitHub's annotations).
  std::vector<LintResult> lint;
};

struct RunOptions {
  Selection selection;
  KeyValues build_arg_overrides; // --build-arg K=V, in command-line order
  bool dry_run = false;
  /// With dry_run: instead of the commands, which stages would rebuild and why (`tty` or
  /// `json`); "" prints the commands.
  std::string explain;
  bool no_cache_export = false; // leave out every registry-facing cache tier (BuildKit)
  bool no_salvage = false;      // no re-drive of a failed stage's finished targets
  std::optional<int> jobs;      // --jobs / KILN_JOBS: the job budget, set outright
  std::optional<int> parallel;  // --parallel: stages at once, over the chain's max_parallel
  bool fail_fast = false;       // start nothing after the first failure
  bool no_cache = false;        // no step from the engine's layer cache, in any stage
  /// When set, receives what the run leaves (nothing for a run refused before its first
  /// manifest, or a dry run).
  RunOutput* output = nullptr;
  /// --progress=json: where the run's events go as JSON lines, besides its events.jsonl.
  Console* progress_json = nullptr;
};

/// What a run talks to besides its engine, each replaceable by a test.
struct RunSeams {
  const StoreLevers* store = nullptr; // nullptr: the levers of the chain's engine store
  const Clock* clock = nullptr;       // nullptr: real_clock()
};

/// Run (or with dry_run, print) the selected stages of a validated chain. Errors in the
/// request go to `errors` and return k_exit_usage before anything is built or recorded.
/// Interrupt handlers must be installed first. Returns the process exit code.
int run_chain(const Chain& chain, const Engine& engine, const RunOptions& options, Console& console,
              std::FILE* errors, const RunSeams& seams = {});

} // namespace kiln
