#include "driver/records.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <system_error>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/fs.h"
#include "util/json_field.h"
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
  const cc::CompileStats& t = c->totals;
  return {
      {"compile_requests", t.compile_requests},
      {"hits", t.hits},
      {"misses", t.misses},
      {"errors", t.errors},
      {"bypasses", t.bypasses},
      {"served", {{"sccache", t.via_sccache}, {"ccache", t.via_ccache}, {"direct", t.via_direct}}},
      {"ccache_hits", t.ccache_hits},
      {"ccache_misses", t.ccache_misses},
      {"sccache_lost_steps", c->sccache_lost},
      {"sccache_failed_steps", c->sccache_failed},
      {"sccache_absent_steps", c->sccache_absent},
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
          {"log_truncated_at_byte",
           a.log_truncated_at_byte ? Json(*a.log_truncated_at_byte) : Json(nullptr)},
          {"clip_lines", a.clip_lines},
          {"command", a.command},
          {"stopped_by", a.stopped_by},
          {"last_line", a.last_line},
          {"silent_seconds", rounded(a.silent_seconds)},
          {"registry_cache_dropped", a.registry_cache_dropped},
          {"steps_run", a.steps_run},
          {"steps_cached", a.steps_cached},
          {"vertices", a.vertices},
          {"vertices_cached", a.vertices_cached},
          {"compile", compile_json(a.compile)}};
}

Json gate_json(const GateRecord& g) {
  return {{"gate", g.gate},
          {"subject", g.subject},
          {"verdict", g.verdict},
          {"findings", g.findings},
          {"reason", g.reason},
          {"warnings", g.warnings},
          {"remembered", g.remembered}};
}

} // namespace

void CompileReport::add(const cc::CompileStats& stats) {
  totals += stats;
  ++reports;
  sccache_lost += stats.sccache == cc::SccacheServer::lost ? 1 : 0;
  sccache_failed += stats.sccache == cc::SccacheServer::failed ? 1 : 0;
  sccache_absent += stats.sccache == cc::SccacheServer::absent ? 1 : 0;
}

void mark_critical_path(RunRecord& run) {
  // Stages are recorded in run order, needs first: one pass finds each stage's longest chain.
  std::map<std::string, std::pair<double, std::string>> longest; // name -> (sum, previous)
  std::string last;
  for (const auto& stage : run.stages) {
    std::pair<double, std::string> best{0, ""};
    for (const auto& need : stage.needs) {
      // The first need found starts the chain even when it took no time (it was skipped).
      if (auto found = longest.find(need);
          found != longest.end() && (best.second.empty() || found->second.first > best.first)) {
        best = {found->second.first, need};
      }
    }
    longest[stage.name] = {best.first + stage.seconds, best.second};
    if (last.empty() || longest[stage.name].first > longest[last].first) {
      last = stage.name;
    }
  }
  run.critical_path.clear();
  run.critical_path_seconds = last.empty() ? 0 : longest[last].first;
  for (std::string at = last; !at.empty(); at = longest[at].second) {
    run.critical_path.insert(run.critical_path.begin(), at);
  }
}

const StageRecord* RunRecord::find_stage(const std::string& name) const {
  for (const auto& stage : stages) {
    if (stage.name == name) {
      return &stage;
    }
  }
  return nullptr;
}

StageRecord* RunRecord::find_stage(const std::string& name) {
  return const_cast<StageRecord*>(std::as_const(*this).find_stage(name));
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
    gates.push_back(gate_json(g));
  }
  Json moves = Json::array();
  for (const auto& m : s.moves) {
    moves.push_back({{"from", m.from}, {"to", m.to}, {"why", m.why}, {"attempt", m.attempt}});
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
          {"lane", s.lane},
          {"tag", s.tag},
          {"work_tag", s.work_tag},
          {"tag_moved", s.tag_moved},
          {"tag_held", s.tag_held},
          {"status", s.status},
          {"outcome", s.outcome},
          {"needs", s.needs},
          {"gates_not_run", s.gates_not_run},
          {"command", s.command},
          {"started", s.started},
          {"ended", s.ended},
          {"seconds", rounded(s.seconds)},
          {"image_id", s.image_id},
          {"failure", s.failure},
          {"min_compile_requests", s.min_compile_requests},
          {"compile_floor", s.compile_floor},
          {"jobs", s.jobs},
          {"memory_limit_gb", rounded(s.memory_limit_gb)},
          {"attempts", attempts},
          {"salvage", salvage},
          {"salvage_note", s.salvage_note},
          {"gates", gates},
          {"smoke", smoke},
          {"worker", s.worker},
          {"worker_rank", s.worker_rank},
          {"placement", s.placement},
          {"moves", moves},
          {"cause", s.cause}};
}

Json publish_json(const PublishRecord& p) {
  Json lanes = Json::array();
  for (const auto& l : p.lanes) {
    lanes.push_back({{"lane", l.lane},
                     {"stage", l.stage},
                     {"platform", l.platform},
                     {"image", l.image},
                     {"identity", l.identity},
                     {"digest", l.digest},
                     {"attestation", l.attestation},
                     {"packages", l.packages},
                     {"detail", l.detail}});
  }
  Json gates = Json::array();
  for (const auto& g : p.gates) {
    gates.push_back(gate_json(g));
  }
  return {{"ref", p.ref},           {"status", p.status},
          {"started", p.started},   {"seconds", rounded(p.seconds)},
          {"digest", p.digest},     {"failure", p.failure},
          {"lanes", lanes},         {"gates", gates},
          {"done", p.done},         {"gates_not_run", p.gates_not_run},
          {"attempts", p.attempts}, {"log", p.log}};
}

Json run_part_json(const RunRecord& run) {
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
  Json workers = Json::array();
  for (const auto& w : run.workers) {
    workers.push_back(
        {{"name", w.name}, {"host", w.host}, {"version", w.version}, {"left_out", w.left_out}});
  }
  return {{"schema", k_manifest_schema},
          {"run_id", run.run_id},
          {"chain", {{"name", run.chain_name}, {"file", run.chain_file}}},
          {"engine", {{"name", run.engine}, {"version", run.engine_version}}},
          {"host", run.host},
          {"pid", run.pid},
          {"started", run.started},
          {"ended", run.ended},
          {"status", run.status},
          {"status_reason", run.status_reason},
          {"record_errors", run.record_errors},
          {"max_parallel", run.max_parallel},
          {"wall_seconds", rounded(run.wall_seconds)},
          {"critical_path",
           {{"stages", run.critical_path}, {"seconds", rounded(run.critical_path_seconds)}}},
          {"workers", workers},
          {"resources", resources}};
}

std::string manifest_text(const Json& run, const std::vector<Json>& stages,
                          const std::vector<Json>& publish) {
  // The stages and publish targets go where a reader of the record expects them: after the
  // critical path, before the resources.
  Json doc = Json::object();
  for (const auto& [key, value] : run.items()) {
    if (key == "resources") {
      doc["stages"] = stages;
      doc["publish"] = publish;
    }
    if (key != "stages" && key != "publish") { // the parts' own, whatever a run part says
      doc[key] = value;
    }
  }
  if (!doc.contains("stages")) {
    doc["stages"] = stages;
    doc["publish"] = publish;
  }
  // Engine output is not always UTF-8 (a Latin-1 compiler message, a binary dumped to the
  // terminal) and a quoted line must not make the record unwritable: replace what is invalid.
  return doc.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

std::string manifest_json(const RunRecord& run) {
  std::vector<Json> stages;
  for (const auto& s : run.stages) {
    stages.push_back(stage_json(s));
  }
  std::vector<Json> publish;
  for (const auto& p : run.published) {
    publish.push_back(publish_json(p));
  }
  return manifest_text(run_part_json(run), stages, publish);
}

namespace {

/// Whether a stage's successful build ran steps rather than taking every one from the cache:
/// only such a build says how long the stage takes when it has work to do.
bool ran_steps(const nlohmann::json& stage) {
  auto attempts = stage.find("attempts");
  if (attempts == stage.end() || !attempts->is_array()) {
    return true; // an older record without attempts: take it as it is
  }
  for (const auto& attempt : *attempts) {
    if (attempt.is_object() && json_field<std::string>(attempt, "verdict", "") == "ok") {
      return json_field<int64_t>(attempt, "steps_cached", 0) <
             json_field<int64_t>(attempt, "steps_run", 0);
    }
  }
  return true;
}

} // namespace

std::map<std::string, LastOk> last_ok_builds(const std::filesystem::path& records) {
  std::error_code ec;
  std::vector<std::filesystem::path> runs;
  for (const auto& entry : std::filesystem::directory_iterator(records / "runs", ec)) {
    runs.push_back(entry.path());
  }
  // Run ids start with the UTC start time, so name order is time order.
  std::sort(runs.rbegin(), runs.rend());
  std::map<std::string, LastOk> builds;
  std::map<std::string, LastOk> cached; // fully cached builds: an ETA only when nothing else is
  for (size_t i = 0; i < runs.size() && i < k_eta_runs; ++i) {
    auto text = read_file(runs[i] / "manifest.json", k_manifest_read_limit);
    if (!text) {
      continue;
    }
    auto doc = nlohmann::json::parse(*text, nullptr, false);
    if (!doc.is_object() || !doc.contains("stages") || !doc["stages"].is_array()) {
      continue;
    }
    for (const auto& s : doc["stages"]) {
      if (!s.is_object() || json_field<std::string>(s, "status", "") != "ok") {
        continue;
      }
      LastOk build{runs[i].filename().string(), json_field<double>(s, "seconds", 0.0),
                   json_field<std::string>(s, "image_id", "")};
      (ran_steps(s) ? builds : cached).emplace(json_field<std::string>(s, "name", ""), build);
    }
  }
  builds.merge(cached); // keeps a build that ran steps where both exist
  return builds;
}

} // namespace kiln
