#include "compilecache/stats_line.h"

#include <algorithm>
#include <cstdint>

#include <nlohmann/json.hpp>

namespace kiln::cc {

namespace {

long add_counts(long a, long b) {
  return std::min(a + b, k_max_count);
}

} // namespace

void add_stats(CompileStats& total, const CompileStats& more) {
  total.compile_requests = add_counts(total.compile_requests, more.compile_requests);
  total.hits = add_counts(total.hits, more.hits);
  total.misses = add_counts(total.misses, more.misses);
  total.errors = add_counts(total.errors, more.errors);
  total.bypasses = add_counts(total.bypasses, more.bypasses);
}

std::string format_stats_line(const CompileStats& s) {
  nlohmann::ordered_json doc = {{"compile_requests", s.compile_requests},
                                {"hits", s.hits},
                                {"misses", s.misses},
                                {"errors", s.errors},
                                {"bypasses", s.bypasses}};
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
  auto field = [&](const char* key) {
    auto it = doc.find(key);
    if (it == doc.end() || !it->is_number_integer()) {
      return 0L;
    }
    if (!it->is_number_unsigned() || it->get<uint64_t>() > uint64_t(k_max_count)) {
      counts = false;
      return 0L;
    }
    return it->get<long>();
  };
  CompileStats stats{field("compile_requests"), field("hits"), field("misses"), field("errors"),
                     field("bypasses")};
  if (!counts) {
    return std::nullopt;
  }
  return stats;
}

} // namespace kiln::cc
