#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "chain/chain.h"

namespace kiln {

/// What a build of each stage is expected to take, by the name a run gives it
/// (`<lane>/<stage>` with lanes): the median of its last green builds in the run history, or,
/// without a usable history, its newest successful build.
std::map<std::string, double> stage_etas(const Chain& chain);

/// What indexing a finished run had to say.
struct HistoryNotes {
  std::vector<std::string> regressions; // one describe_regression() line each
  std::string warning;                  // why the history could not be written; "" when it was
};

/// Index the run in `run_dir` (its last manifest written) in the chain's run history, with the
/// analysis of its logs, and find its regressions. Call it with the records lock held: runs
/// still marked `running` are then dead and indexed as killed.
HistoryNotes index_finished_run(const Chain& chain, const std::filesystem::path& run_dir);

} // namespace kiln
