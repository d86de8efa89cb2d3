#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chain/chain.h"
#include "engine/engine.h"
#include "explain/cause.h"

namespace kiln {

/// What a run of the selected stages is expected to do to one stage, judged before it builds.
struct PlannedStage {
  std::string stage;
  std::string lane;
  /// reuse | rebuild | maybe (it rebuilds only when what it copies from a rebuilt parent comes
  /// out different: the engine keys `COPY --from` by the files copied, known once it built)
  std::string verdict;
  std::optional<Cause> cause;
  std::optional<double> expected_seconds; // the median of its last green builds that ran steps
};

/// The selected stages' verdicts in run order (`requests` and `workers`, the worker each would
/// be placed on first or "", parallel to `stages`), each against its last good build's inputs;
/// a need this selection rebuilds is handed over as rebuilt.
std::vector<PlannedStage> explain_plan(const Chain& chain, const Engine& engine,
                                       const std::vector<const Stage*>& stages,
                                       std::vector<BuildRequest> requests,
                                       const std::vector<std::string>& workers,
                                       const KeyValues& overrides, bool no_cache);

nlohmann::json plan_json(const std::vector<PlannedStage>& plan);
std::string plan_text(const std::vector<PlannedStage>& plan);

} // namespace kiln
