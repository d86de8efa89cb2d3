// A run's logs: finding them (a log file, a run folder or a run id), the stage totals across
// each stage's attempts and the findings between attempts (a retry that helped, a failure that
// repeated, fewer jobs), and the publish targets the run's manifest says failed.
#include <algorithm>
#include <map>
#include <tuple>

#include <nlohmann/json.hpp>

#include "driver/records.h"
#include "forensics/log_analyzer_impl.h"
#include "util/json_field.h"

namespace kiln::forensics {

namespace {

struct LogKey {
  std::string lane, stage;
  int attempt = 0;
  std::string path;
  bool operator<(const LogKey& other) const {
    return std::tie(lane, stage, attempt, path) <
           std::tie(other.lane, other.stage, other.attempt, other.path);
  }
};

bool failed_step(const StepResult& step) {
  return step.state == StepState::error;
}

const StepResult* first_failed_step(const LogResult& log) {
  for (const auto& step : log.steps) {
    if (failed_step(step)) {
      return &step;
    }
  }
  return nullptr;
}

std::vector<std::string> error_lines(const LogResult& log) {
  const StepResult* step = first_failed_step(log);
  return step ? step->errors : std::vector<std::string>{};
}

std::optional<long> log_jobs(const LogResult& log) {
  std::optional<long> jobs;
  for (const auto& step : log.steps) {
    if (step.jobs) {
      jobs = std::max(jobs.value_or(0), *step.jobs);
    }
  }
  return jobs;
}

std::string failure_text(const LogResult& log) {
  const StepResult* step = first_failed_step(log);
  if (!step) {
    return "the build failed";
  }
  std::string text = "step " + step->id + " " + step->name + " failed";
  if (!step->errors.empty()) {
    text += ": " + step->errors.front();
  }
  return text;
}

void find_retries(const std::vector<const LogResult*>& attempts, RunAnalysis& run) {
  for (size_t i = 0; i + 1 < attempts.size(); ++i) {
    const LogResult& a = *attempts[i];
    const LogResult& b = *attempts[i + 1];
    RetryFinding base;
    base.stage = a.stage;
    base.lane = a.lane;
    base.from_attempt = a.attempt;
    base.to_attempt = b.attempt;
    if (a.failed && !b.failed) {
      RetryFinding finding = base;
      finding.kind = "retry";
      finding.detail = "attempt " + std::to_string(a.attempt) + " failed (" + failure_text(a) +
                       "), attempt " + std::to_string(b.attempt) + " succeeded";
      run.retries.push_back(std::move(finding));
    } else if (a.failed && b.failed) {
      auto lines = error_lines(a);
      if (!lines.empty() && lines == error_lines(b)) {
        RetryFinding finding = base;
        finding.kind = "repeated-failure";
        finding.detail = "attempts " + std::to_string(a.attempt) + " and " +
                         std::to_string(b.attempt) + " failed with the same " +
                         std::to_string(lines.size()) + " error line(s): " + lines.front();
        run.retries.push_back(std::move(finding));
      }
    }
    // A -j / --parallel that went down: first step by step (the same instruction in both
    // attempts), else the largest of each attempt.
    bool found = false;
    for (const auto& before : a.steps) {
      if (!before.jobs) {
        continue;
      }
      for (const auto& after : b.steps) {
        if (after.name == before.name && after.jobs && *after.jobs < *before.jobs) {
          RetryFinding finding = base;
          finding.kind = "downgrade";
          finding.jobs_from = before.jobs;
          finding.jobs_to = after.jobs;
          finding.detail = "-j" + std::to_string(*before.jobs) + " -> -j" +
                           std::to_string(*after.jobs) + " (attempt " + std::to_string(a.attempt) +
                           " -> " + std::to_string(b.attempt) + ", step " + after.name + ")";
          run.retries.push_back(std::move(finding));
          found = true;
          break;
        }
      }
      if (found) {
        break;
      }
    }
    auto from = log_jobs(a);
    auto to = log_jobs(b);
    if (!found && from && to && *to < *from) {
      RetryFinding finding = base;
      finding.kind = "downgrade";
      finding.jobs_from = from;
      finding.jobs_to = to;
      finding.detail = "-j" + std::to_string(*from) + " -> -j" + std::to_string(*to) +
                       " (attempt " + std::to_string(a.attempt) + " -> " +
                       std::to_string(b.attempt) + ")";
      run.retries.push_back(std::move(finding));
    }
  }
}

} // namespace

void summarize(RunAnalysis& run) {
  run.stages.clear();
  run.retries.clear();
  std::map<std::pair<std::string, std::string>, std::vector<const LogResult*>> by_stage;
  std::vector<std::pair<std::string, std::string>> order;
  for (const auto& log : run.logs) {
    auto key = std::make_pair(log.lane, log.stage);
    if (!by_stage.count(key)) {
      order.push_back(key);
    }
    by_stage[key].push_back(&log);
  }
  for (const auto& key : order) {
    auto& attempts = by_stage[key];
    std::stable_sort(attempts.begin(), attempts.end(), [](const LogResult* a, const LogResult* b) {
      return a->attempt < b->attempt;
    });
    StageSummary summary;
    summary.lane = key.first;
    summary.stage = key.second;
    summary.attempts = static_cast<int>(attempts.size());
    for (const LogResult* log : attempts) {
      summary.clipped = summary.clipped || log->clipped;
      for (const auto& step : log->steps) {
        if (step.dockerfile_step) {
          ++summary.steps;
          summary.steps_cached += step.cached ? 1 : 0;
        }
        summary.step_seconds += step.seconds.value_or(0);
        summary.idle_tail_seconds += step.idle_tail_seconds.value_or(0);
        if (step.idle_tail_seconds &&
            *step.idle_tail_seconds >= run.options.idle_threshold_seconds) {
          ++summary.idle_tail_steps;
        }
        if (step.compile) {
          CompileCounts& counts = summary.compile ? *summary.compile : summary.compile.emplace();
          counts.requests += step.compile->requests;
          counts.hits += step.compile->hits;
          counts.misses += step.compile->misses;
        }
        summary.compile_bypass_steps += step.compile_bypass ? 1 : 0;
        summary.warnings += step.warnings.total;
        summary.signal_warnings += step.warnings.signal;
        summary.fetches_without_progress += step.fetches_without_progress;
        if (step.jobs) {
          summary.jobs_seen = std::max(summary.jobs_seen.value_or(0), *step.jobs);
        }
      }
    }
    // A share only binds a build that reads it: a -j above it takes cores and memory the
    // stages beside it were promised.
    auto share = run.job_shares.find(summary.lane.empty() ? summary.stage
                                                          : summary.lane + "/" + summary.stage);
    if (share != run.job_shares.end()) {
      summary.jobs_share = share->second;
      summary.over_share = summary.jobs_seen && *summary.jobs_seen > share->second;
    }
    summary.step_seconds = round_ms(summary.step_seconds);
    summary.idle_tail_seconds = round_ms(summary.idle_tail_seconds);
    run.stages.push_back(std::move(summary));
    find_retries(attempts, run);
  }
}

tl::expected<RunAnalysis, std::string> analyze_target(const std::string& target,
                                                      const std::filesystem::path& records,
                                                      const Options& options) {
  namespace fs = std::filesystem;
  RunAnalysis run;
  run.options = options;
  std::error_code ec;
  fs::path path(target);
  if (target.empty()) {
    return tl::unexpected(std::string("no log, run folder or run id given"));
  }
  if (fs::is_regular_file(path, ec)) {
    auto log = analyze_log_file(path, target, options);
    if (!log) {
      return tl::unexpected(log.error());
    }
    run.logs.push_back(std::move(*log));
    summarize(run);
    return run;
  }
  fs::path folder;
  if (fs::is_directory(path, ec) && fs::is_directory(path / "stages", ec)) {
    folder = path;
  } else if (fs::is_directory(path, ec) && fs::is_directory(path / "runs", ec)) {
    return tl::unexpected(path.string() +
                          " is a records folder, not a run: name a run id under it (or latest) "
                          "with --records " +
                          path.string());
  } else if (target.find('/') == std::string::npos &&
             fs::is_directory(records / "runs" / target, ec)) {
    folder = records / "runs" / target;
  } else if (target == "latest" && fs::is_directory(records / "latest", ec)) {
    folder = fs::canonical(records / "latest", ec);
  } else if (fs::exists(path, ec)) {
    return tl::unexpected(path.string() +
                          " is neither a log file nor a run folder (one holding stages/)");
  } else if (target.find('/') != std::string::npos || path.extension() == ".log") {
    return tl::unexpected("no log file or run folder at " + target +
                          ": check the path, or pass a run id (looked up under " +
                          (records / "runs").string() + ", --records DIR)");
  } else {
    return tl::unexpected("no run '" + target + "' in " + (records / "runs").string() +
                          " and no file of that name: pass a log file, a run folder, or a run "
                          "id with --records DIR");
  }
  run.run_id = fs::path(folder).lexically_normal().filename().string();
  if (run.run_id->empty()) {
    run.run_id = fs::path(folder).lexically_normal().parent_path().filename().string();
  }
  std::vector<LogKey> found;
  fs::path stages = folder / "stages";
  for (auto it = fs::recursive_directory_iterator(stages, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec)) {
      continue;
    }
    fs::path relative = fs::relative(it->path(), folder, ec);
    LogKey key;
    key.path = relative.string();
    if (parse_log_name(relative, key.stage, key.lane, key.attempt)) {
      found.push_back(std::move(key));
    }
  }
  if (ec) {
    return tl::unexpected("cannot list " + stages.string() + ": " + ec.message());
  }
  std::sort(found.begin(), found.end());
  for (const auto& key : found) {
    auto log = analyze_log_file(folder / key.path, key.path, options);
    if (!log) {
      return tl::unexpected(log.error());
    }
    run.logs.push_back(std::move(*log));
  }
  if (auto text = read_small_file(folder / "manifest.json", k_manifest_read_limit)) {
    using Json = nlohmann::json;
    Json manifest = Json::parse(*text, nullptr, false);
    Json stages = manifest.is_object() ? manifest.value("stages", Json()) : Json();
    for (const Json& stage : stages.is_array() ? stages : Json::array()) {
      long jobs = stage.is_object() ? json_field<long>(stage, "jobs", 0) : 0;
      if (jobs > 0) { // 0: it was never offered a budget (not started, or it reads none)
        run.job_shares[json_field<std::string>(stage, "name", "")] = jobs;
      }
    }
    Json publish = manifest.is_object() ? manifest.value("publish", Json()) : Json();
    for (const Json& target : publish.is_array() ? publish : Json::array()) {
      if (!target.is_object()) {
        continue;
      }
      std::string status = json_field<std::string>(target, "status", "");
      if (status == "failed" || status == "blocked") {
        run.publish_failures.push_back({json_field<std::string>(target, "ref", ""), status,
                                        json_field<std::string>(target, "failure", ""),
                                        json_field<std::string>(target, "log", "")});
      }
    }
  }
  summarize(run);
  return run;
}

} // namespace kiln::forensics
