// disk/slugs, disk/guard and disk/watchdog on plain temp folders. Free space on a shared disk
// moves under other writers, so the guard's measured paths here either do not depend on it
// (deficit 0, a deficit no disk has, the bound by the slugs' own sizes) or measure /proc, whose
// free space is always 0. tests/integration/disk_tmpfs_test.cpp measures real small
// filesystems.
#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <regex>
#include <stdexcept>
#include <thread>

#include <unistd.h>

#include <gtest/gtest.h>

#include "fake_store.h"

#include "disk/guard.h"
#include "disk/slugs.h"
#include "disk/store.h"
#include "disk/watchdog.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::count_containing;
using testing::FakeStore;
using testing::joined;

constexpr uint64_t k_huge = uint64_t{1} << 60; // more than any disk holds

void write_bytes(const fs::path& file, uint64_t size) {
  fs::create_directories(file.parent_path());
  std::ofstream out(file, std::ios::binary);
  std::string chunk(4096, 'x');
  for (uint64_t left = size; left > 0;) {
    uint64_t n = std::min<uint64_t>(left, chunk.size());
    out.write(chunk.data(), static_cast<std::streamsize>(n));
    left -= n;
  }
}

/// A BuildKit-shaped export: index.json plus one blob, `bytes` in all, dated `age` ago.
void make_slug(const fs::path& root, const std::string& name, uint64_t bytes,
               std::chrono::minutes age) {
  fs::path dir = root / name;
  write_bytes(dir / "index.json", 100);
  write_bytes(dir / "blobs" / "sha256" / ("blob-" + name), bytes - 100);
  fs::last_write_time(dir, fs::file_time_type::clock::now() - age);
}

std::vector<std::string> names(const std::vector<Slug>& slugs) {
  std::vector<std::string> out;
  for (const Slug& slug : slugs) {
    out.push_back(slug.name);
  }
  return out;
}

std::vector<std::string> on_disk(const fs::path& root) {
  return names(list_slugs(root));
}

class DiskTempDir : public ::testing::Test {
protected:
  void SetUp() override {
    m_root = fs::temp_directory_path() /
             ("kiln-disk-" + std::to_string(::getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(m_root);
    m_cache = m_root / "cache";
    fs::create_directories(m_cache);
  }
  void TearDown() override { fs::remove_all(m_root); }

  /// Six slugs of 1000..6000 bytes; their ages do not follow their names.
  void make_six() {
    make_slug(m_cache, "hello-app-amd64", 1000, 300min);
    make_slug(m_cache, "hello-base-amd64", 2000, 600min);
    make_slug(m_cache, "hello-base-arm64", 3000, 500min);
    make_slug(m_cache, "hello-sdk-amd64", 4000, 100min);
    make_slug(m_cache, "hello-sdk-arm64", 5000, 400min);
    make_slug(m_cache, "hello-tools", 6000, 200min);
  }

  fs::path m_root;
  fs::path m_cache;
};

using DiskSlugs = DiskTempDir;

TEST_F(DiskSlugs, ListsDirectoriesOldestFirstSizedRecursively) {
  make_six();
  std::vector<Slug> slugs = list_slugs(m_cache);
  EXPECT_EQ(names(slugs),
            (std::vector<std::string>{"hello-base-amd64", "hello-base-arm64", "hello-sdk-arm64",
                                      "hello-app-amd64", "hello-tools", "hello-sdk-amd64"}));
  EXPECT_EQ(slugs[0].bytes, 2000u);
  EXPECT_EQ(slugs[5].bytes, 4000u);
  EXPECT_EQ(slugs[0].path, m_cache / "hello-base-amd64");
}

TEST_F(DiskSlugs, TiesAreOrderedByName) {
  auto when = fs::file_time_type::clock::now() - 60min;
  for (const char* name : {"c", "a", "b"}) {
    make_slug(m_cache, name, 500, 0min);
    fs::last_write_time(m_cache / name, when);
  }
  EXPECT_EQ(on_disk(m_cache), (std::vector<std::string>{"a", "b", "c"}));
}

TEST_F(DiskSlugs, FilesAndSymlinksAreNeitherSlugsNorCounted) {
  make_slug(m_cache, "real", 1000, 10min);
  write_bytes(m_cache / "stray.txt", 50000);
  write_bytes(m_root / "outside" / "big", 70000);
  fs::create_directory_symlink(m_root / "outside", m_cache / "linked-slug");
  fs::create_symlink(m_root / "outside" / "big", m_cache / "real" / "link-to-big");
  std::vector<Slug> slugs = list_slugs(m_cache);
  ASSERT_EQ(names(slugs), std::vector<std::string>{"real"});
  EXPECT_EQ(slugs[0].bytes, 1000u);
}

TEST_F(DiskSlugs, AMissingRootListsNothing) {
  EXPECT_TRUE(list_slugs(m_root / "absent").empty());
  TrimResult trim = trim_slugs(m_root / "absent", k_huge, 0, {}, m_root);
  EXPECT_EQ(trim.removed, 0);
  ASSERT_EQ(trim.lines.size(), 1u);
}

TEST_F(DiskSlugs, ADeficitOfZeroRemovesNothing) {
  make_six();
  TrimResult trim = trim_slugs(m_cache, 0, 0, {}, m_root);
  EXPECT_EQ(trim.removed, 0);
  EXPECT_EQ(trim.freed_bytes, 0u);
  EXPECT_EQ(on_disk(m_cache).size(), 6u);
  ASSERT_EQ(trim.lines.size(), 1u);
  EXPECT_TRUE(std::regex_match(trim.lines[0],
                               std::regex(R"(\[disk-trim\] removed 0 slug\(s\), freed 0 GiB; )"
                                          R"([0-9.]+G free now)")))
      << trim.lines[0];
}

TEST_F(DiskSlugs, RemovesOldestFirstAndNeverTheNewestKept) {
  make_six();
  TrimResult trim = trim_slugs(m_cache, k_huge, 3, {}, m_root);
  EXPECT_EQ(trim.removed, 3);
  EXPECT_EQ(on_disk(m_cache),
            (std::vector<std::string>{"hello-app-amd64", "hello-tools", "hello-sdk-amd64"}));
  ASSERT_EQ(trim.lines.size(), 4u) << joined(trim.lines);
  EXPECT_TRUE(std::regex_match(
      trim.lines[0],
      std::regex(R"(\[disk-trim\] removed hello-base-amd64 \(<0\.0001 GiB, (9h59m|10h00m) old\))")))
      << trim.lines[0];
  EXPECT_NE(trim.lines[1].find("removed hello-base-arm64 ("), std::string::npos);
  EXPECT_NE(trim.lines[2].find("removed hello-sdk-arm64 ("), std::string::npos);
  EXPECT_TRUE(std::regex_match(
      // What was freed is a change of the shared disk's free space, which other processes move
      // too: its figure is not the slugs' size.
      trim.lines[3],
      std::regex(R"(\[disk-trim\] removed 3 slug\(s\), freed (<0\.0001|[0-9.]+) GiB; )"
                 R"([0-9.]+G free now)")))
      << trim.lines[3];
}

TEST_F(DiskSlugs, KeepingMoreThanThereAreRemovesNothing) {
  make_six();
  TrimResult trim = trim_slugs(m_cache, k_huge, 6, {}, m_root);
  EXPECT_EQ(trim.removed, 0);
  EXPECT_EQ(on_disk(m_cache).size(), 6u);
}

TEST_F(DiskSlugs, ProtectedSlugsSurviveAndDoNotShiftTheKeptNewest) {
  make_six();
  TrimResult trim = trim_slugs(m_cache, k_huge, 2, {"hello-base-arm64", "hello-app-amd64"}, m_root);
  EXPECT_EQ(trim.removed, 2);
  EXPECT_EQ(on_disk(m_cache), (std::vector<std::string>{"hello-base-arm64", "hello-app-amd64",
                                                        "hello-tools", "hello-sdk-amd64"}));
}

TEST_F(DiskSlugs, StopsOnceTheRemovedSlugsCoverTheDeficit) {
  make_six();
  // Whatever the shared disk does meanwhile, the oldest slug's 2000 bytes cover 1500.
  TrimResult trim = trim_slugs(m_cache, 1500, 0, {}, m_root);
  EXPECT_EQ(trim.removed, 1) << joined(trim.lines);
  EXPECT_EQ(on_disk(m_cache).size(), 5u);
  EXPECT_FALSE(fs::exists(m_cache / "hello-base-amd64"));
}

TEST_F(DiskSlugs, NeverFollowsASymlinkOutOfTheRoot) {
  make_slug(m_cache, "old", 1000, 60min);
  write_bytes(m_root / "precious" / "data", 1000);
  fs::create_directory_symlink(m_root / "precious", m_cache / "aaa-link");
  fs::create_symlink(m_root / "precious" / "data", m_cache / "old" / "link");
  TrimResult trim = trim_slugs(m_cache, k_huge, 0, {}, m_root);
  EXPECT_EQ(trim.removed, 1);
  EXPECT_TRUE(fs::exists(m_root / "precious" / "data"));
  EXPECT_TRUE(fs::is_symlink(m_cache / "aaa-link"));
}

TEST_F(DiskSlugs, RefusesAFilesystemRootAsCacheRoot) {
  // keep_newest covers everything as a second belt: this test must never delete anything.
  TrimResult trim = trim_slugs("/", k_huge, SIZE_MAX, {}, m_root);
  EXPECT_EQ(trim.removed, 0);
  EXPECT_EQ(count_containing(trim.lines, "is not a cache root kiln would trim"), 1);
}

TEST_F(DiskSlugs, DoesNotTrimForAnotherFilesystem) {
  make_six();
  TrimResult trim = trim_slugs(m_cache, k_huge, 0, {}, "/proc");
  EXPECT_EQ(trim.removed, 0);
  EXPECT_EQ(on_disk(m_cache).size(), 6u);
  EXPECT_EQ(count_containing(trim.lines, "on another filesystem than /proc"), 1)
      << joined(trim.lines);
}

// A slug that cannot be removed is covered on tmpfs, where a mount point refuses even root
// (DiskTmpfs.ASlugThatCannotBeRemovedIsLoggedAndSkipped).

TEST(DiskSlugsText, PrintsGWithThePrecisionTheSizeCallsFor) {
  EXPECT_EQ(gib_text(uint64_t{0}), "0");
  EXPECT_EQ(gib_text(164.4), "164");
  EXPECT_EQ(gib_text(23.44), "23.4");
  EXPECT_EQ(gib_text(1.254), "1.25");
  EXPECT_EQ(gib_text(0.5), "0.500");
  EXPECT_EQ(gib_text(uint64_t{256} << 10), "0.000244");
  EXPECT_EQ(gib_text(0.0001), "0.000100");
  // Under 100 KiB the digits say nothing a reader needs (1 KiB read as 0.000000978).
  EXPECT_EQ(gib_text(uint64_t{1050}), "<0.0001");
  EXPECT_EQ(gib_text(uint64_t{1050}, true), "0.0001");
  EXPECT_EQ(gib_text(0.0021, true), "0.00210");
  EXPECT_EQ(gib_text(0.002101, true), "0.00211");
  EXPECT_EQ(gib_text(3 * k_gib), "3.00");
}

using DiskGuard = DiskTempDir;

TEST_F(DiskGuard, RaisesANonZeroBuildkitKeepBelowTheFloor) {
  DiskPolicy policy;
  policy.buildkit_keep_gb = 50;
  std::string note;
  EXPECT_EQ(effective_keep_gb(policy, &note), 100);
  EXPECT_NE(note.find("buildkit_keep_gb 50 raised to 100"), std::string::npos) << note;
  std::vector<std::string> lines = normalize_policy(policy);
  EXPECT_EQ(policy.buildkit_keep_gb, 100);
  EXPECT_EQ(lines.size(), 1u);

  policy.buildkit_keep_gb = 0;
  EXPECT_EQ(effective_keep_gb(policy, &note), 0);
  EXPECT_EQ(note, "");
  EXPECT_TRUE(normalize_policy(policy).empty());
  EXPECT_EQ(policy.buildkit_keep_gb, 0);

  policy.buildkit_keep_gb = 120;
  EXPECT_EQ(effective_keep_gb(policy), 120);
}

TEST_F(DiskGuard, ThePruneGetsTheRaisedKeepAndSaysSo) {
  DiskPolicy policy;
  policy.path = "/proc";
  policy.buildkit_keep_gb = 20;
  FakeStore store;
  ReclaimOutcome outcome = reclaim(policy, "test", k_huge, {}, &store, false, false, {});
  EXPECT_EQ(store.m_last_keep.load(), 100);
  EXPECT_EQ(count_containing(outcome.lines, "buildkit_keep_gb 20 raised to 100"), 1);
}

TEST_F(DiskGuard, PreflightWithoutANeedPasses) {
  DiskPolicy policy;
  policy.path = m_root;
  GateResult gate = preflight(policy);
  EXPECT_TRUE(gate.ok);
  EXPECT_TRUE(gate.lines.empty());
}

TEST_F(DiskGuard, PreflightPassesWhenTheNeedFits) {
  make_six();
  DiskPolicy policy;
  policy.path = m_root;
  policy.cache_root = m_cache;
  policy.need_gb = 0.000001;
  GateResult gate = preflight(policy);
  EXPECT_TRUE(gate.ok) << gate.message;
  EXPECT_EQ(count_containing(gate.lines, "[disk-trim]"), 0);
  EXPECT_EQ(on_disk(m_cache).size(), 6u);
}

TEST_F(DiskGuard, PreflightRefusesWithAPreciseMessage) {
  make_six();
  DiskPolicy policy;
  policy.path = m_root;
  policy.cache_root = m_cache;
  policy.need_gb = 1e9;
  GateResult gate = preflight(policy);
  EXPECT_FALSE(gate.ok);
  EXPECT_EQ(on_disk(m_cache),
            (std::vector<std::string>{"hello-app-amd64", "hello-tools", "hello-sdk-amd64"}));
  std::regex expected("[0-9.]+G free on " + m_root.string() +
                      R"(, the chain needs 1000000000G; trimmed 3 cache export\(s\) \(<?[0-9.]+ )"
                      R"(GiB\) and it is still short by [0-9.]+G: free space on )" +
                      m_root.string() +
                      R"( or lower \[disk\] need_gb; the largest folder kiln manages is )" +
                      m_cache.string() +
                      R"( \(<0\.0001 GiB in 3 cache export\(s\), the newest 3 of which are )"
                      R"(always kept\))");
  EXPECT_TRUE(std::regex_match(gate.message, expected)) << gate.message;
}

TEST_F(DiskGuard, ReclaimWithTheTargetMetDoesNothing) {
  make_six();
  DiskPolicy policy;
  policy.path = m_root;
  policy.cache_root = m_cache;
  FakeStore store;
  ReclaimOutcome outcome = reclaim(policy, "test", 1, {}, &store, false, true, {"t"});
  EXPECT_FALSE(outcome.removed_any);
  EXPECT_EQ(store.m_prunes.load(), 0);
  EXPECT_EQ(store.m_located.load(), 0);
  EXPECT_EQ(on_disk(m_cache).size(), 6u);
  EXPECT_NE(outcome.record.find("[disk-reclaim] test: nothing to do"), std::string::npos);
}

TEST_F(DiskGuard, WhileABuildRunsTheRecordNamesThePruneAndTheImagesItDidNotLookAt) {
  DiskPolicy policy;
  policy.path = "/proc"; // always 0 bytes free: nothing any lever does shows
  FakeStore store;
  store.m_tagged = {"hello-base:1", "hello-sdk:1", "hello-app:1", "other:2"};
  store.m_stale = {"aaa"};
  ReclaimOutcome outcome = reclaim(policy, "stage sdk", k_huge, {}, &store, false, false, {"x"});
  EXPECT_TRUE(outcome.removed_any);
  EXPECT_TRUE(outcome.store_prune_ran);
  EXPECT_EQ(outcome.record,
            "[disk-reclaim] stage sdk: freed 0 GiB (0G -> 0G free; still short of the "
            "1073741824G target); cache exports: none configured; fake store: removed 1 layer, "
            "freed 0 GiB; images: not looked at while a build runs (4 tagged image(s) in the fake "
            "store, removable only between stages)");
  EXPECT_TRUE(store.removed().empty());
  EXPECT_EQ(count_containing(outcome.lines, "[disk-image] skipped: images are not removed while "
                                            "a build runs"),
            1);
  EXPECT_EQ(count_containing(outcome.lines, "[disk-trim] skipped: no cache root"), 1);
  EXPECT_EQ(count_containing(outcome.lines, "[disk-reclaim]"), 0) << "the record is the one line";
}

TEST_F(DiskGuard, NothingRemovedWithoutEngineLevers) {
  DiskPolicy policy;
  policy.path = "/proc";
  ReclaimOutcome outcome = reclaim(policy, "stage sdk", k_huge, {}, nullptr, false, false, {});
  EXPECT_FALSE(outcome.removed_any);
  EXPECT_FALSE(outcome.store_prune_ran);
  EXPECT_EQ(outcome.record,
            "WARN [disk-reclaim] stage sdk: NOTHING was removed (0G -> 0G free; still short of "
            "the 1073741824G target); cache exports: none configured; engine store: no engine "
            "levers here");
  EXPECT_EQ(count_containing(outcome.lines, "[disk-store] skipped: no engine levers here"), 1);
}

TEST_F(DiskGuard, AnAlreadyPrunedStoreIsNotPrunedAgain) {
  DiskPolicy policy;
  policy.path = "/proc";
  FakeStore store;
  ReclaimOutcome outcome = reclaim(policy, "w", k_huge, {}, &store, true, false, {});
  EXPECT_EQ(store.m_prunes.load(), 0);
  EXPECT_FALSE(outcome.store_prune_ran);
  EXPECT_EQ(count_containing(outcome.lines, "[disk-store] skipped: already pruned once here"), 1);
  EXPECT_NE(outcome.record.find("; fake store: already pruned once here;"), std::string::npos)
      << outcome.record;
}

TEST_F(DiskGuard, BetweenStagesStaleImagesGoFirstAndTheRecordNamesEveryRemoval) {
  make_six();
  DiskPolicy policy;
  policy.path = "/proc";
  policy.cache_root = m_cache; // another filesystem than /proc: not trimmed
  FakeStore store;
  store.m_stale = {"d1", "d2"};
  store.m_tagged = {"hello-base:1", "hello-app:1", "keep:1"};
  ReclaimOutcome outcome = reclaim(policy, "before stage app", k_huge, {"hello-tools"}, &store,
                                   false, true, {"hello-base:1", "hello-app:1"});
  EXPECT_EQ(store.removed(), (std::vector<std::string>{"d1", "d2", "hello-base:1", "hello-app:1"}));
  EXPECT_EQ(count_containing(outcome.lines, "[disk-image] removed "), 4) << joined(outcome.lines);
  EXPECT_EQ(on_disk(m_cache).size(), 6u);
  EXPECT_EQ(outcome.record,
            "[disk-reclaim] before stage app: freed 0 GiB (0G -> 0G free; still short of the "
            "1073741824G target); cache exports: untouched (" +
                m_cache.string() +
                " is on another filesystem than /proc); fake store: removed 1 layer, freed 0 "
                "GiB; images: removed 4 (d1, d2, hello-base:1, hello-app:1), freed 0 GiB");
}

TEST_F(DiskGuard, AStoreOnAnotherFilesystemIsLeftAloneAndTheRecordSaysWhy) {
  // Records on one disk, the engine store on another: removing images there frees nothing
  // here, so neither the prune nor the image pass may touch it.
  DiskPolicy policy;
  policy.path = "/proc";
  FakeStore store;
  store.m_location = m_root;
  store.m_stale = {"d1"};
  store.m_tagged = {"other-chain:1"};
  ReclaimOutcome outcome =
      reclaim(policy, "before stage app", k_huge, {}, &store, false, true, {"this-chain-base:1"});
  EXPECT_EQ(store.m_prunes.load(), 0);
  EXPECT_TRUE(store.removed().empty());
  EXPECT_FALSE(outcome.store_prune_ran);
  EXPECT_FALSE(outcome.removed_any);
  std::string why = "the fake store " + m_root.string() + " is on another filesystem than /proc";
  EXPECT_EQ(outcome.record,
            "WARN [disk-reclaim] before stage app: NOTHING was removed (0G -> 0G free; still "
            "short of the 1073741824G target); cache exports: none configured; fake store and "
            "its images: untouched (" +
                why + ")");
  EXPECT_EQ(count_containing(outcome.lines, "[disk-store] skipped: " + why), 1)
      << joined(outcome.lines);

  GateResult gate = stage_floor(policy, "app", 5, {}, &store, {"this-chain-base:1"});
  EXPECT_FALSE(gate.ok);
  EXPECT_NE(gate.message.find("fake store and its images: untouched (" + why + ")"),
            std::string::npos)
      << gate.message;
  EXPECT_TRUE(store.removed().empty());
}

TEST_F(DiskGuard, AStoreWhoseLocationIsUnknownIsLeftAlone) {
  DiskPolicy policy;
  policy.path = "/proc";
  FakeStore store;
  store.m_location_error = "tcp://10.0.0.5:1234 is remote";
  store.m_stale = {"d1"};
  ReclaimOutcome outcome = reclaim(policy, "w", k_huge, {}, &store, false, true, {"t:1"});
  EXPECT_EQ(store.m_prunes.load(), 0);
  EXPECT_TRUE(store.removed().empty());
  EXPECT_EQ(outcome.parts.back(),
            "fake store and its images: untouched (where the fake store keeps its data is unknown "
            "(tcp://10.0.0.5:1234 is remote), so it is not pruned for /proc)");
}

TEST_F(DiskGuard, AThrowingStoreIsReportedNotPropagated) {
  DiskPolicy policy;
  policy.path = "/proc";
  FakeStore store;
  store.m_throw = true;
  ReclaimOutcome outcome = reclaim(policy, "w", k_huge, {}, &store, false, false, {});
  EXPECT_TRUE(outcome.store_prune_ran);
  EXPECT_EQ(count_containing(outcome.lines, "[disk-store] prune failed: store exploded"), 1);
  EXPECT_FALSE(outcome.removed_any);
  EXPECT_NE(outcome.record.find("fake store: prune failed: store exploded, freed 0 GiB"),
            std::string::npos)
      << outcome.record;
}

TEST_F(DiskGuard, StageFloorPassesWithoutAFloorAndRefusesWhenShort) {
  DiskPolicy policy;
  policy.path = "/proc";
  FakeStore store;
  EXPECT_TRUE(stage_floor(policy, "app", 0, {}, &store, {}).ok);
  GateResult gate = stage_floor(policy, "app", 5, {}, &store, {});
  EXPECT_FALSE(gate.ok);
  EXPECT_EQ(gate.message,
            "0G free on /proc, stage app needs 5.00G and is still short by 5.00G after a reclaim "
            "(cache exports: none configured; fake store: removed 1 layer, freed 0 GiB; images: "
            "removed none of 0 stale image(s) and 0 tag(s) the rest of the run does not need): "
            "free space on /proc or lower the stage's disk floor");
  EXPECT_EQ(count_containing(gate.lines, "[disk-reclaim]"), 1);
  EXPECT_EQ(store.m_prunes.load(), 1);
}

class DiskWatch : public DiskTempDir {
protected:
  std::function<void(const std::string&)> sink() {
    return [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(m_mutex);
      m_log.push_back(line);
    };
  }
  std::vector<std::string> log() {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_log;
  }
  bool wait_for_lines(const std::string& needle, int n) {
    for (auto until = std::chrono::steady_clock::now() + 10s;
         std::chrono::steady_clock::now() < until; std::this_thread::sleep_for(5ms)) {
      if (count_containing(log(), needle) >= n) {
        return true;
      }
    }
    return false;
  }

  std::mutex m_mutex;
  std::vector<std::string> m_log;
};

TEST_F(DiskWatch, EveryTickLogsFreeSpace) {
  DiskPolicy policy;
  policy.path = m_root;
  policy.guard_gb = 0;
  DiskWatchdog watchdog(policy, sink(), nullptr);
  watchdog.tick_now();
  watchdog.tick_now();
  std::vector<std::string> lines = log();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_TRUE(std::regex_match(lines[0],
                               std::regex(R"(\[disk-watch\] [0-9.]+G free on )" + m_root.string())))
      << lines[0];
}

TEST_F(DiskWatch, TicksOnItsIntervalAndStopWakesItAtOnce) {
  DiskPolicy policy;
  policy.path = m_root;
  policy.watch_interval = 10ms;
  DiskWatchdog watchdog(policy, sink(), nullptr);
  watchdog.start("base", {});
  EXPECT_TRUE(wait_for_lines("[disk-watch]", 3));
  watchdog.stop();
  watchdog.stop();

  policy.watch_interval = 1h;
  DiskWatchdog slow(policy, sink(), nullptr);
  int before = count_containing(log(), "[disk-watch]");
  slow.start("base", {});
  ASSERT_TRUE(wait_for_lines("[disk-watch]", before + 1)); // its first tick comes at once
  // Returns only if stop() wakes the thread: otherwise it would sleep out its hour.
  slow.stop();
  EXPECT_EQ(count_containing(log(), "[disk-watch]"), before + 1);
}

TEST_F(DiskWatch, ReclaimsBelowTheGuardWithoutImagesAndPrunesOncePerEpisode) {
  DiskPolicy policy;
  policy.path = "/proc"; // 0 free: every tick is below the guard
  policy.guard_gb = 1;
  policy.buildkit_keep_gb = 30;
  FakeStore store;
  store.m_tagged = {"a:1", "b:1"};
  DiskWatchdog watchdog(policy, sink(), &store);
  EXPECT_EQ(count_containing(log(), "buildkit_keep_gb 30 raised to 100"), 1);
  watchdog.tick_now();
  watchdog.tick_now();
  watchdog.tick_now();
  EXPECT_EQ(store.m_prunes.load(), 1);
  EXPECT_EQ(store.m_last_keep.load(), 100);
  std::vector<std::string> lines = log();
  EXPECT_EQ(count_containing(lines, "[disk-watch] 0G free on /proc"), 3);
  EXPECT_EQ(count_containing(lines, "[disk-reclaim]"), 3);
  EXPECT_EQ(count_containing(lines, "[disk-store] skipped: already pruned once here"), 2);
  EXPECT_EQ(count_containing(lines, "images: not looked at while a build runs (2 tagged image(s) "
                                    "in the fake store"),
            3);
  EXPECT_TRUE(store.removed().empty());

  watchdog.start("app", {});
  EXPECT_TRUE(wait_for_lines("[disk-reclaim] watchdog during app", 1));
  watchdog.stop();
  EXPECT_EQ(store.m_prunes.load(), 2);
}

TEST_F(DiskWatch, AThrowingLogSinkDoesNotEscape) {
  DiskPolicy policy;
  policy.path = "/proc";
  policy.guard_gb = 1;
  policy.watch_interval = 10ms;
  std::atomic<int> calls{0};
  DiskWatchdog watchdog(
      policy,
      [&](const std::string&) {
        ++calls;
        throw std::runtime_error("sink down");
      },
      nullptr);
  EXPECT_NO_THROW(watchdog.tick_now());
  watchdog.start("base", {});
  for (int i = 0; i < 1000 && calls.load() < 10; ++i) {
    std::this_thread::sleep_for(5ms);
  }
  watchdog.stop();
  EXPECT_GE(calls.load(), 10);
}

} // namespace
} // namespace kiln
