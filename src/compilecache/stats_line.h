#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kiln::cc {

/// What one compile step reports about its compile cache, on one line of build output:
/// `[kiln-cc:stats] {"compile_requests":N,"hits":N,"misses":N,"errors":N,"bypasses":N}`.
/// kiln reads it back from the stage log into the manifest.
struct CompileStats {
  long compile_requests = 0; // compiles the cache saw
  long hits = 0;
  long misses = 0;
  long errors = 0;   // the cache's own errors
  long bypasses = 0; // compiles kiln-cc ran directly because sccache failed for its own reasons
};

constexpr std::string_view k_stats_prefix = "[kiln-cc:stats] ";

std::string format_stats_line(const CompileStats& stats);

/// The stats on a line that starts with k_stats_prefix; nullopt for any other line.
std::optional<CompileStats> parse_stats_line(std::string_view line);

} // namespace kiln::cc
