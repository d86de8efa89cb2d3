#include "forensics/history.h"

#include <fstream>

#include <gtest/gtest.h>
#include <sqlite3.h>

#include "driver/run_history.h"
#include "temp_dir.h"

namespace kiln {
namespace {

using Json = nlohmann::json;
using testing::TempDir;

/// A run folder under `records` whose manifest has one stage per (name, outcome, seconds).
void write_run(const std::filesystem::path& records, const std::string& id,
               const std::string& status,
               const std::vector<std::tuple<std::string, std::string, double>>& stages) {
  Json list = Json::array();
  for (const auto& [name, outcome, seconds] : stages) {
    list.push_back({{"name", name},
                    {"lane", ""},
                    {"status", outcome == "failed" ? "failed" : "ok"},
                    {"outcome", outcome},
                    {"seconds", seconds},
                    {"attempts", Json::array({{{"purpose", "build"}, {"verdict", "ok"}}})}});
  }
  std::filesystem::create_directories(records / "runs" / id);
  std::ofstream(records / "runs" / id / "manifest.json")
      << Json{{"run_id", id}, {"status", status}, {"stages", list}}.dump();
}

/// As write_run, each built stage with a cause of the kind given ("" for none).
void write_caused_run(
    const std::filesystem::path& records, const std::string& id,
    const std::vector<std::tuple<std::string, std::string, double, std::string>>& stages) {
  Json list = Json::array();
  for (const auto& [name, outcome, seconds, cause] : stages) {
    list.push_back({{"name", name},
                    {"lane", ""},
                    {"status", "ok"},
                    {"outcome", outcome},
                    {"seconds", seconds},
                    {"attempts", Json::array({{{"purpose", "build"}, {"verdict", "ok"}}})},
                    {"cause", cause.empty() ? Json() : Json{{"kind", cause}, {"summary", cause}}}});
  }
  std::filesystem::create_directories(records / "runs" / id);
  std::ofstream(records / "runs" / id / "manifest.json")
      << Json{{"run_id", id}, {"status", "ok"}, {"stages", list}}.dump();
}

TEST(History, MedianOfOddAndEvenCounts) {
  EXPECT_EQ(median({}), 0);
  EXPECT_EQ(median({3, 1, 2}), 2);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
}

TEST(History, ABuildIsComparedWithGreenBuildsOfTheSameKindBeforeIt) {
  TempDir dir;
  auto records = dir.path();
  write_run(records, "20260101-000000-0001", "ok", {{"lib", "built", 100}, {"base", "reused", 1}});
  write_run(records, "20260102-000000-0002", "ok", {{"lib", "built", 110}, {"base", "reused", 1}});
  write_run(records, "20260103-000000-0003", "ok", {{"lib", "built", 90}, {"base", "built", 40}});
  // Not green, so not in the median; neither are cached builds of lib.
  write_run(records, "20260104-000000-0004", "failed:lib", {{"lib", "failed", 1000}});
  write_run(records, "20260105-000000-0005", "ok", {{"lib", "reused", 2}, {"base", "reused", 1}});
  write_run(records, "20260106-000000-0006", "ok", {{"lib", "built", 131}, {"base", "reused", 35}});
  auto history = History::open(records);
  ASSERT_TRUE(history) << history.error();
  EXPECT_EQ(history->sync(records), 6);
  EXPECT_EQ(history->sync(records), 0) << "a finished run is indexed once";

  RegressionRule rule; // 20 % and 30 s over the median
  auto found = history->regressions("20260106-000000-0006", rule);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].stage, "lib");
  EXPECT_EQ(found[0].median_seconds, 100);
  EXPECT_EQ(found[0].baseline_runs, 3);
  EXPECT_EQ(describe_regression(found[0]),
            "stage lib took 2m11s, 31% (+31.0s) over the median 1m40s of its last 3 green "
            "full builds");
  // A cached base is held against cached builds only (1 s), not against its 40 s build.
  EXPECT_EQ(found[1].stage, "base");
  EXPECT_EQ(found[1].median_seconds, 1);
  EXPECT_EQ(found[1].baseline_runs, 3);
  // Both thresholds must be passed: lib is 31 s over, base 34 s.
  rule.seconds = 33;
  found = history->regressions("20260106-000000-0006", rule);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].stage, "base");
  rule = {.percent = 40, .seconds = 0};
  found = history->regressions("20260106-000000-0006", rule);
  ASSERT_EQ(found.size(), 1u) << "lib is 31 % over";
  EXPECT_EQ(found[0].stage, "base");
  // lib: 131, 2, 90, 110, 100; base: 35, 1, 40, 1, 1.
  EXPECT_EQ(history->expected_seconds("lib", ""), 100);
  EXPECT_EQ(history->expected_seconds("base", ""), 1);
  EXPECT_EQ(history->expected_seconds("lib", "", "20260106-000000-0006"), 95);
  EXPECT_EQ(history->expected_seconds("nothing", ""), std::nullopt);
}

TEST(History, ABuildIsJudgedAndTimedOnlyAgainstBuildsOfItsKind) {
  TempDir dir;
  auto records = dir.path();
  write_caused_run(records, "20260101-000000-0001", {{"lib", "built", 180, "new"}});
  write_caused_run(records, "20260102-000000-0002", {{"lib", "reused", 3, ""}});
  write_caused_run(records, "20260103-000000-0003", {{"lib", "built", 20, "context-changed"}});
  write_caused_run(records, "20260104-000000-0004", {{"lib", "built", 22, "build-arg-changed"}});
  write_caused_run(records, "20260105-000000-0005", {{"lib", "reused", 4, ""}});
  write_caused_run(records, "20260106-000000-0006", {{"lib", "built", 21, "parent-rebuilt"}});
  // A deliberate --no-cache: one earlier full build is no baseline, the partial ones are not
  // its kind.
  write_caused_run(records, "20260107-000000-0007", {{"lib", "built", 250, "cache-bypassed"}});
  auto history = History::open(records);
  ASSERT_TRUE(history) << history.error();
  history->sync(records);
  EXPECT_TRUE(history->regressions("20260107-000000-0007", RegressionRule{}).empty());
  auto runs = history->stage_runs("lib", "", 10);
  ASSERT_EQ(runs.size(), 7u);
  EXPECT_EQ(runs[0].kind, "full");
  EXPECT_EQ(runs[0].cause_kind, "cache-bypassed");
  EXPECT_EQ(runs[1].kind, "partial");
  EXPECT_EQ(runs[2].kind, "cached");
  // The ETA of a build the cache serves is not the midpoint of a cached and a cold build.
  EXPECT_EQ(history->expected_seconds("lib", "", "", 10, "cached"), 3.5);
  EXPECT_EQ(history->expected_seconds("lib", "", "", 10, "partial"), 21);
  EXPECT_EQ(history->expected_seconds("lib", "", "", 10, "full"), 215);
  // A fourth partial build far over the three before it is a regression among partial ones.
  write_caused_run(records, "20260108-000000-0008", {{"lib", "built", 90, "context-changed"}});
  history->sync(records);
  auto found = history->regressions("20260108-000000-0008", RegressionRule{});
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, "partial");
  EXPECT_EQ(found[0].median_seconds, 21);
}

TEST(History, ARunStillRunningWaitsUnlessTheCallerKnowsItIsDead) {
  TempDir dir;
  write_run(dir.path(), "20260101-000000-0001", "running", {{"lib", "built", 10}});
  auto history = History::open(dir.path());
  ASSERT_TRUE(history);
  EXPECT_EQ(history->sync(dir.path()), 0);
  EXPECT_EQ(history->sync(dir.path(), true), 1);
  auto runs = history->stage_runs("lib", "", 10);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].run_status, "running");
  // Once the next run marks it abandoned, it is indexed again with that status.
  write_run(dir.path(), "20260101-000000-0001", "abandoned", {{"lib", "built", 10}});
  EXPECT_EQ(history->sync(dir.path()), 1);
  EXPECT_EQ(history->stage_runs("lib", "", 10)[0].run_status, "abandoned");
  EXPECT_EQ(history->expected_seconds("lib", ""), 10) << "its stage finished green";
}

TEST(History, PruneKeepsTheNewestAndDoesNotIndexTheOthersAgain) {
  TempDir dir;
  for (int i = 1; i <= 5; ++i) {
    write_run(dir.path(), "2026010" + std::to_string(i) + "-000000-000" + std::to_string(i), "ok",
              {{"lib", "built", 10.0 * i}});
  }
  auto history = History::open(dir.path());
  ASSERT_TRUE(history);
  history->sync(dir.path());
  EXPECT_EQ(history->prune(2), 3);
  EXPECT_EQ(history->runs(),
            (std::vector<std::string>{"20260105-000000-0005", "20260104-000000-0004"}));
  EXPECT_EQ(history->sync(dir.path()), 0);
  EXPECT_EQ(history->runs().size(), 2u);
  EXPECT_EQ(history->prune(5), 0);
}

TEST(History, AKeepOfAThousandRunsHoldsAThousand) {
  TempDir dir;
  auto history = History::open(dir.path());
  ASSERT_TRUE(history);
  for (int i = 0; i < 1200; ++i) {
    char id[32];
    std::snprintf(id, sizeof id, "20260101-%06d-beef", i);
    write_run(dir.path(), id, "ok", {{"lib", "built", 10}});
  }
  EXPECT_EQ(history->sync(dir.path()), 1200);
  EXPECT_EQ(history->prune(k_history_keep_default), 200);
  EXPECT_EQ(history->runs().size(), 1000u);
  EXPECT_EQ(history->stage_runs("lib", "", 5000).size(), 1000u);
}

TEST(History, ADatabaseOfAnOlderSchemaIsDroppedAndFilledAgainFromTheRunFolders) {
  TempDir dir;
  write_run(dir.path(), "20260101-000000-0001", "ok", {{"lib", "built", 10}});
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir.path() / "history.db").c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db,
                           "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
                           "INSERT INTO meta VALUES('schema', '1');"
                           "CREATE TABLE runs(run_id TEXT PRIMARY KEY);"
                           "CREATE TABLE stages(run_id TEXT, stage TEXT, lane TEXT);",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  auto history = History::open(dir.path());
  ASSERT_TRUE(history) << history.error();
  EXPECT_EQ(history->sync(dir.path()), 1);
  EXPECT_EQ(history->stage_runs("lib", "", 10).at(0).kind, "full");
}

TEST(History, AnUnreadableDatabaseIsNamedWithWhatToDo) {
  TempDir dir;
  std::ofstream(dir.path() / "history.db") << "this is not a database, and long enough to tell";
  auto history = History::open(dir.path());
  ASSERT_FALSE(history);
  EXPECT_NE(history.error().find("history.db is unusable"), std::string::npos) << history.error();
  EXPECT_NE(history.error().find("remove it"), std::string::npos) << history.error();
}

TEST(History, ARunsForecastIsTheMedianElseTheNewestGreenBuild) {
  TempDir dir;
  Chain chain;
  chain.records = dir.path();
  for (const char* name : {"lib", "base", "new"}) {
    chain.stages.emplace_back().name = name;
  }
  std::vector<const Stage*> stages = {&chain.stages[0], &chain.stages[1], &chain.stages[2]};
  write_run(chain.records, "20260101-000000-0001", "ok", {{"lib", "built", 100}});
  write_run(chain.records, "20260102-000000-0002", "ok", {{"lib", "built", 110}});
  write_run(chain.records, "20260103-000000-0003", "ok",
            {{"lib", "built", 90}, {"base", "built", 40}});
  write_run(chain.records, "20260104-000000-0004", "failed:lib", {{"lib", "failed", 5}});

  auto any = [](const RunForecast& f) {
    std::map<std::string, double> etas;
    for (const auto& [stage, eta] : f.etas) {
      etas[stage] = eta.any.value_or(-1);
    }
    return etas;
  };
  RunForecast forecast = forecast_run(chain, stages);
  EXPECT_EQ(any(forecast), (std::map<std::string, double>{{"lib", 100}, {"base", 40}}));
  EXPECT_EQ(forecast.etas["lib"].of("full"), 100);
  EXPECT_EQ(forecast.etas["lib"].of("cached"), 100) << "none cached: any kind's";

  // Without a usable history: each stage's newest green build.
  std::filesystem::remove(chain.records / "history.db");
  std::filesystem::create_directory(chain.records / "history.db");
  forecast = forecast_run(chain, stages);
  EXPECT_EQ(any(forecast), (std::map<std::string, double>{{"lib", 90}, {"base", 40}}));
}

} // namespace
} // namespace kiln
