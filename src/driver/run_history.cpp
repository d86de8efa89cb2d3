#include "driver/run_history.h"

#include "driver/records.h"
#include "forensics/history.h"

namespace kiln {

std::map<std::string, double> stage_etas(const Chain& chain) {
  std::map<std::string, double> etas;
  auto history = History::open(chain.records);
  if (history) {
    history->sync(chain.records);
    for (const Stage& stage : chain.stages) {
      // The manifest names a lane only with [[lane]] tables; a lone `lane` is a cache slug's.
      std::string lane = chain.lanes.empty() ? std::string() : stage.lane;
      if (auto seconds = history->expected_seconds(stage.known_as(), lane)) {
        etas[stage.name] = *seconds;
      }
    }
  }
  for (const auto& [stage, build] : last_ok_builds(chain.records)) {
    etas.emplace(stage, build.seconds); // only where the history knows no green build
  }
  return etas;
}

HistoryNotes index_finished_run(const Chain& chain, const std::filesystem::path& run_dir) {
  HistoryNotes notes;
  auto history = History::open(chain.records);
  if (!history) {
    notes.warning = history.error();
    return notes;
  }
  history->sync(chain.records, true);
  if (auto indexed = history->index_run(run_dir); !indexed) {
    notes.warning = indexed.error();
    return notes;
  }
  RegressionRule rule{chain.history.regression_percent, chain.history.regression_seconds};
  history->set_rule(rule); // a report or `kiln history` of this run judges it the same way
  for (const Regression& r : history->regressions(run_dir.filename().string(), rule)) {
    notes.regressions.push_back(describe_regression(r));
  }
  return notes;
}

} // namespace kiln
