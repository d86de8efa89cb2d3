// What planning and scheduling a large chain costs: 1,000 stages copied into 4 lanes (4,000
// stages), shaped like a real chain: a spine of toolchain stages, branches off it that need
// one or two earlier stages, and merges that need several. Planned from the chain model
// (plan_stages), then scheduled to the end with every stage succeeding in start order.
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "chain/chain.h"
#include "driver/scheduler.h"

namespace kiln {
namespace {

std::vector<Stage> synthetic_chain(int stages_per_lane, int lanes) {
  std::mt19937 random(42);
  std::vector<Stage> chain;
  chain.reserve(static_cast<size_t>(stages_per_lane) * lanes);
  for (int lane = 0; lane < lanes; ++lane) {
    size_t first = chain.size();
    for (int i = 0; i < stages_per_lane; ++i) {
      Stage stage;
      stage.name = "l" + std::to_string(lane) + "-s" + std::to_string(i);
      stage.weight = 1 + static_cast<int>(random() % 3);
      if (i > 0) {
        // One to four needs among the earlier stages of the lane, the previous one most often.
        int needs = 1 + static_cast<int>(random() % 4);
        for (int n = 0; n < needs; ++n) {
          size_t back = n == 0 ? 1 : 1 + random() % std::min<size_t>(i, 50);
          stage.needs.push_back(chain[first + i - back].name);
        }
      }
      chain.push_back(std::move(stage));
    }
  }
  return chain;
}

void BM_PlanAndSchedule(benchmark::State& state) {
  std::vector<Stage> chain = synthetic_chain(static_cast<int>(state.range(0)), 4);
  std::vector<const Stage*> stages;
  for (const auto& stage : chain) {
    stages.push_back(&stage);
  }
  size_t started = 0;
  for (auto _ : state) {
    Scheduler scheduler(plan_stages(stages), {16, 64, false});
    std::vector<size_t> running;
    while (!scheduler.done()) {
      for (const StageStart& start : scheduler.start_ready()) {
        running.push_back(start.stage);
        ++started;
      }
      // The longest-running stage ends first: end them in start order.
      scheduler.finish(running.front(), true);
      running.erase(running.begin());
    }
    benchmark::DoNotOptimize(scheduler.free_slots());
  }
  state.counters["stages"] = static_cast<double>(stages.size());
  state.counters["starts/iter"] =
      benchmark::Counter(static_cast<double>(started), benchmark::Counter::kAvgIterations);
}
BENCHMARK(BM_PlanAndSchedule)->Arg(250)->Arg(1000)->Unit(benchmark::kMillisecond);

/// The same chain (1,000 stages in one lane) on a pool of 20 workers, 2 slots each: ranking
/// every stage's workers (plan_stages) and placing each stage as it starts. The figure per
/// stage is the time divided by the stages placed.
void BM_PlanAndPlaceOnAPool(benchmark::State& state) {
  std::vector<Stage> stages_of = synthetic_chain(static_cast<int>(state.range(0)), 1);
  Chain chain;
  chain.name = "media";
  std::vector<std::string> pool;
  for (int i = 0; i < 20; ++i) {
    Worker worker;
    worker.name = "bk" + std::to_string(i + 1);
    worker.max_parallel = 2;
    pool.push_back(worker.name);
    chain.workers.push_back(std::move(worker));
  }
  std::vector<const Stage*> stages;
  for (auto& stage : stages_of) {
    stage.workers = pool;
    stages.push_back(&stage);
  }
  std::vector<int> slots(20, 2);
  size_t placed = 0;
  for (auto _ : state) {
    Scheduler scheduler(plan_stages(stages, &chain), {1000, 64, false, 0, slots});
    std::vector<size_t> running;
    while (!scheduler.done()) {
      for (const StageStart& start : scheduler.start_ready()) {
        running.push_back(start.stage);
        ++placed;
      }
      scheduler.finish(running.front(), true);
      running.erase(running.begin());
    }
  }
  state.counters["stages"] = static_cast<double>(stages.size());
  state.counters["per_stage"] = benchmark::Counter(
      static_cast<double>(placed), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_PlanAndPlaceOnAPool)->Arg(1000)->Unit(benchmark::kMillisecond);

} // namespace
} // namespace kiln

BENCHMARK_MAIN();
