// The session folder: what `start` leaves in session.json for the other verbs, the environment
// their sccache calls run with, and the server's stats (now, and saved at the start and end).
#include <nlohmann/json.hpp>

#include "compilecache/session_control.h"
#include "compilecache/session_dir.h"
#include "util/fs.h"

namespace kiln::cc::session_control {

bool save(const Session& session) {
  nlohmann::ordered_json doc;
  doc["sccache"] = session.sccache;
  doc["version"] = session.version_text;
  doc["server"] = session.server;
  doc["address"] = {{"name", session.address_name}, {"value", session.address_value}};
  auto changes = nlohmann::ordered_json::array();
  for (const EnvironmentChange& change : session.changes) {
    changes.push_back({{"name", change.name},
                       {"value", change.value ? nlohmann::ordered_json(*change.value)
                                              : nlohmann::ordered_json()}});
  }
  doc["environment"] = changes;
  auto levels = nlohmann::ordered_json::array();
  for (const auto& [name, read_only] : session.levels) {
    levels.push_back({{"name", name}, {"read_only", read_only}});
  }
  doc["levels"] = levels;
  doc["level0_failures_start_uploads"] = session.level0_failures_start_uploads;
  doc["error_log"] = session.error_log;
  doc["ccache_stats_log"] = session.ccache_stats_log;
  doc["ccache_stats_offset"] = session.ccache_stats_offset;
  return write_file_atomic(session.dir / k_session_file, doc.dump(2) + "\n").has_value();
}

std::optional<Session> load_session_at(const fs::path& dir) {
  Session session;
  session.dir = dir;
  auto text = read_file(session.dir / k_session_file);
  auto doc = text ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
  if (!doc.is_object()) {
    return std::nullopt;
  }
  session.sccache = doc.value("sccache", "");
  session.version_text = doc.value("version", "");
  session.version = parse_version(session.version_text).value_or(Version{});
  session.server = doc.value("server", "absent");
  if (auto address = doc.find("address"); address != doc.end() && address->is_object()) {
    session.address_name = address->value("name", "");
    session.address_value = address->value("value", "");
  }
  for (const auto& change : doc.value("environment", nlohmann::json::array())) {
    auto value = change.find("value");
    session.changes.push_back(
        {change.value("name", ""), value != change.end() && value->is_string()
                                       ? std::optional(value->get<std::string>())
                                       : std::nullopt});
  }
  for (const auto& level : doc.value("levels", nlohmann::json::array())) {
    session.levels.emplace_back(level.value("name", ""), level.value("read_only", false));
  }
  session.level0_failures_start_uploads = doc.value("level0_failures_start_uploads", false);
  session.error_log = doc.value("error_log", "");
  session.ccache_stats_log = doc.value("ccache_stats_log", "");
  session.ccache_stats_offset = doc.value("ccache_stats_offset", 0L);
  return session;
}

Session load_session(const Environment& env) {
  auto it = env.find(k_session_env);
  if (it == env.end() || it->second.empty()) {
    throw UsageError(std::string(k_session_env) +
                     " is not set: run eval \"$(kiln-cc session start)\" first, in the same "
                     "shell");
  }
  auto session = load_session_at(it->second);
  if (!session) {
    throw UsageError(std::string(k_session_env) + "=" + it->second +
                     " is not a kiln-cc session folder (no readable " + k_session_file + ")");
  }
  return *session;
}

Environment session_environment(const Session& session) {
  Environment env = environment_of_process();
  apply_changes(env, session.changes);
  if (session.version < k_show_stats_quiet_since) {
    // An sccache this old starts a server for --show-stats when none answers. Should the
    // step's server be gone, such a stray one must not outlive the step on the exported
    // SCCACHE_IDLE_TIMEOUT=0.
    env["SCCACHE_IDLE_TIMEOUT"] = "10";
  }
  return env;
}

std::optional<SccacheStats> parse_stats_file(const fs::path& path) {
  auto text = read_file(path);
  std::string error;
  return text ? parse_sccache_stats(*text, error) : std::nullopt;
}

std::optional<std::pair<SccacheStats, std::string>> query_stats(const Session& session,
                                                                std::string& failure) {
  CommandResult r = run_command(session.sccache, {"--show-stats", "--stats-format", "json"},
                                session_environment(session), k_sccache_timeout);
  if (!r.ok()) {
    failure = "sccache --show-stats failed: " + r.what();
    return std::nullopt;
  }
  std::string error;
  auto stats = parse_sccache_stats(r.out, error);
  if (!stats) {
    failure = "sccache --show-stats printed no stats JSON (" + error + "): " + first_line(r.out);
    return std::nullopt;
  }
  return std::pair(*stats, r.out);
}

SccacheStats baseline_of(const Session& session) {
  return parse_stats_file(session.dir / k_baseline_file).value_or(SccacheStats{});
}

} // namespace kiln::cc::session_control
