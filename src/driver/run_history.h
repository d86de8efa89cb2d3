#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chain/chain.h"

namespace kiln {

/// How to make BuildKit keep a step's whole output: by default it clips each of a step's
/// streams at 1 MiB, and at 100 KiB per second it has run (util/progress/logs), limits the
/// daemon reads from its own environment, never buildctl's.
constexpr const char* k_lift_log_limit =
    "start buildkitd with BUILDKIT_STEP_LOG_MAX_SIZE=1073741824 and "
    "BUILDKIT_STEP_LOG_MAX_SPEED=-1 in its environment (1 GiB per stream, no rate limit) to "
    "keep a step's whole output";

/// The names the run history files a stage's builds under: the name its Dockerfiles know it
/// by, and its lane only with [[lane]] tables (a lone `lane` is a cache slug's).
struct HistoryKey {
  std::string stage;
  std::string lane;
};
HistoryKey history_key(const Chain& chain, const Stage& stage);

/// What a build of one stage is expected to take: the median of its last green builds of each
/// kind (build_kind(): cached, partial, full) and of any kind.
struct StageEta {
  std::optional<double> any;
  std::map<std::string, double> by_kind;
  /// For a build of `kind`: that kind's median, else any kind's.
  std::optional<double> of(const std::string& kind) const;
};

/// What the run history says before a run.
struct RunForecast {
  /// What a build of each stage is expected to take, by the name a run gives it
  /// (`<lane>/<stage>` with lanes): the medians of its last green builds, or, without a usable
  /// history, its newest successful build.
  std::map<std::string, StageEta> etas;
  /// One line per stage whose last run lost output to the engine's log limit.
  std::vector<std::string> warnings;
};

RunForecast forecast_run(const Chain& chain, const std::vector<const Stage*>& stages);

/// What indexing a finished run had to say.
struct HistoryNotes {
  std::vector<std::string> regressions; // one describe_regression() line each
  std::string warning;                  // why the history could not be written; "" when it was
  std::optional<nlohmann::json> log_analysis; // what the run was indexed with, for its report
};

/// Index the run in `run_dir` (its last manifest written) in the chain's run history, with the
/// analysis of its logs, and find its regressions. Call it with the records lock held: runs
/// still marked `running` are then dead and indexed as killed.
HistoryNotes index_finished_run(const Chain& chain, const std::filesystem::path& run_dir);

} // namespace kiln
