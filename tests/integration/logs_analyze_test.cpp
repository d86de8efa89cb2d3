// `kiln logs analyze` as a user runs it: on a run folder found by its id under records/, as a
// table and as the JSON of the analysis contract, and on a path that is not there.
#include <filesystem>

#include <gtest/gtest.h>

#include "kiln_harness.h"

namespace kiln::testing {
namespace {

const std::string k_run_id = "20261204-101500-ab12";

// The composed run folder of tests/fixtures/forensics, put where a run of this id would be.
void copy_run(const ChainDir& dir) {
  std::filesystem::path to = dir.path() / "records" / "runs" / k_run_id;
  std::filesystem::create_directories(to);
  std::filesystem::copy(std::string(KILN_TEST_FIXTURES) + "/forensics/run-" + k_run_id, to,
                        std::filesystem::copy_options::recursive);
}

TEST(LogsAnalyze, TableOfARunFoundByItsId) {
  ChainDir dir;
  copy_run(dir);
  KilnResult result = dir.kiln({"logs", "analyze", k_run_id});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("run " + k_run_id + ": 4 log(s)"), std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("stages/lib.attempt-2.log: buildkit"), std::string::npos);
  EXPECT_NE(result.output.find("downgrade: lib: -j16 -> -j4 (attempt 1 -> 2"), std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("retry: lib: attempt 1 failed"), std::string::npos);
  EXPECT_NE(result.output.find("repeated-failure: app:"), std::string::npos);
  EXPECT_NE(result.output.find("Error in app attempt 1 #4"), std::string::npos);
  EXPECT_NE(result.output.find("  /src/app.c:3:1: error: expected ';' before '}' token"),
            std::string::npos);
  EXPECT_NE(result.output.find("Idle tails of 10s or more: 1"), std::string::npos);
}

TEST(LogsAnalyze, JsonHasTheContractKeys) {
  ChainDir dir;
  copy_run(dir);
  KilnResult result = dir.kiln({"logs", "analyze", "--format", "json", "--top", "2", "--records",
                                "records", "--idle-threshold", "5", k_run_id});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  auto doc = nlohmann::json::parse(result.output);
  EXPECT_EQ(doc["schema"], 1);
  EXPECT_EQ(doc["run_id"], k_run_id);
  EXPECT_EQ(doc["idle_tail_threshold_seconds"], 5.0);
  EXPECT_EQ(doc["flood_threshold_lines"], 10000);
  ASSERT_EQ(doc["logs"].size(), 4u);
  const auto& log = doc["logs"][3];
  for (const char* key : {"path", "stage", "lane", "attempt", "format", "timed", "lines", "bytes",
                          "clipped", "steps"}) {
    EXPECT_TRUE(log.contains(key)) << key;
  }
  EXPECT_EQ(log["path"], "stages/lib.attempt-2.log");
  EXPECT_EQ(log["stage"], "lib");
  EXPECT_EQ(log["attempt"], 2);
  const auto& step = log["steps"][3];
  for (const char* key :
       {"id", "name", "stage", "cached", "state", "exit_code", "start", "end", "seconds",
        "idle_tail_seconds", "output_lines", "replayed_lines", "clipped", "compile",
        "compile_bypass", "warnings", "flood", "fetches_without_progress", "errors"}) {
    EXPECT_TRUE(step.contains(key)) << key;
  }
  EXPECT_EQ(step["id"], "#4");
  EXPECT_EQ(step["state"], "done");
  EXPECT_EQ(step["seconds"], 61.0);
  EXPECT_EQ(step["idle_tail_seconds"], 12.95);
  EXPECT_TRUE(step["start"].is_null());
  for (const char* key : {"total", "noise", "signal", "classes"}) {
    EXPECT_TRUE(step["warnings"].contains(key)) << key;
  }
  for (const char* key : {"stages", "slowest_steps", "idle_tails", "clips", "retries", "warnings",
                          "errors", "fetches_without_progress"}) {
    EXPECT_TRUE(doc.contains(key)) << key;
  }
  EXPECT_EQ(doc["slowest_steps"].size(), 2u);
  EXPECT_EQ(doc["slowest_steps"][0]["stage"], "lib");
  EXPECT_EQ(doc["idle_tails"]["steps"].size(), 1u);
  EXPECT_EQ(doc["retries"].size(), 3u);
  ASSERT_EQ(doc["errors"].size(), 3u);
  EXPECT_EQ(doc["errors"][0]["lines"][0], "/src/app.c:3:1: error: expected ';' before '}' token");
  const auto& stage = doc["stages"][1];
  for (const char* key : {"stage", "lane", "attempts", "steps", "steps_cached", "step_seconds",
                          "idle_tail_seconds", "idle_tail_steps", "compile", "compile_bypass_steps",
                          "warnings", "signal_warnings", "clipped", "fetches_without_progress"}) {
    EXPECT_TRUE(stage.contains(key)) << key;
  }
}

TEST(LogsAnalyze, MissingPathIsExit2WithOneClearLine) {
  ChainDir dir;
  KilnResult result = dir.kiln({"logs", "analyze", "stages/nothing.attempt-1.log"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.output, "kiln: error: no log file or run folder at "
                           "stages/nothing.attempt-1.log: check the path, or pass a run id "
                           "(looked up under records/runs, --records DIR)\n");
  KilnResult id = dir.kiln({"logs", "analyze", "20990101-000000-0000"});
  EXPECT_EQ(id.exit_code, 2);
  EXPECT_EQ(id.output, "kiln: error: no run '20990101-000000-0000' in records/runs and no file "
                       "of that name: pass a log file, a run folder, or a run id with --records "
                       "DIR\n");
}

} // namespace
} // namespace kiln::testing
