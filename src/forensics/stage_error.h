#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln::forensics {

/// The step a stage's last attempt failed at and the lines that say why, as the log analysis
/// found them ("the failing step's real error", docs/forensics.md): what CI outputs quote.
struct StageError {
  std::string step_id;   // "STEP 2/2", "#8"
  std::string step_name; // the instruction as the engine printed it
  std::vector<std::string> lines;
  bool from_tail = false; // no error line matched: the step's last lines stand in
};

/// `stage` is one entry of a manifest's `stages`, `analysis` the log analysis of its run
/// (to_json's shape). The error of the stage's last attempt; none when that attempt's log
/// names no failed step (or there is no such log).
std::optional<StageError> stage_error(const nlohmann::json& analysis, const nlohmann::json& stage);

/// A manifest stage's `name` without its `<lane>/` prefix: the stage's name inside its lane.
std::string name_in_lane(const nlohmann::json& stage);

} // namespace kiln::forensics
