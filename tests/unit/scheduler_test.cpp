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
