// `drain`, `stats` and `stop`: waiting for the slower levels to hold what level 0 wrote, this
// step's numbers (sccache's counters since the start, kiln-cc's launches, ccache's stats log),
// and the server's final stats and stop.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <tuple>

#include "compilecache/session_control.h"
#include "compilecache/session_dir.h"
#include "util/fs.h"
#include "util/strings.h"

namespace kiln::cc::session_control {

namespace {

/// The running server's stats now, and their raw JSON; nullopt after a WARN. A server that no
/// longer answers makes the session `lost` (said once, and kept in its folder): its counters
/// went with it, and no verb asks it again.
std::optional<std::pair<SccacheStats, std::string>> server_stats(Session& session) {
  // An sccache before 0.7.7 would start a server of its own to answer --show-stats, one whose
  // counters would pass for the step's: its address is tried first.
  const bool starts_servers = session.version < k_show_stats_quiet_since;
  std::string failure;
  std::optional<std::pair<SccacheStats, std::string>> stats;
  if (!starts_servers || answers(session)) {
    stats = query_stats(session, failure);
  }
  if (stats) {
    return stats;
  }
  if (starts_servers || !answers(session)) {
    session.server = "lost";
    save(session);
    warn("the sccache server of this step is gone (nothing answers at " + session.address_name +
         "=" + session.address_value +
         "): the compiles since went to ccache or ran uncached, and its counters are lost");
  } else {
    warn(failure);
  }
  return std::nullopt;
}

} // namespace

void drain(Session& session, const Options& options, const CancelToken& cancel) {
  if (!server_running(session)) {
    note("drain: no sccache server is running in this session: nothing to drain");
    return;
  }
  const SccacheStats baseline = baseline_of(session);
  auto read_only = [&](size_t i) { return i < session.levels.size() && session.levels[i].second; };
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::seconds(options.timeout_s);
  std::optional<std::vector<long>> last_counters;
  int still_polls = 0;
  while (true) {
    auto stats = server_stats(session);
    if (!stats) {
      note("drain: stopped waiting, the uploads left are unknown");
      return;
    }
    SccacheStats since = stats_since(stats->first, baseline);
    std::vector<UploadBacklog> backlog =
        upload_backlog(since, session.level0_failures_start_uploads, read_only);
    auto waited = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - start);
    if (backlog.empty()) {
      note(since.levels.size() < 2 ? "drain: no slower cache level: nothing to drain"
                                   : "drain: no slower cache level takes writes: nothing to drain");
      return;
    }
    long left = 0;
    for (const UploadBacklog& level : backlog) {
      left += level.left();
    }
    if (left == 0) {
      note("drain: every upload done after " + std::to_string(waited.count()) + " s (" +
           describe_backlog(backlog) + ")");
      return;
    }
    std::vector<long> counters;
    for (const LevelCounters& level : since.levels) {
      counters.push_back(level.writes);
      counters.push_back(level.write_failures);
    }
    still_polls = last_counters && *last_counters == counters ? still_polls + 1 : 0;
    last_counters = counters;
    std::string report = std::to_string(left) + " uploads left (" + describe_backlog(backlog) +
                         "); a later build uploads them again";
    if (still_polls >= options.stable_polls) {
      warn("drain: the counters stopped moving for " + std::to_string(still_polls) +
           " polls after " + std::to_string(waited.count()) + " s: " + report);
      return;
    }
    auto now = Clock::now();
    if (now >= deadline) {
      warn("drain: gave up after " + std::to_string(waited.count()) + " s: " + report);
      return;
    }
    // The last poll lands on the deadline, so a drain that finishes just then counts.
    if (!cancel.sleep_for(std::chrono::duration_cast<std::chrono::milliseconds>(
            std::min<Clock::duration>(k_poll_interval, deadline - now)))) {
      warn("drain: interrupted after " + std::to_string(waited.count()) + " s: " + report);
      return;
    }
  }
}

namespace {

/// Which way the compiles kiln-cc launched went, from the launch log (session_dir.h).
struct LaunchCounts {
  long sccache = 0;
  long ccache = 0;
  long direct = 0; // the bare compiler, bypasses included
  long bypasses = 0;
};

LaunchCounts count_launches(const fs::path& file) {
  LaunchCounts counts;
  for (const std::string& line : split(read_file(file).value_or(""), '\n')) {
    std::vector<std::string> fields = split(line, ' ');
    if (fields.size() != 2) {
      continue;
    }
    const std::string& cache = fields[0];
    bool bypass = fields[1] == "bypass";
    counts.sccache += cache == "sccache" && !bypass ? 1 : 0;
    counts.ccache += cache == "ccache" ? 1 : 0;
    counts.direct += cache == "direct" || bypass ? 1 : 0;
    counts.bypasses += bypass ? 1 : 0;
  }
  return counts;
}

/// ccache's hits and misses in its stats log after `offset`: one "# <input>" line per
/// compile, then one line per counter it raised (ccache's StatsLog; the names are its
/// statistics' ids, as `ccache --print-stats` prints them).
std::pair<long, long> ccache_hits_and_misses(const std::string& log, long offset) {
  // A stream from the offset, not read_file: a log the step set itself may hold months of
  // other builds before this step's lines.
  std::ifstream in(log, std::ios::binary);
  if (!in || !in.seekg(offset)) {
    return {0, 0};
  }
  long hits = 0;
  long misses = 0;
  for (std::string line; std::getline(in, line);) {
    hits += line == "direct_cache_hit" || line == "preprocessed_cache_hit" ? 1 : 0;
    misses += line == "cache_miss" ? 1 : 0;
  }
  return {hits, misses};
}

} // namespace

CompileStats step_stats(Session& session) {
  CompileStats line;
  std::optional<SccacheStats> now;
  if (server_running(session)) {
    if (auto stats = server_stats(session)) {
      now = stats->first;
    }
  } else if (session.server == "stopped") {
    now = parse_stats_file(session.dir / k_final_file);
  }
  line.sccache = session.server == "running" || session.server == "stopped" ? SccacheServer::up
                 : session.server == "lost"                                 ? SccacheServer::lost
                 : session.server == "failed"                               ? SccacheServer::failed
                                                                            : SccacheServer::absent;
  if (now) {
    SccacheStats since = stats_since(*now, baseline_of(session));
    line.compile_requests = since.compile_requests;
    line.hits = since.hits;
    line.misses = since.misses;
    line.errors = since.errors();
  }
  LaunchCounts launches = count_launches(session.dir / k_launch_log);
  // Compiles kiln-cc handed to ccache were cached too, if not by sccache: a floor on compile
  // requests is there to catch the ones that never reached a cache.
  line.compile_requests += launches.ccache;
  line.bypasses = launches.bypasses;
  line.via_sccache = launches.sccache;
  line.via_ccache = launches.ccache;
  line.via_direct = launches.direct;
  if (!session.ccache_stats_log.empty()) {
    std::tie(line.ccache_hits, line.ccache_misses) =
        ccache_hits_and_misses(session.ccache_stats_log, session.ccache_stats_offset);
  }
  line.hits += line.ccache_hits;
  line.misses += line.ccache_misses;
  return line;
}

namespace {

void print_error_log_tail(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return;
  }
  // The tail, never the head: the last lines are the ones the step ended on.
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  std::streamoff from = std::max<std::streamoff>(0, size - 65536);
  in.seekg(from);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> lines = split(text, '\n');
  if (!lines.empty() && lines.back().empty()) {
    lines.pop_back(); // after the last newline
  }
  if (from > 0 && !lines.empty()) {
    lines.erase(lines.begin()); // cut mid-line
  }
  if (lines.empty()) {
    return;
  }
  size_t first = lines.size() > k_error_log_tail_lines ? lines.size() - k_error_log_tail_lines : 0;
  note("the last " + std::to_string(lines.size() - first) + " lines of SCCACHE_ERROR_LOG=" + path +
       ":");
  for (size_t i = first; i < lines.size(); ++i) {
    print(stderr, "  " + lines[i] + "\n");
  }
}

} // namespace

void stop(Session& session) {
  if (!server_running(session)) {
    note("stop: " + std::string(session.server == "stopped" ? "the sccache server of this "
                                                              "session is stopped already"
                                : session.server == "lost"
                                    ? "the sccache server of this session is gone already"
                                    : "no sccache server was started in this session"));
    return;
  }
  auto stats = server_stats(session);
  if (session.server == "lost") {
    return; // nothing left to stop
  }
  if (stats) {
    write_file_atomic(session.dir / k_final_file, stats->second);
    SccacheStats since = stats_since(stats->first, baseline_of(session));
    print(stderr, "kiln-cc: sccache stats for this step (" + session.version_text + "):\n" +
                      describe_stats(since));
    auto read_only = [&](size_t i) {
      return i < session.levels.size() && session.levels[i].second;
    };
    long left = 0;
    auto backlog = upload_backlog(since, session.level0_failures_start_uploads, read_only);
    for (const UploadBacklog& level : backlog) {
      left += level.left();
    }
    if (left > 0) {
      warn(std::to_string(left) +
           " uploads to slower levels are unfinished and die with the "
           "server (" +
           describe_backlog(backlog) + "): run kiln-cc session drain before stop");
    }
  }
  CommandResult r = run_command(session.sccache, {"--stop-server"}, session_environment(session),
                                k_sccache_timeout);
  if (!r.ok()) {
    warn("sccache --stop-server failed: " + r.what());
  }
  session.server = "stopped";
  save(session);
  if (!session.error_log.empty()) {
    print_error_log_tail(session.error_log);
  }
}

} // namespace kiln::cc::session_control
