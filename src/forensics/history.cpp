#include "forensics/history.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <sqlite3.h>

#include "driver/records.h"
#include "explain/run_explain.h"
#include "util/fs.h"
#include "util/json_field.h"
#include "util/time.h"

namespace kiln {

namespace {

using Json = nlohmann::json;

// Bumped when a table changes; an older database is dropped and filled again from the run
// folders, which remain the truth.
constexpr int k_history_schema = 2;

constexpr const char* k_tables = R"sql(
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs(
  run_id TEXT PRIMARY KEY, started TEXT, ended TEXT, status TEXT NOT NULL,
  killed INTEGER NOT NULL, green INTEGER NOT NULL, chain TEXT, engine TEXT,
  wall_seconds REAL, critical_path TEXT, critical_path_seconds REAL,
  peak_cpu REAL, min_free_ram_gb REAL, min_free_disk_gb REAL,
  analysed INTEGER NOT NULL, idle_tail_seconds REAL, clipped INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS stages(
  run_id TEXT NOT NULL, stage TEXT NOT NULL, lane TEXT NOT NULL, status TEXT, outcome TEXT,
  started TEXT, seconds REAL, attempts INTEGER, verdicts TEXT, steps_run INTEGER,
  steps_cached INTEGER, compile_requests INTEGER, compile_hits INTEGER, compile_misses INTEGER,
  idle_tail_seconds REAL, clipped INTEGER NOT NULL, warnings INTEGER,
  kind TEXT, cause_kind TEXT, cause TEXT, root TEXT, root_kind TEXT, root_cause TEXT,
  PRIMARY KEY(run_id, lane, stage));
CREATE INDEX IF NOT EXISTS stages_by_name ON stages(stage, lane, run_id);
)sql";

/// One prepared statement; its bindings are 1-based, as SQLite counts them.
class Statement {
public:
  Statement(sqlite3* db, const char* sql) : m_db(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &m_stmt, nullptr) != SQLITE_OK) {
      m_error = sqlite3_errmsg(db);
    }
  }
  ~Statement() { sqlite3_finalize(m_stmt); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int i, const std::string& value) {
    sqlite3_bind_text(m_stmt, i, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Statement& bind(int i, double value) {
    sqlite3_bind_double(m_stmt, i, value);
    return *this;
  }
  Statement& bind(int i, long value) {
    sqlite3_bind_int64(m_stmt, i, value);
    return *this;
  }
  Statement& bind(int i, int value) { return bind(i, static_cast<long>(value)); }
  Statement& bind(int i, bool value) { return bind(i, value ? 1L : 0L); }
  Statement& bind_null(int i) {
    sqlite3_bind_null(m_stmt, i);
    return *this;
  }

  /// True while there is a row to read.
  bool step() {
    if (!m_stmt) {
      return false;
    }
    int rc = sqlite3_step(m_stmt);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE && m_error.empty()) {
      m_error = sqlite3_errmsg(m_db);
    }
    return rc == SQLITE_ROW;
  }
  std::string text(int column) const {
    const unsigned char* value = sqlite3_column_text(m_stmt, column);
    return value ? reinterpret_cast<const char*>(value) : "";
  }
  double real(int column) const { return sqlite3_column_double(m_stmt, column); }
  long integer(int column) const { return static_cast<long>(sqlite3_column_int64(m_stmt, column)); }
  bool null(int column) const { return sqlite3_column_type(m_stmt, column) == SQLITE_NULL; }
  const std::string& error() const { return m_error; }

private:
  sqlite3* m_db;
  sqlite3_stmt* m_stmt = nullptr;
  std::string m_error;
};

tl::expected<void, std::string> exec(sqlite3* db, const char* sql) {
  char* message = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &message) != SQLITE_OK) {
    std::string error = message ? message : "unknown error";
    sqlite3_free(message);
    return tl::unexpected(error);
  }
  return {};
}

/// A manifest names a laned stage `<lane>/<stage>`; the history keeps the two apart.
std::string stage_name(const std::string& name, const std::string& lane) {
  if (!lane.empty() && name.starts_with(lane + "/")) {
    return name.substr(lane.size() + 1);
  }
  return name;
}

/// A run that ended without saying how: killed, crashed or cut short. Never green.
bool killed_status(const std::string& status) {
  return status == "running" || status == "abandoned" || status == "interrupted" ||
         status == "crashed";
}

/// What the log analysis says of one stage, by (stage, lane).
struct AnalysedStage {
  double idle_tail_seconds = 0;
  bool clipped = false;
  long warnings = 0;
};

std::map<std::pair<std::string, std::string>, AnalysedStage> analysed_stages(const Json* analysis) {
  std::map<std::pair<std::string, std::string>, AnalysedStage> stages;
  if (!analysis || !analysis->is_object() || !analysis->contains("stages") ||
      !(*analysis)["stages"].is_array()) {
    return stages;
  }
  for (const Json& s : (*analysis)["stages"]) {
    std::string lane = json_field<std::string>(s, "lane", "");
    std::string name = stage_name(json_field<std::string>(s, "stage", ""), lane);
    stages[{name, lane}] = {json_field<double>(s, "idle_tail_seconds", 0.0),
                            json_field<bool>(s, "clipped", false),
                            json_field<long>(s, "warnings", 0)};
  }
  return stages;
}

StageRun stage_run_of(const Statement& row) {
  StageRun run;
  run.run_id = row.text(0);
  run.started = row.text(1);
  run.run_status = row.text(2);
  run.stage = row.text(3);
  run.lane = row.text(4);
  run.status = row.text(5);
  run.outcome = row.text(6);
  run.seconds = row.real(7);
  run.attempts = static_cast<int>(row.integer(8));
  run.verdicts = row.text(9);
  run.compile_requests = row.null(10) ? -1 : row.integer(10);
  run.compile_hits = row.null(11) ? -1 : row.integer(11);
  run.idle_tail_seconds = row.null(12) ? -1 : row.real(12);
  run.clipped = row.integer(13) != 0;
  run.kind = row.text(14);
  run.cause_kind = row.text(15);
  run.cause = row.text(16);
  return run;
}

constexpr const char* k_stage_run_columns =
    "s.run_id, r.started, r.status, s.stage, s.lane, s.status, s.outcome, s.seconds, "
    "s.attempts, s.verdicts, s.compile_requests, s.compile_hits, s.idle_tail_seconds, s.clipped, "
    "s.kind, s.cause_kind, s.cause";

/// Green builds of the stage of this kind ("": any) in runs before `before` ("" for all),
/// newest first.
std::vector<double> green_seconds(sqlite3* db, const std::string& stage, const std::string& lane,
                                  const std::string& kind, const std::string& before, int limit) {
  Statement q(db, "SELECT s.seconds FROM stages s WHERE s.stage = ?1 AND s.lane = ?2 AND "
                  "s.status = 'ok' AND (?3 = '' OR s.kind = ?3) AND (?4 = '' OR s.run_id < ?4) "
                  "ORDER BY s.run_id DESC LIMIT ?5");
  q.bind(1, stage).bind(2, lane).bind(3, kind).bind(4, before).bind(5, limit);
  std::vector<double> seconds;
  while (q.step()) {
    seconds.push_back(q.real(0));
  }
  return seconds;
}

} // namespace

double median(std::vector<double> values) {
  if (values.empty()) {
    return 0;
  }
  std::sort(values.begin(), values.end());
  size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

std::string describe_regression(const Regression& r) {
  return fmt::format("stage {}{} took {}, {:.0f}% (+{:.1f}s) over the median {} of its last {} "
                     "green {} builds",
                     r.lane.empty() ? "" : r.lane + "/", r.stage, short_duration(r.seconds),
                     r.median_seconds > 0 ? (r.seconds / r.median_seconds - 1) * 100 : 0.0,
                     r.seconds - r.median_seconds, short_duration(r.median_seconds),
                     r.baseline_runs, r.kind.empty() ? r.outcome : r.kind);
}

std::string build_kind(const std::string& outcome, const std::string& cause_kind,
                       int steps_cached) {
  if (outcome == "reused") {
    return "cached";
  }
  if (outcome != "built") {
    return {};
  }
  if (cause_kind.empty()) {
    return steps_cached == 0 ? "full" : "partial";
  }
  return cause_kind == "new" || cause_kind == "cold" || cause_kind == "cache-bypassed" ? "full"
                                                                                       : "partial";
}

std::vector<CauseCost> History::top_causes(int runs) const {
  Statement q(m_db, "SELECT s.root, s.lane, s.root_kind, s.seconds, s.run_id, s.root_cause "
                    "FROM stages s WHERE s.outcome = 'built' AND s.root != '' AND s.run_id IN "
                    "(SELECT run_id FROM runs ORDER BY run_id DESC LIMIT ?1) "
                    "ORDER BY s.run_id DESC");
  q.bind(1, runs);
  std::map<std::tuple<std::string, std::string, std::string>, CauseCost> costs;
  std::map<std::tuple<std::string, std::string, std::string>, std::set<std::string>> seen_runs;
  while (q.step()) {
    auto key = std::make_tuple(q.text(0), q.text(1), q.text(2));
    CauseCost& c = costs[key];
    if (c.root.empty()) {
      c.root = q.text(0);
      c.lane = q.text(1);
      c.kind = q.text(2);
      c.summary = q.text(5); // the newest run's, rows coming newest first
    }
    ++c.builds;
    c.seconds += q.real(3);
    seen_runs[key].insert(q.text(4));
  }
  std::vector<CauseCost> out;
  for (auto& [key, c] : costs) {
    c.runs = static_cast<int>(seen_runs[key].size());
    out.push_back(c);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const CauseCost& a, const CauseCost& b) { return a.seconds > b.seconds; });
  return out;
}

History::History(sqlite3* db) : m_db(db) {}
History::History(History&& other) noexcept : m_db(std::exchange(other.m_db, nullptr)) {}
History& History::operator=(History&& other) noexcept {
  std::swap(m_db, other.m_db);
  return *this;
}
History::~History() {
  sqlite3_close(m_db);
}

tl::expected<History, std::string> History::open(const std::filesystem::path& records) {
  std::filesystem::path file = records / "history.db";
  std::error_code ec;
  std::filesystem::create_directories(records, ec);
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(file.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
      SQLITE_OK) {
    std::string error = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return tl::unexpected(fmt::format("cannot open the run history {}: {}", file.string(), error));
  }
  History history(db);
  // A second kiln reading while a run writes waits rather than failing.
  sqlite3_busy_timeout(db, 10000);
  auto fail = [&](const std::string& error) {
    return tl::unexpected(fmt::format("the run history {} is unusable ({}): remove it, and the "
                                      "next run or `kiln history` indexes the run folders again",
                                      file.string(), error));
  };
  if (auto made = exec(db, k_tables); !made) {
    return fail(made.error());
  }
  std::optional<std::string> schema;
  {
    // Finished before any change below: a table a statement still reads cannot be dropped.
    Statement version(db, "SELECT value FROM meta WHERE key = 'schema'");
    if (version.step()) {
      schema = version.text(0);
    } else if (!version.error().empty()) {
      return fail(version.error());
    }
  }
  if (!schema) {
    Statement set(db, "INSERT INTO meta(key, value) VALUES('schema', ?1)");
    set.bind(1, std::to_string(k_history_schema)).step();
  } else if (*schema != std::to_string(k_history_schema)) {
    auto dropped = exec(db, "DROP TABLE runs; DROP TABLE stages; DELETE FROM meta;");
    if (!dropped) {
      return fail(dropped.error());
    }
    return open(records);
  }
  return history;
}

tl::expected<void, std::string> History::index_run(const std::filesystem::path& run_dir,
                                                   const Json* analysis) {
  auto text = read_file(run_dir / "manifest.json", k_manifest_read_limit);
  if (!text) {
    return tl::unexpected(
        fmt::format("{}: {}", (run_dir / "manifest.json").string(), text.error()));
  }
  Json doc = Json::parse(*text, nullptr, false);
  if (!doc.is_object() || !doc.contains("run_id")) {
    return tl::unexpected(
        fmt::format("{} is not a kiln manifest", (run_dir / "manifest.json").string()));
  }
  const std::string run_id = json_field<std::string>(doc, "run_id", "");
  const std::string status = json_field<std::string>(doc, "status", "running");
  double peak_cpu = 0;
  double min_ram = -1;
  double min_disk = -1;
  if (doc.contains("resources") && doc["resources"].is_array()) {
    for (const Json& phase : doc["resources"]) {
      peak_cpu = std::max(peak_cpu, json_field<double>(phase, "peak_cpu", 0.0));
      double ram = json_field<double>(phase, "min_free_ram_gb", -1.0);
      double disk = json_field<double>(phase, "min_free_disk_gb", -1.0);
      min_ram = ram >= 0 && (min_ram < 0 || ram < min_ram) ? ram : min_ram;
      min_disk = disk >= 0 && (min_disk < 0 || disk < min_disk) ? disk : min_disk;
    }
  }
  Json critical = doc.value("critical_path", Json::object());
  std::string path;
  if (critical.is_object() && critical.contains("stages") && critical["stages"].is_array()) {
    for (const Json& s : critical["stages"]) {
      path += (path.empty() ? "" : " -> ") + (s.is_string() ? s.get<std::string>() : "");
    }
  }
  auto analysed = analysed_stages(analysis);
  double idle_total = 0;
  bool clipped_any = false;
  for (const auto& [key, a] : analysed) {
    idle_total += a.idle_tail_seconds;
    clipped_any = clipped_any || a.clipped;
  }

  // Each built stage's first cause, followed through rebuilt parents to the stage it started at.
  struct Root {
    std::string stage;
    Cause cause;
  };
  std::map<std::string, Root> roots;
  if (auto explained = explain_run(run_dir, nullptr)) {
    std::map<std::string, const RootCost*> by_root;
    for (const auto& r : explained->roots) {
      by_root[r.stage] = &r;
    }
    for (const auto& e : explained->stages) {
      if (auto r = by_root.find(e.root); r != by_root.end()) {
        roots[e.stage] = {r->second->stage, r->second->cause};
      }
    }
  }

  if (auto begun = exec(m_db, "BEGIN IMMEDIATE"); !begun) {
    return tl::unexpected("cannot write the run history: " + begun.error());
  }
  auto rollback = [&](const std::string& error) {
    exec(m_db, "ROLLBACK");
    return tl::unexpected("cannot write the run history: " + error);
  };
  Statement drop(m_db, "DELETE FROM stages WHERE run_id = ?1");
  drop.bind(1, run_id).step();
  if (!drop.error().empty()) {
    return rollback(drop.error());
  }
  Statement run(m_db, "INSERT OR REPLACE INTO runs VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, "
                      "?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)");
  run.bind(1, run_id)
      .bind(2, json_field<std::string>(doc, "started", ""))
      .bind(3, json_field<std::string>(doc, "ended", ""))
      .bind(4, status)
      .bind(5, killed_status(status))
      .bind(6, status == "ok")
      .bind(7, json_field<std::string>(doc.value("chain", Json::object()), "name", ""))
      .bind(8, json_field<std::string>(doc.value("engine", Json::object()), "name", ""))
      .bind(9, json_field<double>(doc, "wall_seconds", 0.0))
      .bind(10, path)
      .bind(11, json_field<double>(critical, "seconds", 0.0))
      .bind(12, peak_cpu)
      .bind(13, min_ram)
      .bind(14, min_disk)
      .bind(15, analysis != nullptr)
      .bind(16, idle_total)
      .bind(17, clipped_any);
  run.step();
  if (!run.error().empty()) {
    return rollback(run.error());
  }
  if (doc.contains("stages") && doc["stages"].is_array()) {
    for (const Json& s : doc["stages"]) {
      std::string lane = json_field<std::string>(s, "lane", "");
      std::string name = stage_name(json_field<std::string>(s, "name", ""), lane);
      std::string stage_status = json_field<std::string>(s, "status", "");
      // A dead run's stages were not finished, whatever they last said.
      if (killed_status(status) && stage_status == "running") {
        stage_status = "abandoned";
      }
      std::string verdicts;
      int steps_run = 0;
      int steps_cached = 0;
      std::optional<Json> compile;
      int attempts = 0;
      bool clipped = false;
      if (s.contains("attempts") && s["attempts"].is_array()) {
        for (const Json& a : s["attempts"]) {
          if (json_field<std::string>(a, "purpose", "build") != "build") {
            continue;
          }
          ++attempts;
          verdicts += (verdicts.empty() ? "" : ",") + json_field<std::string>(a, "verdict", "");
          steps_run = json_field<int>(a, "steps_run", 0);
          steps_cached = json_field<int>(a, "steps_cached", 0);
          if (a.contains("compile") && a["compile"].is_object()) {
            compile = a["compile"];
          }
          clipped = clipped || (a.contains("clip_lines") && a["clip_lines"].is_array() &&
                                !a["clip_lines"].empty());
        }
      }
      Statement row(m_db, "INSERT OR REPLACE INTO stages VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, "
                          "?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, "
                          "?23)");
      row.bind(1, run_id)
          .bind(2, name)
          .bind(3, lane)
          .bind(4, stage_status)
          .bind(5, json_field<std::string>(s, "outcome", ""))
          .bind(6, json_field<std::string>(s, "started", ""))
          .bind(7, json_field<double>(s, "seconds", 0.0))
          .bind(8, attempts)
          .bind(9, verdicts)
          .bind(10, steps_run)
          .bind(11, steps_cached);
      if (compile) {
        row.bind(12, json_field<long>(*compile, "compile_requests", 0))
            .bind(13, json_field<long>(*compile, "hits", 0))
            .bind(14, json_field<long>(*compile, "misses", 0));
      } else {
        row.bind_null(12).bind_null(13).bind_null(14);
      }
      if (auto a = analysed.find({name, lane}); a != analysed.end()) {
        row.bind(15, a->second.idle_tail_seconds)
            .bind(16, clipped || a->second.clipped)
            .bind(17, a->second.warnings);
      } else {
        row.bind_null(15).bind(16, clipped).bind_null(17);
      }
      const std::string outcome = json_field<std::string>(s, "outcome", "");
      const Json cause = s.value("cause", Json());
      const std::string cause_kind =
          cause.is_object() ? json_field<std::string>(cause, "kind", "") : std::string();
      row.bind(18, build_kind(outcome, cause_kind, steps_cached))
          .bind(19, cause_kind)
          .bind(20, cause.is_object() ? json_field<std::string>(cause, "summary", "") : "");
      if (auto root = roots.find(json_field<std::string>(s, "name", "")); root != roots.end()) {
        row.bind(21, root->second.stage)
            .bind(22, root->second.cause.kind)
            .bind(23, root->second.cause.summary);
      } else {
        row.bind(21, std::string()).bind(22, std::string()).bind(23, std::string());
      }
      clipped_any = clipped_any || clipped;
      row.step();
      if (!row.error().empty()) {
        return rollback(row.error());
      }
    }
  }
  Statement clips(m_db, "UPDATE runs SET clipped = ?2 WHERE run_id = ?1");
  clips.bind(1, run_id).bind(2, clipped_any).step();
  if (auto committed = exec(m_db, "COMMIT"); !committed) {
    return rollback(committed.error());
  }
  return {};
}

int History::sync(const std::filesystem::path& records, bool running_is_killed) {
  std::map<std::string, std::string> indexed; // run id -> its indexed status
  Statement q(m_db, "SELECT run_id, status FROM runs");
  while (q.step()) {
    indexed[q.text(0)] = q.text(1);
  }
  std::string floor;
  Statement f(m_db, "SELECT value FROM meta WHERE key = 'pruned_before'");
  if (f.step()) {
    floor = f.text(0);
  }
  int count = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(records / "runs", ec)) {
    std::string id = entry.path().filename().string();
    if (id < floor) {
      continue; // pruned: the folder stays, the history forgets it
    }
    auto known = indexed.find(id);
    // Only a run last seen unfinished can change: every other status is final.
    if (known != indexed.end() && !killed_status(known->second)) {
      continue;
    }
    auto text = read_file(entry.path() / "manifest.json", k_manifest_read_limit);
    if (!text) {
      continue;
    }
    Json doc = Json::parse(*text, nullptr, false);
    std::string status = json_field<std::string>(doc, "status", "");
    if (status.empty() || (status == "running" && !running_is_killed) ||
        (known != indexed.end() && known->second == status)) {
      continue;
    }
    if (index_run(entry.path())) {
      ++count;
    }
  }
  return count;
}

std::vector<StageRun> History::stage_runs(const std::string& stage, const std::string& lane,
                                          int limit) const {
  std::string sql = fmt::format("SELECT {} FROM stages s JOIN runs r ON r.run_id = s.run_id "
                                "WHERE s.stage = ?1 AND (?2 = '' OR s.lane = ?2) "
                                "ORDER BY s.run_id DESC, s.lane LIMIT ?3",
                                k_stage_run_columns);
  Statement q(m_db, sql.c_str());
  q.bind(1, stage).bind(2, lane).bind(3, limit);
  std::vector<StageRun> runs;
  while (q.step()) {
    runs.push_back(stage_run_of(q));
  }
  return runs;
}

std::vector<std::pair<std::string, std::string>> History::stages() const {
  Statement q(m_db, "SELECT stage, lane, MIN(run_id) AS first FROM stages GROUP BY stage, lane "
                    "ORDER BY first, rowid");
  std::vector<std::pair<std::string, std::string>> stages;
  while (q.step()) {
    stages.emplace_back(q.text(0), q.text(1));
  }
  return stages;
}

std::vector<std::string> History::runs() const {
  Statement q(m_db, "SELECT run_id FROM runs ORDER BY run_id DESC");
  std::vector<std::string> ids;
  while (q.step()) {
    ids.push_back(q.text(0));
  }
  return ids;
}

std::vector<Regression> History::regressions(const std::string& run_id,
                                             const RegressionRule& rule) const {
  std::string sql = fmt::format("SELECT {} FROM stages s JOIN runs r ON r.run_id = s.run_id "
                                "WHERE s.run_id = ?1 AND s.status = 'ok' ORDER BY s.rowid",
                                k_stage_run_columns);
  Statement q(m_db, sql.c_str());
  q.bind(1, run_id);
  std::vector<Regression> found;
  while (q.step()) {
    StageRun now = stage_run_of(q);
    if (now.kind.empty()) {
      continue;
    }
    std::vector<double> before =
        green_seconds(m_db, now.stage, now.lane, now.kind, run_id, rule.baseline_runs);
    if (before.size() < static_cast<size_t>(k_min_baseline)) {
      continue; // one or two earlier builds say nothing of what is usual
    }
    double typical = median(before);
    if (now.seconds > typical * (1 + rule.percent / 100) && now.seconds > typical + rule.seconds) {
      found.push_back({run_id, now.stage, now.lane, now.outcome, now.seconds, typical,
                       static_cast<int>(before.size()), now.kind});
    }
  }
  return found;
}

std::optional<double> History::expected_seconds(const std::string& stage, const std::string& lane,
                                                const std::string& before, int baseline_runs,
                                                const std::string& kind) const {
  std::vector<double> seconds = green_seconds(m_db, stage, lane, kind, before, baseline_runs);
  if (seconds.empty()) {
    return std::nullopt;
  }
  return median(seconds);
}

EtaError History::eta_error(const std::string& run_id) const {
  EtaError error;
  Statement q(m_db, "SELECT stage, lane, seconds, kind FROM stages WHERE run_id = ?1 AND "
                    "status = 'ok' ORDER BY rowid");
  q.bind(1, run_id);
  double percent_sum = 0;
  double seconds_sum = 0;
  while (q.step()) {
    // Against builds of the same kind, as the run's ETA was once its judge said which.
    std::optional<double> expected = expected_seconds(q.text(0), q.text(1), run_id, 10, q.text(3));
    if (!expected) {
      continue;
    }
    double off = std::abs(q.real(2) - *expected);
    ++error.stages;
    seconds_sum += off;
    percent_sum += *expected > 0 ? off / *expected * 100 : 0;
    if (off > error.worst_seconds || error.worst_stage.empty()) {
      error.worst_seconds = off;
      error.worst_stage = (q.text(1).empty() ? "" : q.text(1) + "/") + q.text(0);
    }
  }
  if (error.stages > 0) {
    error.mean_seconds = seconds_sum / error.stages;
    error.mean_percent = percent_sum / error.stages;
  }
  return error;
}

RegressionRule History::rule() const {
  RegressionRule rule;
  Statement q(m_db, "SELECT key, value FROM meta WHERE key LIKE 'regression_%'");
  while (q.step()) {
    double value = std::strtod(q.text(1).c_str(), nullptr);
    (q.text(0) == "regression_percent" ? rule.percent : rule.seconds) = value;
  }
  return rule;
}

void History::set_rule(const RegressionRule& rule) {
  for (auto [key, value] : {std::pair{"regression_percent", rule.percent},
                            std::pair{"regression_seconds", rule.seconds}}) {
    Statement set(m_db, "INSERT OR REPLACE INTO meta(key, value) VALUES(?1, ?2)");
    set.bind(1, std::string(key)).bind(2, fmt::format("{}", value)).step();
  }
}

bool History::last_run_clipped(const std::string& stage, const std::string& lane) const {
  Statement q(m_db, "SELECT clipped FROM stages WHERE stage = ?1 AND lane = ?2 "
                    "ORDER BY run_id DESC LIMIT 1");
  q.bind(1, stage).bind(2, lane);
  return q.step() && q.integer(0) != 0;
}

namespace {

/// Delete the rows of `run_ids` (the run and its stages) inside the caller's transaction; how
/// many runs the history knew.
int delete_runs(sqlite3* db, const std::vector<std::string>& run_ids) {
  int known = 0;
  for (const auto& id : run_ids) {
    Statement stages(db, "DELETE FROM stages WHERE run_id = ?1");
    stages.bind(1, id).step();
    Statement runs(db, "DELETE FROM runs WHERE run_id = ?1");
    runs.bind(1, id).step();
    known += sqlite3_changes(db) > 0 ? 1 : 0;
  }
  return known;
}

} // namespace

int History::prune(int keep) {
  std::vector<std::string> ids = runs();
  if (keep < 0 || ids.size() <= static_cast<size_t>(keep)) {
    return 0;
  }
  // The oldest run kept: older folders are not indexed again by sync().
  std::string floor = keep == 0 ? ids.front() + "~" : ids[static_cast<size_t>(keep) - 1];
  exec(m_db, "BEGIN IMMEDIATE");
  int removed = delete_runs(m_db, {ids.begin() + keep, ids.end()});
  Statement mark(m_db, "INSERT OR REPLACE INTO meta(key, value) VALUES('pruned_before', ?1)");
  mark.bind(1, floor).step();
  exec(m_db, "COMMIT");
  return removed;
}

tl::expected<int, std::string> History::forget(const std::vector<std::string>& run_ids) {
  if (auto begun = exec(m_db, "BEGIN IMMEDIATE"); !begun) {
    return tl::unexpected("cannot write the run history: " + begun.error());
  }
  int removed = delete_runs(m_db, run_ids);
  if (auto committed = exec(m_db, "COMMIT"); !committed) {
    exec(m_db, "ROLLBACK");
    return tl::unexpected("cannot write the run history: " + committed.error());
  }
  return removed;
}

namespace {

Json regression_json(const Regression& r) {
  return {{"run_id", r.run_id},      {"stage", r.stage},     {"lane", r.lane},
          {"outcome", r.outcome},    {"seconds", r.seconds}, {"median_seconds", r.median_seconds},
          {"runs", r.baseline_runs}, {"kind", r.kind}};
}

} // namespace

std::optional<Json> run_history_json(const std::filesystem::path& run_dir) {
  std::filesystem::path records = run_dir.parent_path().parent_path();
  std::error_code ec;
  if (!std::filesystem::exists(records / "history.db", ec)) {
    return std::nullopt;
  }
  auto history = History::open(records);
  if (!history) {
    return std::nullopt;
  }
  const std::string run_id = run_dir.filename().string();
  Json regressions = Json::array();
  for (const Regression& r : history->regressions(run_id, history->rule())) {
    regressions.push_back(regression_json(r));
  }
  EtaError eta = history->eta_error(run_id);
  Json doc = {{"regressions", regressions}};
  if (eta.stages > 0) {
    doc["eta_error"] = {
        {"stages", eta.stages},
        {"mean", short_duration(eta.mean_seconds)},
        {"mean percent", fmt::format("{:.0f}%", eta.mean_percent)},
        {"worst", fmt::format("{} off by {}", eta.worst_stage, short_duration(eta.worst_seconds))}};
  }
  return doc;
}

Json history_json(const History& history, const std::string& stage, const std::string& lane,
                  const RegressionRule& rule, int limit) {
  std::vector<std::string> runs = history.runs();
  std::vector<Regression> found;
  if (!runs.empty()) {
    found = history.regressions(runs.front(), rule);
  }
  std::set<std::pair<std::string, std::string>> flagged;
  Json regressions = Json::array();
  for (const Regression& r : found) {
    flagged.insert({r.stage, r.lane});
    regressions.push_back(regression_json(r));
  }
  Json stages = Json::array();
  for (const auto& [name, stage_lane] : history.stages()) {
    if ((!stage.empty() && name != stage) || (!lane.empty() && stage_lane != lane)) {
      continue;
    }
    Json list = Json::array();
    std::vector<double> green;
    for (const StageRun& r : history.stage_runs(name, stage_lane, limit)) {
      if (r.lane != stage_lane) {
        continue;
      }
      list.push_back(
          {{"run_id", r.run_id},
           {"run_status", r.run_status},
           {"status", r.status},
           {"outcome", r.outcome},
           {"seconds", r.seconds},
           {"attempts", r.attempts},
           {"verdicts", r.verdicts},
           {"compile_requests", r.compile_requests < 0 ? Json() : Json(r.compile_requests)},
           {"compile_hits", r.compile_hits < 0 ? Json() : Json(r.compile_hits)},
           {"idle_tail_seconds", r.idle_tail_seconds < 0 ? Json() : Json(r.idle_tail_seconds)},
           {"clipped", r.clipped},
           {"kind", r.kind},
           {"cause_kind", r.cause_kind},
           {"cause", r.cause}});
      if (r.green() && green.size() < static_cast<size_t>(rule.baseline_runs)) {
        green.push_back(r.seconds);
      }
    }
    Json entry = {{"stage", name},
                  {"lane", stage_lane},
                  {"runs", list},
                  {"median_green_seconds", green.empty() ? Json() : Json(median(green))},
                  {"last_seconds", list.empty() ? Json() : list.front()["seconds"]},
                  {"regression", flagged.count({name, stage_lane}) > 0}};
    stages.push_back(entry);
  }
  return {{"runs", runs.size()},
          {"rule",
           {{"percent", rule.percent},
            {"seconds", rule.seconds},
            {"baseline_runs", rule.baseline_runs}}},
          {"stages", stages},
          {"regressions", regressions}};
}

} // namespace kiln
