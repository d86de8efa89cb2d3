// The disk guard lists and ranks every local cache export each time it trims, and a long-lived
// cache root holds thousands of them: listing must stay a small fraction of a second. This
// creates 10,000 slugs (index.json plus two blobs each, dated in shuffled order) once, then
// times list_slugs, which sizes each one recursively and sorts them oldest first.
//
// Usage: kiln_bench_slugs [--benchmark_filter=...]  (the slugs go to a temp folder, removed after)
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include <unistd.h>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "disk/slugs.h"

namespace {

namespace fs = std::filesystem;

constexpr int k_slugs = 10000;

fs::path g_root;

void write_file(const fs::path& path, size_t bytes) {
  std::ofstream out(path, std::ios::binary);
  std::string content(bytes, 'x');
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
}

void make_slugs(const fs::path& root) {
  std::mt19937 random(42);
  std::uniform_int_distribution<int> minutes(0, 60 * 24 * 90);
  auto now = fs::file_time_type::clock::now();
  for (int i = 0; i < k_slugs; ++i) {
    fs::path dir = root / fmt::format("chain-stage{:05}-amd64", i);
    fs::path blobs = dir / "blobs" / "sha256";
    fs::create_directories(blobs);
    write_file(dir / "index.json", 400);
    write_file(blobs / fmt::format("{:064x}", 2 * i), 1000);
    write_file(blobs / fmt::format("{:064x}", 2 * i + 1), 3000);
    fs::last_write_time(dir, now - std::chrono::minutes(minutes(random)));
  }
}

void BM_ListSlugs(benchmark::State& state) {
  size_t listed = 0;
  for (auto _ : state) {
    std::vector<kiln::Slug> slugs = kiln::list_slugs(g_root);
    listed = slugs.size();
    benchmark::DoNotOptimize(slugs.data());
  }
  if (listed != k_slugs) {
    state.SkipWithError("list_slugs did not list every slug");
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(listed));
  state.counters["slugs"] = static_cast<double>(listed);
}
BENCHMARK(BM_ListSlugs)->Unit(benchmark::kMillisecond)->MinTime(2.0);

} // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
    return 1;
  }
  g_root = fs::temp_directory_path() / ("kiln-bench-slugs-" + std::to_string(::getpid()));
  fs::create_directories(g_root);
  make_slugs(g_root);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::error_code ignored;
  fs::remove_all(g_root, ignored);
  return 0;
}
