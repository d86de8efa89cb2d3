#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kiln::cc {

/// What became of a step's sccache server by the time its stats were taken.
enum class SccacheServer {
  unknown, // the line did not say (an older kiln-cc)
  up,      // it served the step to the end
  lost,    // it was gone before the end: its counters with it
  failed,  // it did not start
  absent,  // there was no sccache
};

const char* sccache_server_name(SccacheServer server);

/// What one compile step reports about its compile cache, on one line of build output:
/// `[kiln-cc:stats] {"compile_requests":N,"hits":N,"misses":N,"errors":N,"bypasses":N,
/// "sccache":"up","served":{"sccache":N,"ccache":N,"direct":N},"ccache_hits":N,
/// "ccache_misses":N}`. kiln reads it back from the stage log into the manifest.
struct CompileStats {
  long compile_requests = 0; // compiles a cache saw: sccache's requests and ccache's compiles
  long hits = 0;             // sccache's and ccache's
  long misses = 0;
  long errors = 0;   // the cache's own errors
  long bypasses = 0; // compiles kiln-cc ran directly because sccache failed for its own reasons
  // Which level served the compiles kiln-cc launched.
  long via_sccache = 0;
  long via_ccache = 0; // no sccache server answered
  long via_direct = 0; // the bare compiler: bypasses, and compiles no cache answered
  long ccache_hits = 0;
  long ccache_misses = 0;
  SccacheServer sccache = SccacheServer::unknown;

  /// Add the counts of `other` (not its sccache state), held at k_max_count: a count a step
  /// printed must not wrap a sum around to look small, however many steps are summed.
  CompileStats& operator+=(const CompileStats& other);
};

constexpr std::string_view k_stats_prefix = "[kiln-cc:stats] ";

/// The largest count kiln-cc reads or reports. Far beyond any real cache (a step with a million
/// compiles is rare) and far from overflow however many are summed: a count outside 0..this in
/// sccache's stats or on a stats line is refused, not added, or output claiming 2^64 compiles
/// would wrap to a few and pass a floor.
constexpr long k_max_count = 1'000'000'000'000;

std::string format_stats_line(const CompileStats& stats);

/// The stats on a line that starts with k_stats_prefix; nullopt for any other line, and for one
/// with a count outside 0..k_max_count. A missing or non-integer field counts 0.
std::optional<CompileStats> parse_stats_line(std::string_view line);

} // namespace kiln::cc
