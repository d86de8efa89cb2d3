// The disk guard on real small filesystems: each test mounts a fresh 8 MiB tmpfs, so every
// free-space figure is measured, exact (tmpfs allocates whole pages and nothing for folders)
// and moved by nothing but the test.
#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <thread>

#include <sys/mount.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "fake_store.h"

#include "disk/guard.h"
#include "disk/slugs.h"
#include "disk/store.h"
#include "disk/watchdog.h"
#include "util/fs.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::count_containing;
using testing::FakeStore;
using testing::joined;

constexpr uint64_t k_mib = uint64_t{1} << 20;
constexpr uint64_t k_page = 4096;
constexpr uint64_t k_slug = 512 * 1024;

/// Oldest first: the ages fall along this list while the names do not sort that way.
const std::vector<std::string> k_names = {"hello-sdk-amd64", "hello-base-amd64", "hello-app-arm64",
                                          "hello-tools",     "hello-app-amd64",  "hello-base-arm64",
                                          "hello-zlib",      "hello-sdk-arm64"};

double gb_of(uint64_t bytes) {
  return static_cast<double>(bytes) / static_cast<double>(k_gib);
}

void write_bytes(const fs::path& file, uint64_t size) {
  fs::create_directories(file.parent_path());
  std::ofstream out(file, std::ios::binary);
  std::string chunk(k_page, 'x');
  for (uint64_t left = size; left > 0;) {
    uint64_t n = std::min<uint64_t>(left, chunk.size());
    out.write(chunk.data(), static_cast<std::streamsize>(n));
    left -= n;
  }
}

class DiskTmpfs : public ::testing::Test {
protected:
  void SetUp() override {
    if (::geteuid() != 0) {
      GTEST_SKIP() << "mounting a tmpfs needs root";
    }
    m_mnt = fs::temp_directory_path() /
            ("kiln-tmpfs-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(m_mnt);
    if (::mount("tmpfs", m_mnt.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=8m") != 0) {
      fs::remove(m_mnt);
      GTEST_SKIP() << "cannot mount a tmpfs here";
    }
    m_mounted = true;
    m_cache = m_mnt / "cache";
    fs::create_directories(m_cache);
    ASSERT_EQ(free(), 8 * k_mib);
  }

  void TearDown() override {
    if (m_mounted) {
      ::umount2(m_mnt.c_str(), MNT_DETACH);
      std::error_code error;
      fs::remove(m_mnt, error);
    }
  }

  uint64_t free() const { return free_bytes(m_mnt).value(); }

  /// The first `count` of k_names, `k_slug` bytes each (a one-page index.json and a blob),
  /// dated 800, 700, ... minutes ago.
  void make_slugs(size_t count) {
    for (size_t i = 0; i < count; ++i) {
      fs::path dir = m_cache / k_names[i];
      write_bytes(dir / "index.json", k_page);
      write_bytes(dir / "blobs" / "sha256" / ("blob-" + k_names[i]), k_slug - k_page);
      fs::last_write_time(dir, fs::file_time_type::clock::now() -
                                   std::chrono::minutes(800 - 100 * static_cast<int>(i)));
    }
  }

  /// Fill with a ballast until exactly `free_after` bytes are free.
  void ballast_to(uint64_t free_after) {
    write_bytes(m_mnt / "ballast", free() - free_after);
    ASSERT_EQ(free(), free_after);
  }

  std::vector<std::string> slugs_left() const {
    std::vector<std::string> out;
    for (const Slug& slug : list_slugs(m_cache)) {
      out.push_back(slug.name);
    }
    return out;
  }

  std::vector<std::string> names(size_t from, size_t to) const {
    return std::vector<std::string>(k_names.begin() + static_cast<long>(from),
                                    k_names.begin() + static_cast<long>(to));
  }

  DiskPolicy policy() const {
    DiskPolicy p;
    p.path = m_mnt;
    p.cache_root = m_cache;
    p.watch_interval = 50ms;
    return p;
  }

  /// A store with a 256 KiB layer cache, one 256 KiB dangling image and four tagged ones of
  /// 512 KiB, of which hello-app:1 is a hard link to hello-base:1.
  std::unique_ptr<FakeStore> make_store() {
    auto store = std::make_unique<FakeStore>(FakeStore::files(m_mnt / "store"));
    write_bytes(store->m_dir / "layers", 256 * 1024);
    write_bytes(store->m_dir / "sha256:d1", 256 * 1024);
    write_bytes(store->m_dir / "hello-base:1", k_slug);
    fs::create_hard_link(store->m_dir / "hello-base:1", store->m_dir / "hello-app:1");
    write_bytes(store->m_dir / "hello-sdk:1", k_slug);
    write_bytes(store->m_dir / "hello-zlib:1", k_slug);
    store->m_stale = {"sha256:d1"};
    store->m_tagged = {"hello-base:1", "hello-app:1", "hello-sdk:1", "hello-zlib:1"};
    return store;
  }

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

  bool m_mounted = false;
  fs::path m_mnt;
  fs::path m_cache;
  std::mutex m_mutex;
  std::vector<std::string> m_log;
};

TEST_F(DiskTmpfs, PreflightPassesWithoutTrimming) {
  make_slugs(8);
  ballast_to(2 * k_mib);
  DiskPolicy p = policy();
  p.need_gb = gb_of(3 * k_mib / 2);
  GateResult gate = preflight(p);
  EXPECT_TRUE(gate.ok) << gate.message;
  EXPECT_EQ(gate.lines, std::vector<std::string>{"[disk] preflight: 0.00195G free on " +
                                                 m_mnt.string() + ", the chain needs 0.00146G"});
  EXPECT_EQ(slugs_left(), k_names);
}

TEST_F(DiskTmpfs, PreflightTrimsExactlyTheOldestSlugsNeeded) {
  make_slugs(8);
  ballast_to(2 * k_mib);
  DiskPolicy p = policy();
  p.need_gb = gb_of(13 * k_mib / 4); // 1.25 MiB short: three 512 KiB slugs
  GateResult gate = preflight(p);
  ASSERT_TRUE(gate.ok) << gate.message << "\n" << joined(gate.lines);
  EXPECT_EQ(slugs_left(), names(3, 8));
  EXPECT_EQ(free(), 7 * k_mib / 2);
  ASSERT_EQ(gate.lines.size(), 6u) << joined(gate.lines);
  EXPECT_EQ(gate.lines[1], "[disk-trim] removed hello-sdk-amd64 (0.000488 GiB, 13h20m old)");
  EXPECT_EQ(gate.lines[2], "[disk-trim] removed hello-base-amd64 (0.000488 GiB, 11h40m old)");
  EXPECT_EQ(gate.lines[3], "[disk-trim] removed hello-app-arm64 (0.000488 GiB, 10h00m old)");
  EXPECT_EQ(gate.lines[4], "[disk-trim] removed 3 slug(s), freed 0.00146 GiB; 0.00342G free now");
  EXPECT_EQ(gate.lines[5], "[disk] preflight: 0.00342G free on " + m_mnt.string() +
                               " after trimming, the chain needs 0.00317G");
}

TEST_F(DiskTmpfs, PreflightRefusesWhenTrimmingAllItMayIsNotEnough) {
  make_slugs(8);
  ballast_to(2 * k_mib);
  DiskPolicy p = policy();
  p.need_gb = gb_of(15 * k_mib / 2);
  GateResult gate = preflight(p);
  EXPECT_FALSE(gate.ok);
  EXPECT_EQ(slugs_left(), names(5, 8)) << "the newest 3 are kept";
  EXPECT_EQ(free(), 9 * k_mib / 2);
  EXPECT_EQ(gate.message,
            "0.00439G free on " + m_mnt.string() +
                ", the chain needs 0.00732G; trimmed 5 cache export(s) (0.00244 GiB) and it is "
                "still short by 0.00293G: free space on " +
                m_mnt.string() + " or lower [disk] need_gb; the largest folder kiln manages is " +
                m_cache.string() +
                " (0.00146 GiB in 3 cache export(s), the newest 3 of which are always kept)");
}

TEST_F(DiskTmpfs, ASlugThatCannotBeRemovedIsLoggedAndSkipped) {
  make_slugs(8);
  ballast_to(2 * k_mib);
  // A mount point cannot be removed (EBUSY) even by root. Mounting hides the slug's own mtime,
  // so date the mounted root as the oldest again.
  fs::path stuck = m_cache / k_names[0];
  ASSERT_EQ(::mount("tmpfs", stuck.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=1m"), 0);
  write_bytes(stuck / "index.json", k_page);
  fs::last_write_time(stuck, fs::file_time_type::clock::now() - 900min);
  DiskPolicy p = policy();
  p.need_gb = gb_of(3 * k_mib);
  GateResult gate = preflight(p);
  ::umount2(stuck.c_str(), MNT_DETACH);
  ASSERT_TRUE(gate.ok) << gate.message << "\n" << joined(gate.lines);
  EXPECT_EQ(count_containing(gate.lines, "[disk-trim] cannot remove hello-sdk-amd64: "), 1)
      << joined(gate.lines);
  EXPECT_EQ(count_containing(gate.lines, "[disk-trim] removed hello-base-amd64 ("), 1);
  EXPECT_EQ(count_containing(gate.lines, "[disk-trim] removed hello-app-arm64 ("), 1);
  EXPECT_EQ(count_containing(gate.lines, "[disk-trim] removed 2 slug(s), freed 0.000977 GiB; "
                                         "0.00293G free now"),
            1);
  EXPECT_EQ(free(), 3 * k_mib);
}

TEST_F(DiskTmpfs, StageFloorPassesAboveTheFloor) {
  make_slugs(8);
  ballast_to(2 * k_mib);
  GateResult gate = stage_floor(policy(), "app", gb_of(k_mib), {}, nullptr, {});
  EXPECT_TRUE(gate.ok);
  EXPECT_EQ(gate.lines, std::vector<std::string>{"[disk] stage app: 0.00195G free on " +
                                                 m_mnt.string() + ", floor 0.000977G"});
  EXPECT_EQ(slugs_left(), k_names);
}

TEST_F(DiskTmpfs, StageFloorTrimsUnprotectedSlugsAndPasses) {
  make_slugs(8);
  ballast_to(2 * k_mib);
  GateResult gate =
      stage_floor(policy(), "app", gb_of(3 * k_mib), {k_names[0], k_names[2]}, nullptr, {});
  ASSERT_TRUE(gate.ok) << gate.message;
  EXPECT_EQ(slugs_left(), (std::vector<std::string>{k_names[0], k_names[2], k_names[4], k_names[5],
                                                    k_names[6], k_names[7]}));
  EXPECT_EQ(free(), 3 * k_mib);
  EXPECT_EQ(count_containing(gate.lines, "[disk-reclaim]"), 1) << joined(gate.lines);
  EXPECT_EQ(gate.lines.back(), "[disk-reclaim] before stage app: freed 0.000977 GiB (0.00195G -> "
                               "0.00293G free); cache exports: removed 2 (hello-base-amd64, "
                               "hello-tools), freed 0.000977 GiB");
  EXPECT_EQ(count_containing(gate.lines, "[disk-store] skipped: 0.00293G free meets the 0.00293G "
                                         "target"),
            1);
}

TEST_F(DiskTmpfs, StageFloorRemovesImagesOneAtATimeUntilTheTarget) {
  make_slugs(3);
  auto store = make_store();
  ballast_to(2 * k_mib);
  GateResult gate = stage_floor(policy(), "app", gb_of(3 * k_mib), {}, store.get(),
                                {"hello-app:1", "hello-sdk:1", "hello-zlib:1"});
  ASSERT_TRUE(gate.ok) << gate.message << "\n" << joined(gate.lines);
  EXPECT_EQ(slugs_left(), names(0, 3)) << "the newest 3 are kept";
  EXPECT_EQ(store->m_prunes.load(), 1);
  EXPECT_EQ(store->removed(),
            (std::vector<std::string>{"sha256:d1", "hello-app:1", "hello-sdk:1"}));
  EXPECT_TRUE(fs::exists(store->m_dir / "hello-zlib:1")) << "the target was met before it";
  EXPECT_EQ(count_containing(gate.lines, "[disk-image] removed hello-app:1: freed 0 GiB; "
                                         "0.00244G free now"),
            1)
      << joined(gate.lines);
  EXPECT_EQ(count_containing(gate.lines, "[disk-reclaim]"), 1);
  // hello-app:1 shares its layer with hello-base:1: removed, it freed nothing, and both say so.
  EXPECT_EQ(gate.lines.back(),
            "[disk-reclaim] before stage app: freed 0.000977 GiB (0.00195G -> 0.00293G free); "
            "cache exports: removed none of 3 (the newest 3 and 0 protected are kept); fake "
            "store: removed the layer cache, freed 0.000244 GiB; images: removed 3 (sha256:d1, "
            "hello-app:1, hello-sdk:1), freed 0.000732 GiB");
}

TEST_F(DiskTmpfs, StageFloorRefusesWhenEveryLeverIsNotEnough) {
  make_slugs(3);
  auto store = make_store();
  ballast_to(2 * k_mib);
  GateResult gate = stage_floor(policy(), "app", gb_of(7 * k_mib), {}, store.get(),
                                {"hello-app:1", "hello-sdk:1", "hello-zlib:1"});
  EXPECT_FALSE(gate.ok);
  EXPECT_EQ(free(), 7 * k_mib / 2);
  EXPECT_TRUE(fs::exists(store->m_dir / "hello-base:1")) << "not removable: the run needs it";
  EXPECT_EQ(gate.message,
            "0.00342G free on " + m_mnt.string() +
                ", stage app needs 0.00684G and is still short by 0.00342G after a reclaim (cache "
                "exports: removed none of 3 (the newest 3 and 0 protected are kept); fake store: "
                "removed the layer cache, freed 0.000244 GiB; images: removed 4 (sha256:d1, "
                "hello-app:1, hello-sdk:1, hello-zlib:1), freed 0.00122 GiB): free space on " +
                m_mnt.string() +
                " or lower the stage's disk floor; the largest folder kiln manages is " +
                m_cache.string() +
                " (0.00146 GiB in 3 cache export(s), the newest 3 of which are always kept)");
  EXPECT_EQ(gate.lines.back(),
            "[disk-reclaim] before stage app: freed 0.00146 GiB (0.00195G -> 0.00342G free; "
            "still short of the 0.00684G target); cache exports: removed none of 3 (the newest "
            "3 and 0 protected are kept); fake store: removed the layer cache, freed 0.000244 "
            "GiB; images: removed 4 (sha256:d1, hello-app:1, hello-sdk:1, hello-zlib:1), freed "
            "0.00122 GiB");
}

TEST_F(DiskTmpfs, WatchdogLogsEveryTickAndReclaimsBelowTheGuard) {
  make_slugs(8);
  ballast_to(2 * k_mib);
  DiskPolicy p = policy();
  p.guard_gb = gb_of(3 * k_mib);
  DiskWatchdog watchdog(p, sink(), nullptr);
  watchdog.start("sdk", {k_names[0]});
  ASSERT_TRUE(wait_for_lines("[disk-watch]", 4));
  watchdog.stop();
  std::vector<std::string> lines = log();
  std::string watch = "[disk-watch] ";
  EXPECT_EQ(lines[0], watch + "0.00195G free on " + m_mnt.string());
  EXPECT_EQ(count_containing(lines, watch + "0.00293G free on " + m_mnt.string()),
            count_containing(lines, watch) - 1)
      << joined(lines);
  ASSERT_EQ(count_containing(lines, "[disk-reclaim]"), 1) << joined(lines);
  EXPECT_EQ(count_containing(lines, "[disk-reclaim] watchdog during sdk: freed 0.000977 GiB "
                                    "(0.00195G -> 0.00293G free); cache exports: removed 2 "
                                    "(hello-base-amd64, hello-app-arm64), freed 0.000977 GiB"),
            1);
  EXPECT_EQ(slugs_left(), (std::vector<std::string>{k_names[0], k_names[3], k_names[4], k_names[5],
                                                    k_names[6], k_names[7]}));

  // A second process eats a MiB: the next tick records it and reclaims again.
  write_bytes(m_mnt / "eater", k_mib);
  watchdog.tick_now();
  lines = log();
  EXPECT_EQ(count_containing(lines, watch + "0.00195G free on " + m_mnt.string()), 2);
  EXPECT_EQ(count_containing(lines, "[disk-reclaim]"), 2);
  EXPECT_EQ(slugs_left(),
            (std::vector<std::string>{k_names[0], k_names[5], k_names[6], k_names[7]}));
  EXPECT_EQ(free(), 3 * k_mib);
}

TEST_F(DiskTmpfs, NothingReclaimableWithoutEngineLeversWarns) {
  make_slugs(3);
  ballast_to(2 * k_mib);
  DiskPolicy p = policy();
  p.guard_gb = gb_of(3 * k_mib);
  DiskWatchdog watchdog(p, sink(), nullptr);
  watchdog.start("sdk", {});
  ASSERT_TRUE(wait_for_lines("[disk-reclaim]", 1));
  watchdog.stop();
  EXPECT_EQ(count_containing(log(), "WARN [disk-reclaim] watchdog during sdk: NOTHING was "
                                    "removed (0.00195G -> 0.00195G free; still short of the "
                                    "0.00293G target); cache exports: removed none of 3 (the "
                                    "newest 3 and 0 protected are kept); engine store: no engine "
                                    "levers here"),
            count_containing(log(), "[disk-reclaim]"))
      << joined(log());
  EXPECT_EQ(slugs_left(), names(0, 3));
}

TEST_F(DiskTmpfs, NothingReclaimableNamesTheTaggedImagesItDidNotLookAt) {
  make_slugs(3);
  FakeStore store = FakeStore::files(m_mnt / "store"); // no layer file: its prune frees nothing
  store.m_tagged = {"a:1", "b:1", "c:1", "d:1", "e:1"};
  store.m_stale = {"sha256:x"};
  ballast_to(2 * k_mib);
  DiskPolicy p = policy();
  p.guard_gb = gb_of(3 * k_mib);
  DiskWatchdog watchdog(p, sink(), &store);
  watchdog.tick_now();
  std::vector<std::string> lines = log();
  EXPECT_EQ(lines.back(), "WARN [disk-reclaim] watchdog: NOTHING was removed (0.00195G -> "
                          "0.00195G free; still short of the 0.00293G target); cache exports: "
                          "removed none of 3 (the newest 3 and 0 protected are kept); fake "
                          "store: removed nothing, freed 0 GiB; images: not looked at while a "
                          "build runs (5 tagged image(s) in the fake store, removable only "
                          "between stages)")
      << joined(lines);
  EXPECT_EQ(store.m_prunes.load(), 1);
  EXPECT_TRUE(store.removed().empty());
}

TEST_F(DiskTmpfs, AStoreOnAnotherFilesystemIsNeverTouchedForThisOne) {
  // The records' tmpfs is short; the store lives on the disk under the temp folder. Its images
  // and layers are there in full, and a floor here must not take any of them.
  make_slugs(3);
  fs::path away = m_mnt.string() + "-store";
  FakeStore store = FakeStore::files(away);
  write_bytes(away / "layers", 256 * 1024);
  write_bytes(away / "sha256:d1", 256 * 1024);
  write_bytes(away / "other-chain:1", k_slug);
  store.m_stale = {"sha256:d1"};
  store.m_tagged = {"other-chain:1"};
  ballast_to(2 * k_mib);
  GateResult gate = stage_floor(policy(), "app", gb_of(3 * k_mib), {}, &store, {"other-chain:1"});
  EXPECT_FALSE(gate.ok);
  EXPECT_EQ(store.m_prunes.load(), 0);
  EXPECT_TRUE(store.removed().empty());
  EXPECT_TRUE(fs::exists(away / "layers"));
  EXPECT_TRUE(fs::exists(away / "sha256:d1"));
  EXPECT_TRUE(fs::exists(away / "other-chain:1"));
  EXPECT_EQ(free(), 2 * k_mib);
  EXPECT_EQ(gate.lines.back(),
            "WARN [disk-reclaim] before stage app: NOTHING was removed (0.00195G -> 0.00195G "
            "free; still short of the 0.00293G target); cache exports: removed none of 3 (the "
            "newest 3 and 0 protected are kept); fake store and its images: untouched (the fake "
            "store " +
                away.string() + " is on another filesystem than " + m_mnt.string() + ")");
  std::error_code error;
  fs::remove_all(away, error);
}

TEST_F(DiskTmpfs, TheStorePruneRunsOncePerEpisode) {
  make_slugs(3);
  auto store = make_store();
  ballast_to(2 * k_mib);
  DiskPolicy p = policy();
  p.guard_gb = gb_of(3 * k_mib);
  DiskWatchdog watchdog(p, sink(), store.get());
  watchdog.start("sdk", {});
  ASSERT_TRUE(wait_for_lines("[disk-watch]", 4));
  watchdog.stop();
  std::vector<std::string> lines = log();
  int ticks = count_containing(lines, "[disk-watch]");
  EXPECT_EQ(store->m_prunes.load(), 1);
  EXPECT_EQ(count_containing(lines, "[disk-reclaim]"), ticks) << "one record per tick below";
  EXPECT_EQ(count_containing(lines, "[disk-reclaim] watchdog during sdk: freed 0.000244 GiB "
                                    "(0.00195G -> 0.00220G free; still short of the 0.00293G "
                                    "target); cache exports: removed none of 3 (the newest 3 and "
                                    "0 protected are kept); fake store: removed the layer cache, "
                                    "freed 0.000244 GiB; images: not looked at while a build runs "
                                    "(4 tagged image(s) in the fake store"),
            1)
      << joined(lines);
  EXPECT_EQ(count_containing(lines, "[disk-store] skipped: already pruned once here"), ticks - 1);
  EXPECT_EQ(count_containing(lines, "NOTHING was removed (0.00220G -> 0.00220G free; still short "
                                    "of the 0.00293G target); cache exports: removed none of 3 "
                                    "(the newest 3 and 0 protected are kept); fake store: already "
                                    "pruned once here; images: not looked at while a build runs "
                                    "(4 tagged image(s) in the fake store"),
            ticks - 1);
  EXPECT_TRUE(store->removed().empty()) << "no image is removed while a build runs";

  watchdog.start("app", {});
  ASSERT_TRUE(wait_for_lines("watchdog during app", 2));
  watchdog.stop();
  EXPECT_EQ(store->m_prunes.load(), 2) << "a new episode allows one more prune";
  EXPECT_EQ(store->m_last_keep.load(), 120);
}

} // namespace
} // namespace kiln
