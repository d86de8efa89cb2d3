// The scheduler's decisions alone: what starts, with which share, and what a failure skips.
#include <gtest/gtest.h>

#include "driver/scheduler.h"

namespace kiln {
namespace {

/// base -> six branches -> merge, the shape of a chain with independent media libraries.
std::vector<PlanStage> fan_out(size_t branches) {
  std::vector<PlanStage> stages{{"base", {}, 1}};
  std::vector<size_t> all;
  for (size_t i = 1; i <= branches; ++i) {
    stages.push_back({"branch" + std::to_string(i), {0}, 1});
    all.push_back(i);
  }
  stages.push_back({"merge", all, 1});
  return stages;
}

std::vector<size_t> started(const std::vector<StageStart>& starts) {
  std::vector<size_t> stages;
  for (const auto& s : starts) {
    stages.push_back(s.stage);
  }
  return stages;
}

TEST(Scheduler, AStageStartsOnlyOnceEveryStageItNeedsSucceeded) {
  Scheduler s(fan_out(3), {8, 8, false});
  EXPECT_EQ(started(s.start_ready()), (std::vector<size_t>{0}));
  EXPECT_TRUE(s.start_ready().empty()) << "nothing else is ready while base builds";
  s.finish(0, true);
  EXPECT_EQ(started(s.start_ready()), (std::vector<size_t>{1, 2, 3}));
  s.finish(2, true);
  s.finish(1, true);
  EXPECT_TRUE(s.start_ready().empty()) << "merge still waits for branch3";
  s.finish(3, true);
  EXPECT_EQ(started(s.start_ready()), (std::vector<size_t>{4}));
  s.finish(4, true);
  EXPECT_TRUE(s.done());
}

TEST(Scheduler, MaxParallelIsNeverExceeded) {
  Scheduler s(fan_out(6), {2, 12, false});
  s.start_ready();
  s.finish(0, true);
  size_t most = 0;
  while (!s.done()) {
    auto starts = s.start_ready();
    most = std::max(most, s.running());
    ASSERT_FALSE(starts.empty() && s.running() == 0) << "stuck with stages left";
    // End the lowest running stage, as a real run would end one at a time.
    for (size_t i = 0; i < s.stages().size(); ++i) {
      if (s.state(i) == StageState::running) {
        s.finish(i, true);
        break;
      }
    }
  }
  EXPECT_EQ(most, 2u);
  for (size_t i = 0; i < s.stages().size(); ++i) {
    EXPECT_EQ(s.state(i), StageState::succeeded) << s.stages()[i].name;
  }
}

TEST(Scheduler, ALoneStageTakesTheWholeBudgetAndAFanOutSplitsIt) {
  Scheduler s(fan_out(6), {8, 12, false});
  auto base = s.start_ready();
  ASSERT_EQ(base.size(), 1u);
  EXPECT_EQ(base[0].slots, 12);
  s.finish(0, true);
  auto branches = s.start_ready();
  ASSERT_EQ(branches.size(), 6u);
  int sum = 0;
  for (const auto& b : branches) {
    EXPECT_EQ(b.slots, 2);
    sum += b.slots;
  }
  EXPECT_EQ(sum, 12);
  EXPECT_EQ(s.free_slots(), 0);
}

TEST(Scheduler, SharesFollowWeightsAndNeverAddUpToMoreThanTheBudget) {
  std::vector<PlanStage> stages{{"heavy", {}, 3}, {"light", {}, 1}, {"tiny", {}, 1}};
  Scheduler s(stages, {8, 10, false});
  auto starts = s.start_ready();
  ASSERT_EQ(starts.size(), 3u);
  EXPECT_EQ(starts[0].slots, 6); // 10 * 3/5
  EXPECT_EQ(starts[1].slots, 2);
  EXPECT_EQ(starts[2].slots, 2);
  // A budget smaller than the fan-out: one job each while they last, the rest wait for one.
  Scheduler narrow(fan_out(6), {8, 4, false});
  narrow.start_ready();
  narrow.finish(0, true);
  auto few = narrow.start_ready();
  EXPECT_EQ(few.size(), 4u);
  EXPECT_EQ(narrow.free_slots(), 0);
  narrow.finish(few[0].stage, true);
  auto next = narrow.start_ready();
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].slots, 1);
}

TEST(Scheduler, AStageThatReadsNoBudgetHoldsOneSlotAndLeavesTheRestToTheOnesThatDo) {
  // A five-branch fan-out where only branch3 compiles with the budget: the four others copy
  // files and hold the memory of one job each.
  std::vector<PlanStage> stages = fan_out(5);
  for (size_t i = 1; i < stages.size(); ++i) {
    stages[i].reads_budget = stages[i].name == "branch3";
  }
  Scheduler s(stages, {8, 12, false});
  EXPECT_EQ(s.start_ready()[0].slots, 12);
  s.finish(0, true);
  auto starts = s.start_ready();
  ASSERT_EQ(starts.size(), 5u);
  for (const auto& start : starts) {
    EXPECT_EQ(start.slots, stages[start.stage].reads_budget ? 8 : 1) << stages[start.stage].name;
  }
  EXPECT_EQ(s.free_slots(), 0);
  // Alone, a stage that reads no budget still holds one slot, and what starts beside it shares
  // the rest.
  std::vector<PlanStage> pair{{"copy", {}, 1, 0, false}, {"compile", {}, 1, 0, true}};
  Scheduler alone(pair, {1, 6, false});
  EXPECT_EQ(alone.start_ready()[0].slots, 1);
  alone.finish(0, true);
  EXPECT_EQ(alone.start_ready()[0].slots, 6);
}

TEST(Scheduler, AFailureSkipsOnlyWhatDependsOnItNamingTheFailedStage) {
  // base -> a -> a2; base -> b; merge needs a2 and b.
  std::vector<PlanStage> stages{
      {"base", {}, 1}, {"a", {0}, 1}, {"a2", {1}, 1}, {"b", {0}, 1}, {"merge", {2, 3}, 1}};
  Scheduler s(stages, {4, 4, false});
  s.start_ready();
  s.finish(0, true);
  EXPECT_EQ(started(s.start_ready()), (std::vector<size_t>{1, 3}));
  s.finish(1, false);
  EXPECT_EQ(s.take_skipped(), (std::vector<size_t>{2, 4}));
  EXPECT_EQ(s.skipped_because(2), "a");
  EXPECT_EQ(s.skipped_because(4), "a") << "the cause, not the stage in between";
  EXPECT_EQ(s.skip_cause(4), SkipCause::need_failed);
  EXPECT_EQ(s.state(3), StageState::running) << "an independent branch goes on";
  EXPECT_FALSE(s.done());
  s.finish(3, true);
  EXPECT_TRUE(s.start_ready().empty());
  EXPECT_TRUE(s.done());
  EXPECT_EQ(s.state(3), StageState::succeeded);
  EXPECT_TRUE(s.take_skipped().empty()) << "each skip is reported once";
}

TEST(Scheduler, FailFastSkipsEveryWaitingStageButLetsTheRunningOnesEnd) {
  Scheduler s(fan_out(3), {8, 8, true});
  s.start_ready();
  s.finish(0, true);
  s.start_ready();
  s.finish(1, false);
  EXPECT_EQ(s.take_skipped(), (std::vector<size_t>{4}));
  EXPECT_EQ(s.skip_cause(4), SkipCause::fail_fast);
  EXPECT_EQ(s.state(2), StageState::running);
  s.finish(2, true);
  s.finish(3, true);
  EXPECT_TRUE(s.start_ready().empty()) << "merge was skipped, not started";
  EXPECT_TRUE(s.done());
}

TEST(Scheduler, StopSkipsEverythingWaitingWithTheReason) {
  Scheduler s(fan_out(2), {8, 8, false});
  s.start_ready();
  s.stop("interrupted");
  EXPECT_EQ(s.take_skipped(), (std::vector<size_t>{1, 2, 3}));
  EXPECT_EQ(s.skipped_because(3), "interrupted");
  EXPECT_EQ(s.skip_cause(3), SkipCause::stopped);
  EXPECT_FALSE(s.done());
  s.finish(0, true);
  EXPECT_TRUE(s.start_ready().empty());
  EXPECT_TRUE(s.done());
}

TEST(Scheduler, MaxLanesKeepsOtherLanesWaitingWhileItsLanesBuild) {
  // Two lanes of base -> app.
  std::vector<PlanStage> stages{{"amd64/base", {}, 1, 0},
                                {"amd64/app", {0}, 1, 0},
                                {"arm64/base", {}, 1, 1},
                                {"arm64/app", {2}, 1, 1}};
  Scheduler one(stages, {8, 8, false, 1});
  EXPECT_EQ(started(one.start_ready()), (std::vector<size_t>{0}));
  one.finish(0, true);
  EXPECT_EQ(started(one.start_ready()), (std::vector<size_t>{1})) << "amd64 goes on first";
  one.finish(1, true);
  EXPECT_EQ(started(one.start_ready()), (std::vector<size_t>{2}));
  Scheduler both(stages, {8, 8, false, 0});
  EXPECT_EQ(started(both.start_ready()), (std::vector<size_t>{0, 2}));
}

TEST(Scheduler, StagesThatMaxParallelHoldsBackTakeNoShare) {
  Scheduler serial(fan_out(3), {1, 6, false});
  serial.start_ready();
  serial.finish(0, true);
  auto first = serial.start_ready();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].slots, 6) << "one at a time, each stage has the whole budget";
  Scheduler pairs(fan_out(6), {2, 6, false});
  pairs.start_ready();
  pairs.finish(0, true);
  auto two = pairs.start_ready();
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].slots + two[1].slots, 6) << "no slot idles for stages that cannot start";
}

} // namespace
} // namespace kiln

namespace kiln {
namespace {

/// Three stages on a pool of workers 0, 1 and 2, each ranking them its own way.
std::vector<PlanStage> placed_three() {
  std::vector<PlanStage> stages{{"a", {}, 1}, {"b", {}, 1}, {"c", {}, 1}};
  stages[0].workers = {0, 1, 2};
  stages[1].workers = {0, 2, 1};
  stages[2].workers = {1, 0, 2};
  return stages;
}

TEST(SchedulerPools, AStageTakesItsBestRankedWorkerWithAFreeSlotOrWaits) {
  // One slot of the client's budget: placed stages take none of it.
  Scheduler s(placed_three(), {8, 1, false, 0, {1, 1, 1}});
  std::vector<StageStart> starts = s.start_ready();
  ASSERT_EQ(starts.size(), 3u);
  EXPECT_EQ(starts[0].worker, 0);
  EXPECT_EQ(starts[0].rank, 0);
  EXPECT_EQ(starts[1].worker, 2) << "worker 0 is full: b's second choice";
  EXPECT_EQ(starts[1].rank, 1);
  EXPECT_EQ(starts[1].busy, std::vector<int>{0});
  EXPECT_EQ(starts[2].worker, 1);
  EXPECT_EQ(s.free_slots(), 1) << "the client's budget is untouched";

  // A full pool: the next stage waits for a slot of one of its workers.
  std::vector<PlanStage> four = placed_three();
  four.push_back({"d", {}, 1});
  four.back().workers = {1};
  Scheduler full(four, {8, 1, false, 0, {1, 1, 1}});
  EXPECT_EQ(full.start_ready().size(), 3u);
  EXPECT_TRUE(full.start_ready().empty()) << "d's one worker is busy";
  full.finish(2, true); // c leaves worker 1
  std::vector<StageStart> d = full.start_ready();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].stage, 3u);
  EXPECT_EQ(d[0].worker, 1);
}

TEST(SchedulerPools, ALostWorkerSendsItsStageToTheNextAndADownPoolSkips) {
  Scheduler s(placed_three(), {8, 1, false, 0, {2, 2, 2}});
  std::vector<StageStart> starts = s.start_ready();
  ASSERT_EQ(starts.size(), 3u);
  EXPECT_EQ(s.worker_of(0), 0);
  s.worker_down(0);
  std::optional<StageStart> moved = s.move(0);
  ASSERT_TRUE(moved);
  EXPECT_EQ(moved->worker, 1) << "a's next choice";
  EXPECT_EQ(s.worker_of(0), 1);
  // b's next choices: 2 (it holds it already, one free slot left) then 1.
  std::optional<StageStart> again = s.move(1);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->worker, 2);
  s.worker_down(1);
  s.worker_down(2);
  EXPECT_FALSE(s.move(0)) << "no worker left: it stays";

  // A stage whose every worker is down is skipped, and so is what needs it.
  std::vector<PlanStage> chain{{"base", {}, 1}, {"lib", {0}, 1}};
  chain[0].workers = {0, 1};
  chain[1].workers = {1};
  Scheduler down(chain, {8, 1, false, 0, {1, 1}});
  down.worker_down(0);
  down.worker_down(1);
  EXPECT_TRUE(down.start_ready().empty());
  EXPECT_EQ(down.state(0), StageState::skipped);
  EXPECT_EQ(down.skip_cause(0), SkipCause::no_worker);
  EXPECT_EQ(down.state(1), StageState::skipped);
  EXPECT_EQ(down.skipped_because(1), "base");
  EXPECT_TRUE(down.done());
}

} // namespace
} // namespace kiln
