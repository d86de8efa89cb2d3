#include <gtest/gtest.h>

#include "driver/records_prune.h"
#include "util/time.h"

namespace kiln {
namespace {

const double k_day = 86400;

std::vector<RunEntry> three_runs() {
  // Any order: the plan sorts them by id, which is by start.
  return {{"20261202-000000-bbbb", 10 * k_day, false, 0},
          {"20261201-000000-aaaa", 9 * k_day, false, 0},
          {"20261203-000000-cccc", 11 * k_day, false, 0}};
}

TEST(PrunePlan, KeepRemovesAllButTheNewestOldestFirst) {
  PrunePlan plan = plan_prune(three_runs(), {1, std::nullopt}, 12 * k_day, "", true, "");
  EXPECT_EQ(plan.remove,
            (std::vector<std::string>{"20261201-000000-aaaa", "20261202-000000-bbbb"}));
  EXPECT_TRUE(plan.kept.empty());
  EXPECT_TRUE(plan_prune(three_runs(), {3, std::nullopt}, 0, "", true, "").remove.empty());
}

TEST(PrunePlan, OlderThanRemovesRunsThatStartedBeforeTheAge) {
  PrunePlan plan = plan_prune(three_runs(), {std::nullopt, 1.5 * k_day}, 12 * k_day, "", true, "");
  EXPECT_EQ(plan.remove,
            (std::vector<std::string>{"20261201-000000-aaaa", "20261202-000000-bbbb"}));
}

TEST(PrunePlan, NeverTheRunLatestNames) {
  PrunePlan plan =
      plan_prune(three_runs(), {1, std::nullopt}, 12 * k_day, "20261201-000000-aaaa", true, "");
  EXPECT_EQ(plan.remove, std::vector<std::string>{"20261202-000000-bbbb"});
  EXPECT_EQ(plan.kept, std::vector<std::string>{"run 20261201-000000-aaaa: `latest` names it"});
}

TEST(PrunePlan, OfRunsStartedInOneSecondTheOneLatestNamesIsTheNewestThenTheLastWritten) {
  std::vector<RunEntry> runs = {{"20261203-000000-ffff", 11 * k_day, false, 2},
                                {"20261203-000000-0000", 11 * k_day, false, 1},
                                {"20261203-000000-eeee", 11 * k_day, false, 3}};
  PrunePlan plan =
      plan_prune(runs, {2, std::nullopt}, 12 * k_day, "20261203-000000-0000", true, "");
  EXPECT_EQ(plan.remove, std::vector<std::string>{"20261203-000000-ffff"});
  EXPECT_TRUE(plan.kept.empty());
}

TEST(PrunePlan, ARunningRunIsKeptUnlessTheCallerHoldsTheLock) {
  std::vector<RunEntry> runs = three_runs();
  runs[1].running = true;
  PrunePlan locked_out = plan_prune(runs, {1, std::nullopt}, 12 * k_day, "", false, "held by X");
  EXPECT_EQ(locked_out.remove, std::vector<std::string>{"20261202-000000-bbbb"});
  ASSERT_EQ(locked_out.kept.size(), 1u);
  EXPECT_EQ(locked_out.kept[0], "run 20261201-000000-aaaa: its manifest says running and the "
                                "records lock is not free (held by X)");
  // Holding the lock proves a run that still says `running` dead.
  PrunePlan held = plan_prune(runs, {1, std::nullopt}, 12 * k_day, "", true, "");
  EXPECT_EQ(held.remove.size(), 2u);
}

TEST(PrunePlan, AgesAreAWholeNumberAndOneUnit) {
  EXPECT_EQ(parse_age("90m"), 90 * 60.0);
  EXPECT_EQ(parse_age("12h"), 12 * 3600.0);
  EXPECT_EQ(parse_age("30d"), 30 * k_day);
  EXPECT_EQ(parse_age("2w"), 14 * k_day);
  EXPECT_EQ(parse_age("0d"), 0.0);
  for (const char* bad : {"", "d", "30", "3x", "-1d", "1.5d", "30 d", "d30", "99999999999d"}) {
    EXPECT_FALSE(parse_age(bad).has_value()) << bad;
  }
}

} // namespace
} // namespace kiln
