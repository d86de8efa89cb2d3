// The run history against real buildah runs of the demo chain: every run indexed, a stage slowed
// on purpose flagged, a killed run never green.
#include <gtest/gtest.h>

#include "kiln_harness.h"

namespace kiln::testing {
namespace {

using nlohmann::json;

/// The demo chain with a libs stage that sleeps SLOW_SECONDS (0 unless given) and a regression
/// threshold its other stages' noise cannot reach.
void write_slowable_demo(const ChainDir& dir) {
  dir.copy_unique_demo();
  std::string libs = dir.read("stages/libs.Dockerfile");
  dir.write("stages/libs.Dockerfile", libs + "ARG SLOW_SECONDS=0\nRUN sleep \"${SLOW_SECONDS}\"\n");
  dir.write("chain.toml", dir.read("chain.toml") + "\n[history]\nregression_seconds = 5\n");
}

json history(const ChainDir& dir, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"history", "--chain", "chain.toml", "--format", "json"};
  args.insert(args.end(), extra.begin(), extra.end());
  KilnResult shown = dir.kiln(args);
  EXPECT_EQ(shown.exit_code, 0) << shown.output;
  return json::parse(shown.output, nullptr, false);
}

TEST(RunHistory, AStageSlowedOnPurposeIsFlaggedAtTheEndOfTheRunAndInTheHistory) {
  ChainDir dir;
  write_slowable_demo(dir);
  // What libs builds on, as it comes (it may all be reused); then libs alone with --no-cache, so
  // each run is a sample of a real build of it: three, then a slow one.
  KilnResult first = dir.kiln({"run", "chain.toml", "--only", "base,toolchain"});
  ASSERT_EQ(first.exit_code, 0) << first.output;
  for (int i = 0; i < 3; ++i) {
    KilnResult run = dir.kiln({"run", "chain.toml", "--no-cache", "--only", "libs"});
    ASSERT_EQ(run.exit_code, 0) << run.output;
    EXPECT_EQ(run.output.find("regression:"), std::string::npos) << run.output;
  }
  KilnResult slow = dir.kiln(
      {"run", "chain.toml", "--no-cache", "--only", "libs", "--build-arg", "SLOW_SECONDS=8"});
  ASSERT_EQ(slow.exit_code, 0) << slow.output;
  std::string run_id = dir.latest_manifest()["run_id"];
  auto flagged = slow.output.find("regression: stage libs took ");
  ASSERT_NE(flagged, std::string::npos) << slow.output;
  EXPECT_NE(slow.output.find("over the median", flagged), std::string::npos) << slow.output;
  EXPECT_NE(slow.output.find("of its last 3 green full builds", flagged), std::string::npos)
      << slow.output;
  EXPECT_NE(dir.read("records/runs/" + run_id + "/driver.log").find("regression: stage libs"),
            std::string::npos);

  json doc = history(dir);
  ASSERT_TRUE(doc.is_object());
  EXPECT_EQ(doc["runs"], 5);
  ASSERT_EQ(doc["regressions"].size(), 1u) << doc.dump(2);
  EXPECT_EQ(doc["regressions"][0]["stage"], "libs");
  EXPECT_EQ(doc["regressions"][0]["run_id"], run_id);
  // What the record says agrees with why it was flagged: more than the chain's 5 s over the
  // median (how much more is the machine's to say, not this test's).
  EXPECT_GT(doc["regressions"][0]["seconds"].get<double>(),
            doc["regressions"][0]["median_seconds"].get<double>() + 5);
  ASSERT_EQ(doc["stages"].size(), 3u);
  for (const json& stage : doc["stages"]) {
    EXPECT_EQ(stage["regression"], stage["stage"] == "libs") << stage.dump();
    EXPECT_EQ(stage["runs"].size(), stage["stage"] == "libs" ? 4u : 1u) << stage.dump();
  }

  // One stage, each of its runs, newest first.
  json libs = history(dir, {"libs"});
  ASSERT_EQ(libs["stages"].size(), 1u);
  EXPECT_EQ(libs["stages"][0]["runs"][0]["run_id"], run_id);
  EXPECT_EQ(libs["stages"][0]["runs"][0]["outcome"], "built");

  // The history forgets all but the newest run, and does not index the others again.
  KilnResult pruned = dir.kiln({"history", "prune", "--keep", "1", "--chain", "chain.toml"});
  ASSERT_EQ(pruned.exit_code, 0) << pruned.output;
  EXPECT_NE(pruned.output.find("forgot 4 run(s) and keeps 1"), std::string::npos) << pruned.output;
  EXPECT_EQ(history(dir)["runs"], 1);
}

TEST(RunHistory, ARunKilledBeforeItFinishedIsIndexedAsKilledNeverGreen) {
  ChainDir dir;
  write_slowable_demo(dir);
  KilnResult first = dir.kiln({"run", "chain.toml", "--only", "base"});
  ASSERT_EQ(first.exit_code, 0) << first.output;
  // A record a SIGKILLed kiln leaves: its manifest still says running, its stages too.
  json manifest = dir.latest_manifest();
  std::string dead_id = "20000101-000000-dead";
  manifest["run_id"] = dead_id;
  manifest["status"] = "running";
  for (json& stage : manifest["stages"]) {
    stage["status"] = "running";
  }
  dir.write("records/runs/" + dead_id + "/manifest.json", manifest.dump(2));
  // The next run holds the lock, marks it abandoned and the history takes it as killed.
  KilnResult second = dir.kiln({"run", "chain.toml", "--only", "base"});
  ASSERT_EQ(second.exit_code, 0) << second.output;
  json base = history(dir, {"base", "--runs", "10"});
  ASSERT_EQ(base["stages"].size(), 1u) << base.dump(2);
  const json& runs = base["stages"][0]["runs"];
  ASSERT_EQ(runs.size(), 3u) << base.dump(2);
  EXPECT_EQ(runs[2]["run_id"], dead_id);
  EXPECT_EQ(runs[2]["run_status"], "abandoned");
  EXPECT_NE(runs[2]["status"], "ok");
}

TEST(RunHistory, ANameThatIsNoStageOrNoRecordsIsAUsageError) {
  ChainDir dir;
  KilnResult none = dir.kiln({"history", "--records", "nowhere"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.output.find("nowhere holds no runs"), std::string::npos) << none.output;
  write_slowable_demo(dir);
  ASSERT_EQ(dir.kiln({"run", "chain.toml", "--only", "base"}).exit_code, 0);
  KilnResult unknown = dir.kiln({"history", "lib", "--chain", "chain.toml"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.output.find("no run in the history built stage 'lib'"), std::string::npos)
      << unknown.output;
}

} // namespace
} // namespace kiln::testing
