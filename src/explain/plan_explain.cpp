#include "explain/plan_explain.h"

#include <map>

#include <fmt/format.h>

#include "driver/build_request.h"
#include "driver/run_history.h"
#include "explain/rebuild_judge.h"
#include "forensics/history.h"
#include "util/strings.h"
#include "util/time.h"

namespace kiln {

using json = nlohmann::json;

namespace {

/// What a need this selection rebuilds is handed over as (no image has that identity), and one
/// it may rebuild.
constexpr const char* k_rebuilt = "<rebuilt by this run>";
constexpr const char* k_maybe_rebuilt = "<maybe rebuilt by this run>";

/// Whether the engine may still serve the stage although `cause` says a parent was rebuilt:
/// it keys COPY --from by the files copied, and a parent that may be reused may hand over its
/// old image. True when every other input is unchanged, judged with those parents as they were.
bool rebuilt_parents_only_maybe(const StageVerdict& v) {
  if (!v.cause || v.cause->kind != "parent-rebuilt" || !v.before) {
    return false;
  }
  StageInputs as_before = v.now;
  for (size_t i = 0; i < as_before.steps.size() && i < v.before->steps.size(); ++i) {
    StepInput& step = as_before.steps[i];
    const bool copies = lower(step.text.substr(0, 5)) == "copy ";
    for (auto& [parent, identity] : step.parents) {
      auto was = v.before->steps[i].parents.find(parent);
      if (was != v.before->steps[i].parents.end() &&
          (identity == k_maybe_rebuilt || (copies && identity == k_rebuilt))) {
        identity = was->second;
      }
    }
  }
  return !rebuild_cause(as_before, &*v.before, v.evidence);
}

std::optional<double> rebuild_median(const History* history, const Chain& chain,
                                     const Stage& stage) {
  if (history == nullptr) {
    return std::nullopt;
  }
  const auto [name, lane] = history_key(chain, stage);
  std::vector<double> took;
  for (const auto& run : history->stage_runs(name, lane, 50)) {
    if (run.green() && run.outcome == "built" && took.size() < 10) {
      took.push_back(run.seconds);
    }
  }
  if (took.empty()) {
    return std::nullopt;
  }
  return median(took);
}

} // namespace

std::vector<PlannedStage> explain_plan(const Chain& chain, const Engine& engine,
                                       const std::vector<const Stage*>& stages,
                                       std::vector<BuildRequest> requests,
                                       const std::vector<std::string>& workers,
                                       const KeyValues& overrides, bool no_cache) {
  RebuildJudge judge(chain, engine, overrides, no_cache);
  auto history = History::open(chain.records);
  std::map<std::string, std::string> handed; // a selected stage's name -> what it hands over
  std::vector<PlannedStage> plan;
  for (size_t i = 0; i < stages.size(); ++i) {
    const Stage& stage = *stages[i];
    BuildRequest& request = requests[i];
    for (size_t n = 0; n < request.contexts.size() && n < stage.needs.size(); ++n) {
      if (auto it = handed.find(stage.needs[n]); it != handed.end()) {
        request.contexts[n].identity = it->second;
      } else if (request.contexts[n].identity.empty()) {
        request.contexts[n].identity =
            engine.stage_image_identity(stage_context(chain, *chain.find_stage(stage.needs[n])));
      }
    }
    StageVerdict v = judge.judge(stage, request, workers[i]);
    PlannedStage p{stage.name, stage.lane, "reuse", v.cause, std::nullopt};
    if (v.cause) {
      p.verdict = rebuilt_parents_only_maybe(v) ? "maybe" : "rebuild";
      p.expected_seconds = rebuild_median(history ? &*history : nullptr, chain, stage);
    }
    if (p.verdict != "reuse") {
      handed[stage.name] = p.verdict == "maybe" ? k_maybe_rebuilt : k_rebuilt;
    } else if (v.earlier) {
      handed[stage.name] = v.earlier->image;
    } else if (v.before) {
      handed[stage.name] = v.before->image;
    }
    plan.push_back(std::move(p));
  }
  (void)judge.save();
  return plan;
}

json plan_json(const std::vector<PlannedStage>& plan) {
  json stages = json::array();
  double total = 0;
  int rebuilds = 0;
  for (const auto& p : plan) {
    json s = {{"stage", p.stage},
              {"lane", p.lane},
              {"verdict", p.verdict},
              {"cause", p.cause ? to_json(*p.cause) : json(nullptr)},
              {"expected_seconds", p.expected_seconds ? json(*p.expected_seconds) : json(nullptr)}};
    if (p.verdict != "reuse") {
      ++rebuilds;
      total += p.expected_seconds.value_or(0);
    }
    stages.push_back(std::move(s));
  }
  return {{"stages", stages}, {"rebuilds", rebuilds}, {"expected_seconds", total}};
}

std::string plan_text(const std::vector<PlannedStage>& plan) {
  size_t width = 5;
  for (const auto& p : plan) {
    width = std::max(width, p.stage.size());
  }
  std::string text;
  double total = 0;
  int rebuilds = 0, unknown = 0;
  for (const auto& p : plan) {
    if (p.verdict == "reuse") {
      text += fmt::format("  {:<{}}  reused\n", p.stage, width);
      continue;
    }
    ++rebuilds;
    total += p.expected_seconds.value_or(0);
    unknown += p.expected_seconds ? 0 : 1;
    std::string cost = p.expected_seconds ? fmt::format("~{}", human_duration(*p.expected_seconds))
                                          : std::string("no earlier build to time");
    std::string where = p.cause->line > 0 ? fmt::format(" from line {}", p.cause->line) : "";
    text += fmt::format("  {:<{}}  {}{} ({}): {}\n", p.stage, width,
                        p.verdict == "maybe" ? "rebuilds unless what it copies comes out the same,"
                                             : "rebuilds",
                        where, cost, p.cause->summary);
  }
  return fmt::format("kiln: {} of {} stage(s) would rebuild, ~{} by the medians of their "
                     "earlier builds{}; nothing was built\n",
                     rebuilds, plan.size(), human_duration(total),
                     unknown > 0 ? fmt::format(" ({} never timed)", unknown) : "") +
         text;
}

} // namespace kiln
