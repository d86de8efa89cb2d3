#pragma once

#include <filesystem>
#include <string>

#include "chain/chain.h"
#include "driver/console.h"
#include "driver/run_loop.h"

namespace kiln {

/// Whether kiln runs as a step of a GitHub Actions job, and where that step's summary goes.
/// The environment is read here alone: `GITHUB_ACTIONS=true` turns the CI outputs on,
/// `GITHUB_STEP_SUMMARY` names the file the summary is appended to.
struct GithubActions {
  bool on = false;
  std::filesystem::path step_summary; // "": no summary, only annotations
};

/// What the environment says (above).
GithubActions github_actions();

/// After `kiln run` on GitHub Actions: an annotation per lint finding of the preflight and per
/// stage that failed (through `console`, after the run's own lines), and the run's Markdown
/// step summary appended to the summary file. A summary that cannot be written is a warning;
/// the run's exit code stays its own.
void write_github_run_outputs(const GithubActions& github, const Chain& chain,
                              const RunOutput& output, Console& console);

} // namespace kiln
