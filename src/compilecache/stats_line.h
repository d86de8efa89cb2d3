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

/// The largest count kiln-cc reads or reports. Far beyond any real cache (a step with a million
/// compiles is rare) and far from overflow however many are summed: a count outside 0..this in
/// sccache's stats or on a stats line is refused, not added, or output claiming 2^64 compiles
/// would wrap to a few and pass a floor.
constexpr long k_max_count = 1'000'000'000'000;

/// `total` plus `more`, field by field, held at k_max_count: the totals of many steps never wrap.
void add_stats(CompileStats& total, const CompileStats& more);

std::string format_stats_line(const CompileStats& stats);

/// The stats on a line that starts with k_stats_prefix; nullopt for any other line, and for one
/// with a count outside 0..k_max_count. A missing or non-integer field counts 0.
std::optional<CompileStats> parse_stats_line(std::string_view line);

} // namespace kiln::cc
