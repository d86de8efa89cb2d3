// How an attempt's compile report becomes a warning, and what the manifest records of it.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "driver/compile_fallback.h"
#include "driver/records.h"

namespace kiln {
namespace {

cc::CompileStats step(cc::SccacheServer server, long sccache, long ccache, long direct) {
  cc::CompileStats stats;
  stats.sccache = server;
  stats.via_sccache = sccache;
  stats.via_ccache = ccache;
  stats.via_direct = direct;
  stats.compile_requests = sccache + ccache;
  return stats;
}

TEST(CompileFallback, EveryCompileThroughSccacheIsNoWarning) {
  CompileReport report;
  report.add(step(cc::SccacheServer::up, 240, 0, 0));
  report.add(step(cc::SccacheServer::up, 3, 0, 0));
  EXPECT_EQ(compile_fallback_warning(report), std::nullopt);
}

TEST(CompileFallback, CcacheInAStepWithoutSccacheIsNoFallback) {
  CompileReport report;
  report.add(step(cc::SccacheServer::absent, 0, 12, 0));
  EXPECT_EQ(compile_fallback_warning(report), std::nullopt);
}

TEST(CompileFallback, ALostServerSaysWhereTheCompilesWent) {
  CompileReport report;
  cc::CompileStats lost = step(cc::SccacheServer::lost, 10, 233, 0);
  lost.ccache_hits = 190;
  lost.ccache_misses = 43;
  report.add(lost);
  report.add(step(cc::SccacheServer::up, 2, 0, 0));
  EXPECT_EQ(compile_fallback_warning(report),
            "the compile cache fell back: the sccache server was lost mid-step in 1 of 2 step(s), "
            "its counters with it; of 245 compile(s) kiln-cc launched, 12 went to sccache, 233 to "
            "ccache (190 hit(s), 43 miss(es)), 0 ran uncached");
}

TEST(CompileFallback, AServerThatDidNotStartAndUncachedCompilesAreNamed) {
  CompileReport report;
  cc::CompileStats failed = step(cc::SccacheServer::failed, 0, 0, 5);
  failed.bypasses = 0;
  report.add(failed);
  cc::CompileStats bypassed = step(cc::SccacheServer::up, 7, 0, 2);
  bypassed.bypasses = 2;
  report.add(bypassed);
  EXPECT_EQ(compile_fallback_warning(report),
            "the compile cache fell back: the sccache server did not start in 1 of 2 step(s); of "
            "14 compile(s) kiln-cc launched, 7 went to sccache, 0 to ccache (0 hit(s), 0 "
            "miss(es)), 7 ran uncached (2 after sccache failed on them)");
}

TEST(CompileFallback, CcacheWhereSccacheWasMeantIsAFallback) {
  // The server answered at the end, yet some compiles found none: it was busy past the probe,
  // or restarted.
  CompileReport report;
  report.add(step(cc::SccacheServer::up, 8, 2, 0));
  auto warning = compile_fallback_warning(report);
  ASSERT_TRUE(warning);
  EXPECT_NE(warning->find("8 went to sccache, 2 to ccache"), std::string::npos) << *warning;
}

TEST(CompileFallback, TheManifestRecordsTheLevelsThatServed) {
  CompileReport report;
  cc::CompileStats lost = step(cc::SccacheServer::lost, 1, 2, 0);
  lost.ccache_hits = 1;
  lost.ccache_misses = 1;
  report.add(lost);
  report.add(step(cc::SccacheServer::failed, 0, 0, 4));
  report.add(step(cc::SccacheServer::absent, 0, 3, 0));
  RunRecord run;
  run.stages.push_back(StageRecord{});
  run.stages[0].attempts.push_back(AttemptRecord{});
  run.stages[0].attempts[0].compile = report;
  auto compile = nlohmann::json::parse(manifest_json(run))["stages"][0]["attempts"][0]["compile"];
  EXPECT_EQ(compile["served"], (nlohmann::json{{"sccache", 1}, {"ccache", 5}, {"direct", 4}}));
  EXPECT_EQ(compile["ccache_hits"], 1);
  EXPECT_EQ(compile["ccache_misses"], 1);
  EXPECT_EQ(compile["sccache_lost_steps"], 1);
  EXPECT_EQ(compile["sccache_failed_steps"], 1);
  EXPECT_EQ(compile["sccache_absent_steps"], 1);
  EXPECT_EQ(compile["reports"], 3);
}

} // namespace
} // namespace kiln
