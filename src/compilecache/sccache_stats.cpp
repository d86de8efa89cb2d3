#include "compilecache/sccache_stats.h"

#include <algorithm>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "compilecache/stats_line.h"

namespace kiln::cc {

namespace {

/// Reads sccache's counters, remembering the first that is no count: negative, or beyond
/// k_max_count (a u64 near 2^64 would wrap negative in a long and subtract from a step's sums).
class CounterReader {
public:
  long number(const nlohmann::json& object, const char* key) {
    auto it = object.find(key);
    return it != object.end() ? count(*it, key) : 0;
  }

  /// PerLanguageCount: {"counts": {"C/C++": 3, "Rust": 1}, "adv_counts": {...}}.
  long per_language_total(const nlohmann::json& stats, const char* key) {
    auto it = stats.find(key);
    if (it == stats.end() || !it->is_object()) {
      return 0;
    }
    auto counts = it->find("counts");
    if (counts == it->end() || !counts->is_object()) {
      return 0;
    }
    long total = 0;
    for (const auto& [language, value] : counts->items()) {
      total = std::min(total + count(value, key), k_max_count);
    }
    return total;
  }

  const std::string& error() const { return m_error; }

private:
  long count(const nlohmann::json& value, const char* key) {
    if (value.is_number_unsigned() && value.get<uint64_t>() <= uint64_t(k_max_count)) {
      return value.get<long>();
    }
    if (value.is_number_integer()) {
      if (m_error.empty()) {
        m_error = std::string("\"") + key + "\" is " + value.dump() +
                  ", not a count sccache can have reached";
      }
      return 0;
    }
    return 0; // absent or not a number: reads as 0, like a counter this version does not have
  }

  std::string m_error;
};

bool went_backwards(const SccacheStats& now, const SccacheStats& start) {
  if (now.compile_requests < start.compile_requests || now.hits < start.hits ||
      now.misses < start.misses || now.cache_errors < start.cache_errors ||
      now.cache_write_errors < start.cache_write_errors ||
      now.cache_read_errors < start.cache_read_errors || now.levels.size() != start.levels.size()) {
    return true;
  }
  for (size_t i = 0; i < now.levels.size(); ++i) {
    const LevelCounters& a = now.levels[i];
    const LevelCounters& b = start.levels[i];
    if (a.name != b.name || a.hits < b.hits || a.misses < b.misses || a.writes < b.writes ||
        a.write_failures < b.write_failures) {
      return true;
    }
  }
  return false;
}

} // namespace

std::optional<SccacheStats> parse_sccache_stats(std::string_view json, std::string& error) {
  auto doc = nlohmann::json::parse(json, nullptr, false);
  if (!doc.is_object()) {
    error = "not a JSON object";
    return std::nullopt;
  }
  auto stats_it = doc.find("stats");
  if (stats_it == doc.end() || !stats_it->is_object() || !stats_it->contains("compile_requests")) {
    error = "no \"stats\" object with \"compile_requests\"";
    return std::nullopt;
  }
  const nlohmann::json& stats = *stats_it;
  CounterReader counters;
  SccacheStats out;
  out.compile_requests = counters.number(stats, "compile_requests");
  out.hits = counters.per_language_total(stats, "cache_hits");
  out.misses = counters.per_language_total(stats, "cache_misses");
  out.cache_errors = counters.per_language_total(stats, "cache_errors");
  out.cache_write_errors = counters.number(stats, "cache_write_errors");
  out.cache_read_errors = counters.number(stats, "cache_read_errors");
  auto levels = stats.find("multi_level");
  if (levels != stats.end() && levels->is_array()) {
    for (const auto& level : *levels) {
      if (!level.is_object()) {
        continue;
      }
      LevelCounters level_counts;
      auto name = level.find("name");
      level_counts.name = name != level.end() && name->is_string()
                              ? name->get<std::string>()
                              : "L" + std::to_string(out.levels.size());
      level_counts.hits = counters.number(level, "hits");
      level_counts.misses = counters.number(level, "misses");
      level_counts.writes = counters.number(level, "writes");
      level_counts.write_failures = counters.number(level, "write_failures");
      out.levels.push_back(level_counts);
    }
  }
  if (!counters.error().empty()) {
    error = counters.error();
    return std::nullopt;
  }
  return out;
}

SccacheStats stats_since(const SccacheStats& now, const SccacheStats& start) {
  if (went_backwards(now, start)) {
    return now;
  }
  SccacheStats out = now;
  out.compile_requests -= start.compile_requests;
  out.hits -= start.hits;
  out.misses -= start.misses;
  out.cache_errors -= start.cache_errors;
  out.cache_write_errors -= start.cache_write_errors;
  out.cache_read_errors -= start.cache_read_errors;
  for (size_t i = 0; i < out.levels.size(); ++i) {
    out.levels[i].hits -= start.levels[i].hits;
    out.levels[i].misses -= start.levels[i].misses;
    out.levels[i].writes -= start.levels[i].writes;
    out.levels[i].write_failures -= start.levels[i].write_failures;
  }
  return out;
}

std::vector<UploadBacklog> upload_backlog(const SccacheStats& since_start,
                                          bool level0_failures_start_uploads,
                                          const std::function<bool(size_t)>& read_only) {
  std::vector<UploadBacklog> backlog;
  if (since_start.levels.size() < 2) {
    return backlog;
  }
  const LevelCounters& level0 = since_start.levels.front();
  long expected = level0.writes + (level0_failures_start_uploads ? level0.write_failures : 0);
  for (size_t i = 1; i < since_start.levels.size(); ++i) {
    if (read_only(i)) {
      continue;
    }
    const LevelCounters& level = since_start.levels[i];
    backlog.push_back({level.name, level.writes, level.write_failures, expected});
  }
  return backlog;
}

std::string describe_backlog(const std::vector<UploadBacklog>& backlog) {
  std::string out;
  for (const UploadBacklog& level : backlog) {
    out += (out.empty() ? "" : "; ") + level.name + ": " + std::to_string(level.written) +
           " written, " + std::to_string(level.failed) + " failed of " +
           std::to_string(level.expected);
  }
  return out;
}

std::string describe_stats(const SccacheStats& s) {
  std::string out;
  auto row = [&](const std::string& label, long value) {
    std::string padded = label;
    padded.resize(std::max<size_t>(padded.size() + 1, 28), ' ');
    out += "  " + padded + std::to_string(value) + "\n";
  };
  row("cache errors", s.cache_errors);
  row("cache write errors", s.cache_write_errors);
  row("cache read errors", s.cache_read_errors);
  for (const LevelCounters& level : s.levels) {
    row(level.name + " write failures", level.write_failures);
  }
  row("compile requests", s.compile_requests);
  row("hits", s.hits);
  row("misses", s.misses);
  for (const LevelCounters& level : s.levels) {
    out += "  " + level.name + ": " + std::to_string(level.hits) + " hits, " +
           std::to_string(level.misses) + " misses, " + std::to_string(level.writes) + " writes\n";
  }
  return out;
}

} // namespace kiln::cc
