// What the run's event writer sustains: events emitted as a building stage emits them (a step's
// start, with its instruction), written by the writer thread to events.jsonl and flushed.
// Target: 100,000 events a second.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <string>

#include <unistd.h>

#include "driver/events.h"
#include "util/clock.h"

namespace {

void BM_EmitAndWrite(benchmark::State& state) {
  std::filesystem::path file = std::filesystem::temp_directory_path() /
                               ("kiln-bench-events-" + std::to_string(::getpid()) + ".jsonl");
  const auto batch = static_cast<int>(state.range(0));
  for (auto _ : state) {
    state.PauseTiming();
    std::filesystem::remove(file);
    state.ResumeTiming();
    kiln::EventLog events(file, kiln::real_clock(), nullptr);
    for (int i = 0; i < batch; ++i) {
      events.emit(kiln::EventType::step_started,
                  {{"stage", "libs"},
                   {"attempt", 1},
                   {"build_stage", "build"},
                   {"step", i},
                   {"steps", batch},
                   {"instruction", "RUN --mount=type=cache,target=/root/.cache/sccache make -j8"}});
    }
    events.flush();
  }
  state.SetItemsProcessed(state.iterations() * batch);
  std::filesystem::remove(file);
}
BENCHMARK(BM_EmitAndWrite)->Arg(100000)->Unit(benchmark::kMillisecond);

} // namespace

BENCHMARK_MAIN();
