// The `[kiln-cc:stats] ` line: what kiln-cc prints and kiln reads back from a stage log.
#include <limits>

#include <gtest/gtest.h>

#include "compilecache/stats_line.h"

namespace kiln::cc {
namespace {

TEST(StatsLine, RoundTrips) {
  CompileStats stats{120, 100, 15, 5, 2};
  stats.via_sccache = 90;
  stats.via_ccache = 28;
  stats.via_direct = 3;
  stats.ccache_hits = 20;
  stats.ccache_misses = 8;
  stats.sccache = SccacheServer::lost;
  std::string line = format_stats_line(stats);
  EXPECT_EQ(line, "[kiln-cc:stats] {\"compile_requests\":120,\"hits\":100,\"misses\":15,"
                  "\"errors\":5,\"bypasses\":2,\"sccache\":\"lost\",\"served\":{\"sccache\":90,"
                  "\"ccache\":28,\"direct\":3},\"ccache_hits\":20,\"ccache_misses\":8}");
  auto parsed = parse_stats_line(line);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->compile_requests, 120);
  EXPECT_EQ(parsed->hits, 100);
  EXPECT_EQ(parsed->misses, 15);
  EXPECT_EQ(parsed->errors, 5);
  EXPECT_EQ(parsed->bypasses, 2);
  EXPECT_EQ(parsed->via_sccache, 90);
  EXPECT_EQ(parsed->via_ccache, 28);
  EXPECT_EQ(parsed->via_direct, 3);
  EXPECT_EQ(parsed->ccache_hits, 20);
  EXPECT_EQ(parsed->ccache_misses, 8);
  EXPECT_EQ(parsed->sccache, SccacheServer::lost);
}

TEST(StatsLine, EveryServerStateRoundTrips) {
  for (SccacheServer state : {SccacheServer::unknown, SccacheServer::up, SccacheServer::lost,
                              SccacheServer::failed, SccacheServer::absent}) {
    CompileStats stats;
    stats.sccache = state;
    auto parsed = parse_stats_line(format_stats_line(stats));
    ASSERT_TRUE(parsed);
    EXPECT_EQ(parsed->sccache, state) << sccache_server_name(state);
  }
}

TEST(StatsLine, OtherLinesAreNotStats) {
  EXPECT_FALSE(parse_stats_line("STEP 2/2: RUN make"));
  EXPECT_FALSE(parse_stats_line("[kiln-cc:stats] not json"));
  EXPECT_FALSE(parse_stats_line("[kiln-cc:stats] [1,2]"));
  EXPECT_FALSE(parse_stats_line(" [kiln-cc:stats] {}")); // the caller finds the prefix
}

TEST(StatsLine, MissingOrMistypedFieldsCountZero) {
  auto parsed = parse_stats_line("[kiln-cc:stats] {\"compile_requests\":\"7\",\"hits\":3,"
                                 "\"served\":[1],\"sccache\":\"sideways\"}");
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->compile_requests, 0);
  EXPECT_EQ(parsed->hits, 3);
  EXPECT_EQ(parsed->bypasses, 0);
  EXPECT_EQ(parsed->via_ccache, 0);
  EXPECT_EQ(parsed->sccache, SccacheServer::unknown);
}

TEST(StatsLine, ALineFromAnOlderKilnCcSaysNothingOfLevels) {
  auto parsed = parse_stats_line("[kiln-cc:stats] {\"compile_requests\":120,\"hits\":100,"
                                 "\"misses\":15,\"errors\":5,\"bypasses\":2}");
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->compile_requests, 120);
  EXPECT_EQ(parsed->via_sccache + parsed->via_ccache + parsed->via_direct, 0);
  EXPECT_EQ(parsed->sccache, SccacheServer::unknown);
}

TEST(StatsLine, SumsSaturateInsteadOfWrapping) {
  // Two steps claiming nearly LONG_MAX requests must not add up to a negative, small-looking
  // number that passes a floor: the sum holds at the largest count kiln reads.
  CompileStats sum;
  CompileStats huge;
  huge.compile_requests = std::numeric_limits<long>::max() - 1;
  huge.ccache_hits = 5;
  sum += huge;
  sum += huge;
  EXPECT_EQ(sum.compile_requests, k_max_count);
  EXPECT_EQ(sum.ccache_hits, 10);
}

// A count that is negative or beyond any real cache's is no count: it wrapped the sums it
// was added to (2^64 - 1 read as -1).
TEST(StatsLine, CountsOutsideTheRangeRefuseTheLine) {
  EXPECT_FALSE(parse_stats_line("[kiln-cc:stats] {\"compile_requests\":-5,\"hits\":3}"));
  EXPECT_FALSE(parse_stats_line("[kiln-cc:stats] {\"compile_requests\":18446744073709551615}"));
  EXPECT_FALSE(parse_stats_line("[kiln-cc:stats] {\"hits\":9223372036854775807}"));
  EXPECT_FALSE(parse_stats_line("[kiln-cc:stats] {\"bypasses\":1000000000001}"));
  auto largest = parse_stats_line("[kiln-cc:stats] {\"compile_requests\":1000000000000}");
  ASSERT_TRUE(largest);
  EXPECT_EQ(largest->compile_requests, 1'000'000'000'000);
}

TEST(StatsLine, SumsHoldAtTheLargestCount) {
  CompileStats total{k_max_count, 0, 1, 0, 0};
  total += CompileStats{k_max_count, 2, k_max_count, 0, 3};
  EXPECT_EQ(total.compile_requests, k_max_count);
  EXPECT_EQ(total.hits, 2);
  EXPECT_EQ(total.misses, k_max_count);
  EXPECT_EQ(total.bypasses, 3);
}

} // namespace
} // namespace kiln::cc
