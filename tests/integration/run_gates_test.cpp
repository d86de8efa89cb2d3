// The gates inside `kiln run`, against real buildah: the lint preflight, the image-env gate on
// parents this run did not build, on the final image and on flagged stages, and the smoke
// stage's coverage floors.
#include <gtest/gtest.h>

#include "kiln_harness.h"

namespace kiln::testing {
namespace {

using nlohmann::json;

/// A Dockerfile line that puts the build host in ENV; the lint finding is suppressed so the
/// image reaches the image-env gate, which no suppression waives.
const char* k_leaking_env = "# kiln-lint ignore=leak-env-name reason=testing the image gate\n"
                            "ENV SCCACHE_WEBDAV_ENDPOINT=http://192.168.1.5:8080\n";

/// A chain file: the [chain] table named after the test, then `rest`.
void write_chain(const ChainDir& dir, const std::string& rest) {
  dir.write("chain.toml", "[chain]\nname = \"g" + dir.nonce() +
                              "\"\n[defaults]\ncooldown_s = 0\nattempts = 1\n" + rest);
}

std::string stage(const std::string& name, const std::string& needs = "",
                  const std::string& extra = "") {
  std::string text =
      "[[stage]]\nname = \"" + name + "\"\ndockerfile = \"" + name + ".Dockerfile\"\n";
  if (!needs.empty()) {
    text += "needs = [\"" + needs + "\"]\n";
  }
  return text + extra;
}

const json* find_stage(const json& manifest, const std::string& name) {
  for (const auto& s : manifest["stages"]) {
    if (s["name"] == name) {
      return &s;
    }
  }
  return nullptr;
}

TEST(RunGates, LintFindingsRefuseTheRunBeforeAnythingBuilds) {
  ChainDir dir;
  dir.write("base.Dockerfile", k_base_dockerfile);
  dir.write("work.Dockerfile", "FROM base\nENV SCCACHE_BUCKET=team-cache\nRUN true\n");
  write_chain(dir, stage("base") + stage("work", "base"));

  for (bool dry : {true, false}) {
    std::vector<std::string> args = {"run", "chain.toml"};
    if (dry) {
      args.push_back("--dry-run");
    }
    KilnResult result = dir.kiln(args);
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_NE(result.output.find("work.Dockerfile:2:5: leak-env-name"), std::string::npos)
        << result.output;
    EXPECT_EQ(result.output.find("buildah build"), std::string::npos) << result.output;
  }
}

TEST(RunGates, TheLintPreflightReadsTheDockerignoreOfTheStagesContext) {
  // The .dockerignore that decides what a COPY reaches is the stage's context's, not the one
  // beside its Dockerfile: the build would fail on the excluded file, so the run is refused.
  ChainDir dir;
  dir.write("app.Dockerfile", "FROM scratch\nCOPY build/app /app\n");
  dir.write(".dockerignore", "# beside the Dockerfile: not the build context\n");
  dir.write("ctx/.dockerignore", "build/\n");
  dir.write("ctx/build/app", "app\n");
  write_chain(dir, stage("app", "", "context = \"ctx\"\n"));

  KilnResult result = dir.kiln({"run", "chain.toml", "--dry-run"});
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("app.Dockerfile:2:6: copy-ignored-file: Attempting to Copy file "
                               "\"build/app\" that is excluded by .dockerignore"),
            std::string::npos)
      << result.output;
}

TEST(RunGates, FinalImageThatCarriesTheBuildHostIsRefusedAndRecorded) {
  ChainDir dir;
  dir.write("base.Dockerfile", k_base_dockerfile);
  dir.write("final.Dockerfile", std::string("FROM base\n") + k_leaking_env + "RUN true\n");
  write_chain(dir, stage("base") + stage("final", "base"));

  KilnResult result = dir.kiln({"run", "chain.toml"});
  EXPECT_EQ(result.exit_code, 3) << result.output;
  EXPECT_NE(result.output.find("SCCACHE_WEBDAV_ENDPOINT"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("never ENV"), std::string::npos) << result.output;

  json manifest = dir.latest_manifest();
  EXPECT_EQ(manifest["status"], "refused:image-env:final");
  const json* final_stage = find_stage(manifest, "final");
  ASSERT_NE(final_stage, nullptr);
  EXPECT_EQ(final_stage->at("status"), "refused");
  // The parent was built by this run: the final image's grade covers what it passes on.
  ASSERT_EQ(final_stage->at("gates").size(), 1u) << final_stage->dump(2);
  const json& built = final_stage->at("gates")[0];
  EXPECT_EQ(built["subject"], "image of stage final");
  EXPECT_EQ(built["verdict"], "refused");
  ASSERT_EQ(built["findings"].size(), 1u);
  EXPECT_NE(built["findings"][0].get<std::string>().find("SCCACHE_WEBDAV_ENDPOINT"),
            std::string::npos);
  // The build log survives the refusal.
  EXPECT_NE(dir.read("records/latest/stages/final.attempt-1.log").find("COMMIT"),
            std::string::npos);
  EXPECT_NE(dir.read("records/latest/driver.log").find("image-env gate refused image of stage"),
            std::string::npos);
}

TEST(RunGates, ParentFromAnEarlierRunIsGradedBeforeTheStageStarts) {
  ChainDir dir;
  dir.write("base.Dockerfile", std::string(k_base_dockerfile) + k_leaking_env);
  dir.write("work.Dockerfile", "FROM base\nRUN echo work > /work\n");
  write_chain(dir, stage("base") + stage("work", "base"));

  // The base alone is not the final image: nothing grades it in its own run.
  KilnResult first = dir.kiln({"run", "chain.toml", "--only", "base"});
  ASSERT_EQ(first.exit_code, 0) << first.output;

  KilnResult second = dir.kiln({"run", "chain.toml", "--only", "work"});
  EXPECT_EQ(second.exit_code, 3) << second.output;
  json manifest = dir.latest_manifest();
  EXPECT_EQ(manifest["status"], "refused:image-env:work");
  const json* work = find_stage(manifest, "work");
  ASSERT_NE(work, nullptr);
  EXPECT_EQ(work->at("status"), "refused");
  EXPECT_TRUE(work->at("attempts").empty()) << "the stage must not start on a leaking parent";
  ASSERT_EQ(work->at("gates").size(), 1u);
  EXPECT_NE(work->at("gates")[0]["subject"].get<std::string>().find(
                "parent base (localhost/g" + dir.nonce() + "-base:latest-kiln-"),
            std::string::npos)
      << work->at("gates")[0].dump();
  EXPECT_EQ(work->at("gates")[0]["verdict"], "refused");
  EXPECT_NE(second.output.find("rebuild it from a Dockerfile that passes `kiln lint`"),
            std::string::npos)
      << second.output;
}

TEST(RunGates, OutsideParentAndFlaggedStageAreGraded) {
  ChainDir dir;
  // An image no chain stage builds, carrying a cloud credential in its Env.
  std::string outside = "localhost/outside-" + dir.nonce() + ":1";
  dir.write("outside.Dockerfile",
            std::string(k_base_dockerfile) +
                "# kiln-lint ignore=leak-env-name reason=an image built elsewhere\n"
                "ENV AWS_ACCESS_KEY_ID=AKIAEXAMPLE\n");
  std::string output;
  ProcessExit built = run_process(
      {{"buildah", "build", "--isolation", "chroot", "--layers", "--file",
        (dir.path() / "outside.Dockerfile").string(), "--tag", outside, dir.path().string()},
       {},
       {}},
      [&](std::string_view chunk) { output += chunk; });
  ASSERT_TRUE(built.ok()) << output;

  dir.write("base.Dockerfile", k_base_dockerfile);
  dir.write("tools.Dockerfile",
            std::string("FROM base\n") +
                "# kiln-lint ignore=leak-address reason=testing the flagged stage's gate\n"
                "ARG MIRROR=http://10.1.2.3/mirror\n"
                "# kiln-lint ignore=leak-env-expansion reason=testing the flagged stage's gate\n"
                "ENV MIRROR_URL=${MIRROR}\n");
  dir.write("vendor.Dockerfile", "FROM " + outside + "\nRUN true\n");
  write_chain(dir,
              stage("base") + stage("tools", "base", "gate_image_env = true\n") + stage("vendor"));

  KilnResult flagged = dir.kiln({"run", "chain.toml", "--only", "base,tools"});
  EXPECT_EQ(flagged.exit_code, 3) << flagged.output;
  json manifest = dir.latest_manifest();
  EXPECT_EQ(manifest["status"], "refused:image-env:tools");
  const json* tools = find_stage(manifest, "tools");
  ASSERT_NE(tools, nullptr);
  EXPECT_NE(tools->at("gates").back()["findings"][0].get<std::string>().find("10.1.2.3"),
            std::string::npos)
      << tools->dump(2);

  KilnResult vendor = dir.kiln({"run", "chain.toml", "--only", "vendor"});
  EXPECT_EQ(vendor.exit_code, 3) << vendor.output;
  manifest = dir.latest_manifest();
  EXPECT_EQ(manifest["status"], "refused:image-env:vendor");
  const json* v = find_stage(manifest, "vendor");
  ASSERT_NE(v, nullptr);
  EXPECT_TRUE(v->at("attempts").empty());
  EXPECT_EQ(v->at("gates")[0]["subject"], "parent " + outside);
  EXPECT_NE(v->at("gates")[0]["findings"][0].get<std::string>().find("AWS_ACCESS_KEY_ID"),
            std::string::npos);

  run_process({{"buildah", "rmi", "-f", outside}, {}, {}}, [](std::string_view) {});
}

/// base -> final -> smoke, the smoke stage printing `report` from a RUN that exits `code`.
void write_smoke_chain(const ChainDir& dir, const std::string& report, int code = 0,
                       const std::string& floors = "") {
  dir.write("base.Dockerfile", k_base_dockerfile);
  dir.write("final.Dockerfile", "FROM base\nRUN echo 1 > /release\n");
  dir.write("smoke.Dockerfile",
            "FROM final\nRUN printf '" + report + "' && exit " + std::to_string(code) + "\n");
  write_chain(dir, stage("base") + stage("final", "base") +
                       stage("smoke", "final", "kind = \"smoke\"\n") + floors);
}

TEST(RunGates, SmokeStageThatReportsPassesIsGreenAndRecordsItsCounts) {
  ChainDir dir;
  write_smoke_chain(dir, "3 passed, 0 failed, 0 skipped\\n");
  KilnResult result = dir.kiln({"run", "chain.toml"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  json manifest = dir.latest_manifest();
  EXPECT_EQ(manifest["status"], "ok");
  const json& smoke = find_stage(manifest, "smoke")->at("smoke");
  EXPECT_EQ(smoke["passed"], 3);
  EXPECT_EQ(smoke["failed"], 0);
  EXPECT_EQ(smoke["skipped"], 0);
  EXPECT_EQ(smoke["min_passed"], 1);
  EXPECT_EQ(smoke["max_skipped"], 0);
  EXPECT_EQ(smoke["verdict"], "pass");
  ASSERT_EQ(smoke["summaries"].size(), 1u);
  EXPECT_NE(smoke["summaries"][0].get<std::string>().find("3 passed, 0 failed, 0 skipped"),
            std::string::npos);

  // A smoke stage never comes from the layer cache: a second run runs the tests again.
  KilnResult again = dir.kiln({"run", "chain.toml"});
  ASSERT_EQ(again.exit_code, 0) << again.output;
  json second = dir.latest_manifest();
  const json& attempt = find_stage(second, "smoke")->at("attempts")[0];
  EXPECT_LT(attempt["steps_cached"], attempt["steps_run"]) << attempt.dump();
}

struct FloorCase {
  const char* name;
  const char* report;
  const char* floors;
  const char* says; // in the stage's failure
};

TEST(RunGates, SmokeFloorsRefuseWithExitThreeAndSayWhichFloor) {
  const FloorCase cases[] = {
      {"no summary", "all good\\n", "", "no test summary"},
      {"nothing ran", "0 passed, 0 failed, 0 skipped\\n", "[smoke]\nmin_passed = 0\n",
       "ran nothing"},
      {"a failure", "4 passed, 1 failed, 0 skipped\\n", "", "1 test(s) failed"},
      {"below min_passed", "4 passed, 0 failed, 0 skipped\\n", "[smoke]\nmin_passed = 5\n",
       "below the floor min_passed = 5"},
      {"above max_skipped", "4 passed, 0 failed, 3 skipped\\n", "[smoke]\nmax_skipped = 2\n",
       "above the ceiling max_skipped = 2"},
  };
  // One checkout for every case: its base and final stages build once and are reused, and only
  // the smoke stage (never cached) runs again.
  ChainDir dir;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    write_smoke_chain(dir, c.report, 0, c.floors);
    KilnResult result = dir.kiln({"run", "chain.toml"});
    EXPECT_EQ(result.exit_code, 3) << result.output;
    json manifest = dir.latest_manifest();
    EXPECT_EQ(manifest["status"], "refused:smoke:smoke");
    const json* smoke = find_stage(manifest, "smoke");
    ASSERT_NE(smoke, nullptr);
    EXPECT_EQ(smoke->at("status"), "refused");
    EXPECT_EQ(smoke->at("smoke")["verdict"], "failed");
    EXPECT_NE(smoke->at("failure").get<std::string>().find(c.says), std::string::npos)
        << smoke->at("failure");
    EXPECT_NE(result.output.find(c.says), std::string::npos) << result.output;
  }
}

/// A self-test of 11 checks and a suite of 342 tests in one chain: each smoke stage holds its
/// own floors, and [smoke]'s (here out of reach of both) only covers a stage that sets none.
void write_two_smoke_chain(const ChainDir& dir, int suite_floor) {
  dir.write("base.Dockerfile", k_base_dockerfile);
  dir.write("final.Dockerfile", "FROM base\nRUN echo 1 > /release\n");
  dir.write("self.Dockerfile", "FROM final\nRUN printf '11 passed, 0 failed, 0 skipped\\n'\n");
  dir.write("suite.Dockerfile", "FROM final\nRUN printf '342 passed, 0 failed, 2 skipped\\n'\n");
  write_chain(dir, stage("base") + stage("final", "base") +
                       stage("self", "final", "kind = \"smoke\"\nmin_passed = 11\n") +
                       stage("suite", "final",
                             "kind = \"smoke\"\nmin_passed = " + std::to_string(suite_floor) +
                                 "\nmax_skipped = 2\n") +
                       "\n[smoke]\nmin_passed = 1000\n");
}

TEST(RunGates, EachSmokeStageHoldsItsOwnFloors) {
  ChainDir dir;
  write_two_smoke_chain(dir, 300);
  KilnResult result = dir.kiln({"run", "chain.toml"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  json manifest = dir.latest_manifest();
  const json& self = find_stage(manifest, "self")->at("smoke");
  EXPECT_EQ(self["min_passed"], 11);
  EXPECT_EQ(self["max_skipped"], 0); // [smoke]'s: the stage set none
  EXPECT_EQ(self["verdict"], "pass");
  const json& suite = find_stage(manifest, "suite")->at("smoke");
  EXPECT_EQ(suite["passed"], 342);
  EXPECT_EQ(suite["min_passed"], 300);
  EXPECT_EQ(suite["max_skipped"], 2);
  EXPECT_EQ(suite["verdict"], "pass");

  write_two_smoke_chain(dir, 400);
  KilnResult refused = dir.kiln({"run", "chain.toml"});
  EXPECT_EQ(refused.exit_code, 3) << refused.output;
  json again = dir.latest_manifest();
  EXPECT_EQ(again["status"], "refused:smoke:suite");
  EXPECT_EQ(find_stage(again, "self")->at("smoke")["verdict"], "pass");
  EXPECT_NE(find_stage(again, "suite")
                ->at("failure")
                .get<std::string>()
                .find("342 passed, below the floor min_passed = 400"),
            std::string::npos)
      << find_stage(again, "suite")->dump();
}

TEST(RunGates, FailingSmokeBuildKeepsItsCounts) {
  ChainDir dir;
  write_smoke_chain(dir, "2 passed, 1 failed, 0 skipped\\n", 1);
  KilnResult result = dir.kiln({"run", "chain.toml"});
  EXPECT_EQ(result.exit_code, 1) << result.output;
  json manifest = dir.latest_manifest();
  EXPECT_EQ(manifest["status"], "failed:smoke");
  const json& smoke = find_stage(manifest, "smoke")->at("smoke");
  EXPECT_EQ(smoke["passed"], 2);
  EXPECT_EQ(smoke["failed"], 1);
  EXPECT_EQ(smoke["verdict"], "failed");
}

} // namespace
} // namespace kiln::testing
