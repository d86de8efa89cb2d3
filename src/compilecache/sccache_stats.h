#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::cc {

/// One level of a multi-level cache, from `multi_level` (upstream src/cache/multilevel.rs,
/// LevelStats).
struct LevelCounters {
  std::string name; // "L0 (disk)", "L1 (s3)": index and opendal scheme
  long hits = 0;
  long misses = 0;
  long writes = 0;
  long write_failures = 0;
};

/// The counters kiln-cc reads from `sccache --show-stats --stats-format json`. Fields relied
/// on, all under "stats" (upstream src/server.rs, ServerInfo and ServerStats, read at
/// mozilla/sccache bf75727, 0.17.0; Debian's 0.4.0-pre.6 prints the same names but no
/// "multi_level" and no "adv_counts"):
///   compile_requests                       number
///   cache_hits / cache_misses / cache_errors {"counts": {language: number}}: summed
///   cache_write_errors, cache_read_errors  number
///   multi_level                            absent, null, or [{name, hits, misses, writes,
///                                          write_failures, ...}], level 0 first
/// A missing counter reads as 0, so one schema serves both versions. A negative one, or one
/// above k_max_count (stats_line.h), makes the document no stats document.
struct SccacheStats {
  long compile_requests = 0;
  long hits = 0;
  long misses = 0;
  long cache_errors = 0;       // requests sccache failed to handle (it ran no compile, or bypassed)
  long cache_write_errors = 0; // objects it compiled but could not store
  long cache_read_errors = 0;
  std::vector<LevelCounters> levels; // empty without a multi-level chain

  /// The cache's own errors, as kiln-cc reports them.
  long errors() const { return cache_errors + cache_write_errors + cache_read_errors; }
};

/// nullopt, and `error` set, when `json` is not sccache's stats document.
std::optional<SccacheStats> parse_sccache_stats(std::string_view json, std::string& error);

/// `now` less `start`. A server that restarted since (its counters went backwards, or its
/// levels changed) counts from zero instead: the new server's numbers all belong to the step.
SccacheStats stats_since(const SccacheStats& now, const SccacheStats& start);

/// How far one slower level is behind level 0. Each level-0 write starts exactly one write to
/// every slower read-write level, in the background; backfills count apart (backfills_to) and
/// are not waited for.
struct UploadBacklog {
  std::string name;
  long written = 0;
  long failed = 0;
  long expected = 0; // level 0's writes, and its failures where those start uploads too

  long left() const { return expected > written + failed ? expected - written - failed : 0; }
};

/// One entry per slower level that takes writes (`read_only(i)` false for level i).
std::vector<UploadBacklog> upload_backlog(const SccacheStats& since_start,
                                          bool level0_failures_start_uploads,
                                          const std::function<bool(size_t)>& read_only);

/// "L1 (s3): 20 written, 0 failed of 20", joined with "; ".
std::string describe_backlog(const std::vector<UploadBacklog>& backlog);

/// The step's numbers for a build log, failures first: they are what a reader looks for.
std::string describe_stats(const SccacheStats& since_start);

} // namespace kiln::cc
