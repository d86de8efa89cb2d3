// kiln run with its guards: the resource sampler and job budget on a real buildah demo run,
// and the disk guard on a real tmpfs the test mounts (BuildKit stages through the fake
// buildctl, which also replays the store's du and prune).
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <sys/mount.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "kiln_harness.h"

namespace kiln::testing {
namespace {

using nlohmann::json;
using Env = std::vector<std::pair<std::string, std::string>>;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
  }
  return lines;
}

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

TEST(RunResources, DemoSamplesEveryPhaseAndOffersTheBudget) {
  ChainDir dir;
  dir.copy_demo();
  std::string chain = dir.read("chain.toml");
  chain.replace(chain.find("name = \"hello\""), 14, "name = \"hello-" + dir.nonce() + "\"");
  dir.write("chain.toml", chain + "\n[resources]\nsample_interval_s = 0.2\n");
  // A LIB_FLAGS of this test's own makes the libs RUN miss the layer cache: the budget is a
  // secret, so it is (rightly) no part of the key and would not rebuild it.
  KilnResult run = dir.kiln(
      {"run", "chain.toml", "--jobs", "1", "--build-arg", "LIB_FLAGS=-DTEST" + dir.nonce()});
  ASSERT_EQ(run.exit_code, 0) << run.output;

  // The CSV's phases are the run's: init, every stage in run order, done.
  std::vector<std::string> phases;
  auto rows = lines_of(dir.read("records/latest/resources.csv"));
  ASSERT_GT(rows.size(), 7u);
  EXPECT_EQ(rows[0], "time,phase,cpu_pct,free_ram_gb,committed_gb,free_disk_gb");
  for (size_t i = 1; i < rows.size(); ++i) {
    std::string phase = rows[i].substr(rows[i].find(',') + 1);
    phase = phase.substr(0, phase.find(','));
    if (phases.empty() || phases.back() != phase) {
      phases.push_back(phase);
    }
  }
  EXPECT_EQ(phases, (std::vector<std::string>{"init", "base", "toolchain", "libs", "final", "smoke",
                                              "done"}));
  json manifest = dir.latest_manifest();
  ASSERT_EQ(manifest["resources"].size(), 7u);
  EXPECT_EQ(manifest["resources"][3]["phase"], "libs");
  EXPECT_GT(manifest["resources"][3]["min_free_disk_gb"].get<double>(), 0);
  EXPECT_NE(run.output.find("resources per phase"), std::string::npos) << run.output;

  // --jobs reached the libs build through the kiln-budget secret, not a build arg.
  EXPECT_EQ(manifest["stages"][2]["jobs"], 1);
  std::string libs_log =
      dir.read("records/latest/" + manifest["stages"][2]["attempts"][0]["log"].get<std::string>());
  EXPECT_NE(libs_log.find("compiling with 1 job(s) of a"), std::string::npos) << libs_log;
  EXPECT_EQ(dir.read("records/budget/libs.env").rfind("JOBS=1\nMEMORY_LIMIT_GB=", 0), 0u);
  EXPECT_EQ(manifest["stages"][2]["command"].get<std::string>().find("JOBS"), std::string::npos);

  // Every stage had its floor checked and at least one watchdog sample.
  std::string driver = dir.read("records/latest/driver.log");
  EXPECT_EQ(count(driver, "[disk-watch] "), 5u) << driver;
  EXPECT_EQ(count(driver, "floor 10.0G"), 5u) << driver;

  // A summary of any run's CSV, later.
  KilnResult summary = dir.kiln({"resources", "summarize", "records/latest/resources.csv"});
  EXPECT_EQ(summary.exit_code, 0);
  EXPECT_NE(summary.output.find("smoke"), std::string::npos) << summary.output;
  EXPECT_EQ(dir.kiln({"run", "chain.toml", "--dry-run"}, nullptr, {{"KILN_JOBS", "many"}}).exit_code, 2);
}

/// A small tmpfs mounted inside the test's folder: the disk whose free space kiln guards.
class RunDisk : public ::testing::Test {
protected:
  void SetUp() override {
    if (::geteuid() != 0) {
      GTEST_SKIP() << "mounting a tmpfs needs root";
    }
    m_disk = m_dir.path() / "disk";
    std::filesystem::create_directories(m_disk);
    ASSERT_EQ(::mount("tmpfs", m_disk.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=8m"), 0);
    m_mounted = true;
    m_dir.write("work.Dockerfile", "FROM scratch AS base\nCOPY busybox /bin/busybox\n");
    m_dir.write("plan", "# auto\n");
  }
  void TearDown() override {
    if (m_mounted) {
      ::umount2(m_disk.c_str(), MNT_DETACH);
    }
  }

  void write_chain(const std::string& disk, const std::string& stage_extra = "") {
    m_dir.write("chain.toml", "[chain]\nname = \"rd" + m_dir.nonce() +
                                  "\"\nengine = \"buildkit\"\n\n[cache]\nroot = \"disk/cache\"\n"
                                  "\n[disk]\npath = \"disk\"\n" +
                                  disk +
                                  "\n[[stage]]\nname = \"work\"\ndockerfile = "
                                  "\"work.Dockerfile\"\n" +
                                  stage_extra);
  }

  Env env(Env extra = {}) const {
    Env env = {{"PATH", std::string(KILN_FAKE_BUILDCTL_DIR) + ":" + std::getenv("PATH")},
               {"KILN_FAKE_BUILDCTL_LOG", (m_dir.path() / "buildctl.log").string()},
               {"KILN_FAKE_BUILDCTL_PLAN", (m_dir.path() / "plan").string()}};
    env.insert(env.end(), extra.begin(), extra.end());
    return env;
  }

  /// A slug of `kib` KiB under the cache root, `age_s` seconds old.
  void slug(const std::string& name, int kib, int age_s) {
    std::filesystem::path path = m_disk / "cache" / name;
    std::filesystem::create_directories(path);
    std::ofstream(path / "blob") << std::string(static_cast<size_t>(kib) * 1024, 'x');
    std::filesystem::last_write_time(path, std::filesystem::file_time_type::clock::now() -
                                               std::chrono::seconds(age_s));
  }

  ChainDir m_dir;
  std::filesystem::path m_disk;
  bool m_mounted = false;
};

TEST_F(RunDisk, APreflightThatCannotFindRoomRefusesTheRunAndRecordsWhy) {
  slug("old", 1024, 300);
  write_chain("need_gb = 1\nfloor_gb = 0\n");
  KilnResult run = m_dir.kiln({"run", "chain.toml"}, nullptr, env());
  EXPECT_EQ(run.exit_code, 2) << run.output;
  json manifest = m_dir.latest_manifest();
  EXPECT_EQ(manifest["status"], "refused:disk");
  EXPECT_EQ(manifest["stages"][0]["status"], "skipped");
  std::string driver = m_dir.read("records/latest/driver.log");
  EXPECT_NE(driver.find("disk preflight refused the run: "), std::string::npos) << driver;
  EXPECT_NE(driver.find("the chain needs 1.00G"), std::string::npos) << driver;
  // The newest three exports are never trimmed, even to start a run.
  EXPECT_TRUE(std::filesystem::exists(m_disk / "cache/old"));
  EXPECT_EQ(count(m_dir.read("buildctl.log"), "\"command\":\"build\""), 0u); // nothing built
  EXPECT_FALSE(std::filesystem::exists(m_dir.path() / "records/latest/resources.csv"));
}

TEST_F(RunDisk, AStageBelowItsFloorIsNotStarted) {
  write_chain("floor_gb = 0\n", "disk_floor_gb = 1\n");
  KilnResult run = m_dir.kiln({"run", "chain.toml"}, nullptr, env());
  EXPECT_EQ(run.exit_code, 1) << run.output;
  json stage = m_dir.latest_manifest()["stages"][0];
  EXPECT_EQ(stage["status"], "failed");
  EXPECT_TRUE(stage["attempts"].empty());
  EXPECT_NE(stage["failure"].get<std::string>().find("1G"), std::string::npos) << stage;
  EXPECT_EQ(count(m_dir.read("buildctl.log"), "\"command\":\"build\""), 0u);
}

TEST_F(RunDisk, TheWatchdogTrimsTheOldestExportsDuringAStage) {
  // 8 MiB disk: five 1 MiB exports and 2.5 MiB of ballast leave ~0.5 MiB free, below a
  // 2 MiB guard. Trimming the two oldest (the newest three are kept) brings it to ~2.5 MiB.
  for (int i = 0; i < 5; ++i) {
    slug("s" + std::to_string(i), 1024, 500 - i * 100);
  }
  std::ofstream(m_disk / "ballast") << std::string(2560 * 1024, 'b');
  write_chain("floor_gb = 0\nguard_gb = 0.002\nwatch_interval_s = 1\n");
  KilnResult run =
      m_dir.kiln({"run", "chain.toml"}, nullptr, env({{"KILN_FAKE_BUILDCTL_DELAY_MS", "30"}}));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::string driver = m_dir.read("records/latest/driver.log");
  EXPECT_NE(driver.find("[disk-trim] removed s0 "), std::string::npos) << driver;
  EXPECT_NE(driver.find("[disk-trim] removed s1 "), std::string::npos) << driver;
  EXPECT_FALSE(std::filesystem::exists(m_disk / "cache/s0"));
  EXPECT_TRUE(std::filesystem::exists(m_disk / "cache/s2"));
  // One record per reclaim, and the reclaim is on the console too.
  EXPECT_EQ(count(driver, "[disk-reclaim]"), count(run.output, "[disk-reclaim]")) << driver;
  EXPECT_GE(count(driver, "[disk-reclaim]"), 1u);
  EXPECT_GE(count(driver, "[disk-watch] "), 2u) << driver;
}

TEST_F(RunDisk, NothingReclaimableIsAWarningThatSaysWhatItDidNotTouch) {
  std::ofstream(m_disk / "ballast") << std::string(7 * 1024 * 1024, 'b');
  write_chain("floor_gb = 0\nguard_gb = 0.004\nwatch_interval_s = 1\n");
  KilnResult run = m_dir.kiln({"run", "chain.toml"}, nullptr, env());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::string driver = m_dir.read("records/latest/driver.log");
  EXPECT_NE(driver.find("NOTHING was reclaimable"), std::string::npos) << driver;
  // The BuildKit store was pruned with the filter, once, and its cache mounts survived.
  std::string buildctl = m_dir.read("buildctl.log");
  EXPECT_EQ(count(buildctl, "\"prune\",\"--filter\",\"type==regular\""), 1u) << buildctl;
  EXPECT_NE(driver.find("cache-mount record(s) survived"), std::string::npos) << driver;
}

TEST_F(RunDisk, DiskStatusAndReclaimBetweenRuns) {
  for (int i = 0; i < 5; ++i) {
    slug("s" + std::to_string(i), 1024, 500 - i * 100);
  }
  std::ofstream(m_disk / "ballast") << std::string(2560 * 1024, 'b');
  write_chain("floor_gb = 0\n");
  KilnResult status = m_dir.kiln({"disk", "status", "chain.toml"}, nullptr, env());
  ASSERT_EQ(status.exit_code, 0) << status.output;
  EXPECT_NE(status.output.find("cache exports: 5 slug(s)"), std::string::npos) << status.output;
  EXPECT_LT(status.output.find("  s0 "), status.output.find("  s4 ")) << status.output;
  EXPECT_NE(status.output.find("exec.cachemount"), std::string::npos) << status.output;

  // 8 MiB target: the two oldest exports are not enough, and a dry run removes nothing.
  KilnResult dry =
      m_dir.kiln({"disk", "reclaim", "chain.toml", "--target-gb", "0.003", "--dry-run"}, nullptr, env());
  ASSERT_EQ(dry.exit_code, 0) << dry.output;
  EXPECT_NE(dry.output.find("remove cache export s0"), std::string::npos) << dry.output;
  EXPECT_NE(dry.output.find("remove cache export s1"), std::string::npos) << dry.output;
  EXPECT_EQ(dry.output.find("remove cache export s2"), std::string::npos) << dry.output;
  EXPECT_TRUE(std::filesystem::exists(m_disk / "cache/s0"));
  EXPECT_EQ(count(m_dir.read("buildctl.log"), "\"command\":\"prune\""), 0u);

  KilnResult real =
      m_dir.kiln({"disk", "reclaim", "chain.toml", "--target-gb", "0.003"}, nullptr, env());
  EXPECT_EQ(count(real.output, "[disk-reclaim]"), 1u) << real.output;
  EXPECT_FALSE(std::filesystem::exists(m_disk / "cache/s0"));
  EXPECT_FALSE(std::filesystem::exists(m_disk / "cache/s1"));
  EXPECT_TRUE(std::filesystem::exists(m_disk / "cache/s2"));
}

} // namespace
} // namespace kiln::testing
