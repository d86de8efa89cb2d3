#include "forensics/stage_error.h"

#include "util/json_field.h"

namespace kiln::forensics {

std::string name_in_lane(const nlohmann::json& stage) {
  std::string name = json_field(stage, "name", std::string());
  std::string lane = json_field(stage, "lane", std::string());
  if (!lane.empty() && name.starts_with(lane + "/")) {
    return name.substr(lane.size() + 1);
  }
  return name;
}

std::optional<StageError> stage_error(const nlohmann::json& analysis, const nlohmann::json& stage) {
  auto attempts = stage.find("attempts");
  if (attempts == stage.end() || !attempts->is_array() || attempts->empty()) {
    return std::nullopt;
  }
  int last = json_field(attempts->back(), "number", 0);
  std::string lane = json_field(stage, "lane", std::string());
  std::string name = name_in_lane(stage);
  auto errors = analysis.find("errors");
  if (errors == analysis.end() || !errors->is_array()) {
    return std::nullopt;
  }
  // The analysis names a log by the stage inside its lane (stages/<lane>/<stage>.attempt-N.log).
  for (const auto& entry : *errors) {
    if (json_field(entry, "stage", std::string()) != name ||
        json_field(entry, "lane", std::string()) != lane ||
        json_field(entry, "attempt", 0) != last) {
      continue;
    }
    StageError error;
    error.step_id = json_field(entry, "id", std::string());
    error.step_name = json_field(entry, "name", std::string());
    error.from_tail = json_field(entry, "from_tail", false);
    if (auto lines = entry.find("lines"); lines != entry.end() && lines->is_array()) {
      for (const auto& line : *lines) {
        if (line.is_string()) {
          error.lines.push_back(line.get<std::string>());
        }
      }
    }
    return error;
  }
  return std::nullopt;
}

} // namespace kiln::forensics
