#include "explain/run_explain.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "driver/records.h"
#include "explain/stage_inputs.h"
#include "util/fs.h"
#include "util/time.h"

namespace kiln {

using json = nlohmann::json;

namespace {

tl::expected<json, std::string> read_manifest(const std::filesystem::path& run) {
  std::filesystem::path file = run / "manifest.json";
  auto text = read_file(file, k_manifest_read_limit);
  if (!text) {
    return tl::make_unexpected(text.error());
  }
  json manifest = json::parse(*text, nullptr, false);
  if (!manifest.is_object() || !manifest.contains("stages")) {
    return tl::make_unexpected(file.string() + ": not a run manifest");
  }
  return manifest;
}

/// The cause of `stage`'s build in `run` against its inputs in `against`.
tl::expected<Cause, std::string> cause_against(const std::filesystem::path& run,
                                               const std::filesystem::path& against,
                                               const std::string& stage) {
  auto now = read_inputs(inputs_file(run, stage));
  if (!now) {
    return tl::make_unexpected(now.error());
  }
  if (!*now) {
    return tl::make_unexpected(
        fmt::format("{} is missing: the run was recorded by a kiln that kept no inputs",
                    inputs_file(run, stage).string()));
  }
  auto before = read_inputs(inputs_file(against, stage));
  if (!before) {
    return tl::make_unexpected(before.error());
  }
  const StageInputs* was = *before ? &**before : nullptr;
  if (auto cause = rebuild_cause(**now, was, {})) {
    return *cause;
  }
  return cold_cause(**now, *was, {});
}

/// The stage of `lane` a Dockerfile knows as `parent`: `<lane>/<parent>` with lanes.
std::string chain_stage(const std::string& lane, const std::string& parent) {
  return lane.empty() ? parent : lane + "/" + parent;
}

} // namespace

tl::expected<RunExplanation, std::string> explain_run(const std::filesystem::path& run,
                                                      const std::filesystem::path* against) {
  auto manifest = read_manifest(run);
  if (!manifest) {
    return tl::make_unexpected(manifest.error());
  }
  RunExplanation ex;
  ex.run_id = manifest->value("run_id", run.filename().string());
  ex.status = manifest->value("status", "");
  if (against != nullptr) {
    auto other = read_manifest(*against);
    if (!other) {
      return tl::make_unexpected(other.error());
    }
    ex.against = other->value("run_id", against->filename().string());
  }
  for (const auto& s : (*manifest)["stages"]) {
    ExplainedStage e;
    e.stage = s.value("name", "");
    e.lane = s.value("lane", "");
    e.outcome = s.value("outcome", "");
    e.seconds = s.value("seconds", 0.0);
    if (e.outcome == "built") {
      if (against != nullptr) {
        auto cause = cause_against(run, *against, e.stage);
        if (!cause) {
          return tl::make_unexpected(cause.error());
        }
        e.cause = std::move(*cause);
      } else if (s.contains("cause")) {
        e.cause = cause_from_json(s["cause"]);
      }
    }
    ex.stages.push_back(std::move(e));
  }
  // Each build's first cause, followed through rebuilt parents to the stage that started it.
  std::map<std::string, const ExplainedStage*> by_name;
  for (const auto& e : ex.stages) {
    by_name[e.stage] = &e;
  }
  for (auto& e : ex.stages) {
    if (e.outcome != "built") {
      continue;
    }
    const ExplainedStage* at = &e;
    std::set<std::string> seen;
    while (at->cause && at->cause->kind == "parent-rebuilt" && seen.insert(at->stage).second) {
      auto parent = by_name.find(chain_stage(at->lane, at->cause->detail.value("parent", "")));
      if (parent == by_name.end() || parent->second->outcome != "built") {
        break;
      }
      at = parent->second;
    }
    e.root = at->stage;
  }
  std::map<std::string, RootCost> roots;
  std::map<std::string, std::set<std::string>> lanes;
  for (const auto& e : ex.stages) {
    if (e.root.empty()) {
      continue;
    }
    RootCost& r = roots[e.root];
    if (r.stage.empty()) {
      r.stage = e.root;
      const ExplainedStage* root = by_name[e.root];
      r.cause = root->cause.value_or(Cause{"unknown", 0, "", "the run recorded no cause", {}, ""});
    }
    r.seconds += e.seconds;
    r.stages.push_back(e.stage);
    lanes[e.root].insert(e.lane);
  }
  for (auto& [name, r] : roots) {
    r.lanes = static_cast<int>(lanes[name].size());
    ex.roots.push_back(r);
  }
  std::stable_sort(ex.roots.begin(), ex.roots.end(),
                   [](const RootCost& a, const RootCost& b) { return a.seconds > b.seconds; });
  return ex;
}

json explanation_json(const RunExplanation& ex) {
  json stages = json::array();
  for (const auto& e : ex.stages) {
    stages.push_back({{"stage", e.stage},
                      {"lane", e.lane},
                      {"outcome", e.outcome},
                      {"seconds", e.seconds},
                      {"cause", e.cause ? to_json(*e.cause) : json(nullptr)},
                      {"root", e.root}});
  }
  json roots = json::array();
  for (const auto& r : ex.roots) {
    roots.push_back({{"stage", r.stage},
                     {"cause", to_json(r.cause)},
                     {"seconds", r.seconds},
                     {"stages", r.stages},
                     {"lanes", r.lanes}});
  }
  return {{"run", ex.run_id},
          {"status", ex.status},
          {"against", ex.against},
          {"stages", stages},
          {"roots", roots}};
}

std::string explanation_text(const RunExplanation& ex) {
  size_t width = 5;
  int built = 0;
  double seconds = 0;
  for (const auto& e : ex.stages) {
    width = std::max(width, e.stage.size());
    if (e.outcome == "built") {
      ++built;
      seconds += e.seconds;
    }
  }
  std::string text =
      fmt::format("kiln: run {} ({}): {} of {} stage(s) built, {} of builds; {}\n", ex.run_id,
                  ex.status, built, ex.stages.size(), human_duration(seconds),
                  ex.against.empty() ? "each against its own last good build"
                                     : "each against its build in run " + ex.against);
  for (const auto& e : ex.stages) {
    if (e.outcome != "built") {
      text += fmt::format("  {:<{}}  {}\n", e.stage, width, e.outcome.empty() ? "-" : e.outcome);
      continue;
    }
    text += fmt::format("  {:<{}}  built {:>6}  {}\n", e.stage, width, human_duration(e.seconds),
                        e.cause ? e.cause->summary : std::string("(no cause recorded)"));
    if (e.cause && e.cause->kind == "instruction-changed" && e.cause->detail.contains("diff")) {
      for (const auto& line : e.cause->detail["diff"]) {
        text += fmt::format("  {:<{}}      {}\n", "", width, line.get<std::string>());
      }
    }
    if (e.cause && e.cause->kind == "cold") {
      for (const auto& line : e.cause->detail.value("evidence", json::array())) {
        text += fmt::format("  {:<{}}      evidence: {}\n", "", width, line.get<std::string>());
      }
    }
  }
  if (!ex.roots.empty()) {
    text += "kiln: what the rebuilds cost, by first cause:\n";
    for (const auto& r : ex.roots) {
      text += fmt::format("  {}: {}: {} across {} stage(s){}\n", r.stage, r.cause.summary,
                          human_duration(r.seconds), r.stages.size(),
                          r.lanes > 1 ? fmt::format(" and {} lanes", r.lanes) : "");
    }
  }
  return text;
}

} // namespace kiln
