#include "compilecache/stats_line.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include <nlohmann/json.hpp>

namespace kiln::cc {

namespace {

constexpr std::array<std::pair<SccacheServer, const char*>, 5> k_server_names = {{
    {SccacheServer::unknown, "unknown"},
    {SccacheServer::up, "up"},
    {SccacheServer::lost, "lost"},
    {SccacheServer::failed, "failed"},
    {SccacheServer::absent, "absent"},
}};

void add(long& sum, long value) {
  long total = 0;
  sum = __builtin_add_overflow(sum, value, &total) ? k_max_count : std::min(total, k_max_count);
}

} // namespace

const char* sccache_server_name(SccacheServer server) {
  for (const auto& [value, name] : k_server_names) {
    if (value == server) {
      return name;
    }
  }
  return "unknown";
}

CompileStats& CompileStats::operator+=(const CompileStats& other) {
  add(compile_requests, other.compile_requests);
  add(hits, other.hits);
  add(misses, other.misses);
  add(errors, other.errors);
  add(bypasses, other.bypasses);
  add(via_sccache, other.via_sccache);
  add(via_ccache, other.via_ccache);
  add(via_direct, other.via_direct);
  add(ccache_hits, other.ccache_hits);
  add(ccache_misses, other.ccache_misses);
  return *this;
}

std::string format_stats_line(const CompileStats& s) {
  nlohmann::ordered_json doc = {
      {"compile_requests", s.compile_requests},
      {"hits", s.hits},
      {"misses", s.misses},
      {"errors", s.errors},
      {"bypasses", s.bypasses},
      {"sccache", sccache_server_name(s.sccache)},
      {"served", {{"sccache", s.via_sccache}, {"ccache", s.via_ccache}, {"direct", s.via_direct}}},
      {"ccache_hits", s.ccache_hits},
      {"ccache_misses", s.ccache_misses}};
  return std::string(k_stats_prefix) + doc.dump();
}

std::optional<CompileStats> parse_stats_line(std::string_view line) {
  if (!line.starts_with(k_stats_prefix)) {
    return std::nullopt;
  }
  auto doc = nlohmann::json::parse(line.substr(k_stats_prefix.size()), nullptr, false);
  if (!doc.is_object()) {
    return std::nullopt;
  }
  bool counts = true;
  auto field = [&](const nlohmann::json& object, const char* key) {
    auto it = object.find(key);
    if (it == object.end() || !it->is_number_integer()) {
      return 0L;
    }
    if (!it->is_number_unsigned() || it->get<uint64_t>() > uint64_t(k_max_count)) {
      counts = false;
      return 0L;
    }
    return it->get<long>();
  };
  CompileStats stats{field(doc, "compile_requests"), field(doc, "hits"), field(doc, "misses"),
                     field(doc, "errors"), field(doc, "bypasses")};
  if (auto served = doc.find("served"); served != doc.end() && served->is_object()) {
    stats.via_sccache = field(*served, "sccache");
    stats.via_ccache = field(*served, "ccache");
    stats.via_direct = field(*served, "direct");
  }
  stats.ccache_hits = field(doc, "ccache_hits");
  stats.ccache_misses = field(doc, "ccache_misses");
  if (!counts) {
    return std::nullopt;
  }
  if (auto server = doc.find("sccache"); server != doc.end() && server->is_string()) {
    for (const auto& [value, name] : k_server_names) {
      if (*server == name) {
        stats.sccache = value;
      }
    }
  }
  return stats;
}

} // namespace kiln::cc
