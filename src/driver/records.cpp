#include "driver/records.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <system_error>

#include <nlohmann/json.hpp>

#include "util/time.h"

namespace kiln {

namespace {

constexpr size_t k_eta_runs = 20;

using Json = nlohmann::ordered_json; // keys in the documented order, not sorted

/// Seconds to the millisecond: finer is noise, and shorter numbers read better.
double rounded(double seconds) {
  return std::round(seconds * 1000) / 1000;
}

Json compile_json(const std::optional<CompileReport>& c) {
  if (!c) {
    return nullptr;
  }
  return {{"compile_requests", c->totals.compile_requests},
          {"hits", c->totals.hits},
          {"misses", c->totals.misses},
          {"errors", c->totals.errors},
          {"bypasses", c->totals.bypasses},
          {"reports", c->reports}};
}

Json attempt_json(const AttemptRecord& a) {
  return {{"number", a.number},
          {"started", a.started},
          {"seconds", rounded(a.seconds)},
          {"exit_code", a.exit_code},
          {"verdict", a.verdict},
          {"transient_class", a.transient_class},
          {"matched_line", a.matched_line},
          {"reason", a.reason},
          {"log", a.log},
          {"command", a.command},
          {"registry_cache_dropped", a.registry_cache_dropped},
          {"steps_run", a.steps_run},
          {"steps_cached", a.steps_cached},
          {"vertices", a.vertices},
          {"vertices_cached", a.vertices_cached},
          {"compile", compile_json(a.compile)}};
}

Json stage_json(const StageRecord& s) {
  Json attempts = Json::array();
  for (const auto& a : s.attempts) {
    attempts.push_back(attempt_json(a));
  }
  Json salvage = Json::array();
  for (const auto& r : s.salvage) {
    salvage.push_back({{"target", r.target},
                       {"verdict", r.verdict},
                       {"seconds", rounded(r.seconds)},
                       {"log", r.log}});
  }
  Json gates = Json::array();
  for (const auto& g : s.gates) {
    gates.push_back({{"gate", g.gate},
                     {"subject", g.subject},
                     {"verdict", g.verdict},
                     {"findings", g.findings},
                     {"reason", g.reason}});
  }
  Json smoke = nullptr;
  if (s.smoke) {
    const SmokeRecord& m = *s.smoke;
    smoke = {{"passed", m.passed},           {"failed", m.failed},
             {"skipped", m.skipped},         {"min_passed", m.min_passed},
             {"max_skipped", m.max_skipped}, {"summaries", m.summaries},
             {"verdict", m.verdict},         {"reason", m.reason}};
  }
  return {{"name", s.name},
          {"tag", s.tag},
          {"status", s.status},
          {"command", s.command},
          {"started", s.started},
          {"ended", s.ended},
          {"seconds", rounded(s.seconds)},
          {"image_id", s.image_id},
          {"failure", s.failure},
          {"min_compile_requests", s.min_compile_requests},
          {"jobs", s.jobs},
          {"memory_limit_gb", rounded(s.memory_limit_gb)},
          {"attempts", attempts},
          {"salvage", salvage},
          {"salvage_note", s.salvage_note},
          {"gates", gates},
          {"smoke", smoke}};
}

} // namespace

void CompileReport::add(const cc::CompileStats& stats) {
  cc::add_stats(totals, stats);
  ++reports;
}

StageRecord* RunRecord::find_stage(const std::string& name) {
  for (auto& stage : stages) {
    if (stage.name == name) {
      return &stage;
    }
  }
  return nullptr;
}

std::string manifest_json(const RunRecord& run) {
  Json stages = Json::array();
  for (const auto& s : run.stages) {
    stages.push_back(stage_json(s));
  }
  Json resources = Json::array();
  for (const auto& p : run.resources) {
    resources.push_back({{"phase", p.phase},
                         {"minutes", std::round(p.minutes * 10) / 10},
                         {"avg_cpu", std::round(p.avg_cpu * 10) / 10},
                         {"peak_cpu", std::round(p.peak_cpu * 10) / 10},
                         {"min_free_ram_gb", std::round(p.min_free_ram_gb * 10) / 10},
                         {"min_free_disk_gb", std::round(p.min_free_disk_gb * 10) / 10},
                         {"samples", p.samples}});
  }
  Json doc = {{"schema", k_manifest_schema},
              {"run_id", run.run_id},
              {"chain", {{"name", run.chain_name}, {"file", run.chain_file}}},
              {"engine", {{"name", run.engine}, {"version", run.engine_version}}},
              {"host", run.host},
              {"started", run.started},
              {"ended", run.ended},
              {"status", run.status},
              {"stages", stages},
              {"resources", resources}};
  // Engine output is not always UTF-8 (a Latin-1 compiler message, a binary dumped to the
  // terminal) and a quoted line must not make the record unwritable: replace what is invalid.
  return doc.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

tl::expected<RunFolder, std::string> RunFolder::create(const std::filesystem::path& records,
                                                       SystemTime start) {
  RunFolder folder;
  std::error_code ec;
  std::filesystem::create_directories(records / "runs", ec);
  // Two runs started in the same second draw again until their folders differ: sharing one
  // would mix their logs.
  bool created = false;
  for (int draw = 0; draw < 100 && !created && !ec; ++draw) {
    folder.m_run_id = make_run_id(start);
    folder.m_path = records / "runs" / folder.m_run_id;
    created = std::filesystem::create_directory(folder.m_path, ec);
  }
  if (created) {
    std::filesystem::create_directory(folder.m_path / "stages", ec);
  }
  if (!created || ec) {
    return tl::unexpected("cannot create a run folder under " + (records / "runs").string() + ": " +
                          (ec ? ec.message() : "every id drawn is taken"));
  }
  const std::string& run_id = folder.m_run_id;
  if (auto opened = folder.m_driver_log.open(folder.m_path / "driver.log"); !opened) {
    return tl::unexpected(opened.error());
  }
  // Swap the link in with a rename so `latest` never dangles or vanishes.
  std::filesystem::path link = records / "latest";
  std::filesystem::path tmp = records / ("latest.tmp-" + run_id);
  std::filesystem::remove(tmp, ec);
  std::filesystem::create_directory_symlink(std::filesystem::path("runs") / run_id, tmp, ec);
  if (!ec) {
    std::filesystem::rename(tmp, link, ec);
  }
  if (ec) {
    return tl::unexpected("cannot point " + link.string() + " at the run: " + ec.message());
  }
  return folder;
}

void RunFolder::log(std::string_view message) {
  std::string line = utc_iso8601(std::chrono::system_clock::now());
  line += ' ';
  line += message;
  line += '\n';
  m_driver_log.write(line);
}

tl::expected<void, std::string> RunFolder::write_manifest(const RunRecord& run) const {
  return write_file_atomic(m_path / "manifest.json", manifest_json(run));
}

std::string RunFolder::attempt_log(const std::string& stage, int attempt) {
  return "stages/" + stage + ".attempt-" + std::to_string(attempt) + ".log";
}

std::map<std::string, LastOk> last_ok_builds(const std::filesystem::path& records) {
  std::error_code ec;
  std::vector<std::filesystem::path> runs;
  for (const auto& entry : std::filesystem::directory_iterator(records / "runs", ec)) {
    runs.push_back(entry.path());
  }
  // Run ids start with the UTC start time, so name order is time order.
  std::sort(runs.rbegin(), runs.rend());
  std::map<std::string, LastOk> builds;
  for (size_t i = 0; i < runs.size() && i < k_eta_runs; ++i) {
    auto text = read_file(runs[i] / "manifest.json");
    if (!text) {
      continue;
    }
    auto doc = nlohmann::json::parse(*text, nullptr, false);
    if (doc.is_discarded() || !doc.contains("stages") || !doc["stages"].is_array()) {
      continue;
    }
    for (const auto& s : doc["stages"]) {
      if (s.is_object() && s.value("status", "") == "ok") {
        builds.emplace(
            s.value("name", ""),
            LastOk{runs[i].filename().string(), s.value("seconds", 0.0), s.value("image_id", "")});
      }
    }
  }
  return builds;
}

} // namespace kiln
