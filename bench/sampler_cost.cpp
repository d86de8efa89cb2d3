// The resource sampler runs through every build, so its own cost must stay negligible: this
// times one sample (/proc/stat, /proc/meminfo, statvfs, format and append a CSV row) and its
// parts, and projects the CPU a run spends on sampling per hour at the default 20 s interval.
//
// Usage: kiln_bench_sampler [--benchmark_filter=...]  (the CSV goes to a temp file, removed after)
#include <filesystem>
#include <string>

#include <unistd.h>

#include <benchmark/benchmark.h>

#include "resources/host_stats.h"
#include "resources/sampler.h"
#include "util/fs.h"

namespace {

namespace fs = std::filesystem;

/// 3600 s / 20 s: the samples of one hour at the default interval.
constexpr double k_samples_per_hour = 180;

/// A CSV of its own per benchmark, removed when it ends.
class TempCsv {
public:
  explicit TempCsv(const std::string& name)
      : m_path(fs::temp_directory_path() /
               ("kiln-bench-" + std::to_string(::getpid()) + "-" + name + ".csv")) {
    (void)kiln::write_file_atomic(m_path, kiln::k_resource_csv_header);
    (void)m_file.open(m_path);
  }
  TempCsv(const TempCsv&) = delete;
  TempCsv& operator=(const TempCsv&) = delete;
  ~TempCsv() {
    m_file = kiln::AppendFile();
    std::error_code ignored;
    fs::remove(m_path, ignored);
  }

  kiln::AppendFile& file() { return m_file; }
  const fs::path& path() const { return m_path; }

private:
  fs::path m_path;
  kiln::AppendFile m_file;
};

/// The projection as counters, shown with their unit (`28us`, `5ms`): CPU time per sample and
/// per hour of sampling. A rate counter divides by the benchmark's CPU time and an inverted one
/// flips that, so `value` samples give CPU time / value.
void report_projection(benchmark::State& state) {
  double samples = static_cast<double>(state.iterations());
  auto per = benchmark::Counter::kIsRate | benchmark::Counter::kInvert;
  state.counters["cpu_per_sample"] = benchmark::Counter(samples, per);
  state.counters["cpu_per_hour_at_20s"] = benchmark::Counter(samples / k_samples_per_hour, per);
}

void BM_ReadCpuTimes(benchmark::State& state) {
  for (auto _ : state) {
    auto times = kiln::read_cpu_times();
    benchmark::DoNotOptimize(times);
  }
}
BENCHMARK(BM_ReadCpuTimes);

void BM_ReadMeminfo(benchmark::State& state) {
  for (auto _ : state) {
    auto mem = kiln::read_meminfo();
    benchmark::DoNotOptimize(mem);
  }
}
BENCHMARK(BM_ReadMeminfo);

void BM_FreeBytes(benchmark::State& state) {
  fs::path disk = fs::temp_directory_path();
  for (auto _ : state) {
    auto bytes = kiln::free_bytes(disk);
    benchmark::DoNotOptimize(bytes);
  }
}
BENCHMARK(BM_FreeBytes);

void BM_FormatAndAppendRow(benchmark::State& state) {
  TempCsv csv("append");
  kiln::ResourceRow row{"2026-12-02T14:03:00Z", "build base", 87.25, 12.5, 30.75, 412.5};
  for (auto _ : state) {
    kiln::append_resource_row(csv.file(), row);
  }
}
BENCHMARK(BM_FormatAndAppendRow);

/// What the sampler thread does once per tick.
void BM_OneSample(benchmark::State& state) {
  TempCsv csv("sample");
  fs::path disk = csv.path().parent_path();
  std::string phase = "build base";
  kiln::CpuBaseline last;
  for (auto _ : state) {
    kiln::append_resource_row(csv.file(), kiln::sample_once(phase, disk, last));
  }
  report_projection(state);
}
BENCHMARK(BM_OneSample);

} // namespace

BENCHMARK_MAIN();
