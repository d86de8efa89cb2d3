#include "driver/records_prune.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "disk/tree_size.h"
#include "driver/records.h"
#include "forensics/history.h"
#include "util/fs.h"
#include "util/json_field.h"

namespace kiln {

namespace fs = std::filesystem;

namespace {

/// When a run started by its id (`YYYYMMDD-HHMMSS-xxxx`, UTC); 0 when the id is not one.
double started_by_id(const std::string& id) {
  if (id.size() < 15 || id[8] != '-') {
    return 0;
  }
  std::string iso =
      fmt::format("{}-{}-{}T{}:{}:{}Z", id.substr(0, 4), id.substr(4, 2), id.substr(6, 2),
                  id.substr(9, 2), id.substr(11, 2), id.substr(13, 2));
  return parse_utc(iso).value_or(0);
}

/// Every run folder under `<records>/runs` that holds a manifest.
std::vector<RunEntry> list_runs(const fs::path& records) {
  std::vector<RunEntry> runs;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(records / "runs", ec)) {
    std::error_code entry_ec;
    if (!entry.is_directory(entry_ec) || !fs::exists(entry.path() / "manifest.json", entry_ec)) {
      continue;
    }
    RunEntry run;
    run.id = entry.path().filename().string();
    run.started = started_by_id(run.id);
    auto written = fs::last_write_time(entry.path() / "manifest.json", entry_ec);
    run.written = std::chrono::duration<double>(written.time_since_epoch()).count();
    if (auto text = read_file(entry.path() / "manifest.json", k_manifest_read_limit)) {
      nlohmann::json doc = nlohmann::json::parse(*text, nullptr, false);
      run.running = json_field<std::string>(doc, "status", "") == "running";
      if (auto started = parse_utc(json_field<std::string>(doc, "started", ""))) {
        run.started = *started;
      }
    }
    runs.push_back(std::move(run));
  }
  return runs;
}

} // namespace

PrunePlan plan_prune(std::vector<RunEntry> runs, const PruneRule& rule, double now,
                     const std::string& latest, bool lock_held, const std::string& lock_note) {
  // Newest first. A run id sorts by the second its run started; of the runs of one second, the
  // one `latest` names started last, and the others ended (wrote their manifest last) in the
  // order they started: the records lock makes them one after another.
  auto second = [](const RunEntry& run) { return run.id.substr(0, 15); };
  std::sort(runs.begin(), runs.end(), [&](const RunEntry& a, const RunEntry& b) {
    if (second(a) != second(b)) {
      return second(a) > second(b);
    }
    if ((a.id == latest) != (b.id == latest)) {
      return a.id == latest;
    }
    return a.written != b.written ? a.written > b.written : a.id > b.id;
  });
  PrunePlan plan;
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunEntry& run = runs[i];
    bool selected = rule.keep
                        ? i >= static_cast<size_t>(*rule.keep)
                        : rule.older_than_seconds && run.started < now - *rule.older_than_seconds;
    if (!selected) {
      continue;
    }
    if (run.id == latest) {
      plan.kept.push_back(fmt::format("run {}: `latest` names it", run.id));
    } else if (run.running && !lock_held) {
      // Without the lock, a manifest that says `running` may be a live run's.
      plan.kept.push_back(fmt::format("run {}: its manifest says running and the records lock "
                                      "is not free ({})",
                                      run.id, lock_note));
    } else {
      plan.remove.push_back(run.id);
    }
  }
  std::reverse(plan.remove.begin(), plan.remove.end());
  std::reverse(plan.kept.begin(), plan.kept.end());
  return plan;
}

PruneOutcome prune_records(const fs::path& records, const PruneRule& rule, SystemTime now,
                           bool dry_run, bool lock_held, const std::string& lock_note) {
  PruneOutcome outcome;
  std::vector<RunEntry> runs = list_runs(records);
  outcome.total = static_cast<int>(runs.size());
  std::error_code ec;
  fs::path latest = fs::canonical(records / "latest", ec);
  double now_seconds = std::chrono::duration<double>(now.time_since_epoch()).count();
  outcome.plan = plan_prune(std::move(runs), rule, now_seconds,
                            ec ? std::string() : latest.filename().string(), lock_held, lock_note);
  for (const auto& id : outcome.plan.remove) {
    fs::path folder = records / "runs" / id;
    uint64_t bytes = tree_size(folder).allocated;
    if (!dry_run) {
      std::error_code removed;
      fs::remove_all(folder, removed);
      if (removed) {
        outcome.errors.push_back(
            fmt::format("cannot remove {}: {}", folder.string(), removed.message()));
        continue;
      }
    }
    outcome.removed.push_back(id);
    outcome.bytes += bytes;
  }
  // The rows go with the folders: sync() would never index them again, and the history would
  // go on judging builds against runs no one can open.
  if (dry_run || outcome.removed.empty() || !fs::exists(records / "history.db", ec)) {
    return outcome;
  }
  auto history = History::open(records);
  if (!history) {
    outcome.errors.push_back(history.error());
    return outcome;
  }
  if (auto forgotten = history->forget(outcome.removed)) {
    outcome.forgotten = *forgotten;
  } else {
    outcome.errors.push_back(forgotten.error());
  }
  return outcome;
}

} // namespace kiln
