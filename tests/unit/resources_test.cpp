// resources/: the /proc readers, the sampler on a real temp dir, the summary and the budget.
#include <chrono>
#include <fstream>
#include <thread>

#include <unistd.h>

#include <gtest/gtest.h>

#include "resources/budget.h"
#include "resources/host_stats.h"
#include "resources/sampler.h"
#include "util/fs.h"
#include "util/strings.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

/// A folder of its own per test, removed afterwards.
class TempDirTest : public ::testing::Test {
protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() /
            ("kiln-resources-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(m_dir);
    fs::create_directories(m_dir);
  }
  void TearDown() override { fs::remove_all(m_dir); }

  fs::path write(const std::string& name, const std::string& text) {
    fs::path path = m_dir / name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  std::string contents(const fs::path& path) {
    auto text = read_file(path);
    EXPECT_TRUE(text) << text.error();
    return text.value_or("");
  }

  fs::path m_dir;
};

// --- /proc readers ---------------------------------------------------------------------------

using ProcReadersTest = TempDirTest;

TEST_F(ProcReadersTest, ParsesTheAggregateCpuLine) {
  auto times = read_cpu_times(write("stat", "cpu  100 20 30 400 50 6 7 8 0 0\n"
                                            "cpu0 50 10 15 200 25 3 3 4 0 0\n"
                                            "intr 12345\n"));
  ASSERT_TRUE(times) << times.error();
  EXPECT_EQ(times->total, 621u);
  EXPECT_EQ(times->busy, 621u - 400 - 50);
}

TEST_F(ProcReadersTest, LeavesOutGuestTimeTheKernelAlreadyCountsInUser) {
  auto times = read_cpu_times(write("stat", "cpu  100 20 30 400 50 6 7 8 90 10\n"));
  ASSERT_TRUE(times) << times.error();
  EXPECT_EQ(times->total, 621u);
  EXPECT_EQ(times->busy, 171u);
}

TEST_F(ProcReadersTest, AcceptsTheFourFieldsOfOldKernels) {
  auto times = read_cpu_times(write("stat", "cpu 1 2 3 4\n"));
  ASSERT_TRUE(times) << times.error();
  EXPECT_EQ(times->total, 10u);
  EXPECT_EQ(times->busy, 6u);
}

TEST_F(ProcReadersTest, FindsTheCpuLineWhereverItIs) {
  auto times = read_cpu_times(write("stat", "cpu0 9 9 9 9\ncpu 1 2 3 4 5\n"));
  ASSERT_TRUE(times) << times.error();
  EXPECT_EQ(times->total, 15u);
  EXPECT_EQ(times->busy, 6u);
}

TEST_F(ProcReadersTest, CpuErrorsNameTheFile) {
  auto missing = read_cpu_times(m_dir / "absent");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().find("absent"), std::string::npos) << missing.error();

  auto no_line = read_cpu_times(write("stat", "cpu0 1 2 3 4\nintr 5\n"));
  ASSERT_FALSE(no_line);
  EXPECT_NE(no_line.error().find("no aggregate cpu line"), std::string::npos) << no_line.error();

  auto short_line = read_cpu_times(write("short", "cpu 1 2 x\n"));
  ASSERT_FALSE(short_line);
  EXPECT_NE(short_line.error().find("short"), std::string::npos) << short_line.error();
}

TEST_F(ProcReadersTest, ParsesMeminfo) {
  auto mem = read_meminfo(write("meminfo", "MemTotal:       16318480 kB\n"
                                           "MemFree:         1234567 kB\n"
                                           "MemAvailable:    8159240 kB\n"
                                           "Buffers:          123456 kB\n"
                                           "Committed_AS:   20971520 kB\n"
                                           "VmallocTotal:   34359738367 kB\n"));
  ASSERT_TRUE(mem) << mem.error();
  EXPECT_EQ(mem->total_kb, 16318480u);
  EXPECT_EQ(mem->available_kb, 8159240u);
  EXPECT_EQ(mem->committed_kb, 20971520u);
}

TEST_F(ProcReadersTest, MeminfoNamesTheMissingKey) {
  auto mem =
      read_meminfo(write("meminfo", "MemTotal: 100 kB\nMemFree: 50 kB\nCommitted_AS: 7 kB\n"));
  ASSERT_FALSE(mem);
  EXPECT_NE(mem.error().find("MemAvailable"), std::string::npos) << mem.error();
  EXPECT_NE(mem.error().find("meminfo"), std::string::npos) << mem.error();
}

TEST_F(ProcReadersTest, RealProcFilesParse) {
  auto times = read_cpu_times();
  ASSERT_TRUE(times) << times.error();
  EXPECT_GT(times->total, 0u);
  EXPECT_LE(times->busy, times->total);
  auto mem = read_meminfo();
  ASSERT_TRUE(mem) << mem.error();
  EXPECT_GT(mem->total_kb, 0u);
  EXPECT_LE(mem->available_kb, mem->total_kb);
  EXPECT_GE(online_cores(), 1);
}

TEST(ProcReaders, CpuPercentIsBusyOverTotalDeltas) {
  EXPECT_DOUBLE_EQ(cpu_percent({100, 1000}, {150, 1100}), 50.0);
  EXPECT_DOUBLE_EQ(cpu_percent({100, 1000}, {200, 1100}), 100.0);
  EXPECT_DOUBLE_EQ(cpu_percent({100, 1000}, {100, 1400}), 0.0);
  EXPECT_DOUBLE_EQ(cpu_percent({0, 0}, {1, 4}), 25.0);
}

TEST(ProcReaders, CpuPercentIsZeroWhenNoTimePassedOrCountersWentBack) {
  EXPECT_DOUBLE_EQ(cpu_percent({100, 1000}, {100, 1000}), 0.0);
  EXPECT_DOUBLE_EQ(cpu_percent({100, 1000}, {50, 900}), 0.0);
  EXPECT_DOUBLE_EQ(cpu_percent({100, 1000}, {90, 1100}), 0.0);
}

// --- the sampler -----------------------------------------------------------------------------

using ResourceSamplerTest = TempDirTest;

TEST_F(ResourceSamplerTest, WritesRowsOfEachPhaseInOrder) {
  fs::path csv = m_dir / "resources.csv";
  {
    ResourceSampler sampler(csv, m_dir, 50ms);
    ASSERT_TRUE(sampler.start());
    sampler.set_phase("a");
    std::this_thread::sleep_for(200ms);
    sampler.set_phase("b");
    sampler.stop();
  }
  std::string text = contents(csv);
  ASSERT_EQ(text.substr(0, k_resource_csv_header.size()), k_resource_csv_header);

  auto rows = read_resource_csv(csv);
  ASSERT_TRUE(rows) << rows.error();
  // startup (at start), a (its change), ~4 ticks of a, b (its change), b (the final row).
  ASSERT_GE(rows->size(), 5u);
  EXPECT_EQ(rows->front().phase, k_initial_phase);
  EXPECT_EQ((*rows)[1].phase, "a");
  EXPECT_EQ(rows->back().phase, "b");
  EXPECT_EQ((*rows)[rows->size() - 2].phase, "b"); // the change row, then the final one
  size_t a_rows = 0;
  int previous = 0;
  for (const ResourceRow& row : *rows) {
    // Phases only ever move forward: startup -> a -> b.
    int order = row.phase == "b" ? 2 : row.phase == "a" ? 1 : 0;
    EXPECT_GE(order, previous) << row.phase;
    previous = order;
    a_rows += row.phase == "a";
    EXPECT_GT(row.free_disk_gb, 0) << row.time;
    EXPECT_GT(row.free_ram_gb, 0) << row.time;
    EXPECT_GE(row.cpu_pct, 0);
    EXPECT_LE(row.cpu_pct, 100);
    EXPECT_EQ(row.time.size(), 20u) << row.time;
  }
  EXPECT_GE(a_rows, 2u) << text; // the change row and at least one tick in 200 ms

  // Written again, the parsed rows give back the very same file.
  fs::path copy = m_dir / "copy.csv";
  ASSERT_TRUE(write_file_atomic(copy, k_resource_csv_header));
  AppendFile file;
  ASSERT_TRUE(file.open(copy));
  for (const ResourceRow& row : *rows) {
    append_resource_row(file, row);
  }
  EXPECT_EQ(contents(copy), text);
}

// from_chars reads nan, inf and 1e308 as numbers; summed into a phase they printed as nan or
// inf minutes of CPU. A negative size and a CPU share above 100 % are no sample either.
TEST_F(ResourceSamplerTest, ValuesNoSamplerWritesAreRefusedWithTheirLine) {
  const std::string header(k_resource_csv_header);
  const std::string good = "2026-12-02T16:59:29Z,base,50.0,22.9,0.1,75.0\n";
  const std::pair<std::string, std::string> cases[] = {
      {"2026-12-02T16:59:39Z,base,nan,22.9,0.1,75.0\n", "cpu_pct `nan`"},
      {"2026-12-02T16:59:39Z,base,50.0,inf,0.1,75.0\n", "free_ram_gb `inf`"},
      {"2026-12-02T16:59:39Z,base,50.0,22.9,1e308,75.0\n", "committed_gb `1e308`"},
      {"2026-12-02T16:59:39Z,base,50.0,22.9,0.1,-1\n", "free_disk_gb `-1`"},
      {"2026-12-02T16:59:39Z,base,100.5,22.9,0.1,75.0\n", "cpu_pct `100.5`"},
      {"2026-12-02T16:59:39Z,base,50.0,-nan,0.1,75.0\n", "free_ram_gb `-nan`"},
  };
  for (const auto& [row, named] : cases) {
    fs::path csv = write("resources.csv", header + good + row);
    auto rows = read_resource_csv(csv);
    ASSERT_FALSE(rows) << row;
    EXPECT_NE(rows.error().find(csv.string() + ":3: " + named), std::string::npos) << rows.error();
    EXPECT_NE(rows.error().find("correct the line or delete it"), std::string::npos)
        << rows.error();
  }
  auto edge = read_resource_csv(
      write("resources.csv", header + "2026-12-02T16:59:29Z,base,100,0,0,1000000000\n"));
  ASSERT_TRUE(edge) << edge.error();
}

TEST_F(ResourceSamplerTest, APhaseChangeIsWrittenAtOnceAndStopWakesTheThread) {
  fs::path csv = m_dir / "resources.csv";
  ResourceSampler sampler(csv, m_dir, std::chrono::hours(1));
  ASSERT_TRUE(sampler.start());
  sampler.set_phase("pull");
  auto rows = read_resource_csv(csv);
  ASSERT_TRUE(rows) << rows.error();
  ASSERT_EQ(rows->size(), 2u); // the killed-now view: start row and the change row are on disk
  EXPECT_EQ((*rows)[1].phase, "pull");

  // With an hour's interval, a stop() that waited for it would outlast the test's time limit.
  sampler.stop();
  rows = read_resource_csv(csv);
  ASSERT_TRUE(rows) << rows.error();
  ASSERT_EQ(rows->size(), 3u);
  EXPECT_EQ((*rows)[2].phase, "pull");
}

TEST_F(ResourceSamplerTest, StopTwiceOrWithoutStartIsFine) {
  ResourceSampler never_started(m_dir / "never.csv", m_dir, 50ms);
  never_started.stop();
  EXPECT_FALSE(fs::exists(m_dir / "never.csv"));

  fs::path csv = m_dir / "resources.csv";
  ResourceSampler sampler(csv, m_dir, 50ms);
  ASSERT_TRUE(sampler.start());
  sampler.stop();
  auto once = contents(csv);
  sampler.stop();
  EXPECT_EQ(contents(csv), once);
}

TEST_F(ResourceSamplerTest, StartTwiceIsAnError) {
  ResourceSampler sampler(m_dir / "resources.csv", m_dir, 50ms);
  ASSERT_TRUE(sampler.start());
  auto again = sampler.start();
  ASSERT_FALSE(again);
  EXPECT_NE(again.error().find("already started"), std::string::npos) << again.error();
}

TEST_F(ResourceSamplerTest, CreatesTheFolderAndStopsInItsDestructor) {
  fs::path csv = m_dir / "run" / "resources.csv";
  {
    ResourceSampler sampler(csv, m_dir / "not-yet", std::chrono::hours(1));
    sampler.set_phase("prepare"); // before start(): names the first row, writes nothing
    ASSERT_TRUE(sampler.start());
    sampler.set_phase("prepare"); // unchanged: no row
  }
  auto rows = read_resource_csv(csv);
  ASSERT_TRUE(rows) << rows.error();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].phase, "prepare");
  EXPECT_EQ((*rows)[1].phase, "prepare");
  EXPECT_GT((*rows)[0].free_disk_gb, 0); // measured on the nearest folder that exists
}

TEST_F(ResourceSamplerTest, QuotesOnlyPhasesThatNeedIt) {
  fs::path csv = m_dir / "resources.csv";
  ASSERT_TRUE(write_file_atomic(csv, k_resource_csv_header));
  AppendFile file;
  ASSERT_TRUE(file.open(csv));
  append_resource_row(file, {"2026-12-02T14:00:00Z", "build base", 12.345, 3.25, 7.04, 100});
  append_resource_row(file, {"2026-12-02T14:00:20Z", "make \"all\", test", 99.95, 0, 0.05, 1});
  append_resource_row(file, {"2026-12-02T14:00:40Z", "two\nlines", 0, 0, 0, 0});
  EXPECT_EQ(contents(csv), std::string(k_resource_csv_header) +
                               "2026-12-02T14:00:00Z,build base,12.3,3.2,7.0,100.0\n"
                               "2026-12-02T14:00:20Z,\"make \"\"all\"\", test\",100.0,0.0,0.1,1.0\n"
                               "2026-12-02T14:00:40Z,two lines,0.0,0.0,0.0,0.0\n");
  auto rows = read_resource_csv(csv);
  ASSERT_TRUE(rows) << rows.error();
  ASSERT_EQ(rows->size(), 3u);
  EXPECT_EQ((*rows)[1].phase, "make \"all\", test");
  EXPECT_DOUBLE_EQ((*rows)[1].cpu_pct, 100.0);
  EXPECT_EQ((*rows)[2].phase, "two lines");
}

TEST(ResourceSampler, SampleOnceMeasuresTheHost) {
  CpuBaseline cpu;
  ResourceRow first = sample_once("p", "/", cpu);
  EXPECT_GT(cpu.last.total, 0u);
  EXPECT_EQ(first.phase, "p");
  EXPECT_GT(first.free_ram_gb, 0);
  EXPECT_GT(first.committed_gb, 0);
  EXPECT_GT(first.free_disk_gb, 0);
  EXPECT_EQ(first.time.back(), 'Z');
}

TEST(ResourceSampler, ARowMomentsAfterTheLastMeasuresFromTheReadingBefore) {
  CpuBaseline cpu;
  EXPECT_DOUBLE_EQ(cpu_since(cpu, {100, 1000}), 10.0); // since boot
  EXPECT_DOUBLE_EQ(cpu_since(cpu, {500, 1800}), 50.0); // a tick's row: 400 of 800 ticks
  // A stage boundary 3 ticks later, all of them busy: 100 % over so short a time is noise. It
  // reads since the reading before (403 of 803 ticks) and keeps the last one.
  EXPECT_NEAR(cpu_since(cpu, {503, 1803}), 100.0 * 403 / 803, 1e-9);
  EXPECT_EQ(cpu.last.total, 1800u);
  // The next tick measures from the last reading kept.
  EXPECT_DOUBLE_EQ(cpu_since(cpu, {600, 2000}), 50.0);
  EXPECT_EQ(cpu.last.total, 2000u);
}

// --- reading an old CSV ----------------------------------------------------------------------

using ResourceCsvTest = TempDirTest;

TEST_F(ResourceCsvTest, ErrorsNameTheFileAndTheLine) {
  std::string header(k_resource_csv_header);
  std::string good = "2026-12-02T14:00:00Z,a,1.0,2.0,3.0,4.0\n";
  struct Case {
    std::string text;
    std::string expected;
  };
  std::vector<Case> cases = {
      {header + good + "not,a,row\n", "bad.csv:3: expected 6 fields, found 3"},
      {header + good + good + "2026-12-02T14:00:40Z,a,1.0,lots,3.0,4.0\n",
       "bad.csv:4: free_ram_gb `lots` is not a number"},
      {header + "yesterday,a,1.0,2.0,3.0,4.0\n", "bad.csv:2: time `yesterday` is not UTC"},
      {header + "2026-12-02T14:00:00Z,\"open,1.0,2.0,3.0,4.0\n", "bad.csv:2: unterminated quote"},
      {"time,phase\n" + good, "bad.csv:1: expected the header"},
      {"", "bad.csv: empty"},
  };
  for (const Case& c : cases) {
    auto rows = read_resource_csv(write("bad.csv", c.text));
    ASSERT_FALSE(rows) << c.text;
    EXPECT_NE(rows.error().find(c.expected), std::string::npos) << rows.error();
  }
  auto missing = read_resource_csv(m_dir / "absent.csv");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().find("absent.csv"), std::string::npos) << missing.error();
}

TEST_F(ResourceCsvTest, SkipsBlankLinesAndCarriageReturns) {
  auto rows = read_resource_csv(write("ok.csv",
                                      "time,phase,cpu_pct,free_ram_gb,committed_gb,free_disk_gb\r\n"
                                      "2026-12-02T14:00:00Z,a,1.5,2.0,3.0,4.0\r\n"
                                      "\n"
                                      "2026-12-02T14:00:20.250Z,,0.0,2.0,3.0,4.0\n"));
  ASSERT_TRUE(rows) << rows.error();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_DOUBLE_EQ((*rows)[0].cpu_pct, 1.5);
  EXPECT_EQ((*rows)[1].phase, "");
}

// --- the per-phase summary -------------------------------------------------------------------

ResourceRow row(const std::string& time, const std::string& phase, double cpu, double ram,
                double disk) {
  return {"2026-12-02T" + time + "Z", phase, cpu, ram, 1.0, disk};
}

TEST(ResourceSummary, AttributesEachIntervalToThePhaseThatStartsIt) {
  auto phases = summarize({
      row("14:00:00", "pull", 10, 8, 100),
      row("14:00:20", "pull", 30, 6, 90),
      row("14:00:40", "build", 50, 4, 80),
      row("14:01:40", "build", 70, 5, 70),
      row("14:02:00", "push", 5, 9, 60),
  });
  ASSERT_EQ(phases.size(), 3u);
  EXPECT_EQ(phases[0].phase, "pull");
  EXPECT_NEAR(phases[0].minutes, 40.0 / 60, 1e-9); // up to the first build row
  EXPECT_DOUBLE_EQ(phases[0].avg_cpu, 20);
  EXPECT_DOUBLE_EQ(phases[0].peak_cpu, 30);
  EXPECT_DOUBLE_EQ(phases[0].min_free_ram_gb, 6);
  EXPECT_DOUBLE_EQ(phases[0].min_free_disk_gb, 90);
  EXPECT_EQ(phases[0].samples, 2);

  EXPECT_EQ(phases[1].phase, "build");
  EXPECT_NEAR(phases[1].minutes, 80.0 / 60, 1e-9);
  EXPECT_DOUBLE_EQ(phases[1].avg_cpu, 60);
  EXPECT_DOUBLE_EQ(phases[1].peak_cpu, 70);
  EXPECT_DOUBLE_EQ(phases[1].min_free_ram_gb, 4);
  EXPECT_DOUBLE_EQ(phases[1].min_free_disk_gb, 70);
  EXPECT_EQ(phases[1].samples, 2);

  EXPECT_EQ(phases[2].phase, "push");
  EXPECT_DOUBLE_EQ(phases[2].minutes, 0); // the last row of the file adds no time
  EXPECT_EQ(phases[2].samples, 1);
}

TEST(ResourceSummary, APhaseThatComesBackKeepsItsPlaceAndAddsOnlyItsOwnTime) {
  auto phases = summarize({
      row("14:00:00", "build", 100, 8, 100),
      row("14:01:00", "retry-wait", 0, 8, 100),
      row("14:03:00", "build", 50, 2, 100),
      row("14:04:00", "build", 50, 2, 100),
  });
  ASSERT_EQ(phases.size(), 2u);
  EXPECT_EQ(phases[0].phase, "build");
  EXPECT_NEAR(phases[0].minutes, 2, 1e-9);
  EXPECT_NEAR(phases[0].avg_cpu, 200.0 / 3, 1e-9);
  EXPECT_DOUBLE_EQ(phases[0].min_free_ram_gb, 2);
  EXPECT_EQ(phases[1].phase, "retry-wait");
  EXPECT_NEAR(phases[1].minutes, 2, 1e-9);
}

TEST(ResourceSummary, NoRowsNoPhases) {
  EXPECT_TRUE(summarize({}).empty());
}

TEST(ResourceSummary, FormatsAnAlignedTable) {
  auto text = format_summary(summarize({
      row("14:00:00", "pull", 10, 8, 100),
      row("14:00:30", "build stage", 95.5, 1.25, 12.5),
      row("14:10:30", "build stage", 90, 2, 10),
  }));
  auto lines = split(text, '\n');
  ASSERT_EQ(lines.size(), 4u) << text; // header, two phases, the empty tail after the last \n
  EXPECT_EQ(lines[0], "phase        minutes  avg_cpu  peak_cpu  min_free_ram_gb  min_free_disk_gb");
  EXPECT_EQ(lines[1], "pull             0.5     10.0      10.0              8.0             100.0");
  EXPECT_EQ(lines[2], "build stage     10.0     92.8      95.5              1.2              10.0");
  EXPECT_EQ(format_summary({}),
            "phase  minutes  avg_cpu  peak_cpu  min_free_ram_gb  min_free_disk_gb\n");
}

// --- the job budget --------------------------------------------------------------------------

MemInfo ram_gb(double total) {
  MemInfo mem;
  mem.total_kb = static_cast<uint64_t>(total * 1024 * 1024);
  return mem;
}

TEST(Budget, DefaultReserveIs36PercentOfRamButAtLeast2Gb) {
  // The measured host: 61 GB usable, 22 GB had to stay with the host.
  EXPECT_NEAR(default_host_reserve_gb(61), 22, 0.05);
  EXPECT_DOUBLE_EQ(default_host_reserve_gb(100), 36);
  EXPECT_DOUBLE_EQ(default_host_reserve_gb(8), 2.88);
  EXPECT_DOUBLE_EQ(default_host_reserve_gb(4), 2);
}

TEST(Budget, AutomaticReserve) {
  Budget b = job_budget(ram_gb(50), 16, std::nullopt, std::nullopt, 4, std::nullopt);
  EXPECT_DOUBLE_EQ(b.host_reserve_gb, 18);
  EXPECT_DOUBLE_EQ(b.memory_limit_gb, 32);
  EXPECT_EQ(b.jobs, 8);
  EXPECT_EQ(b.cores, 16);
  EXPECT_EQ(b.reason, "jobs 8 = min(16 cores, 32.0 GB / 4.0 GB per job); "
                      "memory limit 32.0 GB = 50.0 GB RAM - 18.0 GB default reserve");
}

TEST(Budget, ExplicitReserve) {
  Budget b = job_budget(ram_gb(18), 8, 4.0, std::nullopt, 4, std::nullopt);
  EXPECT_DOUBLE_EQ(b.memory_limit_gb, 14);
  EXPECT_EQ(b.jobs, 3);
  EXPECT_EQ(b.reason, "jobs 3 = min(8 cores, 14.0 GB / 4.0 GB per job); "
                      "memory limit 14.0 GB = 18.0 GB RAM - 4.0 GB reserve");
}

TEST(Budget, CoresBoundJobsWhenMemoryIsPlenty) {
  Budget b = job_budget(ram_gb(256), 8, std::nullopt, std::nullopt, 2, std::nullopt);
  EXPECT_EQ(b.jobs, 8);
}

TEST(Budget, ExplicitMemoryLimit) {
  Budget b = job_budget(ram_gb(64), 32, 4.0, 10.0, 4, std::nullopt);
  EXPECT_DOUBLE_EQ(b.memory_limit_gb, 10);
  EXPECT_DOUBLE_EQ(b.host_reserve_gb, 54);
  EXPECT_EQ(b.jobs, 2);
  EXPECT_EQ(
      b.reason,
      "jobs 2 = min(32 cores, 10.0 GB / 4.0 GB per job); memory limit 10.0 GB set explicitly");
}

TEST(Budget, JobsOverride) {
  Budget b = job_budget(ram_gb(8), 4, std::nullopt, std::nullopt, 4, 12);
  EXPECT_EQ(b.jobs, 12);
  EXPECT_DOUBLE_EQ(b.memory_limit_gb, 8 - 2.88);
  EXPECT_TRUE(b.reason.starts_with("jobs 12 set explicitly;")) << b.reason;
  EXPECT_EQ(job_budget(ram_gb(8), 4, std::nullopt, std::nullopt, 4, 0).jobs, 1);
}

TEST(Budget, NoMemoryPerJobMeansOneJobPerCore) {
  Budget b = job_budget(ram_gb(4), 12, std::nullopt, std::nullopt, 0, std::nullopt);
  EXPECT_EQ(b.jobs, 12);
  EXPECT_TRUE(b.reason.starts_with("jobs 12 = 12 cores (no memory per job given);")) << b.reason;
}

TEST(Budget, TinyRamStillGetsOneJobAndA1GbLimit) {
  Budget b = job_budget(ram_gb(2.5), 8, std::nullopt, std::nullopt, 4, std::nullopt);
  EXPECT_DOUBLE_EQ(b.host_reserve_gb, 2);
  EXPECT_DOUBLE_EQ(b.memory_limit_gb, 1);
  EXPECT_EQ(b.jobs, 1);
  EXPECT_EQ(b.reason, "jobs 1 = min(8 cores, 1.0 GB / 4.0 GB per job), at least 1; "
                      "memory limit 1.0 GB = 2.5 GB RAM - 2.0 GB default reserve, raised to the "
                      "1.0 GB floor");
  EXPECT_EQ(job_budget(ram_gb(64), 0, std::nullopt, std::nullopt, 4, std::nullopt).jobs, 1);
}

TEST(Budget, DivisionThatIsExactInDecimalFloorsRight) {
  // 1.2 / 0.4 is 2.9999999999999996 in binary.
  EXPECT_EQ(job_budget(ram_gb(64), 8, std::nullopt, 1.2, 0.4, std::nullopt).jobs, 3);
}

TEST(Budget, FileText) {
  Budget b = job_budget(ram_gb(18), 8, 4.0, std::nullopt, 4, std::nullopt);
  EXPECT_EQ(budget_file_text(b), "export JOBS=3\nexport MEMORY_LIMIT_GB=14.0\n");
}

} // namespace
} // namespace kiln

namespace kiln {
namespace {

TEST(BudgetShare, AShareTakesItsFractionOfTheMemoryAndTheJobsAndItsOwnMemPerJobBoundsIt) {
  // 24 GB at 2 GB per job is 12 slots; the host has 4 cores.
  Budget whole = job_budget(ram_gb(32), 4, 8.0, std::nullopt, 2, std::nullopt);
  ASSERT_EQ(whole.slots, 12);
  ASSERT_EQ(whole.jobs, 4);
  Budget half = budget_share(whole, 6, std::nullopt);
  EXPECT_EQ(half.jobs, 2);
  EXPECT_DOUBLE_EQ(half.memory_limit_gb, 12);
  EXPECT_EQ(half.reason, "6 of the run's 12 slot(s): jobs 2 of 4, 12.0 of 24.0 GB");
  Budget one = budget_share(whole, 1, std::nullopt);
  EXPECT_EQ(one.jobs, 1) << "never below one job";
  EXPECT_DOUBLE_EQ(one.memory_limit_gb, 2);
  EXPECT_EQ(budget_share(whole, 12, 8.0).jobs, 3) << "24 GB at the stage's 8 GB per job";
  EXPECT_EQ(budget_share(whole, 99, std::nullopt).slots, 12) << "never above the whole";
  // Rounded: 11 of 12 slots of 4 jobs are 3.67 jobs, so 4; 5 of 12 are 1.67, so 2.
  EXPECT_EQ(budget_share(whole, 11, std::nullopt).jobs, 4);
  EXPECT_EQ(budget_share(whole, 5, std::nullopt).jobs, 2);
  EXPECT_EQ(budget_share(whole, 2, std::nullopt).jobs, 1);
}

} // namespace
} // namespace kiln

namespace kiln {
namespace {

TEST(WorkerBudget, AWorkersOwnFiguresSharedItsMaxParallelWays) {
  Budget here{16.0, 8, 8, 8, 4.0, ""};
  Budget big = worker_budget(64.0, 32, 2, here, 2.0);
  EXPECT_EQ(big.memory_limit_gb, 32.0);
  EXPECT_EQ(big.jobs, 16) << "32 jobs' memory and 32 cores, halved";
  EXPECT_EQ(big.reason, "the worker's 64.0 GB and 32 core(s) shared 2 way(s): jobs 16, 32.0 GB");
  // Memory bounds the jobs as on this host: 6 GB at 2 GB a job is 3 jobs of 4 cores.
  EXPECT_EQ(worker_budget(6.0, 4, 1, here, 2.0).jobs, 3);
  // What the chain file does not give is this host's, and the reason says so.
  Budget unknown = worker_budget(std::nullopt, std::nullopt, 1, here, 2.0);
  EXPECT_EQ(unknown.memory_limit_gb, 16.0);
  EXPECT_EQ(unknown.jobs, 8);
  EXPECT_NE(unknown.reason.find("its memory and cores are this host's"), std::string::npos)
      << unknown.reason;
  EXPECT_EQ(worker_budget(2.0, 1, 4, here, 2.0).jobs, 1) << "never below one job";
}

} // namespace
} // namespace kiln
