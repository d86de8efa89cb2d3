#include "driver/run_history.h"

#include <fmt/format.h>

#include "driver/records.h"
#include "forensics/history.h"
#include "forensics/log_analysis.h"

namespace kiln {

HistoryKey history_key(const Chain& chain, const Stage& stage) {
  // The manifest names a lane only with [[lane]] tables.
  return {stage.known_as(), chain.lanes.empty() ? std::string() : stage.lane};
}

std::optional<double> StageEta::of(const std::string& kind) const {
  auto it = by_kind.find(kind);
  return it != by_kind.end() ? std::optional<double>(it->second) : any;
}

RunForecast forecast_run(const Chain& chain, const std::vector<const Stage*>& stages) {
  RunForecast forecast;
  auto history = History::open(chain.records);
  if (history) {
    history->sync(chain.records);
    for (const Stage* stage : stages) {
      const auto [name, lane] = history_key(chain, *stage);
      if (auto seconds = history->expected_seconds(name, lane)) {
        StageEta& eta = forecast.etas[stage->name];
        eta.any = *seconds;
        for (const char* kind : {"cached", "partial", "full"}) {
          if (auto of_kind = history->expected_seconds(name, lane, "", 10, kind)) {
            eta.by_kind[kind] = *of_kind;
          }
        }
      }
      if (history->last_run_clipped(name, lane)) {
        forecast.warnings.push_back(fmt::format(
            "warning: stage {}: the engine clipped its output in its last run, so that log "
            "misses lines for good; {}",
            stage->name, k_lift_log_limit));
      }
    }
  }
  // The newest manifests, read only when the history knows no green build of some stage.
  if (forecast.etas.size() < stages.size()) {
    for (const auto& [stage, build] : last_ok_builds(chain.records)) {
      forecast.etas.emplace(stage, StageEta{build.seconds, {}});
    }
  }
  return forecast;
}

HistoryNotes index_finished_run(const Chain& chain, const std::filesystem::path& run_dir) {
  HistoryNotes notes;
  auto history = History::open(chain.records);
  if (!history) {
    notes.warning = history.error();
    return notes;
  }
  if (auto analysed =
          forensics::analyze_target(run_dir.string(), chain.records, forensics::Options{})) {
    notes.log_analysis = forensics::to_json(*analysed);
  }
  const nlohmann::json* analysis = notes.log_analysis ? &*notes.log_analysis : nullptr;
  if (auto indexed = history->index_run(run_dir, analysis); !indexed) {
    notes.warning = indexed.error();
    return notes;
  }
  // After this run, which sync() then finds indexed: earlier runs it never saw, and those still
  // marked running, dead since this run holds the records lock.
  history->sync(chain.records, true);
  RegressionRule rule{chain.history.regression_percent, chain.history.regression_seconds};
  history->set_rule(rule); // a report or `kiln history` of this run judges it the same way
  for (const Regression& r : history->regressions(run_dir.filename().string(), rule)) {
    notes.regressions.push_back(describe_regression(r));
  }
  return notes;
}

} // namespace kiln
