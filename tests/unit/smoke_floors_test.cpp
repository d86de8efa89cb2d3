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

// Counts once added as int: 4 * 999,999,999 + 294,967,300 failures is 2^32, which wrapped to
// 0 failed and the gate passed.
TEST(SmokeFloors, FailuresSummingPastTheIntRangeStillFail) {
  std::vector<std::string> lines = {"1 passed"};
  for (int i = 0; i < 4; ++i) {
    lines.push_back("999999999 failed");
  }
  lines.push_back("294967300 failed");
  SmokeCounts counts = find_test_summaries(lines);
  EXPECT_EQ(counts.failed, k_max_test_count);
  SmokeVerdict verdict = judge_smoke(counts, 1, 0);
  EXPECT_FALSE(verdict.ok);
  EXPECT_NE(verdict.reason.find("no smoke stage runs that many"), std::string::npos)
      << verdict.reason;
}

// pytest's errors count as failures: three kinds of 999,999,999 in one line wrapped negative.
TEST(SmokeFloors, OneLineOfHugeCountsStillFails) {
  SmokeCounts counts = find_test_summaries(
      {"== 1 passed, 999999999 failed, 999999999 errors, 999999999 error in 0.12s =="});
  ASSERT_EQ(counts.summaries.size(), 1u);
  EXPECT_EQ(counts.summaries[0].failed, k_max_test_count);
  EXPECT_FALSE(judge_smoke(counts, 1, 0).ok);
}

TEST(SmokeFloors, AnAbsurdNumberOfPassesIsNotGreen) {
  SmokeCounts counts = find_test_summaries({"999999999 passed", "999999999 passed"});
  EXPECT_EQ(counts.passed, k_max_test_count);
  SmokeVerdict verdict = judge_smoke(counts, 1, 0);
  EXPECT_FALSE(verdict.ok);
  EXPECT_NE(verdict.reason.find("1000000000 or more"), std::string::npos) << verdict.reason;
}

} // namespace
} // namespace kiln
