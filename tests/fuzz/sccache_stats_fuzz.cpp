// sccache's stats document and kiln-cc's `[kiln-cc:stats]` line: both JSON, so one input
// feeds both readers. Every count read must be a count (never negative, never wrapped), and a
// step's numbers taken from its own start are zero.
#include <cstdlib>

#include "compilecache/sccache_stats.h"
#include "compilecache/stats_line.h"
#include "fuzz_bundle.h"

namespace {

using namespace kiln::cc;

void check_count(long count) {
  if (count < 0 || count > k_max_count) {
    std::abort();
  }
}

void check_stats(const SccacheStats& stats) {
  for (long count : {stats.compile_requests, stats.hits, stats.misses, stats.cache_errors,
                     stats.cache_write_errors, stats.cache_read_errors, stats.errors()}) {
    check_count(count);
  }
  for (const LevelCounters& level : stats.levels) {
    for (long count : {level.hits, level.misses, level.writes, level.write_failures}) {
      check_count(count);
    }
  }
}

void check_line(const CompileStats& stats) {
  for (long count :
       {stats.compile_requests, stats.hits, stats.misses, stats.errors, stats.bypasses}) {
    check_count(count);
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text = kiln::fuzz::as_text(data, size);
  std::string error;
  if (auto stats = parse_sccache_stats(text, error)) {
    check_stats(*stats);
    SccacheStats none = stats_since(*stats, *stats);
    if (none.compile_requests != 0 || none.hits != 0 || none.errors() != 0) {
      std::abort();
    }
    SccacheStats all = stats_since(*stats, SccacheStats{});
    check_stats(all);
    for (bool failures_upload : {false, true}) {
      auto backlog = upload_backlog(all, failures_upload, [](size_t i) { return i % 3 == 2; });
      for (const UploadBacklog& level : backlog) {
        check_count(level.left());
      }
      (void)describe_backlog(backlog);
    }
    (void)describe_stats(all);
  } else if (error.empty()) {
    std::abort(); // refused without saying why
  }

  std::string line = std::string(k_stats_prefix) + std::string(text);
  if (auto stats = parse_stats_line(line)) {
    check_line(*stats);
    auto again = parse_stats_line(format_stats_line(*stats));
    if (!again || again->compile_requests != stats->compile_requests ||
        again->hits != stats->hits || again->misses != stats->misses ||
        again->errors != stats->errors || again->bypasses != stats->bypasses) {
      std::abort();
    }
    CompileStats total = *stats;
    for (int i = 0; i < 3; ++i) {
      total += *stats;
      check_line(total);
    }
  }
  return 0;
}
