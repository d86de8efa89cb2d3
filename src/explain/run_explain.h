#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <tl/expected.hpp>

#include "explain/cause.h"

namespace kiln {

struct ExplainedStage {
  std::string stage;
  std::string lane;
  std::string outcome;
  double seconds = 0;
  std::optional<Cause> cause; // a stage that built; nullopt for any other outcome
  /// The stage whose own cause made this one build (itself unless its cause is a rebuilt
  /// parent, followed up the chain); "" when it did not build.
  std::string root;
};

/// What a first cause cost: the seconds of its stage and of every stage it dragged along.
struct RootCost {
  std::string stage;
  Cause cause;
  double seconds = 0;
  std::vector<std::string> stages; // itself first, then what it dragged along in run order
  int lanes = 0;
};

struct RunExplanation {
  std::string run_id;
  std::string status;
  std::string against; // the run compared with (--against); "" when each stage was compared
                       // with its own last good build, as the run itself did
  std::vector<ExplainedStage> stages;
  std::vector<RootCost> roots; // most expensive first
};

/// The causes of a run's builds: as the run recorded them, or recomputed against the inputs of
/// the run in `against` (a run folder; nullptr: as recorded). An error names the file.
tl::expected<RunExplanation, std::string> explain_run(const std::filesystem::path& run,
                                                      const std::filesystem::path* against);

nlohmann::json explanation_json(const RunExplanation& explanation);
std::string explanation_text(const RunExplanation& explanation);

} // namespace kiln
