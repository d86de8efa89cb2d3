// Reading sccache's stats JSON: Debian's 0.4 as recorded, and the current upstream schema as
// the fake sccache prints it.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include <gtest/gtest.h>

#include "compilecache/sccache_stats.h"
#include "util/process.h"

namespace kiln::cc {
namespace {

namespace fs = std::filesystem;

std::string fixture(const std::string& relative) {
  std::ifstream in(fs::path(KILN_TEST_FIXTURES) / relative);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

SccacheStats parse(const std::string& json) {
  std::string error;
  auto stats = parse_sccache_stats(json, error);
  EXPECT_TRUE(stats.has_value()) << error << "\n" << json;
  return stats.value_or(SccacheStats{});
}

/// What the fake sccache prints for one scripted snapshot.
std::string fake_stats_json(const std::string& snapshot) {
  fs::path state = fs::temp_directory_path() / ("kiln-cc-fake-" + std::to_string(::getpid()));
  fs::create_directories(state / "stats");
  std::ofstream(state / "stats" / "1") << snapshot;
  std::string fake = std::string(KILN_TEST_FIXTURES) + "/fake-sccache/sccache";
  std::string output;
  ProcessExit exit = run_process({{fake, "--show-stats", "--stats-format", "json"},
                                  {{"FAKE_SCCACHE_STATE", state.string()}},
                                  {}},
                                 [&](std::string_view chunk) { output += chunk; });
  fs::remove_all(state);
  EXPECT_TRUE(exit.ok()) << output;
  return output;
}

TEST(SccacheStats, ReadsDebiansSccache04) {
  SccacheStats fresh = parse(fixture("sccache-0.4/session-stats-fresh.json"));
  EXPECT_EQ(fresh.compile_requests, 0);
  SccacheStats s = parse(fixture("sccache-0.4/session-stats-miss-hit-error.json"));
  EXPECT_EQ(s.compile_requests, 3);
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.misses, 1);
  EXPECT_EQ(s.errors(), 0) << "a compile error is the compiler's, not the cache's";
  EXPECT_TRUE(s.levels.empty());
}

TEST(SccacheStats, ReadsTheUpstreamSchemaWithLevels) {
  SccacheStats s = parse(fake_stats_json("compile_requests=40\nhits=15\nmisses=25\n"
                                         "cache_errors=2\nwrite_errors=1\n"
                                         "levels=\"disk:25:0 s3:20:3\"\n"));
  EXPECT_EQ(s.compile_requests, 40);
  EXPECT_EQ(s.hits, 15);
  EXPECT_EQ(s.misses, 25);
  EXPECT_EQ(s.cache_errors, 2);
  EXPECT_EQ(s.cache_write_errors, 1);
  EXPECT_EQ(s.errors(), 3);
  ASSERT_EQ(s.levels.size(), 2u);
  EXPECT_EQ(s.levels[0].name, "L0 (disk)");
  EXPECT_EQ(s.levels[0].writes, 25);
  EXPECT_EQ(s.levels[1].name, "L1 (s3)");
  EXPECT_EQ(s.levels[1].writes, 20);
  EXPECT_EQ(s.levels[1].write_failures, 3);
}

TEST(SccacheStats, RefusesWhatIsNotTheStatsDocument) {
  std::string error;
  EXPECT_FALSE(parse_sccache_stats("sccache: error: couldn't connect to server", error));
  EXPECT_FALSE(parse_sccache_stats("{\"stats\":{}}", error));
  EXPECT_NE(error.find("compile_requests"), std::string::npos);
}

// sccache's counters are u64: one near 2^64 once read as a negative long, and per-language
// counts summed past the range of a long.
TEST(SccacheStats, RefusesCountersNoCacheCanHaveReached) {
  std::string error;
  EXPECT_FALSE(parse_sccache_stats(
      R"({"stats":{"compile_requests":18446744073709551615,"cache_hits":{"counts":{}}}})", error));
  EXPECT_NE(error.find("\"compile_requests\" is 18446744073709551615"), std::string::npos) << error;
  error.clear();
  EXPECT_FALSE(parse_sccache_stats(
      R"({"stats":{"compile_requests":2,"cache_hits":{"counts":{"C/C++":9223372036854775807,
          "Rust":9223372036854775807}}}})",
      error));
  EXPECT_NE(error.find("cache_hits"), std::string::npos) << error;
  error.clear();
  EXPECT_FALSE(parse_sccache_stats(
      R"j({"stats":{"compile_requests":2,"multi_level":[{"name":"L0 (disk)","writes":-3}]}})j",
      error));
  EXPECT_NE(error.find("writes"), std::string::npos) << error;
}

TEST(SccacheStats, PerLanguageCountsHoldAtTheLargestCount) {
  SccacheStats s = parse(R"({"stats":{"compile_requests":2,"cache_misses":{"counts":
      {"C/C++":1000000000000,"Rust":1000000000000}}}})");
  EXPECT_EQ(s.misses, 1'000'000'000'000);
}

TEST(SccacheStats, CountsSinceTheStart) {
  SccacheStats start = parse(fake_stats_json("compile_requests=10\nhits=4\nmisses=6\n"
                                             "levels=\"disk:6:0 s3:6:0\"\n"));
  SccacheStats now = parse(fake_stats_json("compile_requests=30\nhits=10\nmisses=20\n"
                                           "cache_errors=1\nlevels=\"disk:20:0 s3:15:1\"\n"));
  SccacheStats since = stats_since(now, start);
  EXPECT_EQ(since.compile_requests, 20);
  EXPECT_EQ(since.hits, 6);
  EXPECT_EQ(since.misses, 14);
  EXPECT_EQ(since.errors(), 1);
  EXPECT_EQ(since.levels[0].writes, 14);
  EXPECT_EQ(since.levels[1].writes, 9);
  EXPECT_EQ(since.levels[1].write_failures, 1);
}

TEST(SccacheStats, ARestartedServerCountsFromZero) {
  SccacheStats start;
  start.compile_requests = 50;
  start.hits = 50;
  SccacheStats now;
  now.compile_requests = 7;
  now.misses = 7;
  SccacheStats since = stats_since(now, start);
  EXPECT_EQ(since.compile_requests, 7);
  EXPECT_EQ(since.misses, 7);
  EXPECT_EQ(since.hits, 0);
}

TEST(UploadBacklog, EachLevel0WriteOwesOneWriteToEverySlowerLevel) {
  SccacheStats since;
  since.levels = {
      {"L0 (disk)", 0, 0, 20, 2}, {"L1 (webdav)", 0, 0, 12, 3}, {"L2 (s3)", 0, 0, 20, 0}};
  auto never = [](size_t) { return false; };
  auto backlog = upload_backlog(since, false, never);
  ASSERT_EQ(backlog.size(), 2u);
  EXPECT_EQ(backlog[0].expected, 20) << "a failed level-0 write starts no upload";
  EXPECT_EQ(backlog[0].left(), 5);
  EXPECT_EQ(backlog[1].left(), 0);
  EXPECT_EQ(describe_backlog(backlog),
            "L1 (webdav): 12 written, 3 failed of 20; L2 (s3): 20 written, 0 failed of 20");
  auto ignore_policy = upload_backlog(since, true, never);
  EXPECT_EQ(ignore_policy[0].expected, 22);
  EXPECT_EQ(ignore_policy[1].left(), 2);
}

TEST(UploadBacklog, ReadOnlyLevelsAreNotWaitedFor) {
  SccacheStats since;
  since.levels = {{"L0 (disk)", 0, 0, 20, 0}, {"L1 (s3)", 0, 0, 0, 0}};
  EXPECT_TRUE(upload_backlog(since, false, [](size_t i) { return i == 1; }).empty());
  since.levels.pop_back();
  EXPECT_TRUE(upload_backlog(since, false, [](size_t) { return false; }).empty());
}

TEST(SccacheStats, TheLogSummaryPutsFailuresFirst) {
  SccacheStats since;
  since.compile_requests = 3;
  since.cache_errors = 1;
  since.levels = {{"L0 (disk)", 1, 2, 2, 0}, {"L1 (s3)", 0, 2, 1, 1}};
  std::string text = describe_stats(since);
  EXPECT_LT(text.find("cache errors"), text.find("compile requests")) << text;
  EXPECT_LT(text.find("L1 (s3) write failures      1"), text.find("compile requests")) << text;
  EXPECT_NE(text.find("  L0 (disk): 1 hits, 2 misses, 2 writes\n"), std::string::npos) << text;
}

} // namespace
} // namespace kiln::cc
