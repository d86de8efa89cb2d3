#pragma once

#include <cstdio>
#include <optional>

#include "chain/chain.h"
#include "chain/plan.h"
#include "driver/console.h"
#include "engine/engine.h"

namespace kiln {

constexpr int k_exit_ok = 0;
constexpr int k_exit_failed = 1;
constexpr int k_exit_usage = 2;
constexpr int k_exit_gate = 3; // a gate refused: the image-env gate or a smoke stage's floors
constexpr int k_exit_interrupted = 130;

struct RunOptions {
  Selection selection;
  KeyValues build_arg_overrides; // --build-arg K=V, in command-line order
  bool dry_run = false;
  bool no_cache_export = false; // leave out every registry-facing cache tier (BuildKit)
  bool no_salvage = false;      // no re-drive of a failed stage's finished targets
  std::optional<int> jobs;      // --jobs / KILN_JOBS: the job budget, set outright
};

/// Run (or with dry_run, print) the selected stages of a validated chain. Errors in the
/// request go to `errors` and return k_exit_usage before anything is built or recorded.
/// Interrupt handlers must be installed first. Returns the process exit code.
int run_chain(const Chain& chain, const Engine& engine, const RunOptions& options, Console& console,
              std::FILE* errors);

} // namespace kiln
