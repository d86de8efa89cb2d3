#include "driver/abandoned_runs.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <system_error>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "driver/events.h"
#include "driver/record_fold.h"
#include "driver/records.h"
#include "util/fs.h"
#include "util/json_field.h"
#include "util/time.h"

namespace kiln {

namespace {

using Json = nlohmann::ordered_json; // keys in the record's order, not sorted

// How many of the newest runs a new run looks at: a run killed further back was marked by the
// run after it.
constexpr size_t k_abandoned_scan = 20;

/// `ended` of a dead run: the last time its record was written.
std::string last_written(const std::filesystem::path& run) {
  std::error_code ec;
  auto when = std::filesystem::last_write_time(run / "driver.log", ec);
  if (ec) {
    when = std::filesystem::last_write_time(run / "manifest.json", ec);
  }
  if (ec) {
    return {};
  }
  return utc_iso8601(std::chrono::file_clock::to_sys(when));
}

/// Append what marking a dead run abandoned changed of `doc` (its manifest, marked) to the
/// run's events, and `run.ended`: its manifest stays the fold of its events. The manifest that
/// fold gives, or nullopt for a run without events (recorded before they were) or whose events
/// cannot be appended to.
std::optional<std::string> record_abandonment(const std::filesystem::path& events, const Json& doc,
                                              const std::string& ended) {
  auto text = read_file(events);
  if (!text) {
    return std::nullopt;
  }
  // A line the kill cut short never reached the manifest: it goes, so the stream stays lines.
  std::string kept = text->substr(0, text->rfind('\n') + 1);
  long seq = 0;
  double t = 0;
  if (kept.size() > 1) {
    size_t start = kept.rfind('\n', kept.size() - 2);
    auto last =
        Json::parse(kept.substr(start == std::string::npos ? 0 : start + 1), nullptr, false);
    if (last.is_object()) {
      seq = json_field<int64_t>(last, "seq", 0);
      t = json_field<double>(last, "t", 0.0);
    }
  }
  Json run = doc;
  run.erase("stages");
  run.erase("publish");
  std::string appended = event_line(++seq, ended, t, "run.record", {{"record", run}});
  if (doc.contains("stages") && doc["stages"].is_array()) {
    for (const auto& stage : doc["stages"]) {
      if (stage.is_object()) { // every one: which attempts changed is not worth finding out
        appended +=
            event_line(++seq, ended, t, "stage.record",
                       {{"stage", json_field<std::string>(stage, "name", "")}, {"record", stage}});
      }
    }
  }
  appended += event_line(
      ++seq, ended, t, "run.ended",
      {{"status", "abandoned"}, {"status_reason", doc["status_reason"]}, {"exit_code", nullptr}});
  if (!write_file_atomic(events, kept + appended, Durability::rename_only)) {
    return std::nullopt;
  }
  auto manifest = replay_manifest(events);
  return manifest ? std::optional<std::string>(std::move(*manifest)) : std::nullopt;
}

} // namespace

std::vector<std::string> mark_abandoned_runs(const std::filesystem::path& records) {
  std::error_code ec;
  std::vector<std::filesystem::path> runs;
  for (const auto& entry : std::filesystem::directory_iterator(records / "runs", ec)) {
    runs.push_back(entry.path());
  }
  std::sort(runs.rbegin(), runs.rend());
  std::vector<std::string> marked;
  for (size_t i = 0; i < runs.size() && i < k_abandoned_scan; ++i) {
    auto text = read_file(runs[i] / "manifest.json", k_manifest_read_limit);
    if (!text) {
      continue;
    }
    auto doc = Json::parse(*text, nullptr, false);
    if (!doc.is_object() || json_field<std::string>(doc, "status", "") != "running") {
      continue;
    }
    std::string ended = last_written(runs[i]);
    doc["status"] = "abandoned";
    doc["status_reason"] =
        fmt::format("kiln (pid {} on {}) stopped without finishing its record: "
                    "killed, or the machine went down; found by the next run",
                    json_field<int64_t>(doc, "pid", 0), json_field<std::string>(doc, "host", "?"));
    doc["ended"] = ended;
    if (doc.contains("stages") && doc["stages"].is_array()) {
      for (auto& stage : doc["stages"]) {
        if (!stage.is_object()) {
          continue;
        }
        if (json_field<std::string>(stage, "status", "") == "running") {
          stage["status"] = "abandoned";
          stage["ended"] = ended;
        }
        if (stage.contains("attempts") && stage["attempts"].is_array()) {
          for (auto& attempt : stage["attempts"]) {
            if (attempt.is_object() &&
                json_field<std::string>(attempt, "verdict", "") == "running") {
              attempt["verdict"] = "abandoned";
            }
          }
        }
      }
    }
    std::string run_id = runs[i].filename().string();
    std::string manifest = doc.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
    if (auto folded = record_abandonment(runs[i] / "events.jsonl", doc, ended)) {
      manifest = std::move(*folded);
    }
    if (write_file_atomic(runs[i] / "manifest.json", manifest)) {
      marked.push_back(fmt::format("run {} never finished (its record was last written {}); it "
                                   "now says abandoned",
                                   run_id, ended.empty() ? "at an unknown time" : ended));
    }
  }
  return marked;
}

} // namespace kiln
