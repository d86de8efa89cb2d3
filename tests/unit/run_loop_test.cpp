// The run loop in-process: a scripted engine and a fake clock, real files for the record.
#include "driver/run_loop.h"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <functional>
#include <map>
#include <new>

#include <sys/wait.h>
#include <unistd.h>

#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "chain/chain_loader.h"
#include "driver/records_lock.h"
#include "fake_clock.h"
#include "fake_engine.h"
#include "fake_store.h"
#include "layer_tarball.h"
#include "occurrences.h"
#include "temp_dir.h"
#include "util/cancel.h"
#include "util/fs.h"

namespace kiln {
namespace {

using json = nlohmann::json;
using testing::FakeBuild;
using testing::FakeClock;
using testing::FakeEngine;
using testing::occurrences;
using testing::TempDir;

/// A chain in a scratch folder, run in-process against a FakeEngine on a FakeClock.
class RunLoop : public ::testing::Test {
protected:
  /// A chain of one stage `base` (plus `stages`, TOML), with `dockerfile` as base's Dockerfile.
  void write_chain(const std::string& dockerfile = "FROM scratch\nRUN step\n",
                   const std::string& extra = "", const std::string& stage_keys = "") {
    m_dir.write("base.Dockerfile", dockerfile);
    m_dir.write("chain.toml", "[chain]\nname = \"t\"\n\n"
                              "[defaults]\ncooldown_s = 1\n\n"
                              "[disk]\nfloor_gb = 0\nguard_gb = 0\n\n"
                              "[resources]\nsample_interval_s = 0\n\n" +
                                  extra +
                                  "\n[[stage]]\nname = \"base\"\n"
                                  "dockerfile = \"base.Dockerfile\"\n" +
                                  stage_keys);
  }

  int run() {
    auto chain = load_chain(m_dir.path() / "chain.toml");
    EXPECT_TRUE(chain) << (chain ? "" : chain.error()[0].message);
    if (!chain) {
      return -1;
    }
    char* out = nullptr;
    size_t out_size = 0;
    std::FILE* stream = open_memstream(&out, &out_size);
    char* err = nullptr;
    size_t err_size = 0;
    std::FILE* errors = open_memstream(&err, &err_size);
    int code = 0;
    {
      Console console(stream, false);
      code = run_chain(*chain, m_engine, m_options, console, errors, {nullptr, &m_clock});
    }
    std::fclose(stream);
    std::fclose(errors);
    m_output = std::string(out, out_size) + std::string(err, err_size);
    std::free(out);
    std::free(err);
    return code;
  }

  json manifest() const { return json::parse(m_dir.read("records/latest/manifest.json")); }

  /// base; a, b and c on base; a2 on a; merge on a2, b and c: a chain that fans out and in.
  void write_wide_chain(const std::string& extra = "") {
    m_dir.write("stage.Dockerfile", "FROM scratch\nRUN step\n");
    std::string chain = "[chain]\nname = \"wide\"\n\n[defaults]\nattempts = 1\n\n"
                        "[disk]\nfloor_gb = 0\nguard_gb = 0\n\n"
                        "[resources]\nsample_interval_s = 0\n" +
                        extra + "\n";
    for (const auto& [name, needs] :
         std::vector<std::pair<std::string, std::string>>{{"base", ""},
                                                          {"a", "\"base\""},
                                                          {"b", "\"base\""},
                                                          {"c", "\"base\""},
                                                          {"a2", "\"a\""},
                                                          {"merge", "\"a2\", \"b\", \"c\""}}) {
      chain += "[[stage]]\nname = \"" + name + "\"\ndockerfile = \"stage.Dockerfile\"\nneeds = [" +
               needs + "]\n";
    }
    m_dir.write("chain.toml", chain);
  }

  /// Stages a and b, independent, each with a disk floor of `share` of what the disk of the
  /// test's folder has free now. No [disk] path: the floors measure the store's filesystem.
  void write_floors_chain(double share) {
    auto free = free_bytes(m_dir.path());
    ASSERT_TRUE(free) << free.error();
    double floor_gb = share * static_cast<double>(*free) / static_cast<double>(uint64_t{1} << 30);
    std::string floor = fmt::format("disk_floor_gb = {:.6f}\n", floor_gb);
    m_dir.write("stage.Dockerfile", "FROM scratch\nRUN step\n");
    m_dir.write("chain.toml", "[chain]\nname = \"t\"\n\n[defaults]\nattempts = 1\n\n"
                              "[disk]\nneed_gb = 0\nfloor_gb = 0\nguard_gb = 0\n\n"
                              "[resources]\nsample_interval_s = 0\n\n"
                              "[[stage]]\nname = \"a\"\ndockerfile = \"stage.Dockerfile\"\n" +
                                  floor +
                                  "\n[[stage]]\nname = \"b\"\ndockerfile = "
                                  "\"stage.Dockerfile\"\n" +
                                  floor);
  }

  /// The floors chain on a store in the test's folder, a and b allowed at once, each build
  /// lasting until `until` holds (defined after within_30s).
  int run_floors(const std::function<bool()>& until);

  /// Each stage's outcome in the manifest, by name.
  std::map<std::string, std::string> outcomes() const {
    std::map<std::string, std::string> out;
    json doc = manifest();
    for (const auto& stage : doc["stages"]) {
      out[stage["name"].get<std::string>()] = stage["outcome"].get<std::string>();
    }
    return out;
  }

  /// Where `event` is in the engine's events; fails the test when it is not there.
  size_t event_at(const std::string& event) const {
    auto events = m_engine.events();
    auto found = std::find(events.begin(), events.end(), event);
    EXPECT_NE(found, events.end()) << event;
    return static_cast<size_t>(found - events.begin());
  }

  RunOptions m_options;
  TempDir m_dir;
  FakeClock m_clock;
  FakeEngine m_engine{&m_clock};
  std::string m_output;
};

TEST_F(RunLoop, AnExceptionInsideTheRunEndsItCrashedWithTheReasonRecorded) {
  write_chain();
  FakeBuild build = FakeBuild::ok();
  build.during = [] { throw std::bad_alloc(); };
  m_engine.script("base", {build});
  EXPECT_EQ(run(), k_exit_crash) << m_output;
  json doc = manifest();
  EXPECT_EQ(doc["status"], "crashed");
  EXPECT_EQ(doc["status_reason"], "std::bad_alloc");
  EXPECT_FALSE(doc["ended"].get<std::string>().empty());
  EXPECT_EQ(doc["stages"][0]["status"], "crashed");
  EXPECT_EQ(doc["stages"][0]["attempts"][0]["verdict"], "crashed");
  EXPECT_NE(m_output.find("internal error: std::bad_alloc; the run stopped and its record says "
                          "so: "),
            std::string::npos)
      << m_output;
  EXPECT_NE(m_dir.read("records/latest/driver.log").find("crashed: std::bad_alloc"),
            std::string::npos);
}

TEST_F(RunLoop, ARetryWaitsItsCooldownOnTheClockAndEveryAttemptIsRecorded) {
  write_chain();
  m_engine.script("base", {FakeBuild::failing("curl: (56) Recv failure: Connection reset by peer"),
                           FakeBuild::failing("curl: (18) transfer closed with 3 bytes remaining"),
                           FakeBuild::ok()});
  EXPECT_EQ(run(), k_exit_ok) << m_output;
  EXPECT_EQ(m_clock.sleeps(), (std::vector<std::chrono::milliseconds>{std::chrono::seconds(1),
                                                                      std::chrono::seconds(2)}));
  json attempts = manifest()["stages"][0]["attempts"];
  ASSERT_EQ(attempts.size(), 3u);
  EXPECT_EQ(attempts[0]["verdict"], "retry");
  EXPECT_EQ(attempts[0]["transient_class"], "fetch-network");
  EXPECT_EQ(attempts[2]["verdict"], "ok");
}

TEST_F(RunLoop, AStallIsRetriedAndAStallAtTheSameStepAgainIsRefused) {
  write_chain("FROM scratch\nRUN step\n", "", "stall_timeout_s = 90\n");
  FakeBuild stall;
  stall.lines = {"STEP 1/2: FROM scratch", "STEP 2/2: RUN fetch-the-world",
                 "Connecting to mirror.example..."};
  stall.stalled = true;
  stall.exit_code = 130;
  m_engine.script("base", {stall, stall});
  EXPECT_EQ(run(), k_exit_failed) << m_output;
  json doc = manifest();
  EXPECT_EQ(doc["status"], "failed:base");
  json attempts = doc["stages"][0]["attempts"];
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(attempts[0]["stopped_by"], "stall");
  EXPECT_EQ(attempts[0]["verdict"], "retry");
  EXPECT_EQ(attempts[0]["transient_class"], "stall");
  EXPECT_EQ(attempts[0]["last_line"], "Connecting to mirror.example...");
  EXPECT_EQ(attempts[0]["silent_seconds"], 90);
  EXPECT_EQ(attempts[1]["verdict"], "refused-identical");
  EXPECT_NE(attempts[1]["reason"].get<std::string>().find(
                "no output for 90s at step 2/2: RUN fetch-the-world"),
            std::string::npos)
      << attempts[1]["reason"];
}

TEST_F(RunLoop, ATimeLimitEndsTheStageAtOnce) {
  write_chain("FROM scratch\nRUN step\n", "", "timeout_s = 600\n");
  FakeBuild slow = FakeBuild::ok();
  slow.lines.pop_back(); // no image id: it never finished
  slow.timed_out = true;
  slow.exit_code = 130;
  m_engine.script("base", {slow});
  EXPECT_EQ(run(), k_exit_failed) << m_output;
  json attempt = manifest()["stages"][0]["attempts"][0];
  EXPECT_EQ(attempt["stopped_by"], "timeout");
  EXPECT_EQ(attempt["verdict"], "permanent");
  EXPECT_EQ(m_engine.builds().size(), 1u);
}

FakeBuild compile_build(bool compile_cached) {
  FakeBuild build;
  build.lines = {"STEP 1/3: FROM scratch", "STEP 2/3: RUN kiln-cc session run -- make"};
  if (compile_cached) {
    build.lines.push_back("--> Using cache "
                          "1111111111111111111111111111111111111111111111111111111111111111");
  }
  build.lines.push_back("STEP 3/3: RUN echo changed");
  build.lines.push_back("3f0c56e7d4a2b8c19e5f7a6d2c4b8e1f0a9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b");
  return build;
}

TEST_F(RunLoop, ACompileStepTheCacheServedSatisfiesTheCompileFloor) {
  write_chain("FROM scratch\nRUN kiln-cc session run -- make\nRUN echo changed\n", "",
              "min_compile_requests = 10\n");
  m_engine.script("base", {compile_build(true)});
  EXPECT_EQ(run(), k_exit_ok) << m_output;
  json stage = manifest()["stages"][0];
  EXPECT_EQ(stage["status"], "ok");
  EXPECT_EQ(stage["compile_floor"],
            "satisfied: its 1 compile step(s) came from the layer cache and compiled nothing");
  EXPECT_TRUE(m_engine.withdrawn().empty());
}

TEST_F(RunLoop, ACompileStepThatRanWithoutStatsFailsTheFloorAndItsImageIsWithdrawn) {
  write_chain("FROM scratch\nRUN kiln-cc session run -- make\nRUN echo changed\n", "",
              "min_compile_requests = 10\n");
  m_engine.script("base", {compile_build(false)});
  EXPECT_EQ(run(), k_exit_failed) << m_output;
  json stage = manifest()["stages"][0];
  EXPECT_EQ(stage["status"], "failed");
  EXPECT_NE(stage["failure"].get<std::string>().find("(1 compile step(s) ran)"), std::string::npos);
  // Its work name goes: no later stage or run is handed an image that failed its floor.
  ASSERT_EQ(m_engine.withdrawn().size(), 1U);
  EXPECT_TRUE(m_engine.withdrawn()[0].starts_with("localhost/t-base:latest-kiln-"));
}

TEST_F(RunLoop, ASecondRunOnLockedRecordsIsRefusedNamingTheFirst) {
  write_chain();
  auto held = RecordsLock::acquire(m_dir.path() / "records");
  ASSERT_TRUE(held);
  held->describe("run 20261202-140000-abcd", "2026-12-02T14:00:00Z");
  EXPECT_EQ(run(), k_exit_usage);
  EXPECT_NE(m_output.find("another kiln run or command is using the records folder"),
            std::string::npos)
      << m_output;
  EXPECT_NE(m_output.find("run 20261202-140000-abcd"), std::string::npos) << m_output;
  EXPECT_TRUE(m_engine.builds().empty());
}

TEST_F(RunLoop, ADeadRunIsMarkedAbandonedByTheNextRunWhichSaysSo) {
  write_chain();
  m_dir.write("records/runs/20261201-090000-dead/manifest.json",
              R"({"run_id": "20261201-090000-dead", "status": "running", "pid": 999,)"
              R"( "host": "gone", "stages": [{"name": "base", "status": "running",)"
              R"( "attempts": [{"verdict": "running"}]}]})");
  EXPECT_EQ(run(), k_exit_ok) << m_output;
  EXPECT_NE(m_output.find("run 20261201-090000-dead never finished"), std::string::npos)
      << m_output;
  json dead = json::parse(m_dir.read("records/runs/20261201-090000-dead/manifest.json"));
  EXPECT_EQ(dead["status"], "abandoned");
  EXPECT_EQ(dead["stages"][0]["status"], "abandoned");
  EXPECT_EQ(manifest()["status"], "ok");
  EXPECT_GT(manifest()["pid"].get<int>(), 0);
}

TEST_F(RunLoop, AJobBudgetThatCannotBeWrittenFailsTheStageNamingTheWrite) {
  write_chain("FROM scratch\nRUN --mount=type=secret,id=kiln-budget . /run/secrets/kiln-budget\n");
  // A file where the budget folder goes: the write fails as a full or read-only disk would.
  m_dir.write("records/budget", "not a folder");
  EXPECT_EQ(run(), k_exit_failed) << m_output;
  json stage = manifest()["stages"][0];
  EXPECT_EQ(stage["status"], "failed");
  EXPECT_NE(stage["failure"].get<std::string>().find(
                "the job budget the Dockerfile mounts as secret 'kiln-budget' could not be "
                "written: cannot write"),
            std::string::npos)
      << stage["failure"];
  EXPECT_TRUE(m_engine.builds().empty());
}

TEST_F(RunLoop, AStageStartsAfterEveryStageItNeedsEndedAndMaxParallelIsNeverExceeded) {
  write_wide_chain();
  for (const char* branch : {"a", "b", "c", "a2"}) {
    FakeBuild build = FakeBuild::ok();
    build.holds = std::chrono::milliseconds(30);
    m_engine.script(branch, {build});
  }
  m_options.parallel = 2;
  EXPECT_EQ(run(), k_exit_ok) << m_output;
  EXPECT_LE(m_engine.most_at_once(), 2);
  for (const char* branch : {"a", "b", "c"}) {
    EXPECT_GT(event_at(std::string("start ") + branch), event_at("end base")) << branch;
  }
  EXPECT_GT(event_at("start a2"), event_at("end a"));
  for (const char* need : {"a2", "b", "c"}) {
    EXPECT_GT(event_at("start merge"), event_at(std::string("end ") + need)) << need;
  }
  json doc = manifest();
  EXPECT_EQ(doc["max_parallel"], 2);
  EXPECT_EQ(doc["status"], "ok");
}

TEST_F(RunLoop, StagesReadyTogetherStartInRunOrderAndTheEventsSaySo) {
  write_wide_chain();
  EXPECT_EQ(run(), k_exit_ok) << m_output;
  // a, b and c are ready together once base ended: whichever thread gets the record first,
  // they start a, b, c (the run order), as stage.started events and the manifest say.
  std::vector<std::string> started;
  std::istringstream events(m_dir.read("records/latest/events.jsonl"));
  for (std::string line; std::getline(events, line);) {
    json event = json::parse(line);
    if (event["type"] == "stage.started") {
      started.push_back(event["stage"]);
    }
  }
  EXPECT_EQ(started, (std::vector<std::string>{"base", "a", "b", "c", "a2", "merge"}));
}

TEST_F(RunLoop, KeepGoingBuildsTheIndependentBranchesAndSkipsWhatNeedsTheFailure) {
  write_wide_chain();
  m_engine.script("a", {FakeBuild::failing("a.c:1:1: error: expected ';'")});
  EXPECT_EQ(run(), k_exit_failed) << m_output;
  EXPECT_EQ(outcomes(), (std::map<std::string, std::string>{{"base", "built"},
                                                            {"a", "failed"},
                                                            {"b", "built"},
                                                            {"c", "built"},
                                                            {"a2", "skipped:a"},
                                                            {"merge", "skipped:a"}}));
  json doc = manifest();
  EXPECT_EQ(doc["status"], "failed:a");
  EXPECT_EQ(doc["stages"][5]["status"], "skipped");
  // merge is the chain's final stage: the image-env gate it would have run did not run.
  EXPECT_EQ(doc["stages"][5]["gates_not_run"], json::array({"image-env", "residue", "arch"}));
  EXPECT_NE(m_output.find("[merge] skipped: it needs a, which did not succeed; gates not run: "
                          "image-env"),
            std::string::npos)
      << m_output;
}

TEST_F(RunLoop, TheFinalImageCarryingABuildHostFileInAnyLayerIsRefused) {
  write_chain("FROM scratch\nRUN step\n", "[gates]\nresidue_allow = [{ path = \"/etc/ssl/*.pem\", "
                                          "reason = \"the test CA, public by design\" }]\n");
  m_engine.set_layers(
      "base", {testing::Tarball().file("root/.netrc", "machine h login u password p\n").gzip(),
               testing::Tarball()
                   .whiteout("root/.netrc")
                   .file("etc/ssl/ca.pem", "-----BEGIN PRIVATE KEY-----\nMII\n")
                   .zstd()});
  EXPECT_EQ(run(), k_exit_gate) << m_output;
  json doc = manifest();
  EXPECT_EQ(doc["status"], "refused:residue:base");
  EXPECT_EQ(doc["stages"][0]["outcome"], "refused");
  const json& gates = doc["stages"][0]["gates"];
  ASSERT_EQ(gates.size(), 3U) << gates.dump(); // image-env, then residue and arch
  EXPECT_EQ(gates[1]["gate"], "residue");
  EXPECT_EQ(gates[1]["verdict"], "refused");
  ASSERT_EQ(gates[1]["findings"].size(), 1U);
  EXPECT_NE(gates[1]["findings"][0].get<std::string>().find(
                "/root/.netrc: netrc: netrc credentials of the build host (29 bytes); added in "
                "layer 1 of 2, deleted in layer 2: still published"),
            std::string::npos)
      << gates[1].dump();
  EXPECT_NE(gates[1]["reason"].get<std::string>().find("1 allowed by [gates] residue_allow"),
            std::string::npos);
  EXPECT_NE(m_output.find("residue gate refused image of stage base"), std::string::npos)
      << m_output;
}

TEST_F(RunLoop, AStageMissingAnArtifactOrOverItsLayerCeilingIsRefusedNamingEach) {
  write_wide_chain();
  std::string chain = m_dir.read("chain.toml");
  chain.replace(chain.find("name = \"a\"\n"), 11,
                "name = \"a\"\nartifacts = [\"/opt/lib/liba.so\", \"/opt/lib/libb.so\"]\n"
                "max_layers = 1\n");
  m_dir.write("chain.toml", chain);
  m_engine.set_layers("a", {testing::Tarball().file("opt/lib/liba.so", "elf").gzip(),
                            testing::Tarball().file("opt/lib/other.so", "elf").gzip()});
  EXPECT_EQ(run(), k_exit_gate) << m_output;
  json doc = manifest();
  EXPECT_EQ(doc["status"], "refused:artifacts:a");
  EXPECT_EQ(outcomes()["a"], "refused");
  EXPECT_EQ(outcomes()["b"], "built");
  EXPECT_EQ(outcomes()["a2"], "skipped:a");
  std::string failure = doc["stages"][1]["failure"];
  EXPECT_NE(failure.find("/opt/lib/libb.so is missing"), std::string::npos) << failure;
  EXPECT_EQ(failure.find("liba.so is missing"), std::string::npos) << failure;
  EXPECT_NE(failure.find("2 layers, over the stage's max_layers of 1"), std::string::npos)
      << failure;
}

TEST_F(RunLoop, EveryFailureIsNamedInTheRunStatus) {
  write_wide_chain();
  m_engine.script("a", {FakeBuild::failing("a.c:1:1: error: expected ';'")});
  m_engine.script("c", {FakeBuild::failing("c.c:1:1: error: expected ';'")});
  m_options.parallel = 1; // plan order: a fails before c
  EXPECT_EQ(run(), k_exit_failed) << m_output;
  EXPECT_EQ(manifest()["status"], "failed:a,c");
  EXPECT_EQ(outcomes()["b"], "built");
  EXPECT_EQ(outcomes()["merge"], "skipped:a");
}

TEST_F(RunLoop, FailFastStartsNothingAfterTheFirstFailure) {
  write_wide_chain();
  m_engine.script("a", {FakeBuild::failing("a.c:1:1: error: expected ';'")});
  m_options.parallel = 1;
  m_options.fail_fast = true;
  EXPECT_EQ(run(), k_exit_failed) << m_output;
  EXPECT_EQ(outcomes(), (std::map<std::string, std::string>{{"base", "built"},
                                                            {"a", "failed"},
                                                            {"b", "skipped:a"},
                                                            {"c", "skipped:a"},
                                                            {"a2", "skipped:a"},
                                                            {"merge", "skipped:a"}}));
  EXPECT_EQ(m_engine.builds(), (std::vector<std::string>{"base", "a"}));
}

TEST_F(RunLoop, TheJobBudgetIsSharedByTheStagesThatStartTogether) {
  write_wide_chain();
  m_dir.write("stage.Dockerfile", "FROM scratch\nRUN --mount=type=secret,id=kiln-budget step\n");
  m_options.jobs = 6;
  EXPECT_EQ(run(), k_exit_ok) << m_output;
  json doc = manifest();
  std::map<std::string, int> jobs;
  for (const auto& stage : doc["stages"]) {
    jobs[stage["name"]] = stage["jobs"];
  }
  // base alone takes all 6; a, b and c start together and split them; a2 and merge are alone
  // again by the time they start, or share with what still runs, never over the budget.
  EXPECT_EQ(jobs["base"], 6);
  EXPECT_EQ(jobs["a"] + jobs["b"] + jobs["c"], 6);
  EXPECT_EQ(jobs["a"], 2);
  EXPECT_EQ(jobs["merge"], 6);
}

TEST_F(RunLoop, AStageWhoseDockerfileMountsNoBudgetHoldsOneJobAndLeavesTheRest) {
  write_wide_chain();
  m_dir.write("compile.Dockerfile", "FROM scratch\nRUN --mount=type=secret,id=kiln-budget step\n");
  std::string chain = m_dir.read("chain.toml");
  const std::string a = "name = \"a\"\ndockerfile = \"stage.Dockerfile\"";
  chain.replace(chain.find(a), a.size(), "name = \"a\"\ndockerfile = \"compile.Dockerfile\"");
  m_dir.write("chain.toml", chain);
  m_options.jobs = 6;
  EXPECT_EQ(run(), k_exit_ok) << m_output;
  std::map<std::string, int> jobs;
  json doc = manifest();
  for (const auto& stage : doc["stages"]) {
    jobs[stage["name"]] = stage["jobs"];
  }
  // b and c only hold the memory of a job each: a, which compiles with the budget, takes the rest.
  EXPECT_EQ(jobs, (std::map<std::string, int>{
                      {"base", 1}, {"a", 4}, {"b", 1}, {"c", 1}, {"a2", 1}, {"merge", 1}}));
  EXPECT_NE(m_dir.read("records/latest/driver.log")
                .find("stage a: budget: 4 of the run's 6 slot(s): jobs 4 of 6"),
            std::string::npos);
}

TEST_F(RunLoop, ALaneThatFailsLeavesTheOtherLaneToFinish) {
  m_dir.write("base.Dockerfile", "FROM scratch\nRUN step\n");
  m_dir.write("app.Dockerfile", "FROM base\nRUN step\n");
  m_dir.write("final.Dockerfile", "FROM app\nRUN step\n");
  m_dir.write("chain.toml", "[chain]\nname = \"ln\"\n[defaults]\nattempts = 1\n"
                            "[disk]\nfloor_gb = 0\nguard_gb = 0\n"
                            "[resources]\nsample_interval_s = 0\n"
                            "[[lane]]\nname = \"amd64\"\nplatform = \"linux/amd64\"\n"
                            "[[lane]]\nname = \"arm64\"\nplatform = \"linux/arm64\"\n"
                            "[[stage]]\nname = \"base\"\ndockerfile = \"base.Dockerfile\"\n"
                            "[[stage]]\nname = \"app\"\ndockerfile = \"app.Dockerfile\"\n"
                            "needs = [\"base\"]\n"
                            "[[stage]]\nname = \"final\"\ndockerfile = \"final.Dockerfile\"\n"
                            "needs = [\"app\"]\n");
  m_engine.script("arm64/app", {FakeBuild::failing("app.c:1:1: error: unknown target")});
  EXPECT_EQ(run(), k_exit_failed) << m_output;
  EXPECT_EQ(outcomes(), (std::map<std::string, std::string>{{"amd64/base", "built"},
                                                            {"amd64/app", "built"},
                                                            {"amd64/final", "built"},
                                                            {"arm64/base", "built"},
                                                            {"arm64/app", "failed"},
                                                            {"arm64/final", "skipped:arm64/app"}}));
  json doc = manifest();
  EXPECT_EQ(doc["status"], "failed:arm64/app");
  EXPECT_EQ(doc["stages"][0]["lane"], "amd64");
  EXPECT_EQ(doc["stages"][5]["gates_not_run"], json::array({"image-env", "residue", "arch"}));
  // Each lane's stages have logs of their own.
  EXPECT_TRUE(
      std::filesystem::exists(m_dir.path() / "records/latest/stages/arm64/app.attempt-1.log"));
  EXPECT_NE(m_output.find("[arm64/final] skipped: it needs arm64/app, which did not succeed"),
            std::string::npos)
      << m_output;
}

TEST_F(RunLoop, AnExceptionInOneStageLeavesNoStageOfTheRecordPendingOrRunning) {
  write_wide_chain();
  FakeBuild build = FakeBuild::ok();
  build.during = [] { throw std::runtime_error("a bug"); };
  m_engine.script("a", {build});
  FakeBuild slow = FakeBuild::ok();
  slow.holds = std::chrono::minutes(1); // stopped by the crash, not waited for
  m_engine.script("b", {slow});
  EXPECT_EQ(run(), k_exit_crash) << m_output;
  json doc = manifest();
  EXPECT_EQ(doc["status"], "crashed");
  for (const auto& stage : doc["stages"]) {
    EXPECT_NE(stage["status"], "pending") << stage["name"];
    EXPECT_NE(stage["status"], "running") << stage["name"];
  }
  EXPECT_EQ(outcomes()["a"], "crashed");
  EXPECT_EQ(outcomes()["a2"], "skipped:a");
}

/// Whether `found` turns true within 30 s, polled.
bool within_30s(const std::function<bool()>& found) {
  for (int tenth = 0; tenth < 300; ++tenth) {
    if (found()) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

/// A store whose prune lasts until stage `b` of the run is recorded as ended ok, or 30 s.
class StoreThatWaitsForB : public testing::FakeStore {
public:
  explicit StoreThatWaitsForB(std::filesystem::path manifest) : m_manifest(std::move(manifest)) {}

  LayerPrune prune_layers(double keep_gb) const override {
    m_pruning = true;
    m_saw_b_end = within_30s([&] {
      auto doc = json::parse(read_file(m_manifest).value_or(""), nullptr, false);
      if (doc.is_object() && doc.contains("stages")) {
        for (const auto& stage : doc["stages"]) {
          if (stage["name"] == "b" && stage["status"] == "ok") {
            return true;
          }
        }
      }
      return false;
    });
    return FakeStore::prune_layers(keep_gb);
  }

  std::filesystem::path m_manifest;
  mutable std::atomic<bool> m_pruning{false};
  mutable std::atomic<bool> m_saw_b_end{false};
};

TEST_F(RunLoop, AStageWhoseDiskFloorReclaimsKeepsNoOtherStageFromEndingAndBeingRecorded) {
  // b builds until a's floor reclaims; a (after x, which ends once b builds) has a floor that
  // can never be met, so it reclaims, and its store prune lasts until b's end is recorded. A
  // floor that held the run's record while it reclaimed kept b from being recorded until the
  // prune gave up.
  m_dir.write("stage.Dockerfile", "FROM scratch\nRUN step\n");
  m_dir.write("chain.toml", "[chain]\nname = \"t\"\n\n[defaults]\nattempts = 1\n\n"
                            "[disk]\npath = \"" +
                                m_dir.path().string() +
                                "\"\nneed_gb = 0\nfloor_gb = 0\nguard_gb = 0\n\n"
                                "[resources]\nsample_interval_s = 0\n\n"
                                "[[stage]]\nname = \"b\"\ndockerfile = \"stage.Dockerfile\"\n\n"
                                "[[stage]]\nname = \"x\"\ndockerfile = \"stage.Dockerfile\"\n\n"
                                "[[stage]]\nname = \"a\"\ndockerfile = \"stage.Dockerfile\"\n"
                                "needs = [\"x\"]\ndisk_floor_gb = 100000\n");
  auto chain = load_chain(m_dir.path() / "chain.toml");
  ASSERT_TRUE(chain) << chain.error()[0].message;
  StoreThatWaitsForB store(m_dir.path() / "records/latest/manifest.json");
  store.m_location = m_dir.path();
  FakeBuild b = FakeBuild::ok();
  b.during = [&] { within_30s([&] { return store.m_pruning.load(); }); };
  FakeBuild x = FakeBuild::ok();
  x.during = [&] {
    within_30s([&] {
      auto builds = m_engine.builds();
      return std::find(builds.begin(), builds.end(), "b") != builds.end();
    });
  };
  m_engine.script("b", {b});
  m_engine.script("x", {x});
  m_options.parallel = 2;
  Console console(stdout, false);
  int code = run_chain(*chain, m_engine, m_options, console, stderr, {&store, &m_clock});
  EXPECT_EQ(code, k_exit_failed);
  EXPECT_TRUE(store.m_pruning);
  EXPECT_TRUE(store.m_saw_b_end) << "b was not recorded while a's floor reclaimed";
  EXPECT_EQ(outcomes()["b"], "built");
  EXPECT_EQ(outcomes()["a"], "failed");
}

int RunLoop::run_floors(const std::function<bool()>& until) {
  auto chain = load_chain(m_dir.path() / "chain.toml");
  EXPECT_TRUE(chain) << chain.error()[0].message;
  testing::FakeStore store;
  store.m_location = m_dir.path();
  FakeBuild waits = FakeBuild::ok();
  waits.during = [&] { within_30s(until); };
  m_engine.script("a", {waits});
  m_engine.script("b", {waits});
  m_options.parallel = 2;
  Console console(stdout, false);
  return run_chain(*chain, m_engine, m_options, console, stderr, {&store, &m_clock});
}

TEST_F(RunLoop, TwoFloorsThatFitAloneButNotTogetherOnOneStoreBuildOneAfterTheOther) {
  // Each floor is 60 % of what the store's disk has free: either stage passes alone, both
  // together do not. The first to build holds its floor until the other is seen held back.
  write_floors_chain(0.6);
  std::filesystem::path driver = m_dir.path() / "records/latest/driver.log";
  EXPECT_EQ(run_floors([&] {
              return read_file(driver).value_or("").find(": held back: ") != std::string::npos;
            }),
            k_exit_ok);
  EXPECT_EQ(outcomes(), (std::map<std::string, std::string>{{"a", "built"}, {"b", "built"}}));
  std::string log = read_file(driver).value_or("");
  ASSERT_EQ(occurrences(log, ": held back: "), 1u) << log;
  std::string first = m_engine.builds().at(0);
  std::string second = first == "a" ? "b" : "a";
  EXPECT_NE(log.find("stage " + second + ": held back: "), std::string::npos) << log;
  EXPECT_NE(log.find("held by " + first + " building there; it starts when one of them ends"),
            std::string::npos)
      << log;
  // The second started only once the first had ended, then passed alone.
  EXPECT_GT(event_at("start " + second), event_at("end " + first));
  EXPECT_NE(log.find("[disk] stage " + second + ": "), std::string::npos);
}

TEST_F(RunLoop, TwoFloorsThatFitTogetherOnOneStoreBuildAtOnce) {
  // Each build lasts until both have started: they overlap or the test times out failing.
  write_floors_chain(0.3);
  EXPECT_EQ(run_floors([&] { return m_engine.builds().size() == 2; }), k_exit_ok);
  std::string log = m_dir.read("records/latest/driver.log");
  EXPECT_EQ(occurrences(log, ": held back: "), 0u) << log;
  EXPECT_LT(event_at("start " + m_engine.builds().at(1)),
            event_at("end " + m_engine.builds().at(0)));
  EXPECT_NE(log.find(" beside the "), std::string::npos) << log;
}

TEST_F(RunLoop, ASecondCtrlCKillsABuildTheFirstDidNotStopAndDriverLogSaysSo) {
  // In a child: the interrupt handlers and the token they cancel are the process's own.
  EXPECT_EXIT(
      {
        install_interrupt_handlers();
        write_chain();
        FakeBuild stubborn = FakeBuild::ok();
        stubborn.holds = std::chrono::seconds(60);
        stubborn.stubborn = true;
        m_engine.script("base", {stubborn});
        std::thread user([&] {
          while (m_engine.builds().empty()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
          }
          ::kill(::getpid(), SIGINT);
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          ::kill(::getpid(), SIGINT);
        });
        int code = run();
        user.join();
        std::string driver = m_dir.read("records/latest/driver.log");
        bool ok = code == k_exit_interrupted && manifest()["status"] == "interrupted" &&
                  manifest()["status_reason"] == "interrupted by SIGINT" &&
                  driver.find("a second SIGINT: every build's process group is killed now") !=
                      std::string::npos;
        if (!ok) {
          std::fprintf(stderr, "exit %d\n%s\n%s", code, m_output.c_str(), driver.c_str());
        }
        std::_Exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

} // namespace
} // namespace kiln
