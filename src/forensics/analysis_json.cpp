// The JSON of `kiln logs analyze` (the analysis contract; docs/forensics.md describes every
// field).
#include <algorithm>

#include <nlohmann/json.hpp>

#include "forensics/log_analyzer_impl.h"

namespace kiln::forensics {

// ---------------------------------------------------------------------------------------------
// JSON

namespace {

using nlohmann::json;

json optional_number(const std::optional<double>& value) {
  return value ? json(*value) : json(nullptr);
}

json warnings_json(const WarningCounts& counts) {
  json classes = json::object();
  for (const auto& [klass, count] : counts.classes) {
    classes[klass] = count;
  }
  return {{"total", counts.total},
          {"noise", counts.noise},
          {"signal", counts.signal},
          {"unclassified", counts.unclassified},
          {"classes", classes}};
}

json compile_json(const std::optional<CompileCounts>& counts, bool with_source) {
  if (!counts) {
    return nullptr;
  }
  json out = {{"requests", counts->requests}, {"hits", counts->hits}, {"misses", counts->misses}};
  if (with_source) {
    out["source"] = counts->source;
  }
  return out;
}

json step_json(const StepResult& step) {
  return {{"id", step.id},
          {"name", step.name},
          {"stage", step.stage},
          {"dockerfile_step", step.dockerfile_step},
          {"cached", step.cached},
          {"state", state_name(step.state)},
          {"exit_code", step.exit_code ? json(*step.exit_code) : json(nullptr)},
          {"start", optional_number(step.start)},
          {"end", optional_number(step.end)},
          {"seconds", optional_number(step.seconds)},
          {"idle_tail_seconds", optional_number(step.idle_tail_seconds)},
          {"output_lines", step.output_lines},
          {"replayed_lines", step.replayed_lines},
          {"clipped", step.clipped},
          {"compile", compile_json(step.compile, true)},
          {"compiler_invocations", step.compiler_invocations},
          {"compile_bypass", step.compile_bypass},
          {"warnings", warnings_json(step.warnings)},
          {"flood", step.flood},
          {"fetches_without_progress", step.fetches_without_progress},
          {"errors", step.errors},
          {"error_lines_total", step.error_lines_total},
          {"errors_from_tail", step.errors_from_tail},
          {"jobs", step.jobs ? json(*step.jobs) : json(nullptr)}};
}

} // namespace

nlohmann::json to_json(const RunAnalysis& run) {
  json out;
  out["schema"] = 1;
  out["run_id"] = run.run_id ? json(*run.run_id) : json(nullptr);
  out["idle_tail_threshold_seconds"] = run.options.idle_threshold_seconds;
  out["flood_threshold_lines"] = run.options.flood_lines;
  json logs = json::array();
  struct Ranked {
    const LogResult* log;
    const StepResult* step;
  };
  std::vector<Ranked> timed;
  json idle_steps = json::array();
  double idle_total = 0;
  double idle_over = 0;
  json clips = json::array();
  json errors = json::array();
  WarningCounts warnings;
  long fetches = 0;
  for (const auto& log : run.logs) {
    json steps = json::array();
    for (const auto& step : log.steps) {
      steps.push_back(step_json(step));
      if (step.seconds) {
        timed.push_back({&log, &step});
      }
      if (step.idle_tail_seconds) {
        idle_total += *step.idle_tail_seconds;
        if (*step.idle_tail_seconds >= run.options.idle_threshold_seconds) {
          idle_over += *step.idle_tail_seconds;
          idle_steps.push_back({{"stage", log.stage},
                                {"lane", log.lane},
                                {"attempt", log.attempt},
                                {"id", step.id},
                                {"name", step.name},
                                {"idle_tail_seconds", *step.idle_tail_seconds}});
        }
      }
      if (step.state == StepState::error) {
        errors.push_back({{"stage", log.stage},
                          {"lane", log.lane},
                          {"attempt", log.attempt},
                          {"id", step.id},
                          {"name", step.name},
                          {"lines", step.errors},
                          {"from_tail", step.errors_from_tail}});
      }
      warnings += step.warnings;
      fetches += step.fetches_without_progress;
    }
    for (const auto& clip : log.clips) {
      clips.push_back({{"stage", log.stage},
                       {"lane", log.lane},
                       {"attempt", log.attempt},
                       {"id", clip.id},
                       {"line", clip.line}});
    }
    logs.push_back({{"path", log.path},
                    {"stage", log.stage},
                    {"lane", log.lane},
                    {"attempt", log.attempt},
                    {"format", log.format},
                    {"timed", log.timed},
                    {"line_times", log.line_times},
                    {"lines", log.lines},
                    {"bytes", log.bytes},
                    {"clipped", log.clipped},
                    {"failed", log.failed}});
    logs.back()["steps"] = std::move(steps);
  }
  out["logs"] = std::move(logs);
  json stages = json::array();
  for (const auto& stage : run.stages) {
    stages.push_back({{"stage", stage.stage},
                      {"lane", stage.lane},
                      {"attempts", stage.attempts},
                      {"steps", stage.steps},
                      {"steps_cached", stage.steps_cached},
                      {"step_seconds", stage.step_seconds},
                      {"idle_tail_seconds", stage.idle_tail_seconds},
                      {"idle_tail_steps", stage.idle_tail_steps},
                      {"compile", compile_json(stage.compile, false)},
                      {"compile_bypass_steps", stage.compile_bypass_steps},
                      {"warnings", stage.warnings},
                      {"signal_warnings", stage.signal_warnings},
                      {"clipped", stage.clipped},
                      {"fetches_without_progress", stage.fetches_without_progress},
                      {"jobs_seen", stage.jobs_seen ? json(*stage.jobs_seen) : json(nullptr)},
                      {"jobs_share", stage.jobs_share ? json(*stage.jobs_share) : json(nullptr)},
                      {"over_share", stage.over_share}});
  }
  out["stages"] = std::move(stages);
  std::stable_sort(timed.begin(), timed.end(), [](const Ranked& a, const Ranked& b) {
    return *a.step->seconds > *b.step->seconds;
  });
  json slowest = json::array();
  for (size_t i = 0; i < timed.size() && i < run.options.top; ++i) {
    slowest.push_back({{"stage", timed[i].log->stage},
                       {"lane", timed[i].log->lane},
                       {"attempt", timed[i].log->attempt},
                       {"id", timed[i].step->id},
                       {"name", timed[i].step->name},
                       {"seconds", *timed[i].step->seconds}});
  }
  out["slowest_steps"] = std::move(slowest);
  out["idle_tails"] = {{"total_seconds", round_ms(idle_total)},
                       {"over_threshold_seconds", round_ms(idle_over)},
                       {"steps", std::move(idle_steps)}};
  out["clips"] = std::move(clips);
  json retries = json::array();
  for (const auto& retry : run.retries) {
    json entry = {{"stage", retry.stage},
                  {"lane", retry.lane},
                  {"kind", retry.kind},
                  {"detail", retry.detail},
                  {"from_attempt", retry.from_attempt},
                  {"to_attempt", retry.to_attempt}};
    if (retry.jobs_from && retry.jobs_to) {
      entry["jobs_from"] = *retry.jobs_from;
      entry["jobs_to"] = *retry.jobs_to;
    }
    retries.push_back(std::move(entry));
  }
  out["retries"] = std::move(retries);
  out["warnings"] = warnings_json(warnings);
  for (const auto& p : run.publish_failures) {
    errors.push_back({{"stage", "publish"},
                      {"lane", ""},
                      {"attempt", nullptr},
                      {"id", p.ref},
                      {"name", "publish " + p.ref + ": " + p.status},
                      {"lines", json::array({p.failure})},
                      {"from_tail", false},
                      {"log", p.log}});
  }
  out["errors"] = std::move(errors);
  out["fetches_without_progress"] = fetches;
  return out;
}

} // namespace kiln::forensics
