#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "explain/stage_inputs.h"

namespace kiln {

/// Why a stage was built instead of reused: the first difference in build order between its
/// inputs and those of its last build that ended ok (docs/explain.md lists every kind).
struct Cause {
  /// new | cache-bypassed | base-moved | parent-rebuilt | instruction-changed |
  /// build-arg-changed | context-changed | unhashed-input | cold
  std::string kind;
  int line = 0;        // of the step where the cache broke; 0 when it broke before any step
  std::string step;    // that step's first line as written, cut at 100 characters
  std::string summary; // one line a reader understands alone
  nlohmann::json detail = nlohmann::json::object(); // the kind's own fields
  std::string against; // the run whose build it was compared with; "" for `new`
};

nlohmann::json to_json(const Cause& cause);
std::optional<Cause> cause_from_json(const nlohmann::json& json);

/// What kiln knows of the engine's cache beyond the inputs: why a build whose inputs did not
/// change may still not be served from it.
struct CacheEvidence {
  /// The last build's image is no longer what the stage's name holds in the engine's store (or
  /// is gone): said how, "" when it is still there or this engine cannot tell.
  std::string image_gone;
  std::vector<std::string> reclaims; // kiln's reclaims since that build, each as recorded
  bool import_dropped = false;       // the registry cache tiers were left out of the build
};

/// The cause that makes the engine rebuild the stage, judged before its build: nullopt when its
/// inputs are those of its last good build (`before`) and nothing says the engine lost it.
std::optional<Cause> rebuild_cause(const StageInputs& now, const StageInputs* before,
                                   const CacheEvidence& evidence);

/// The cause of a build that ran steps although rebuild_cause() found none: `cold`, with what
/// kiln knows (the worker it moved to, the evidence).
Cause cold_cause(const StageInputs& now, const StageInputs& before, const CacheEvidence& evidence);

} // namespace kiln
