// kiln run with its guards: the resource sampler and job budget on a real buildah demo run,
// and the disk guard on a real tmpfs the test mounts: records there and the buildah store on
// another disk, and BuildKit stages through the fake buildctl, which also replays the store's
// du and prune (a stand-in process behind the daemon's socket says where its store is).
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <sys/mount.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "disk/buildah_store.h"
#include "disk/slugs.h"
#include "driver/records_lock.h"
#include "kiln_harness.h"
#include "occurrences.h"
#include "stand_in_buildkitd.h"
#include "util/strings.h"

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

  // The CSV's phases are the run's: init, every stage in run order with the time between
  // stages (nothing building) as idle, done.
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
  EXPECT_EQ(phases, (std::vector<std::string>{"init", "base", "idle", "toolchain", "idle", "libs",
                                              "idle", "final", "idle", "smoke", "idle", "done"}));
  json manifest = dir.latest_manifest();
  ASSERT_EQ(manifest["resources"].size(), 8u) << "one summary per phase, idle once";
  EXPECT_EQ(manifest["resources"][4]["phase"], "libs");
  EXPECT_GT(manifest["resources"][4]["min_free_disk_gb"].get<double>(), 0);
  EXPECT_NE(run.output.find("resources per phase"), std::string::npos) << run.output;

  // --jobs reached the libs build through the kiln-budget secret, not a build arg.
  EXPECT_EQ(manifest["stages"][2]["jobs"], 1);
  std::string libs_log =
      dir.read("records/latest/" + manifest["stages"][2]["attempts"][0]["log"].get<std::string>());
  EXPECT_NE(libs_log.find("compiling with 1 job(s) of a"), std::string::npos) << libs_log;
  EXPECT_EQ(dir.read("records/budget/libs.env").rfind("export JOBS=1\nexport MEMORY_LIMIT_GB=", 0),
            0u);
  EXPECT_EQ(manifest["stages"][2]["command"].get<std::string>().find("JOBS"), std::string::npos);

  // Every stage had its floor checked and at least one watchdog sample.
  std::string driver = dir.read("records/latest/driver.log");
  EXPECT_EQ(occurrences(driver, "[disk-watch] "), 5u) << driver;
  EXPECT_EQ(occurrences(driver, "floor 10.0G"), 5u) << driver;

  // A summary of any run's CSV, later.
  KilnResult summary = dir.kiln({"resources", "summarize", "records/latest/resources.csv"});
  EXPECT_EQ(summary.exit_code, 0);
  EXPECT_NE(summary.output.find("smoke"), std::string::npos) << summary.output;
  EXPECT_EQ(
      dir.kiln({"run", "chain.toml", "--dry-run"}, nullptr, {{"KILN_JOBS", "many"}}).exit_code, 2);
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

  /// The daemon answers at a socket in the test's folder: nothing listens there unless a test
  /// starts a stand-in, so where its store is stays unknown.
  std::string socket() const { return (m_dir.path() / "buildkitd.sock").string(); }
  /// How every disk line names that daemon's store.
  std::string store_label() const {
    return "buildkit store at unix://" + socket() + " (from [engine.buildkit] host)";
  }

  void write_chain(const std::string& disk, const std::string& stage_extra = "",
                   const std::string& cache_extra = "") {
    m_dir.write("chain.toml", "[chain]\nname = \"rd" + m_dir.nonce() +
                                  "\"\nengine = \"buildkit\"\n\n[engine.buildkit]\nhost = "
                                  "\"unix://" +
                                  socket() + "\"\n\n[cache]\nroot = \"disk/cache\"\n" +
                                  cache_extra + "\n[disk]\npath = \"disk\"\n" + disk +
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
  EXPECT_EQ(occurrences(m_dir.read("buildctl.log"), "\"command\":\"build\""), 0u); // nothing built
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
  EXPECT_EQ(occurrences(m_dir.read("buildctl.log"), "\"command\":\"build\""), 0u);
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
  EXPECT_EQ(occurrences(driver, "[disk-reclaim]"), occurrences(run.output, "[disk-reclaim]"))
      << driver;
  EXPECT_GE(occurrences(driver, "[disk-reclaim]"), 1u);
  EXPECT_GE(occurrences(driver, "[disk-watch] "), 2u) << driver;
}

TEST_F(RunDisk, ADaemonThatCannotBeLocatedIsNotPrunedAndTheWarningSaysWhy) {
  std::ofstream(m_disk / "ballast") << std::string(7 * 1024 * 1024, 'b');
  write_chain("floor_gb = 0\nguard_gb = 0.004\nwatch_interval_s = 1\n");
  KilnResult run = m_dir.kiln({"run", "chain.toml"}, nullptr, env());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::string driver = m_dir.read("records/latest/driver.log");
  std::string why =
      "where the " + store_label() + " keeps its data is unknown (cannot connect to " + socket() +
      ": No such file or directory), so it is not pruned for " + (m_dir.path() / "disk").string();
  EXPECT_NE(driver.find("WARN [disk-reclaim] watchdog during work: NOTHING was removed"),
            std::string::npos)
      << driver;
  EXPECT_NE(driver.find(store_label() + " and its images: untouched (" + why + ")"),
            std::string::npos)
      << driver;
  EXPECT_EQ(occurrences(m_dir.read("buildctl.log"), "\"command\":\"prune\""), 0u);
  EXPECT_EQ(occurrences(driver, "[disk-reclaim]"), occurrences(run.output, "[disk-reclaim]"))
      << run.output;
}

TEST_F(RunDisk, TheStoreOfADaemonOnTheShortDiskIsPrunedOnceAndItsCacheMountsSurvive) {
  std::filesystem::create_directories(m_disk / "buildkit");
  StandInBuildkitd daemon(socket(), {"--root", (m_disk / "buildkit").string()});
  std::ofstream(m_disk / "ballast") << std::string(7 * 1024 * 1024, 'b');
  write_chain("floor_gb = 0\nguard_gb = 0.004\nwatch_interval_s = 1\n");
  KilnResult run = m_dir.kiln({"run", "chain.toml"}, nullptr, env());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::string driver = m_dir.read("records/latest/driver.log");
  std::string buildctl = m_dir.read("buildctl.log");
  EXPECT_EQ(occurrences(buildctl, "\"prune\",\"--filter\",\"type==regular\""), 1u) << buildctl;
  EXPECT_NE(driver.find("cache-mount record(s) survived"), std::string::npos) << driver;
  // The console's record names what the prune removed, as driver.log does.
  EXPECT_NE(run.output.find(store_label() + ": pruned 14 layer record(s), 3.16MB, freed "),
            std::string::npos)
      << run.output;
}

TEST_F(RunDisk, TheStoreOfADaemonOnAnotherDiskIsLeftAlone) {
  std::filesystem::create_directories(m_dir.path() / "buildkit");
  StandInBuildkitd daemon(socket(), {"--root", (m_dir.path() / "buildkit").string()});
  std::ofstream(m_disk / "ballast") << std::string(7 * 1024 * 1024, 'b');
  write_chain("floor_gb = 0\nguard_gb = 0.004\nwatch_interval_s = 1\n");
  KilnResult run = m_dir.kiln({"run", "chain.toml"}, nullptr, env());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(occurrences(m_dir.read("buildctl.log"), "\"command\":\"prune\""), 0u);
  EXPECT_NE(run.output.find(store_label() + " and its images: untouched (the buildkit store " +
                            (m_dir.path() / "buildkit").string() + " (buildkitd pid " +
                            std::to_string(daemon.pid()) +
                            ", its --root) is on another filesystem than " +
                            (m_dir.path() / "disk").string() + ")"),
            std::string::npos)
      << run.output;
}

TEST_F(RunDisk, ALanesOwnDaemonIsMeasuredPrunedAndNamedNotTheChainsDefault) {
  // The lane builds on the daemon at socket() (its store on the short disk); the chain's
  // default daemon is one no stage uses. Every du, prune, floor and watch goes to the lane's.
  std::filesystem::create_directories(m_disk / "buildkit");
  StandInBuildkitd daemon(socket(), {"--root", (m_disk / "buildkit").string()});
  std::ofstream(m_disk / "ballast") << std::string(7 * 1024 * 1024, 'b');
  std::string idle = (m_dir.path() / "idle.sock").string();
  m_dir.write("chain.toml", "[chain]\nname = \"rd" + m_dir.nonce() +
                                "\"\nengine = \"buildkit\"\n\n[engine.buildkit]\nhost = \"unix://" +
                                idle +
                                "\"\n\n[cache]\nroot = \"disk/cache\"\n\n[disk]\nfloor_gb = "
                                "0.0001\nguard_gb = 0.004\nwatch_interval_s = 1\n\n"
                                "[[lane]]\nname = \"amd64\"\nplatform = \"linux/amd64\"\n"
                                "host = \"unix://" +
                                socket() +
                                "\"\n\n[[stage]]\nname = \"work\"\ndockerfile = "
                                "\"work.Dockerfile\"\n");
  KilnResult run =
      m_dir.kiln({"run", "chain.toml"}, nullptr, env({{"KILN_FAKE_BUILDCTL_DELAY_MS", "30"}}));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::string lane_store = "buildkit store at unix://" + socket() + " (from [[lane]] amd64)";
  std::string driver = m_dir.read("records/latest/driver.log");
  EXPECT_NE(driver.find("[disk] stage amd64/work: "), std::string::npos) << driver;
  EXPECT_NE(driver.find("(" + lane_store + "), floor 0.000100G"), std::string::npos) << driver;
  EXPECT_NE(driver.find("[disk-watch] "), std::string::npos) << driver;
  EXPECT_NE(driver.find(" (" + lane_store + ")\n"), std::string::npos) << driver;
  EXPECT_NE(run.output.find(lane_store + ": pruned 14 layer record(s), 3.16MB, freed "),
            std::string::npos)
      << run.output;

  KilnResult status = m_dir.kiln({"disk", "status", "chain.toml"}, nullptr, env());
  ASSERT_EQ(status.exit_code, 0) << status.output;
  EXPECT_NE(status.output.find(lane_store + ":\n  free space: "), std::string::npos)
      << status.output;

  // Every du and prune, of the run and of status, went to the lane's daemon.
  std::string buildctl = m_dir.read("buildctl.log");
  EXPECT_EQ(occurrences(buildctl, idle), 0u) << buildctl;
  size_t store_commands = 0;
  for (const std::string& line : lines_of(buildctl)) {
    if (line.find("\"command\":\"du\"") != std::string::npos ||
        line.find("\"command\":\"prune\"") != std::string::npos) {
      ++store_commands;
      EXPECT_NE(line.find("unix://" + socket()), std::string::npos) << line;
    }
  }
  EXPECT_GE(store_commands, 4u) << buildctl; // the prune's du, counts before and after; status
}

TEST_F(RunDisk, AGcPolicyKeepingLessThanTheStagesImagesIsWarnedBeforeAnythingBuilds) {
  write_chain("floor_gb = 0\nguard_gb = 0\n");
  // A first run has nothing to compare: its stages built no image yet.
  KilnResult first =
      m_dir.kiln({"run", "chain.toml"}, nullptr, env({{"KILN_FAKE_BUILDKIT_GC", "custom"}}));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_EQ(first.output.find("of layer cache"), std::string::npos) << first.output;
  // The stage's image now holds a 2 GiB layer (sparse: no disk is used).
  std::filesystem::path blob =
      m_dir.path() / "records/oci/work/blobs/sha256" / std::string(64, 'e');
  ASSERT_TRUE(std::filesystem::exists(blob.parent_path()));
  { std::ofstream(blob).close(); }
  std::filesystem::resize_file(blob, uint64_t{2} << 30);

  // The default policy keeps 26 GB of layers: enough.
  KilnResult roomy = m_dir.kiln({"run", "chain.toml"}, nullptr, env());
  ASSERT_EQ(roomy.exit_code, 0) << roomy.output;
  EXPECT_EQ(roomy.output.find("of layer cache"), std::string::npos) << roomy.output;

  // A daemon whose all-records rule keeps 1 GB evicts that layer between runs: said before
  // the stage builds, with both figures.
  KilnResult tight =
      m_dir.kiln({"run", "chain.toml"}, nullptr, env({{"KILN_FAKE_BUILDKIT_GC", "custom"}}));
  ASSERT_EQ(tight.exit_code, 0) << tight.output;
  size_t warned = tight.output.find("keeps at most 1.00GB of layer cache");
  ASSERT_NE(warned, std::string::npos) << tight.output;
  EXPECT_NE(tight.output.find("below the 2.15GB the images of its stages took in their last run "
                              "(work)"),
            std::string::npos)
      << tight.output;
  EXPECT_LT(warned, tight.output.find("[work] building")) << tight.output;
  EXPECT_NE(m_dir.read("records/latest/driver.log").find("keeps at most 1.00GB"),
            std::string::npos);
}

TEST_F(RunDisk, CacheExportsAreCappedOldestFirstAndNotWrittenUnderTheFloor) {
  for (int i = 0; i < 5; ++i) {
    slug("s" + std::to_string(i), 1024, 500 - i * 100);
  }
  // 2.5 MiB for 5 MiB of exports and the stage's own: the three oldest go, the stage's stays.
  write_chain("floor_gb = 0\nguard_gb = 0\nkeep_slugs = 0\nexports_max_gb = 0.00244140625\n", "",
              "local = true\n");
  KilnResult capped = m_dir.kiln({"run", "chain.toml"}, nullptr, env());
  ASSERT_EQ(capped.exit_code, 0) << capped.output;
  std::string driver = m_dir.read("records/latest/driver.log");
  EXPECT_NE(driver.find("over the 0.00244G cap ([disk] exports_max_gb): trimming the oldest"),
            std::string::npos)
      << driver;
  for (const char* gone : {"s0", "s1", "s2"}) {
    EXPECT_FALSE(std::filesystem::exists(m_disk / "cache" / gone)) << gone << "\n" << driver;
  }
  for (const char* kept : {"s3", "s4"}) {
    EXPECT_TRUE(std::filesystem::exists(m_disk / "cache" / kept)) << kept << "\n" << driver;
  }
  std::vector<Slug> left = list_slugs(m_disk / "cache");
  ASSERT_EQ(left.size(), 3u);
  std::string own = left.back().name; // the newest: this run's export
  EXPECT_TRUE(std::filesystem::exists(m_disk / "cache" / own / "index.json")) << own;

  // Under the stage's floor on the exports' disk (8 MiB, far from 1 G), the export it has is
  // read and no new one is written. The floor itself measures the daemon's store, which is
  // not on this host here, so the stage builds.
  m_dir.write("chain.toml", "[chain]\nname = \"rd" + m_dir.nonce() +
                                "\"\nengine = \"buildkit\"\n\n[engine.buildkit]\nhost = \"unix://" +
                                socket() +
                                "\"\n\n[cache]\nroot = \"disk/cache\"\nlocal = true\n\n[disk]\n"
                                "floor_gb = 1\nguard_gb = 0\n\n[[stage]]\nname = \"work\"\n"
                                "dockerfile = \"work.Dockerfile\"\n");
  KilnResult under = m_dir.kiln({"run", "chain.toml"}, nullptr, env());
  ASSERT_EQ(under.exit_code, 0) << under.output;
  EXPECT_NE(under.output.find("WARN [disk] stage work: no new cache export this build: "),
            std::string::npos)
      << under.output;
  EXPECT_NE(under.output.find("WARN [disk] stage work: floor not checked: the free space of the " +
                              store_label() + " cannot be measured from this host"),
            std::string::npos)
      << under.output;
  std::string builds;
  for (const std::string& line : lines_of(m_dir.read("buildctl.log"))) {
    if (line.find("\"command\":\"build\"") != std::string::npos) {
      builds = line; // the last build
    }
  }
  EXPECT_EQ(builds.find("type=local,dest="), std::string::npos) << builds;
  EXPECT_NE(builds.find("type=local,src="), std::string::npos) << builds;
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
  KilnResult dry = m_dir.kiln(
      {"disk", "reclaim", "chain.toml", "--target-gb", "0.003", "--dry-run"}, nullptr, env());
  ASSERT_EQ(dry.exit_code, 0) << dry.output;
  EXPECT_NE(dry.output.find("remove cache export s0"), std::string::npos) << dry.output;
  EXPECT_NE(dry.output.find("remove cache export s1"), std::string::npos) << dry.output;
  EXPECT_EQ(dry.output.find("remove cache export s2"), std::string::npos) << dry.output;
  EXPECT_TRUE(std::filesystem::exists(m_disk / "cache/s0"));
  EXPECT_EQ(occurrences(m_dir.read("buildctl.log"), "\"command\":\"prune\""), 0u);

  EXPECT_NE(dry.output.find("leave the " + store_label() + " and its images alone: where the " +
                            store_label() + " keeps its data is unknown"),
            std::string::npos)
      << dry.output;
  EXPECT_NE(status.output.find(store_label() + ":\n  free space: "), std::string::npos)
      << status.output;
  EXPECT_NE(status.output.find("  where it keeps its data is unknown (cannot connect to " +
                               socket() + ": No such file or directory)"),
            std::string::npos)
      << status.output;

  {
    // While a run holds the records, a reclaim removes nothing and names the run.
    auto held = RecordsLock::acquire(m_dir.path() / "records");
    ASSERT_TRUE(held) << held.error();
    held->describe("run 20261206-020000-abcd", "2026-12-06T02:00:00Z");
    KilnResult refused =
        m_dir.kiln({"disk", "reclaim", "chain.toml", "--target-gb", "0.003"}, nullptr, env());
    EXPECT_EQ(refused.exit_code, 2) << refused.output;
    EXPECT_NE(refused.output.find("another kiln run or command is using the records folder"),
              std::string::npos)
        << refused.output;
    EXPECT_NE(refused.output.find("run 20261206-020000-abcd"), std::string::npos) << refused.output;
    EXPECT_TRUE(std::filesystem::exists(m_disk / "cache/s0"));
  }

  KilnResult real =
      m_dir.kiln({"disk", "reclaim", "chain.toml", "--target-gb", "0.003"}, nullptr, env());
  EXPECT_EQ(occurrences(real.output, "[disk-reclaim]"), 1u) << real.output;
  EXPECT_NE(m_dir.read("records/kiln.lock").find("kiln disk reclaim, pid "), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(m_disk / "cache/s0"));
  EXPECT_FALSE(std::filesystem::exists(m_disk / "cache/s1"));
  EXPECT_TRUE(std::filesystem::exists(m_disk / "cache/s2"));
}

/// Every image of the store kiln's buildah commands reach, as `id names...`, sorted.
std::vector<std::string> store_images() {
  auto listed = capture_output({"buildah", "images", "--all", "--json", "--no-trunc"});
  EXPECT_TRUE(listed) << listed.error();
  auto images = parse_buildah_images(listed ? *listed : "");
  EXPECT_TRUE(images) << images.error();
  std::vector<std::string> out;
  for (const BuildahImage& image : images ? *images : std::vector<BuildahImage>{}) {
    std::string line = image.id;
    for (const std::string& name : image.names) {
      line += " " + name;
    }
    out.push_back(line);
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(RunDiskElsewhere, AFloorFailingOnTmpfsRecordsRemovesNoImageFromAStoreOnAnotherDisk) {
  if (::geteuid() != 0 || !capture_output({"buildah", "--version"})) {
    GTEST_SKIP() << "needs root and buildah";
  }
  ChainDir dir;
  std::string conf = dir.private_buildah_store();
  ::setenv("CONTAINERS_STORAGE_CONF", conf.c_str(), 1);
  std::filesystem::path records = dir.path() / "records";
  std::filesystem::create_directories(records);
  // Room for the run record and the kiln-cc copy a run puts beside it, far from 1 G.
  ASSERT_EQ(::mount("tmpfs", records.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=64m"), 0);
  struct Unmount {
    std::filesystem::path path;
    ~Unmount() {
      ::umount2(path.c_str(), MNT_DETACH);
      ::unsetenv("CONTAINERS_STORAGE_CONF");
    }
  } unmount{records};

  // The store holds what the guard once removed for such a floor: another chain's image, and
  // a dangling one dated 1970 (--timestamp 0), older than any age limit.
  dir.write("other.Dockerfile", "FROM scratch\nCOPY busybox /bin/busybox\nCOPY marker /marker\n");
  std::string other = "localhost/other-" + dir.nonce() + ":dev";
  for (const char* marker : {"old", "new"}) {
    dir.write("marker", std::string(marker) + "\n");
    auto built = capture_output(
        {"buildah", "build", "--isolation", "chroot", "--layers", "--timestamp", "0", "-f",
         (dir.path() / "other.Dockerfile").string(), "-t", other, dir.path().string()});
    ASSERT_TRUE(built) << built.error();
  }
  auto dangling = capture_output({"buildah", "images", "--filter", "dangling=true", "--quiet"});
  ASSERT_TRUE(dangling) << dangling.error();
  ASSERT_FALSE(trim(*dangling).empty()) << "the old build's image is dangling";
  std::vector<std::string> before = store_images();

  // [disk] path names the records folder: the 64 MiB tmpfs, short of a 1 G floor.
  dir.write("base.Dockerfile", k_base_dockerfile);
  auto write_chain = [&](const std::string& disk) {
    dir.write("chain.toml", "[chain]\nname = \"far-" + dir.nonce() + "\"\n\n[disk]\n" + disk +
                                "floor_gb = 1\n\n[[stage]]\nname = \"base\"\n"
                                "dockerfile = \"base.Dockerfile\"\n");
  };
  write_chain("path = \"" + records.string() + "\"\n");
  KilnResult run = dir.kiln({"run", "chain.toml"}, nullptr, {{"CONTAINERS_STORAGE_CONF", conf}});
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_EQ(store_images(), before) << run.output;

  json stage = dir.latest_manifest()["stages"][0];
  EXPECT_EQ(stage["status"], "failed");
  EXPECT_TRUE(stage["attempts"].empty());
  std::string why = "the buildah store " + (dir.path() / "store").string() +
                    " is on another filesystem than " + records.string();
  EXPECT_NE(stage["failure"].get<std::string>().find("buildah store and its images: untouched (" +
                                                     why + ")"),
            std::string::npos)
      << stage["failure"];

  // The console shows the reclaim's record as driver.log has it: nothing removed, and why.
  std::string driver = dir.read("records/latest/driver.log");
  std::vector<std::string> records_lines;
  for (const std::string& line : lines_of(driver)) {
    if (line.find("[disk-reclaim]") != std::string::npos) {
      records_lines.push_back(line.substr(line.find(' ') + 1)); // after the timestamp
    }
  }
  ASSERT_EQ(records_lines.size(), 1u) << driver;
  EXPECT_TRUE(
      records_lines[0].starts_with("WARN [disk-reclaim] before stage base: NOTHING was removed ("))
      << records_lines[0];
  EXPECT_NE(records_lines[0].find("buildah store and its images: untouched (" + why + ")"),
            std::string::npos)
      << records_lines[0];
  EXPECT_NE(run.output.find("kiln: " + records_lines[0] + "\n"), std::string::npos) << run.output;

  // Between runs the same rule holds, and status says where the store is.
  Env store_env = {{"CONTAINERS_STORAGE_CONF", conf}};
  KilnResult status = dir.kiln({"disk", "status", "chain.toml"}, nullptr, store_env);
  EXPECT_EQ(status.exit_code, 0) << status.output;
  EXPECT_NE(status.output.find("the buildah store " + (dir.path() / "store").string() +
                               ": on another filesystem than " + records.string() +
                               ": the disk guard leaves it alone"),
            std::string::npos)
      << status.output;
  KilnResult reclaim =
      dir.kiln({"disk", "reclaim", "chain.toml", "--target-gb", "1"}, nullptr, store_env);
  EXPECT_EQ(reclaim.exit_code, 1) << reclaim.output;
  EXPECT_NE(reclaim.output.find("buildah store and its images: untouched (" + why + ")"),
            std::string::npos)
      << reclaim.output;
  EXPECT_EQ(store_images(), before);

  // Without [disk] path the floor measures the store's own filesystem, not the records'.
  write_chain("");
  KilnResult measured = dir.kiln({"run", "chain.toml"}, nullptr, store_env);
  EXPECT_EQ(measured.exit_code, 0) << measured.output;
  std::string floor_line = "[disk] stage base: ";
  std::string second = dir.read("records/latest/driver.log");
  size_t at = second.find(floor_line);
  ASSERT_NE(at, std::string::npos) << second;
  std::string line = second.substr(at, second.find('\n', at) - at);
  EXPECT_NE(line.find("G free on " + (dir.path() / "store").string() +
                      " (buildah store), floor "
                      "1.00G"),
            std::string::npos)
      << line;
}

} // namespace
} // namespace kiln::testing
