#include "compilecache/stats_line.h"

#include <nlohmann/json.hpp>

namespace kiln::cc {

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
  auto field = [&](const char* key) {
    auto it = doc.find(key);
    return it != doc.end() && it->is_number_integer() ? it->get<long>() : 0L;
  };
  return CompileStats{field("compile_requests"), field("hits"), field("misses"), field("errors"),
                      field("bypasses")};
}

} // namespace kiln::cc
