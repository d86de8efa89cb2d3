// What the run's event writer sustains: events emitted as a building stage emits them (a step's
// start, with its instruction), written by the writer thread to events.jsonl and flushed.
// Target: 100,000 events a second. And what a save of the record costs now that the manifest is
// the fold of record events: one stage's record as an event, folded by the writer, the manifest
// of a 20-stage run written (atomic rename, as between a run's first and last state), waited for.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <string>

#include <unistd.h>

#include "driver/events.h"
#include "driver/records.h"
#include "util/fs.h"
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

/// A stage as a run records it once it built: three attempts with their commands and counts.
kiln::StageRecord built_stage(int n) {
  kiln::StageRecord stage;
  stage.name = "lib" + std::to_string(n);
  stage.status = "ok";
  stage.outcome = "built";
  stage.needs = {"base", "toolchain"};
  stage.command = "buildah build --isolation chroot --layers --file lib.Dockerfile --tag "
                  "localhost/lib:latest-kiln-1234 --build-arg VERSION=1.2.3 .";
  for (int a = 1; a <= 3; ++a) {
    kiln::AttemptRecord attempt;
    attempt.number = a;
    attempt.verdict = a < 3 ? "retry" : "ok";
    attempt.command = stage.command;
    attempt.matched_line = "error: failed to fetch: connection reset by peer";
    attempt.steps_run = 40;
    attempt.steps_cached = 12;
    stage.attempts.push_back(attempt);
  }
  return stage;
}

void BM_SaveAStage(benchmark::State& state) {
  std::filesystem::path folder = std::filesystem::temp_directory_path() /
                                 ("kiln-bench-save-" + std::to_string(::getpid()));
  std::filesystem::create_directories(folder);
  kiln::RunRecord run;
  run.run_id = "20261205-230000-abcd";
  for (int i = 0; i < 20; ++i) {
    run.stages.push_back(built_stage(i));
  }
  {
    kiln::EventLog events(folder / "events.jsonl", kiln::real_clock(), nullptr,
                          [&](const std::string& manifest, bool) {
                            (void)kiln::write_file_atomic(folder / "manifest.json", manifest,
                                                          kiln::Durability::rename_only);
                          });
    events.emit(kiln::EventType::run_record, {{"record", kiln::run_part_json(run)}});
    int i = 0;
    for (auto _ : state) {
      const kiln::StageRecord& stage = run.stages[static_cast<size_t>(i++ % 20)];
      events.emit(kiln::EventType::stage_record,
                  {{"stage", stage.name}, {"record", kiln::stage_json(stage)}});
      events.flush();
    }
  }
  state.SetItemsProcessed(state.iterations());
  std::filesystem::remove_all(folder);
}
BENCHMARK(BM_SaveAStage)->Unit(benchmark::kMicrosecond);

} // namespace

BENCHMARK_MAIN();
