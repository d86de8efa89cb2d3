#include "gates/smoke_floors.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

SmokeCounts reported(int passed, int failed, int skipped) {
  SmokeCounts counts{passed, failed, skipped, {}};
  counts.summaries.push_back({"plain", passed, failed, skipped, 1, "the runner's line"});
  return counts;
}

TEST(SmokeFloors, PassesAtTheFloorsExactly) {
  SmokeVerdict verdict = judge_smoke(reported(2, 0, 1), 2, 1);
  EXPECT_TRUE(verdict.ok);
  EXPECT_EQ(verdict.reason, "");
}

TEST(SmokeFloors, OutputWithoutASummaryIsNeverGreen) {
  // Counts alone do not count: only a summary line the runner printed does.
  SmokeCounts counts{5, 0, 0, {}};
  SmokeVerdict verdict = judge_smoke(counts, 0, 0);
  EXPECT_FALSE(verdict.ok);
  EXPECT_NE(verdict.reason.find("no test summary"), std::string::npos) << verdict.reason;
}

TEST(SmokeFloors, NothingRunIsNeverGreenEvenWithNoFloor) {
  SmokeVerdict verdict = judge_smoke(reported(0, 0, 0), 0, 5);
  EXPECT_FALSE(verdict.ok);
  EXPECT_NE(verdict.reason.find("ran nothing"), std::string::npos) << verdict.reason;
}

TEST(SmokeFloors, EveryMissedFloorIsNamed) {
  SmokeVerdict verdict = judge_smoke(reported(1, 2, 3), 4, 1);
  EXPECT_FALSE(verdict.ok);
  EXPECT_EQ(verdict.reason, "2 test(s) failed; 1 passed, below the floor min_passed = 4; "
                            "3 skipped, above the ceiling max_skipped = 1");
}

TEST(SmokeFloors, OneFailureFailsWhateverTheFloors) {
  SmokeVerdict verdict = judge_smoke(reported(100, 1, 0), 1, 0);
  EXPECT_FALSE(verdict.ok);
  EXPECT_EQ(verdict.reason, "1 test(s) failed");
}

TEST(SmokeFloors, SkippedOnlyRunIsBelowAnyPositiveFloor) {
  SmokeVerdict verdict = judge_smoke(reported(0, 0, 2), 1, 2);
  EXPECT_FALSE(verdict.ok);
  EXPECT_EQ(verdict.reason, "0 passed, below the floor min_passed = 1");
}

} // namespace
} // namespace kiln
