// A wide chain on real buildah: one base, six independent branches, a merge. The branches build
// at once, a failed branch skips only the merge, and Ctrl-C stops every branch's engine.
#include <algorithm>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kiln_harness.h"
#include "util/cancel.h"

namespace kiln::testing {
namespace {

using json = nlohmann::json;

const std::vector<std::string> k_branches = {"b1", "b2", "b3", "b4", "b5", "b6"};

/// base -> b1..b6 (each `branch_body` with BRANCH set to its name) -> merge.
void write_wide_chain(const ChainDir& dir, const std::string& branch_body) {
  dir.write("base.Dockerfile", k_base_dockerfile);
  dir.write("branch.Dockerfile", "FROM base\nARG BRANCH\n" + branch_body);
  std::string merge = "FROM base\n";
  std::string needs = "\"base\"";
  for (const auto& branch : k_branches) {
    merge += "COPY --from=" + branch + " /out/" + branch + " /out/" + branch + "\n";
    needs += ", \"" + branch + "\"";
  }
  dir.write("merge.Dockerfile", merge);
  std::string chain = "[chain]\nname = \"w" + dir.nonce() +
                      "\"\n[defaults]\ncooldown_s = 0\nattempts = 1\n"
                      "[[stage]]\nname = \"base\"\ndockerfile = \"base.Dockerfile\"\n";
  for (const auto& branch : k_branches) {
    chain += "[[stage]]\nname = \"" + branch +
             "\"\ndockerfile = \"branch.Dockerfile\"\nneeds = [\"base\"]\n"
             "build_args = { BRANCH = \"" +
             branch + "\" }\n";
  }
  chain +=
      "[[stage]]\nname = \"merge\"\ndockerfile = \"merge.Dockerfile\"\nneeds = [" + needs + "]\n";
  dir.write("chain.toml", chain);
}

json stage_named(const json& manifest, const std::string& name) {
  for (const auto& stage : manifest["stages"]) {
    if (stage["name"] == name) {
      return stage;
    }
  }
  ADD_FAILURE() << "no stage " << name;
  return json::object();
}

TEST(WideChain, IndependentBranchesBuildAtOnceAndAFailedOneSkipsOnlyTheMerge) {
  ChainDir dir;
  // Each branch's RUN takes 10 s; b4 fails at once with a compile error.
  write_wide_chain(dir, "RUN if [ \"$BRANCH\" = b4 ]; then echo 'b4.c:1:1: error: expected ;' >&2; "
                        "exit 1; fi; sleep 10 && mkdir -p /out/$BRANCH && echo " +
                            dir.nonce() + " > /out/$BRANCH/built\n");
  KilnResult run = dir.kiln({"run", "chain.toml", "--parallel", "6", "--jobs", "6"});
  EXPECT_EQ(run.exit_code, 1) << run.output;
  json manifest = dir.latest_manifest();
  EXPECT_EQ(manifest["status"], "failed:b4");
  EXPECT_EQ(stage_named(manifest, "b4")["outcome"], "failed");
  EXPECT_EQ(stage_named(manifest, "merge")["outcome"], "skipped:b4");
  EXPECT_EQ(stage_named(manifest, "merge")["gates_not_run"],
            json::array({"image-env", "residue", "arch"}));

  // Every other branch built, and all five were building at one moment: the latest start comes
  // before the earliest end (UTC ISO-8601 times compare as strings).
  std::string latest_start;
  std::string earliest_end = "9999";
  for (const auto& branch : k_branches) {
    json stage = stage_named(manifest, branch);
    if (branch == "b4") {
      continue;
    }
    EXPECT_EQ(stage["outcome"], "built") << branch << "\n" << run.output;
    EXPECT_EQ(stage["jobs"], 1) << "six branches share the six jobs";
    latest_start = std::max(latest_start, stage["attempts"][0]["started"].get<std::string>());
    earliest_end = std::min(earliest_end, stage["ended"].get<std::string>());
    // Each started only after base ended.
    EXPECT_GE(stage["started"].get<std::string>(),
              stage_named(manifest, "base")["ended"].get<std::string>());
  }
  EXPECT_LT(latest_start, earliest_end) << run.output;
  EXPECT_NE(run.output.find("[merge] skipped: it needs b4, which did not succeed"),
            std::string::npos)
      << run.output;

  // Each stable name moved as its stage ended, not after the run: base's while the branches
  // built, before any of them ended; a branch's after its own end. The failed run takes none back.
  std::string log = dir.read("records/latest/driver.log");
  auto moved = [&](const std::string& stage) {
    return log.find("stage " + stage + ": " +
                    stage_named(manifest, stage)["tag"].get<std::string>() + " now names ");
  };
  ASSERT_NE(moved("base"), std::string::npos) << log;
  for (const auto& branch : k_branches) {
    if (branch == "b4") {
      continue;
    }
    auto ended = log.find("stage " + branch + ": attempt 1/1 ok in ");
    ASSERT_NE(ended, std::string::npos) << log;
    EXPECT_LT(moved("base"), ended) << log;
    EXPECT_GT(moved(branch), ended) << log;
    EXPECT_TRUE(stage_named(manifest, branch)["tag_moved"].get<bool>()) << branch;
  }
  EXPECT_FALSE(stage_named(manifest, "merge")["tag_moved"].get<bool>());
}

TEST(WideChain, CtrlCStopsEveryBranchAndLeavesNoEngineProcess) {
  ChainDir dir;
  std::string sleep = "sleep 9" + dir.nonce().substr(0, 3);
  write_wide_chain(dir, "RUN " + sleep + "\n");
  CancelToken ctrl_c;
  std::thread interrupter([&] {
    // Ctrl-C once every branch's RUN is running.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (processes_matching(sleep).size() < k_branches.size() &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ctrl_c.cancel();
  });
  KilnResult run = dir.kiln({"run", "chain.toml", "--parallel", "6", "--jobs", "6"}, &ctrl_c);
  interrupter.join();
  EXPECT_EQ(run.exit_code, 130) << run.output;
  json manifest = dir.latest_manifest();
  EXPECT_EQ(manifest["status"], "interrupted");
  for (const auto& branch : k_branches) {
    EXPECT_EQ(stage_named(manifest, branch)["status"], "interrupted") << branch;
  }
  EXPECT_EQ(stage_named(manifest, "merge")["outcome"], "skipped:interrupted");
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((!processes_matching(sleep).empty() ||
          !processes_matching(dir.path().string() + "/branch.Dockerfile").empty()) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(processes_matching(sleep).empty()) << "a RUN outlived kiln";
  EXPECT_TRUE(processes_matching(dir.path().string() + "/branch.Dockerfile").empty())
      << "buildah outlived kiln";
}

} // namespace
} // namespace kiln::testing
