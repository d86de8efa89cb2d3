// kiln run on the buildkit engine, end to end through the real run loop. No buildkitd can run
// here, so `buildctl` is tests/fake_buildctl: it replays the recorded BuildKit v0.11.6 output
// (tests/fixtures/buildkit-v0.11.6) and writes the OCI layouts, metadata and cache exports a
// real build leaves, so the stage handoff between stages is real.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "kiln_harness.h"
#include "local_registry.h"
#include "util/sha256.h"

namespace kiln::testing {
namespace {

using Env = std::vector<std::pair<std::string, std::string>>;
using nlohmann::json;

bool has_word(const json& build, const std::string& word) {
  for (const auto& arg : build["argv"]) {
    if (arg.get<std::string>() == word) {
      return true;
    }
  }
  return false;
}

bool mentions(const json& build, const std::string& text) {
  return build["argv"].dump().find(text) != std::string::npos;
}

std::string file_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// A one-stage chain over the recorded Dockerfile (stages base -> work -> broken), so the
/// fake's recordings and the Dockerfile kiln reads agree.
void write_work_chain(const ChainDir& dir, const std::string& extra_chain,
                      const std::string& extra_stage) {
  dir.write("work.Dockerfile",
            file_text(std::string(KILN_TEST_FIXTURES) + "/buildkit-v0.11.6/Dockerfile.used"));
  dir.write("chain.toml", "[chain]\nname = \"bk" + dir.nonce() + "\"\nengine = \"buildkit\"\n" +
                              extra_chain +
                              "\n[defaults]\ncooldown_s = 0\n\n[[stage]]\nname = \"work\"\n"
                              "dockerfile = \"work.Dockerfile\"\ntarget = \"work\"\n"
                              "lane = \"amd64\"\n" +
                              extra_stage);
}

TEST(BuildkitRun, DemoChainHandsEachStageOverByOciLayoutDigest) {
  ChainDir dir;
  dir.copy_demo_for_replay();
  FakeBuildkit fake(dir);
  KilnResult run = dir.kiln({"run", "--engine", "buildkit", "chain.toml"}, nullptr, fake.env());
  ASSERT_EQ(run.exit_code, 0) << run.output;

  json manifest = dir.latest_manifest();
  EXPECT_EQ(manifest["engine"]["name"], "buildkit");
  EXPECT_EQ(manifest["engine"]["version"], "buildkitd v0.11.6, buildctl v0.11.6");
  std::map<std::string, std::string> digest;
  for (const auto& stage : manifest["stages"]) {
    std::string name = stage["name"];
    EXPECT_EQ(stage["status"], "ok") << name;
    digest[name] = stage["image_id"];
    ASSERT_TRUE(digest[name].starts_with("sha256:")) << name;
    // The digest kiln recorded is the one the layout's index names.
    EXPECT_NE(dir.read("records/oci/" + name + "/index.json").find(digest[name]), std::string::npos)
        << name;
    const json& attempt = stage["attempts"][0];
    EXPECT_EQ(attempt["vertices"], 9) << name; // build-fresh's nine vertices
    EXPECT_EQ(attempt["vertices_cached"], 1) << name;
    EXPECT_EQ(attempt["steps_run"], 4) << name;
  }
  ASSERT_EQ(digest.size(), 5u);
  // Every stage that needs another is handed exactly the digest that stage built.
  auto builds = fake.builds();
  ASSERT_EQ(builds.size(), 5u);
  auto handed = [&](size_t build, const std::string& need) {
    return has_word(builds[build],
                    "context:" + need + "=oci-layout://" + need + "@" + digest[need]) &&
           has_word(builds[build], need + "=" + (dir.path() / "records/oci" / need).string());
  };
  EXPECT_TRUE(handed(1, "base"));
  EXPECT_TRUE(handed(2, "toolchain"));
  EXPECT_TRUE(handed(3, "base"));
  EXPECT_TRUE(handed(3, "libs"));
  EXPECT_TRUE(handed(4, "final"));
  // The digests differ per stage: a handoff of the wrong layout could not pass unseen.
  EXPECT_NE(digest["base"], digest["final"]);

  // A later run of one stage alone finds its need's layout from this run.
  KilnResult only = dir.kiln({"run", "--engine", "buildkit", "--only", "smoke", "chain.toml"},
                             nullptr, fake.env());
  EXPECT_EQ(only.exit_code, 0) << only.output;
  EXPECT_TRUE(
      has_word(fake.builds().back(), "context:final=oci-layout://final@" + digest["final"]));

  // A dry run hands over a need this run builds as what it builds, not as what an earlier run
  // left; and one it does not build as the digest on record.
  KilnResult dry =
      dir.kiln({"run", "--engine", "buildkit", "--dry-run", "--only", "libs,final", "chain.toml"},
               nullptr, fake.env());
  ASSERT_EQ(dry.exit_code, 0) << dry.output;
  EXPECT_NE(dry.output.find("context:toolchain=oci-layout://toolchain@" + digest["toolchain"]),
            std::string::npos)
      << dry.output;
  EXPECT_NE(dry.output.find("context:base=oci-layout://base@" + digest["base"]), std::string::npos)
      << dry.output;
  EXPECT_NE(dry.output.find("context:libs=oci-layout://libs@<libs as built in this run>"),
            std::string::npos)
      << dry.output;
  EXPECT_EQ(dry.output.find(digest["libs"]), std::string::npos) << dry.output;
}

/// Every stage handed over through the registry goes by digest, no tag moving; the final stage
/// (gated) is built to its OCI layout only, and what reaches the registry under its tag is
/// that layout's image, the very digest its gates read, even with --no-cache: never a rebuild.
TEST(BuildkitRun, WithARegistryEveryStageGoesByDigestAndTheGatedImageIsWhatIsPushed) {
  ChainDir dir;
  LocalRegistry registry(dir.path() / "registry");
  ASSERT_TRUE(registry.ready());
  dir.copy_demo_for_replay();
  std::string chain = dir.read("chain.toml");
  chain.replace(chain.find("[chain]\n"), 8,
                "[chain]\nregistry = \"" + registry.host() + "/team\"\nfinal = \"final\"\n");
  chain.insert(chain.find("require_smoke"), "tls_verify = false\n");
  dir.write("chain.toml", chain);
  FakeBuildkit fake(dir);
  KilnResult run =
      dir.kiln({"run", "--engine", "buildkit", "--no-cache", "chain.toml"}, nullptr, fake.env());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  json manifest = dir.latest_manifest();
  json stages = manifest["stages"];
  std::string base_digest = stages[0]["image_id"];
  ASSERT_TRUE(base_digest.starts_with("sha256:"));
  auto builds = fake.builds();
  ASSERT_EQ(builds.size(), 5u) << "one build per stage: nothing is built again to push it";
  EXPECT_TRUE(has_word(builds[0], "type=image,name=" + registry.host() +
                                      "/team/hello-base,push=true,push-by-digest=true"));
  EXPECT_FALSE(mentions(builds[0], "type=oci"));
  EXPECT_TRUE(has_word(builds[1], "context:base=docker-image://" + registry.host() +
                                      "/team/hello-base@" + base_digest));
  EXPECT_FALSE(mentions(builds[1], "--oci-layout"));
  EXPECT_TRUE(mentions(builds[3], "type=oci"));
  EXPECT_FALSE(mentions(builds[3], "push=true"));
  for (const auto& build : builds) {
    EXPECT_TRUE(has_word(build, "--no-cache")) << build.dump();
  }

  // The registry's tag of the final image names an index whose image is the gated one.
  const json& published = manifest["publish"][0];
  EXPECT_EQ(published["ref"], registry.host() + "/team/hello-final:latest");
  EXPECT_EQ(published["status"], "published") << published.dump(2);
  EXPECT_EQ(published["done"], json({"push", "read-back", "tag"}));
  std::string gated =
      json::parse(dir.read("records/oci/final.metadata.json"))["containerimage.digest"];
  EXPECT_EQ(stages[3]["image_id"], gated);
  std::string served = registry.manifest("team/hello-final", "latest");
  ASSERT_FALSE(served.empty()) << "the registry serves no hello-final:latest";
  json index = json::parse(served);
  ASSERT_EQ(index["manifests"].size(), 2u) << index.dump(2); // the image and its attestations
  EXPECT_EQ(index["manifests"][0]["digest"], gated);
  EXPECT_EQ(index["manifests"][1]["annotations"]["vnd.docker.reference.digest"], gated);
  EXPECT_EQ(published["lanes"][0]["digest"], gated);

  // A later run of one stage cannot read a parent that went through the registry: nothing was
  // judged, so the stage does not start and the run says unverified, not refused.
  KilnResult only = dir.kiln({"run", "--engine", "buildkit", "--only", "toolchain", "chain.toml"},
                             nullptr, fake.env());
  EXPECT_EQ(only.exit_code, 4) << only.output;
  json later = dir.latest_manifest();
  EXPECT_EQ(later["status"], "unverified:image-env:toolchain");
  EXPECT_EQ(later["stages"][0]["status"], "unverified") << later["stages"].dump(2);
  EXPECT_NE(later["stages"][0]["failure"].get<std::string>().find("could not read a parent"),
            std::string::npos);
  EXPECT_EQ(fake.builds().size(), 5u) << "the stage was not built";
}

TEST(BuildkitRun, LocalTierMakesTheSecondRunACachedRebuild) {
  ChainDir dir;
  write_work_chain(dir, "\n[cache]\nlocal = true\n", "");
  FakeBuildkit fake(dir);
  ASSERT_EQ(dir.kiln({"run", "chain.toml"}, nullptr, fake.env()).exit_code, 0);
  std::string slug = (dir.path() / "records/cache" / ("bk" + dir.nonce() + "-work-amd64")).string();
  auto builds = fake.builds();
  // The first run has no slug yet: a clean miss, no import; the export creates it.
  EXPECT_FALSE(has_word(builds[0], "type=local,src=" + slug));
  EXPECT_TRUE(has_word(builds[0], "type=local,dest=" + slug + ",mode=max"));

  KilnResult second = dir.kiln({"run", "chain.toml"}, nullptr, fake.env());
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_TRUE(has_word(fake.builds()[1], "type=local,src=" + slug));
  json attempt = dir.latest_manifest()["stages"][0]["attempts"][0];
  EXPECT_EQ(attempt["steps_run"], 4);
  EXPECT_EQ(attempt["steps_cached"], 4);
  EXPECT_EQ(attempt["vertices_cached"], 4);
}

TEST(BuildkitRun, RunFailureIsNotRetriedAndSalvageLandsTheFinishedTargets) {
  ChainDir dir;
  write_work_chain(dir, "\n[cache]\nlocal = true\nsalvage_min_free_gb = 0\n", "");
  FakeBuildkit fake(dir);
  fake.plan("work.Dockerfile build-fail-run build-fresh\n");
  KilnResult run = dir.kiln({"run", "chain.toml"}, nullptr, fake.env());
  EXPECT_EQ(run.exit_code, 1) << run.output;
  json stage = dir.latest_manifest()["stages"][0];
  ASSERT_EQ(stage["attempts"].size(), 1u);
  EXPECT_EQ(stage["attempts"][0]["verdict"], "permanent");
  EXPECT_NE(stage["failure"].get<std::string>().find("no transient pattern matched"),
            std::string::npos)
      << stage["failure"];

  // base and work finished before `broken` failed: each is re-driven as its own target, with
  // nothing registry-facing, its image to scratch, so its local export lands.
  ASSERT_EQ(stage["salvage"].size(), 2u) << stage;
  EXPECT_EQ(stage["salvage"][0]["target"], "base");
  EXPECT_EQ(stage["salvage"][1]["target"], "work");
  EXPECT_EQ(stage["salvage"][1]["verdict"], "ok");
  auto builds = fake.builds();
  ASSERT_EQ(builds.size(), 3u);
  EXPECT_TRUE(has_word(builds[1], "target=base"));
  EXPECT_TRUE(has_word(builds[2], "target=work"));
  EXPECT_FALSE(mentions(builds[2], "/records/oci/work"));
  std::string slug = "records/cache/bk" + dir.nonce() + "-work-amd64/index.json";
  EXPECT_FALSE(dir.read(slug).empty());
  EXPECT_FALSE(dir.read("records/latest/" + stage["salvage"][1]["log"].get<std::string>()).empty());
}

/// The largest peak resident set (VmHWM, in KiB) `pid` reported while it ran.
long peak_rss_kib(int pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) {
      return std::stol(line.substr(6));
    }
  }
  return -1;
}

TEST(BuildkitRun, ThreeHundredMegabytesOfAStepsOutputCostKilnUnder64MiB) {
  ChainDir dir;
  write_work_chain(dir, "", "");
  FakeBuildkit fake(dir);
  fake.plan("work.Dockerfile build-fresh\n");
  const std::string chain = (dir.path() / "chain.toml").string();
  std::atomic<bool> ended{false};
  KilnResult run;
  std::thread kiln([&] {
    run = dir.kiln({"run", chain}, nullptr, fake.env({{"KILN_FAKE_BUILDCTL_LOG_MB", "300"}}));
    ended = true;
  });
  // The kiln process's own peak, read while it runs; VmHWM only grows, so the last reading is
  // as high as any before it.
  long peak = -1;
  while (!ended) {
    for (int pid : processes_matching("run " + chain)) {
      std::string comm;
      std::ifstream("/proc/" + std::to_string(pid) + "/comm") >> comm;
      if (comm == "kiln") {
        peak = std::max(peak, peak_rss_kib(pid));
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kiln.join();
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_GE(std::filesystem::file_size(dir.path() / "records/latest/stages/work.attempt-1.log"),
            300u << 20)
      << "the stage log keeps every byte";
  ASSERT_GT(peak, 0) << "kiln was never seen running";
  std::cout << "kiln's peak resident set through 300 MiB of a step's output: " << peak << " KiB\n";
  EXPECT_LT(peak, 64 * 1024) << "kiln's peak resident set, KiB";
}

TEST(BuildkitRun, EachSalvageTargetIsBoundedByItsTimeout) {
  ChainDir dir;
  write_work_chain(dir,
                   "\n[cache]\nlocal = true\nsalvage_min_free_gb = 0\n"
                   "salvage_target_timeout_s = 0.5\n",
                   "");
  FakeBuildkit fake(dir);
  fake.plan("work.Dockerfile build-fail-run build-fresh\n");
  KilnResult run =
      dir.kiln({"run", "chain.toml"}, nullptr, fake.env({{"KILN_FAKE_BUILDCTL_DELAY_MS", "40"}}));
  EXPECT_EQ(run.exit_code, 1) << run.output;
  json salvage = dir.latest_manifest()["stages"][0]["salvage"];
  ASSERT_EQ(salvage.size(), 2u);
  for (const auto& entry : salvage) {
    EXPECT_EQ(entry["verdict"], "timed-out") << entry;
  }
  EXPECT_TRUE(processes_matching(dir.path().string() + "/work.Dockerfile").empty());
}

TEST(BuildkitRun, SalvageIsSkippedAndSaysSoWhenDiskIsShort) {
  ChainDir dir;
  write_work_chain(dir, "\n[cache]\nlocal = true\nsalvage_min_free_gb = 1000000000\n", "");
  FakeBuildkit fake(dir);
  fake.plan("work.Dockerfile build-fail-run\n");
  KilnResult run = dir.kiln({"run", "chain.toml"}, nullptr, fake.env());
  EXPECT_EQ(run.exit_code, 1);
  json stage = dir.latest_manifest()["stages"][0];
  EXPECT_TRUE(stage["salvage"].empty());
  EXPECT_NE(stage["salvage_note"].get<std::string>().find("below salvage_min_free_gb"),
            std::string::npos)
      << stage["salvage_note"];
  EXPECT_EQ(fake.builds().size(), 1u);

  KilnResult off = dir.kiln({"run", "--no-salvage", "chain.toml"}, nullptr, fake.env());
  EXPECT_EQ(dir.latest_manifest()["stages"][0]["salvage_note"], "--no-salvage");
}

TEST(BuildkitRun, TwoImportFlakesThenTheRegistryIsDroppedAndTheLocalTierFinishes) {
  ChainDir dir;
  write_work_chain(dir, "\n[cache]\nlocal = true\n",
                   "cache_from = [\"type=registry,ref=reg.example/bk/work:cache\"]\n"
                   "cache_to = [\"type=registry,ref=reg.example/bk/work:cache,mode=max\"]\n");
  FakeBuildkit fake(dir);
  fake.plan("work.Dockerfile import-flake import-flake build-fresh\n");
  KilnResult run = dir.kiln({"run", "chain.toml"}, nullptr, fake.env());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  json attempts = dir.latest_manifest()["stages"][0]["attempts"];
  ASSERT_EQ(attempts.size(), 3u);
  for (int i : {0, 1}) {
    EXPECT_EQ(attempts[i]["verdict"], "retry");
    EXPECT_EQ(attempts[i]["transient_class"], "cache-import");
    EXPECT_EQ(attempts[i]["registry_cache_dropped"], false);
  }
  EXPECT_EQ(attempts[2]["verdict"], "ok");
  EXPECT_EQ(attempts[2]["registry_cache_dropped"], true);
  auto builds = fake.builds();
  ASSERT_EQ(builds.size(), 3u);
  EXPECT_TRUE(mentions(builds[0], "reg.example") && mentions(builds[1], "reg.example"));
  EXPECT_FALSE(mentions(builds[2], "reg.example"));
  EXPECT_TRUE(mentions(builds[2], "type=local,dest="));
  std::string driver_log = dir.read("records/latest/driver.log");
  EXPECT_NE(driver_log.find("2 registry cache-import flake(s); attempt 3 drops every "
                            "registry-facing cache argument"),
            std::string::npos)
      << driver_log;
}

TEST(BuildkitRun, ADaemonLostMidBuildIsTheWorkersFailureAndIsRetried) {
  ChainDir dir;
  write_work_chain(dir, "", "");
  FakeBuildkit fake(dir);
  // Killed, then stopped (it cancels its builds), then back.
  fake.plan("work.Dockerfile build-daemon-killed build-daemon-terminated build-fresh\n");
  KilnResult run = dir.kiln({"run", "chain.toml"}, nullptr, fake.env());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  json attempts = dir.latest_manifest()["stages"][0]["attempts"];
  ASSERT_EQ(attempts.size(), 3u);
  for (int i : {0, 1}) {
    EXPECT_EQ(attempts[i]["verdict"], "retry") << attempts[i];
    EXPECT_EQ(attempts[i]["transient_class"], "worker-lost") << attempts[i];
  }
  EXPECT_EQ(attempts[0]["matched_line"],
            "error: failed to receive status: rpc error: code = Unavailable desc = error reading "
            "from server: EOF");
  EXPECT_EQ(attempts[1]["matched_line"], "error: failed to solve: Canceled: context canceled");

  // A daemon lost on every attempt fails the stage as the worker's failure, not the Dockerfile's.
  fake.plan("work.Dockerfile build-daemon-killed\n");
  KilnResult lost = dir.kiln({"run", "chain.toml"}, nullptr, fake.env());
  EXPECT_EQ(lost.exit_code, 1) << lost.output;
  json stage = dir.latest_manifest()["stages"][0];
  EXPECT_EQ(stage["attempts"].size(), 3u) << "retried although identical";
  EXPECT_EQ(stage["attempts"][2]["verdict"], "exhausted");
  EXPECT_NE(stage["failure"].get<std::string>().find("class 'worker-lost'"), std::string::npos)
      << stage["failure"];
  EXPECT_EQ(stage["failure"].get<std::string>().find("script or compile"), std::string::npos)
      << stage["failure"];
  KilnResult analyzed =
      dir.kiln({"logs", "analyze", "latest", "--records", "records", "--format", "json"});
  ASSERT_EQ(analyzed.exit_code, 0) << analyzed.output;
  // The step the daemon was lost at failed, and the daemon's own line says why.
  json errors = json::parse(analyzed.output)["errors"];
  ASSERT_EQ(errors.size(), 3u) << analyzed.output;
  for (const json& error : errors) {
    EXPECT_EQ(error["id"], "#6") << error;
    EXPECT_EQ(error["lines"], json::array({"error: failed to receive status: rpc error: code = "
                                           "Unavailable desc = error reading from server: EOF"}))
        << error;
  }
}

TEST(BuildkitRun, NoCacheExportDropsTheRegistryUpFront) {
  ChainDir dir;
  write_work_chain(dir, "\n[cache]\nlocal = true\n",
                   "cache_from = [\"type=registry,ref=reg.example/bk/work:cache\"]\n"
                   "cache_to = [\"type=registry,ref=reg.example/bk/work:cache,mode=max\"]\n");
  FakeBuildkit fake(dir);
  KilnResult run = dir.kiln({"run", "--no-cache-export", "chain.toml"}, nullptr, fake.env());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_FALSE(mentions(fake.builds()[0], "reg.example"));
  EXPECT_TRUE(mentions(fake.builds()[0], "type=local,dest="));
  EXPECT_NE(dir.read("records/latest/driver.log").find("--no-cache-export"), std::string::npos);
}

TEST(BuildkitRun, ExportToAnUnreachableRegistryFailsTheStageWithBuildkitsReason) {
  ChainDir dir;
  write_work_chain(dir, "",
                   "cache_to = [\"type=registry,ref=127.0.0.1:1/nothing:cache,mode=max\"]\n");
  FakeBuildkit fake(dir);
  fake.plan("work.Dockerfile build-export-registry-unreachable\n");
  KilnResult run = dir.kiln({"run", "chain.toml"}, nullptr, fake.env());
  EXPECT_EQ(run.exit_code, 1);
  json stage = dir.latest_manifest()["stages"][0];
  EXPECT_EQ(stage["attempts"].size(), 1u);
  EXPECT_EQ(stage["attempts"][0]["verdict"], "permanent");
  EXPECT_NE(run.output.find("error writing layer blob"), std::string::npos) << run.output;
}

TEST(BuildkitRun, AClippedLogIsKeptAsBuildkitPrintedItFlaggedAndWarnedOfNextTime) {
  ChainDir dir;
  write_work_chain(dir, "", "");
  FakeBuildkit fake(dir);
  fake.plan("work.Dockerfile build-clipped build-fresh\n");
  KilnResult run = dir.kiln({"run", "chain.toml"}, nullptr, fake.env());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  json stage = dir.latest_manifest()["stages"][0];
  std::string log = dir.read("records/latest/" + stage["attempts"][0]["log"].get<std::string>());
  EXPECT_EQ(log,
            file_text(std::string(KILN_TEST_FIXTURES) + "/buildkit-v0.11.6/build-clipped.stderr"));
  EXPECT_EQ(stage["attempts"][0]["steps_run"], 2);
  EXPECT_EQ(stage["attempts"][0]["clip_lines"],
            json::array({"#5 0.073 [output clipped, log limit 2KiB reached]"}));
  const std::string warned = "warning: stage work: the engine clipped a step's output (#5 0.073 "
                             "[output clipped, log limit 2KiB reached]), so stages/work.attempt-1"
                             ".log misses lines for good; start buildkitd with "
                             "BUILDKIT_STEP_LOG_MAX_SIZE=1073741824 and "
                             "BUILDKIT_STEP_LOG_MAX_SPEED=-1";
  EXPECT_NE(run.output.find(warned), std::string::npos) << run.output;
  std::string driver = dir.read("records/latest/driver.log");
  EXPECT_NE(driver.find(warned), std::string::npos) << driver;
  EXPECT_NE(driver.find("BuildKit keeps at most 1 MiB of a step's output stream"),
            std::string::npos);

  // The next run of the stage is told before it builds.
  KilnResult next = dir.kiln({"run", "chain.toml"}, nullptr, fake.env());
  ASSERT_EQ(next.exit_code, 0) << next.output;
  auto before = next.output.find("warning: stage work: the engine clipped its output in its last "
                                 "run, so that log misses lines for good; start buildkitd with");
  EXPECT_NE(before, std::string::npos) << next.output;
  EXPECT_LT(before, next.output.find("stage work: attempt 1")) << next.output;
  EXPECT_EQ(dir.latest_manifest()["stages"][0]["attempts"][0]["clip_lines"], json::array());
}

TEST(BuildkitRun, RefusedLaunchesNameTheAddressOrTheVersion) {
  ChainDir dir;
  dir.copy_demo();
  FakeBuildkit fake(dir);
  KilnResult unreachable = dir.kiln({"run", "--engine", "buildkit", "chain.toml"}, nullptr,
                                    fake.env({{"KILN_FAKE_BUILDCTL_UNREACHABLE", "1"},
                                              {"BUILDKIT_HOST", "tcp://192.0.2.7:1234"}}));
  EXPECT_EQ(unreachable.exit_code, 2);
  EXPECT_NE(unreachable.output.find("buildkitd is unreachable at tcp://192.0.2.7:1234 (from "
                                    "BUILDKIT_HOST)"),
            std::string::npos)
      << unreachable.output;

  KilnResult old = dir.kiln({"run", "--engine", "buildkit", "chain.toml"}, nullptr,
                            fake.env({{"KILN_FAKE_BUILDKIT_VERSION", "v0.10.6"}}));
  EXPECT_EQ(old.exit_code, 2);
  EXPECT_NE(old.output.find("uses --oci-layout (stage handoff without a registry), which needs "
                            "BuildKit v0.11 or newer, but buildctl at PATH is v0.10.6"),
            std::string::npos)
      << old.output;
  EXPECT_TRUE(fake.builds().empty()); // refused before anything was built
}

TEST(BuildkitRun, AVersionThatNamesNoReleaseWarnsAndTheRunGoesOn) {
  ChainDir dir;
  dir.copy_demo_for_replay();
  FakeBuildkit fake(dir);
  // What buildctl and buildkitd built from source without a version stamp report.
  KilnResult run = dir.kiln({"run", "--engine", "buildkit", "chain.toml"}, nullptr,
                            fake.env({{"KILN_FAKE_BUILDKIT_VERSION", "0.0.0+unknown"}}));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(fake.builds().size(), 5u);
  json manifest = dir.latest_manifest();
  EXPECT_EQ(manifest["engine"]["version"], "buildkitd 0.0.0+unknown, buildctl 0.0.0+unknown");
  EXPECT_EQ(manifest["status"], "ok");
  const std::string daemon = "warning: buildkitd at unix:///run/buildkit/buildkitd.sock "
                             "(buildctl's default) reports version 0.0.0+unknown, which names no "
                             "BuildKit release";
  const std::string client = "warning: buildctl at PATH reports version 0.0.0+unknown, which "
                             "names no BuildKit release";
  std::string driver_log = dir.read("records/latest/driver.log");
  for (const std::string* text : {&run.output, &driver_log}) {
    EXPECT_NE(text->find(daemon), std::string::npos) << *text;
    EXPECT_NE(text->find(client), std::string::npos) << *text;
    EXPECT_NE(text->find("--oci-layout (stage handoff without a registry) from v0.11"),
              std::string::npos)
        << *text;
  }
}

TEST(BuildkitRun, TheVersionAndGcProbesRunAtOnce) {
  ChainDir dir;
  write_work_chain(dir, "", "");
  FakeBuildkit fake(dir);
  // Each probe takes a while, as a real one does: one after the other they cannot overlap.
  KilnResult run =
      dir.kiln({"run", "chain.toml"}, nullptr, fake.env({{"KILN_FAKE_BUILDCTL_PROBE_MS", "400"}}));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::map<std::string, json> probes;
  int64_t first_build = 0;
  std::istringstream in(dir.read("buildctl.log"));
  for (std::string line; std::getline(in, line);) {
    json entry = json::parse(line);
    if (entry["command"] == "build" && first_build == 0) {
      first_build = entry["started_ns"];
    } else if (entry["command"] != "build") {
      EXPECT_EQ(probes.count(entry["command"]), 0u) << "probed twice: " << line;
      probes[entry["command"]] = entry;
    }
  }
  // The two versions and the GC policy (`debug workers -v`).
  ASSERT_EQ(probes.size(), 3u) << dir.read("buildctl.log");
  for (const auto& [name, one] : probes) {
    for (const auto& [other_name, other] : probes) {
      // Overlap: each started before every other ended.
      EXPECT_LT(one["started_ns"].get<int64_t>(), other["ended_ns"].get<int64_t>())
          << name << " after " << other_name;
    }
    // And all answered before anything was built.
    EXPECT_LT(one["ended_ns"].get<int64_t>(), first_build) << name;
  }
}

/// A Unix socket something listens on, as a local buildkitd's is (nothing answers on it).
class ListeningSocket {
public:
  explicit ListeningSocket(const std::filesystem::path& path) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::string text = path.string();
    EXPECT_LT(text.size(), sizeof(address.sun_path));
    text.copy(address.sun_path, sizeof(address.sun_path) - 1);
    m_fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_EQ(::bind(m_fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0)
        << path;
    EXPECT_EQ(::listen(m_fd, 16), 0);
  }
  ~ListeningSocket() { stop(); }
  ListeningSocket(const ListeningSocket&) = delete;
  ListeningSocket& operator=(const ListeningSocket&) = delete;

  /// Stop listening and leave the socket file behind, as a killed daemon does.
  void stop() {
    if (m_fd >= 0) {
      ::close(m_fd);
      m_fd = -1;
    }
  }

private:
  int m_fd = -1;
};

TEST(BuildkitRun, VersionsAreAskedAgainOnlyWhenBuildctlOrTheDaemonSocketChanged) {
  ChainDir dir;
  write_work_chain(dir, "", "");
  FakeBuildkit fake(dir);
  std::filesystem::path socket = dir.path() / "bk.sock";
  auto env = fake.env({{"BUILDKIT_HOST", "unix://" + socket.string()}});
  // How many probes each run made: the log grows by one line per invocation.
  size_t seen = 0;
  auto probes_of_next_run = [&](const std::string& when) {
    KilnResult run = dir.kiln({"run", "chain.toml"}, nullptr, env);
    EXPECT_EQ(run.exit_code, 0) << when << "\n" << run.output;
    std::vector<std::string> probes;
    std::istringstream in(dir.read("buildctl.log"));
    size_t line_number = 0;
    for (std::string line; std::getline(in, line); ++line_number) {
      json entry = json::parse(line);
      if (line_number >= seen && entry["command"] != "build") {
        probes.push_back(entry["command"]);
      }
    }
    seen = line_number;
    std::sort(probes.begin(), probes.end());
    return probes;
  };
  // The versions, and the GC policy asked with them (`debug workers -v`).
  const std::vector<std::string> both = {"--version", "debug info", "debug workers"};

  auto daemon = std::make_unique<ListeningSocket>(socket);
  EXPECT_EQ(probes_of_next_run("first run"), both);
  EXPECT_EQ(probes_of_next_run("same buildctl, same daemon"), std::vector<std::string>{});
  json manifest = json::parse(dir.read("records/latest/manifest.json"));
  EXPECT_EQ(manifest["engine"]["version"], "buildkitd v0.11.6, buildctl v0.11.6");
  EXPECT_NE(dir.read("records/latest/driver.log").find("so not asked again"), std::string::npos);

  // A restarted daemon binds a new socket.
  daemon.reset();
  std::filesystem::remove(socket);
  daemon = std::make_unique<ListeningSocket>(socket);
  EXPECT_EQ(probes_of_next_run("daemon restarted"), both);
  EXPECT_EQ(probes_of_next_run("same again"), std::vector<std::string>{});

  // A dead daemon's socket file is still there, but nothing listens: asked, so that an
  // unreachable daemon is reported as such before anything is built.
  daemon->stop();
  EXPECT_EQ(probes_of_next_run("daemon gone"), both);
}

} // namespace
} // namespace kiln::testing

namespace kiln::testing {
namespace {

TEST(BuildkitCacheSnapshot, ReDrivesAGreenStageWithTheRegistryExportAndMeasuresIt) {
  ChainDir dir;
  write_work_chain(dir, "\n[cache]\nlocal = true\n",
                   "snapshot_cache_to = \"type=registry,ref=reg.example/bk/work:snap,mode=max\"\n");
  FakeBuildkit fake(dir);
  KilnResult refused = dir.kiln({"cache", "snapshot", "chain.toml", "work"}, nullptr, fake.env());
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.output.find("stage 'work' has no green build"), std::string::npos)
      << refused.output;

  // The recorded cache export wrote five blobs; the local export holds two of them.
  fake.plan("work.Dockerfile build-fresh build-fresh build-export-registry-unreachable\n");
  ASSERT_EQ(dir.kiln({"run", "chain.toml"}, nullptr, fake.env()).exit_code, 0);
  std::string slug = "records/cache/bk" + dir.nonce() + "-work-amd64/blobs/sha256/";
  dir.write(slug + "3907e4cb0dc8b429290241a1d3855c5e0e6b7cac4ef49cbdd6082b550fe509f8",
            std::string(1000, 'a'));
  dir.write(slug + "4f4fb700ef54461cfa02571ae0db9a0dc1e0cdb5577484a6d75e68dc38e8acc1",
            std::string(234, 'b'));
  std::string metadata = dir.read("records/oci/work.metadata.json");
  std::string run_id = dir.latest_manifest()["run_id"];

  KilnResult snapshot = dir.kiln({"cache", "snapshot", "chain.toml", "work"}, nullptr, fake.env());
  ASSERT_EQ(snapshot.exit_code, 0) << snapshot.output;
  EXPECT_NE(snapshot.output.find("snapshot of work pushed 5 blob(s)"), std::string::npos)
      << snapshot.output;
  auto builds = fake.builds();
  ASSERT_EQ(builds.size(), 2u);
  EXPECT_TRUE(has_word(builds[1], "type=registry,ref=reg.example/bk/work:snap,mode=max"));
  EXPECT_FALSE(mentions(builds[1], "type=local,dest=")); // the local tier is read, not rewritten
  EXPECT_TRUE(mentions(builds[1], "type=local,src="));
  // Off the critical path: no run record, and the stage's image is still its green build's.
  EXPECT_EQ(dir.latest_manifest()["run_id"], run_id);
  EXPECT_EQ(dir.read("records/oci/work.metadata.json"), metadata);
  std::filesystem::path folder;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path() / "records/snapshots")) {
    folder = entry.path();
  }
  json record = json::parse(file_text(folder / "snapshot.json"));
  EXPECT_EQ(record["status"], "ok");
  EXPECT_EQ(record["green_run"], run_id);
  EXPECT_EQ(record["blobs"], 5);
  EXPECT_EQ(record["bytes"], 1234);
  EXPECT_EQ(record["unsized_blobs"], 3);

  // A failed upload fails the snapshot, never the build it copies.
  KilnResult failed = dir.kiln({"cache", "snapshot", "chain.toml", "work"}, nullptr, fake.env());
  EXPECT_EQ(failed.exit_code, 1);
  EXPECT_NE(failed.output.find("the stage's green build is untouched"), std::string::npos)
      << failed.output;
  EXPECT_EQ(dir.read("records/oci/work.metadata.json"), metadata);
  EXPECT_EQ(dir.latest_manifest()["stages"][0]["status"], "ok");
}

TEST(BuildkitCacheSnapshot, AnInterruptedUploadStopsAndLeavesTheBuildAlone) {
  ChainDir dir;
  write_work_chain(dir, "\n[cache]\nlocal = true\n",
                   "snapshot_cache_to = \"type=registry,ref=reg.example/bk/work:snap,mode=max\"\n");
  FakeBuildkit fake(dir);
  ASSERT_EQ(dir.kiln({"run", "chain.toml"}, nullptr, fake.env()).exit_code, 0);
  std::string metadata = dir.read("records/oci/work.metadata.json");
  CancelToken ctrl_c;
  std::thread interrupter([&] {
    // The fake replays a line every 200 ms: press Ctrl-C once it is well under way.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (processes_matching("reg.example/bk/work:snap").empty() &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    ctrl_c.cancel();
  });
  KilnResult snapshot = dir.kiln({"cache", "snapshot", "chain.toml", "work"}, &ctrl_c,
                                 fake.env({{"KILN_FAKE_BUILDCTL_DELAY_MS", "200"}}));
  interrupter.join();
  EXPECT_EQ(snapshot.exit_code, 130) << snapshot.output;
  EXPECT_TRUE(processes_matching("reg.example/bk/work:snap").empty());
  EXPECT_EQ(dir.read("records/oci/work.metadata.json"), metadata);
  EXPECT_NE(snapshot.output.find("snapshot interrupted"), std::string::npos) << snapshot.output;
}

TEST(BuildkitCacheSnapshot, AStageWithoutASnapshotExportIsRefused) {
  ChainDir dir;
  write_work_chain(dir, "", "");
  FakeBuildkit fake(dir);
  KilnResult refused = dir.kiln({"cache", "snapshot", "chain.toml", "work"}, nullptr, fake.env());
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.output.find("stage 'work' has no snapshot_cache_to"), std::string::npos)
      << refused.output;
}

/// The demo chain in two lanes on two daemons, `final` its published stage, its index pushed to
/// `registry` (a plain-HTTP one on loopback).
struct TwoLaneChain {
  TwoLaneChain(const ChainDir& dir, const LocalRegistry& registry)
      : dir(dir), registry(registry), fake(dir),
        amd64("unix://" + (dir.path() / "amd64.sock").string()), arm64("tcp://127.0.0.1:1235"),
        index(registry.host() + "/demo/app:1.0") {
    dir.copy_demo_for_replay();
    std::string chain = dir.read("chain.toml");
    chain.insert(chain.find("require_smoke"), "index = \"" + index + "\"\ntls_verify = false\n");
    chain.insert(chain.find("records = "), "final = \"final\"\n");
    chain.insert(chain.find("[[stage]]"),
                 "[[lane]]\nname = \"amd64\"\nplatform = \"linux/amd64\"\nhost = \"" + amd64 +
                     "\"\n\n[[lane]]\nname = \"arm64\"\nplatform = \"linux/arm64\"\nhost = \"" +
                     arm64 + "\"\n\n");
    dir.write("chain.toml", chain);
  }

  KilnResult run() const {
    return dir.kiln({"run", "--engine", "buildkit", "chain.toml"}, nullptr, env());
  }

  /// Both daemons offer both lanes' platforms: the recorded amd64 one's, and arm64 as a daemon
  /// with an arm64 emulator registered lists it.
  Env env() const {
    return fake.env({{"KILN_FAKE_BUILDKIT_PLATFORMS",
                      "linux/amd64,linux/amd64/v2,linux/amd64/v3,linux/amd64/v4,linux/arm64"}});
  }

  /// What the registry serves under the index's reference, read with its own API: each
  /// platform image's digest by its platform; nothing when it has no such index.
  std::map<std::string, std::string> served() const {
    std::map<std::string, std::string> entries;
    std::string text = registry.manifest("demo/app", "1.0");
    if (text.empty()) {
      return entries;
    }
    json index = json::parse(text);
    for (const auto& entry : index["manifests"]) {
      std::string platform = entry["platform"]["os"].get<std::string>() + "/" +
                             entry["platform"]["architecture"].get<std::string>();
      if (platform != "unknown/unknown") {
        entries[platform] = entry["digest"];
      }
    }
    return entries;
  }

  /// The in-toto statement of `predicate_type` the attestation manifest `attestation` holds.
  json statement(const std::string& attestation, const std::string& predicate_type) const {
    json manifest = json::parse(registry.manifest("demo/app", attestation));
    for (const auto& layer : manifest["layers"]) {
      if (layer["annotations"]["in-toto.io/predicate-type"] == predicate_type) {
        return json::parse(registry.blob("demo/app", layer["digest"]));
      }
    }
    return json();
  }

  /// The digest the metadata of `stage`'s last build in `lane` names: its image as gated.
  std::string gated(const std::string& lane, const std::string& stage) const {
    return json::parse(
        dir.read("records/oci/" + lane + "/" + stage + ".metadata.json"))["containerimage.digest"];
  }

  const ChainDir& dir;
  const LocalRegistry& registry;
  FakeBuildkit fake;
  std::string amd64, arm64, index;
};

/// A lane whose platform its daemon does not list is refused before anything builds: the
/// recorded amd64 daemon built "linux/s390x" with its own binaries when asked.
TEST(BuildkitRun, ALanePlatformItsDaemonDoesNotOfferIsRefusedBeforeAnythingBuilds) {
  ChainDir dir;
  write_work_chain(dir, "", "");
  std::string chain = dir.read("chain.toml");
  chain.replace(chain.find("lane = \"amd64\"\n"), 15, "");
  chain.insert(chain.find("[[stage]]"),
               "[[lane]]\nname = \"amd64\"\nplatform = \"linux/amd64/v3\"\n\n[[lane]]\n"
               "name = \"s390x\"\nplatform = \"linux/s390x\"\n\n");
  dir.write("chain.toml", chain);
  FakeBuildkit fake(dir);
  KilnResult refused = dir.kiln({"run", "chain.toml"}, nullptr, fake.env());
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find(
                "stage(s) s390x/work build for linux/s390x, which the BuildKit daemon at the "
                "chain's address ([engine.buildkit] host, else BUILDKIT_HOST, else buildctl's "
                "default) does not offer (it offers linux/amd64, linux/amd64/v2, linux/amd64/v3, "
                "linux/amd64/v4)"),
            std::string::npos)
      << refused.output;
  EXPECT_EQ(refused.output.find("amd64/work build for"), std::string::npos) << refused.output;
  EXPECT_TRUE(fake.builds().empty());
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "records" / "latest"));

  // With an s390x emulator registered the daemon lists it, and both lanes build.
  KilnResult emulated = dir.kiln(
      {"run", "chain.toml"}, nullptr,
      fake.env({{"KILN_FAKE_BUILDKIT_PLATFORMS",
                 "linux/amd64,linux/amd64/v2,linux/amd64/v3,linux/amd64/v4,linux/s390x"}}));
  EXPECT_EQ(emulated.exit_code, 0) << emulated.output;
  EXPECT_EQ(fake.builds().size(), 2u);
}

std::map<std::string, std::string> stage_outcomes(const json& manifest) {
  std::map<std::string, std::string> outcomes;
  for (const auto& stage : manifest["stages"]) {
    outcomes[stage["name"].get<std::string>()] = stage["outcome"].get<std::string>();
  }
  return outcomes;
}

/// Two lanes of the demo chain on two daemons: each lane's builds go to its own address with
/// its platform, arm64 failing at its second stage leaves amd64 to finish, and the index,
/// missing arm64's image, is not pushed.
TEST(BuildkitRun, TwoLanesBuildOnTheirOwnDaemonsAndAFailedLaneLeavesTheOtherToFinish) {
  ChainDir dir;
  LocalRegistry registry(dir.path() / "registry");
  ASSERT_TRUE(registry.ready());
  TwoLaneChain lanes(dir, registry);
  lanes.fake.plan("toolchain.Dockerfile@" + lanes.arm64 + " build-fail-run\n");
  KilnResult run = lanes.run();
  EXPECT_EQ(run.exit_code, 1) << run.output;

  json manifest = dir.latest_manifest();
  EXPECT_EQ(manifest["status"], "failed:arm64/toolchain");
  std::map<std::string, std::string> outcomes = stage_outcomes(manifest);
  for (const char* stage : {"base", "toolchain", "libs", "final", "smoke"}) {
    EXPECT_EQ(outcomes[std::string("amd64/") + stage], "built") << stage << "\n" << run.output;
  }
  EXPECT_EQ(outcomes["arm64/base"], "built");
  EXPECT_EQ(outcomes["arm64/toolchain"], "failed");
  EXPECT_EQ(outcomes["arm64/libs"], "skipped:arm64/toolchain");
  EXPECT_EQ(outcomes["arm64/smoke"], "skipped:arm64/toolchain");

  // Every build went to its lane's daemon with its lane's platform, and found the images of
  // its own lane.
  std::vector<json> builds = lanes.fake.builds();
  EXPECT_EQ(builds.size(), 7u);
  for (const auto& build : builds) {
    bool on_arm64 = mentions(build, "/oci/arm64/");
    EXPECT_NE(on_arm64, mentions(build, "/oci/amd64/")) << build.dump();
    EXPECT_EQ(build["addr"], on_arm64 ? lanes.arm64 : lanes.amd64) << build.dump();
    EXPECT_TRUE(has_word(build, on_arm64 ? "platform=linux/arm64" : "platform=linux/amd64"))
        << build.dump();
  }

  // The publish is blocked: arm64 has no final image, so the gates after completeness and the
  // push and what follows it did not run, and the registry holds nothing under the reference.
  const json& index = manifest["publish"][0];
  EXPECT_EQ(index["ref"], lanes.index);
  EXPECT_EQ(index["status"], "blocked");
  ASSERT_EQ(index["lanes"].size(), 2u);
  EXPECT_EQ(index["lanes"][0]["lane"], "amd64");
  EXPECT_EQ(index["lanes"][0]["image"], "built-this-run");
  EXPECT_EQ(index["lanes"][1]["image"], "missing");
  EXPECT_EQ(index["lanes"][1]["detail"], "arm64/final ended skipped:arm64/toolchain");
  EXPECT_EQ(index["gates"][0]["gate"], "completeness");
  EXPECT_EQ(index["gates"][0]["verdict"], "refused");
  EXPECT_EQ(index["gates_not_run"],
            json({"smoke", "coherence", "push", "read-back", "sign", "tag"}));
  EXPECT_NE(run.output.find("publish " + lanes.index + ": blocked"), std::string::npos)
      << run.output;
  EXPECT_TRUE(lanes.served().empty());
}

/// Both lanes green: one index naming both platforms, each with its attestation manifest of
/// SLSA provenance and an SPDX SBOM about that very image, pushed to a real registry, read
/// back and verified; a later run whose arm64 final stage fails pushes nothing over it.
TEST(BuildkitRun, BothLanesGreenPublishOneAttestedIndexAndALaterFailedLaneLeavesIt) {
  ChainDir dir;
  LocalRegistry registry(dir.path() / "registry");
  ASSERT_TRUE(registry.ready());
  TwoLaneChain lanes(dir, registry);
  lanes.fake.plan("final.Dockerfile@" + lanes.arm64 + " build-fresh build-fail-run\n");
  KilnResult first = lanes.run();
  ASSERT_EQ(first.exit_code, 0) << first.output;

  json manifest = dir.latest_manifest();
  const json& index = manifest["publish"][0];
  EXPECT_EQ(index["status"], "published") << index.dump(2);
  std::string digest = index["digest"];
  EXPECT_NE(first.output.find("kiln: publish " + lanes.index + ": published " + digest +
                              "; amd64 built-this-run, arm64 built-this-run"),
            std::string::npos)
      << first.output;
  ASSERT_EQ(index["gates"].size(), 3u);
  for (const auto& gate : index["gates"]) {
    EXPECT_EQ(gate["verdict"], "pass") << gate.dump();
  }
  // The tag names the index pushed, byte for byte.
  EXPECT_EQ(sha256_digest(registry.manifest("demo/app", "1.0")), digest);
  // One entry per platform, each the image its lane built and its gates read.
  std::map<std::string, std::string> served = lanes.served();
  ASSERT_EQ(served.size(), 2u) << registry.manifest("demo/app", "1.0");
  EXPECT_NE(served["linux/amd64"], served["linux/arm64"]);
  for (const auto& lane : index["lanes"]) {
    std::string name = lane["lane"];
    std::string platform = lane["platform"];
    EXPECT_EQ(lane["image"], "built-this-run");
    EXPECT_EQ(served[platform], lane["digest"]) << platform;
    EXPECT_EQ(served[platform], lanes.gated(name, "final")) << platform;
    EXPECT_EQ(lane["identity"], lanes.gated(name, "final"));

    // Its provenance: about that digest, naming every stage it is built on by its digest.
    json provenance = lanes.statement(lane["attestation"], "https://slsa.dev/provenance/v1");
    ASSERT_TRUE(provenance.is_object()) << lane.dump();
    EXPECT_EQ(provenance["_type"], "https://in-toto.io/Statement/v1");
    EXPECT_EQ(provenance["subject"][0]["digest"]["sha256"],
              served[platform].substr(std::string("sha256:").size()));
    const json& definition = provenance["predicate"]["buildDefinition"];
    EXPECT_EQ(definition["externalParameters"]["platform"], platform);
    EXPECT_EQ(definition["externalParameters"]["lane"], name);
    std::map<std::string, std::string> dependencies;
    for (const auto& dependency : definition["resolvedDependencies"]) {
      if (dependency.contains("digest")) {
        dependencies[dependency["name"]] =
            "sha256:" + dependency["digest"]["sha256"].get<std::string>();
      }
    }
    for (const char* parent : {"base", "toolchain", "libs"}) {
      EXPECT_EQ(dependencies["stage " + name + "/" + parent], lanes.gated(name, parent))
          << parent << "\n"
          << provenance.dump(2);
    }
    EXPECT_TRUE(dependencies.count("Dockerfile of " + name + "/final")) << provenance.dump(2);
    EXPECT_EQ(provenance["predicate"]["runDetails"]["metadata"]["invocationId"],
              manifest["run_id"]);

    // Its SBOM: SPDX 2.3, about that digest (the fake's images hold no layers: no packages).
    json sbom = lanes.statement(lane["attestation"], "https://spdx.dev/Document");
    ASSERT_TRUE(sbom.is_object()) << lane.dump();
    EXPECT_EQ(sbom["subject"][0]["digest"]["sha256"],
              served[platform].substr(std::string("sha256:").size()));
    EXPECT_EQ(sbom["predicate"]["spdxVersion"], "SPDX-2.3");
  }

  // `kiln attest verify` reads it all back: every platform has both.
  KilnResult verified =
      dir.kiln({"attest", "verify", lanes.index, "--tls-verify=false"}, nullptr, lanes.env());
  EXPECT_EQ(verified.exit_code, 0) << verified.output;
  EXPECT_NE(verified.output.find("2 platform image(s), each with its provenance and SBOM"),
            std::string::npos)
      << verified.output;
  // An index that lost one attestation manifest on the way: refused, naming the platform.
  json tampered = json::parse(registry.manifest("demo/app", "1.0"));
  auto& entries = tampered["manifests"];
  for (auto entry = entries.begin(); entry != entries.end(); ++entry) {
    if ((*entry)["annotations"]["vnd.docker.reference.digest"] == served["linux/arm64"]) {
      entries.erase(entry);
      break;
    }
  }
  ASSERT_TRUE(registry.put_manifest("demo/app", "tampered", tampered.dump(),
                                    "application/vnd.oci.image.index.v1+json"));
  KilnResult refused =
      dir.kiln({"attest", "verify", registry.host() + "/demo/app:tampered", "--tls-verify=false"},
               nullptr, lanes.env());
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_NE(refused.output.find("kiln: refused: linux/arm64 " + served["linux/arm64"] +
                                ": no attestation manifest refers to it"),
            std::string::npos)
      << refused.output;

  KilnResult second = lanes.run();
  EXPECT_EQ(second.exit_code, 1) << second.output;
  json later = dir.latest_manifest();
  EXPECT_EQ(later["status"], "failed:arm64/final");
  const json& blocked = later["publish"][0];
  EXPECT_EQ(blocked["status"], "blocked");
  EXPECT_EQ(blocked["lanes"][0]["image"], "built-this-run");
  // The first run's image is still in arm64's layout folder; this run's publish never takes it.
  EXPECT_EQ(blocked["lanes"][1]["image"], "missing");
  EXPECT_NE(second.output.find("kiln: publish " + lanes.index +
                               ": blocked; amd64 built-this-run, arm64 missing; not run: smoke, "
                               "coherence, push, read-back, sign, tag"),
            std::string::npos)
      << second.output;
  // The registry still serves the first run's good index.
  EXPECT_EQ(lanes.served(), served);
  EXPECT_EQ(sha256_digest(registry.manifest("demo/app", "1.0")), digest);
}

/// Both lanes green, but no registry answers where the index goes: a refused connection is not
/// a flake, so the push fails at once, and the run says `failed:publish` with the command and
/// its words, every stage built.
TEST(BuildkitRun, AnIndexWhoseRegistryRefusesTheConnectionFailsTheRunAsPublish) {
  ChainDir dir;
  LocalRegistry registry(dir.path() / "registry");
  ASSERT_TRUE(registry.ready());
  TwoLaneChain lanes(dir, registry);
  std::string chain = dir.read("chain.toml");
  chain.replace(chain.find(registry.host()), registry.host().size(), "127.0.0.1:9");
  dir.write("chain.toml", chain);
  KilnResult run = lanes.run();
  EXPECT_EQ(run.exit_code, 1) << run.output;

  json manifest = dir.latest_manifest();
  EXPECT_EQ(manifest["status"], "failed:publish");
  for (const auto& [stage, outcome] : stage_outcomes(manifest)) {
    EXPECT_EQ(outcome, "built") << stage;
  }
  const json& index = manifest["publish"][0];
  EXPECT_EQ(index["status"], "failed");
  EXPECT_NE(index["failure"].get<std::string>().find("skopeo copy"), std::string::npos)
      << index.dump(2);
  EXPECT_NE(index["failure"].get<std::string>().find("connection refused"), std::string::npos)
      << index.dump(2);
  EXPECT_EQ(index["gates_not_run"], json({"push", "read-back", "sign", "tag"}));
  std::string log = dir.read("records/latest/publish.log");
  EXPECT_NE(log.find("[kiln] publish attempt 1/3"), std::string::npos) << log;
  EXPECT_EQ(log.find("[kiln] publish attempt 2/3"), std::string::npos) << log;
}

/// A lane whose final image built but whose smoke stage failed has not shipped a tested image:
/// the publish is blocked, naming the stage, and nothing reaches the registry.
TEST(BuildkitRun, ALaneWhoseSmokeStageFailedBlocksThePublish) {
  ChainDir dir;
  LocalRegistry registry(dir.path() / "registry");
  ASSERT_TRUE(registry.ready());
  TwoLaneChain lanes(dir, registry);
  lanes.fake.plan("smoke.Dockerfile@" + lanes.arm64 + " build-fail-run\n");
  KilnResult run = lanes.run();
  EXPECT_EQ(run.exit_code, 1) << run.output;
  json manifest = dir.latest_manifest();
  EXPECT_EQ(manifest["status"], "failed:arm64/smoke");
  const json& index = manifest["publish"][0];
  EXPECT_EQ(index["status"], "blocked");
  EXPECT_EQ(index["lanes"][1]["image"], "built-this-run"); // the image is there, untested
  EXPECT_EQ(index["gates"][0]["findings"], json({"lane arm64: arm64/smoke ended failed"}));
  EXPECT_TRUE(lanes.served().empty());
  EXPECT_TRUE(registry.manifest("demo/app", "1.0").empty());
}

/// With stages handed over through a registry (by digest), the final stage is still built to
/// its layout: the index is judged and assembled from that gated copy.
TEST(BuildkitRun, WithARegistryHandoffTheIndexIsAssembledFromTheGatedLayouts) {
  ChainDir dir;
  LocalRegistry registry(dir.path() / "registry");
  ASSERT_TRUE(registry.ready());
  TwoLaneChain lanes(dir, registry);
  std::string chain = dir.read("chain.toml");
  chain.insert(chain.find("records = "), "registry = \"" + registry.host() + "/handoff\"\n");
  dir.write("chain.toml", chain);
  KilnResult run = lanes.run();
  ASSERT_EQ(run.exit_code, 0) << run.output;
  json manifest = dir.latest_manifest();
  EXPECT_EQ(manifest["publish"].size(), 1u) << "the index alone is published";
  EXPECT_EQ(manifest["publish"][0]["status"], "published") << manifest["publish"].dump(2);
  std::map<std::string, std::string> served = lanes.served();
  EXPECT_EQ(served.size(), 2u);
  EXPECT_EQ(served["linux/arm64"], lanes.gated("arm64", "final"));
}

/// Publishing needs skopeo whatever the engine: without it the run is refused before anything
/// builds, not after.
TEST(BuildkitRun, APublishWithoutSkopeoIsRefusedBeforeAnythingBuilds) {
  ChainDir dir;
  LocalRegistry registry(dir.path() / "registry");
  ASSERT_TRUE(registry.ready());
  TwoLaneChain lanes(dir, registry);
  Env env = lanes.env();
  for (auto& [name, value] : env) {
    if (name == "PATH") {
      value = KILN_FAKE_BUILDCTL_DIR; // buildctl, and no skopeo
    }
  }
  KilnResult run = dir.kiln({"run", "--engine", "buildkit", "chain.toml"}, nullptr, env);
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("the chain publishes ([publish] index), which kiln pushes with "
                            "skopeo, and skopeo is not usable"),
            std::string::npos)
      << run.output;
  EXPECT_TRUE(lanes.fake.builds().empty());
}

} // namespace
} // namespace kiln::testing
