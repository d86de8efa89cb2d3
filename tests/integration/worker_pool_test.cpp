// A chain on a pool of BuildKit workers, against the fake buildctl replaying real recordings:
// stages spread over the pool and return to the same worker, a worker lost under a build moves
// its stages to the next one, and a worker that does not answer is left out.
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "html_elements.h"
#include "kiln_harness.h"
#include "occurrences.h"

namespace kiln::testing {
namespace {

using nlohmann::json;
using Env = std::vector<std::pair<std::string, std::string>>;

constexpr int k_libraries = 10;

std::string recorded(const std::string& name) {
  std::ifstream in(std::string(KILN_TEST_FIXTURES) + "/buildkit-v0.11.6/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// base, ten independent libraries on it, and a merge of them all: twelve stages of the recorded
/// Dockerfile on three workers.
struct PoolChain {
  explicit PoolChain(const ChainDir& dir, int max_parallel = 12,
                     const std::map<std::string, std::string>& worker_extra = {})
      : dir(dir) {
    dir.write("work.Dockerfile", recorded("Dockerfile.used"));
    // One name for every run of the test: placement hashes it, so where each stage goes is
    // the same every time: bk2 comes first for base, lib1, lib3, lib8 and merge, bk3 for lib4
    // and lib9, bk1 for the other five.
    std::string chain = "[chain]\nname = \"pool\"\nengine = \"buildkit\"\n\n[engine.buildkit]\n"
                        "workers = [\"bk1\", \"bk2\", \"bk3\"]\n\n[cache]\nlocal = true\n\n"
                        "[defaults]\ncooldown_s = 0\n";
    for (const char* name : {"bk1", "bk2", "bk3"}) {
      chain += "\n[[worker]]\nname = \"" + std::string(name) + "\"\nhost = \"" + host(name) +
               "\"\nmax_parallel = " + std::to_string(max_parallel) + "\n";
      if (auto extra = worker_extra.find(name); extra != worker_extra.end()) {
        chain += extra->second;
      }
    }
    chain += "\n[[stage]]\nname = \"base\"\ndockerfile = \"work.Dockerfile\"\ntarget = \"work\"\n";
    std::string all;
    for (int i = 1; i <= k_libraries; ++i) {
      std::string lib = "lib" + std::to_string(i);
      chain += "\n[[stage]]\nname = \"" + lib +
               "\"\ndockerfile = \"work.Dockerfile\"\ntarget = \"work\"\nneeds = [\"base\"]\n";
      all += (all.empty() ? "\"" : ", \"") + lib + "\"";
    }
    chain += "\n[[stage]]\nname = \"merge\"\ndockerfile = \"work.Dockerfile\"\ntarget = "
             "\"work\"\nneeds = [" +
             all + "]\n";
    dir.write("chain.toml", chain);
  }

  std::string host(const std::string& worker) const {
    return "unix://" + (dir.path() / (worker + ".sock")).string();
  }

  KilnResult run(Env extra = {}) const {
    return dir.kiln({"run", "chain.toml"}, nullptr, fake.env(std::move(extra)));
  }

  std::vector<json> builds() const { return fake.builds(); }

  const ChainDir& dir;
  FakeBuildkit fake{dir};
};

std::map<std::string, std::string> workers_of(const json& manifest) {
  std::map<std::string, std::string> placed;
  for (const auto& stage : manifest["stages"]) {
    placed[stage["name"]] = stage["worker"];
  }
  return placed;
}

TEST(WorkerPool, StagesSpreadOverThePoolAndReturnToTheirWorker) {
  ChainDir dir;
  PoolChain pool(dir);
  KilnResult first = pool.run();
  ASSERT_EQ(first.exit_code, 0) << first.output;
  json manifest = dir.latest_manifest();
  std::map<std::string, std::string> placed = workers_of(manifest);
  std::set<std::string> used;
  for (const auto& stage : manifest["stages"]) {
    EXPECT_EQ(stage["placement"], "first choice") << stage;
    EXPECT_EQ(stage["worker_rank"], 0);
    used.insert(stage["worker"].get<std::string>());
  }
  EXPECT_EQ(used, (std::set<std::string>{"bk1", "bk2", "bk3"})) << first.output;
  ASSERT_EQ(manifest["workers"].size(), 3u);
  for (const auto& worker : manifest["workers"]) {
    EXPECT_EQ(worker["left_out"], "") << worker;
    EXPECT_EQ(worker["version"], "buildkitd v0.11.6, buildctl v0.11.6") << worker;
  }
  // Each build went to the address of the worker its stage records.
  std::vector<json> builds = pool.builds();
  ASSERT_EQ(builds.size(), 12u);
  for (const auto& stage : manifest["stages"]) {
    std::string layout = "/oci/" + stage["name"].get<std::string>() + ",";
    int seen = 0;
    for (const auto& build : builds) {
      if (build["argv"].dump().find(layout) != std::string::npos) {
        EXPECT_EQ(build["addr"], pool.host(stage["worker"])) << stage["name"];
        ++seen;
      }
    }
    EXPECT_EQ(seen, 1) << stage["name"];
  }
  EXPECT_NE(first.output.find("worker"), std::string::npos);
  EXPECT_NE(first.output.find(" (first choice)"), std::string::npos) << first.output;

  // The report draws a row per worker, each stage's bar on the row of the worker it built on.
  if (std::filesystem::exists(k_chromium)) {
    KilnResult report = dir.kiln({"report", manifest["run_id"], "-o", "pool.html"});
    ASSERT_EQ(report.exit_code, 0) << report.output;
    std::string dom = rendered_dom(dir, dir.path() / "pool.html");
    ASSERT_NE(dom.find("</html>"), std::string::npos) << dom;
    std::map<std::string, std::string> drawn;
    for (const auto& bar : html_elements(dom, "rect", "bar")) {
      drawn[bar.attribute("data-stage")] = bar.attribute("data-worker");
      EXPECT_EQ(bar.attribute("data-group"), "worker " + bar.attribute("data-worker"));
    }
    EXPECT_EQ(drawn, placed);
    for (const char* worker : {"bk1", "bk2", "bk3"}) {
      EXPECT_EQ(occurrences(dom, std::string(">worker ") + worker + "</text>"), 1u) << worker;
    }
  }

  // The next run places every stage where it was, and each finds its cache there.
  KilnResult second = pool.run();
  ASSERT_EQ(second.exit_code, 0) << second.output;
  json again = dir.latest_manifest();
  EXPECT_EQ(workers_of(again), placed);
  for (const auto& stage : again["stages"]) {
    EXPECT_EQ(stage["outcome"], "reused") << stage["name"];
  }
}

TEST(WorkerPool, AWorkerLostUnderItsBuildsMovesThemAndLeavesTheRun) {
  ChainDir dir;
  PoolChain pool(dir);
  // bk2 loses every build it takes: killed under it, as recorded.
  pool.fake.plan("work.Dockerfile@" + pool.host("bk2") + " build-daemon-killed\n");
  KilnResult run = pool.run();
  ASSERT_EQ(run.exit_code, 0) << run.output;
  json manifest = dir.latest_manifest();
  int moved = 0;
  for (const auto& stage : manifest["stages"]) {
    EXPECT_EQ(stage["status"], "ok") << stage;
    EXPECT_NE(stage["worker"], "bk2") << stage;
    for (const auto& move : stage["moves"]) {
      ++moved;
      EXPECT_EQ(move["from"], "bk2") << stage;
      EXPECT_NE(move["to"], "bk2") << stage;
      EXPECT_EQ(move["why"], "worker-lost: error: failed to receive status: rpc error: code = "
                             "Unavailable desc = error reading from server: EOF")
          << stage;
    }
    if (!stage["moves"].empty()) {
      // The lost attempt is the worker's: the stage still had all its own attempts.
      EXPECT_EQ(stage["attempts"][0]["transient_class"], "worker-lost");
      EXPECT_EQ(stage["attempts"].back()["verdict"], "ok");
      EXPECT_EQ(stage["placement"], "moved from bk2");
    }
  }
  EXPECT_GE(moved, 1) << run.output;
  // Two attempts lost in a row take bk2 out of the run; no stage goes there after.
  std::string driver = dir.read("records/latest/driver.log");
  EXPECT_NE(driver.find("worker bk2 (" + pool.host("bk2") +
                        ") is out of the run: 2 attempts lost on it in a row"),
            std::string::npos)
      << driver;
  EXPECT_NE(run.output.find("moved from worker bk2 to "), std::string::npos) << run.output;
}

TEST(WorkerPool, AWorkerThatDoesNotAnswerIsLeftOutAndTheRestBuild) {
  ChainDir dir;
  PoolChain pool(dir);
  KilnResult run = pool.run({{"KILN_FAKE_BUILDCTL_UNREACHABLE", pool.host("bk3")}});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("warning: worker bk3 (" + pool.host("bk3") +
                            ") is left out of this run: buildkitd is unreachable at " +
                            pool.host("bk3") + " (from [[worker]] bk3)"),
            std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("start buildkitd there, or correct its host in the chain file"),
            std::string::npos)
      << run.output;
  json manifest = dir.latest_manifest();
  EXPECT_NE(manifest["workers"][2]["left_out"].get<std::string>().find("unreachable"),
            std::string::npos);
  for (const auto& stage : manifest["stages"]) {
    EXPECT_NE(stage["worker"], "bk3") << stage;
    EXPECT_EQ(stage["status"], "ok") << stage;
  }
  for (const auto& build : pool.builds()) {
    EXPECT_NE(build["addr"], pool.host("bk3"));
  }

  // With no worker answering, nothing builds and every stage says why.
  KilnResult none = pool.run({{"KILN_FAKE_BUILDCTL_UNREACHABLE", "1"}});
  EXPECT_EQ(none.exit_code, 1) << none.output;
  json skipped = dir.latest_manifest();
  EXPECT_EQ(skipped["stages"][0]["outcome"], "skipped:no-worker") << skipped["stages"][0];
  EXPECT_EQ(skipped["stages"][1]["outcome"], "skipped:base");
}

/// A daemon that froze (SIGSTOP) leaves its build as silent as a hanging step: the stall limit
/// stops it, and the daemon is asked before the silence is blamed on the step.
TEST(WorkerPool, AFrozenWorkerIsAskedBeforeASilenceIsCalledAStall) {
  ChainDir dir;
  PoolChain pool(dir);
  std::string chain = dir.read("chain.toml");
  chain.replace(chain.find("cooldown_s = 0\n"), 15, "cooldown_s = 0\nstall_timeout_s = 1\n");
  dir.write("chain.toml", chain);
  KilnResult run = pool.run({{"KILN_FAKE_BUILDCTL_FROZEN", pool.host("bk2")}});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  json manifest = dir.latest_manifest();
  int moved = 0;
  for (const auto& stage : manifest["stages"]) {
    EXPECT_NE(stage["worker"], "bk2") << stage;
    for (const auto& move : stage["moves"]) {
      ++moved;
      EXPECT_EQ(move["from"], "bk2");
      EXPECT_EQ(move["why"], "worker-lost: buildkitd at " + pool.host("bk2") +
                                 " (from [[worker]] bk2) did not answer buildctl debug info "
                                 "within 10s")
          << stage;
      const json& lost = stage["attempts"][0];
      EXPECT_EQ(lost["stopped_by"], "stall") << lost;
      EXPECT_EQ(lost["transient_class"], "worker-lost") << lost;
      EXPECT_NE(lost["reason"].get<std::string>().find("the daemon stopped, not the step"),
                std::string::npos)
          << lost;
    }
  }
  EXPECT_GE(moved, 1) << run.output;
}

TEST(WorkerPool, EachWorkerRunsNoMoreStagesThanItsMaxParallelWithABudgetOfItsOwn) {
  ChainDir dir;
  // The stages read no budget file here, but each is offered its worker's: bk1 has 8 GB and 4
  // cores, bk2 2 GB and 1 core, bk3 says nothing and gets this host's.
  PoolChain pool(dir, 1,
                 {{"bk1", "memory_gb = 8\ncores = 4\n"}, {"bk2", "memory_gb = 2\ncores = 1\n"}});
  KilnResult run = pool.run();
  ASSERT_EQ(run.exit_code, 0) << run.output;
  json manifest = dir.latest_manifest();
  // From the recorded start and end of each stage: never two at once on one worker.
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> spans;
  std::set<std::string> used;
  for (const auto& stage : manifest["stages"]) {
    spans[stage["worker"]].push_back({stage["started"], stage["ended"]});
    used.insert(stage["worker"].get<std::string>());
  }
  EXPECT_EQ(used.size(), 3u) << "busy first choices send stages to the others";
  for (const auto& stage : manifest["stages"]) {
    if (stage["worker"] == "bk1") {
      EXPECT_EQ(stage["memory_limit_gb"], 8.0) << stage["name"];
      EXPECT_EQ(stage["jobs"], 4) << stage["name"];
    } else if (stage["worker"] == "bk2") {
      EXPECT_EQ(stage["memory_limit_gb"], 2.0) << stage["name"];
      EXPECT_EQ(stage["jobs"], 1) << stage["name"];
    }
  }
  std::string log = dir.read("records/latest/driver.log");
  EXPECT_NE(log.find(" busy"), std::string::npos) << log;
  // The fake's log gives each build's start and end on one clock.
  std::map<std::string, std::vector<std::pair<long, long>>> by_worker;
  for (const auto& build : pool.builds()) {
    by_worker[build["addr"]].push_back({build["started_ns"], build["ended_ns"]});
  }
  for (auto& [addr, runs] : by_worker) {
    std::sort(runs.begin(), runs.end());
    for (size_t i = 1; i < runs.size(); ++i) {
      EXPECT_LE(runs[i - 1].second, runs[i].first) << addr << ": two builds overlapped";
    }
  }
}

} // namespace
} // namespace kiln::testing
