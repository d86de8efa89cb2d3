// Test summaries in smoke build output, against the recordings in tests/fixtures/smoke (its
// README says how each was made) and the shapes around them that must not count.
#include "gates/smoke_summary.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "temp_dir.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

const fs::path k_fixtures = fs::path(KILN_TEST_FIXTURES) / "smoke";

std::vector<std::string> recorded_lines(const std::string& name) {
  std::ifstream in(k_fixtures / name, std::ios::binary);
  EXPECT_TRUE(in) << name;
  std::stringstream text;
  text << in.rdbuf();
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(text, line)) {
    lines.push_back(line);
  }
  return lines;
}

struct Recording {
  std::string file;
  std::string format; // "" when the output holds no summary
  int passed = 0;
  int failed = 0;
  int skipped = 0;
  int line = 0;
  std::string text;
};

// Counts read by hand off each recording. ctest: passed = out-of total - failed - (Skipped);
// skipped = (Skipped) + (Disabled). pytest: errors are failed, xpassed passed, xfailed skipped.
const std::vector<Recording> k_recordings = {
    {"ctest-allpass.txt", "ctest", 2, 0, 0, 7, "100% tests passed, 0 tests failed out of 2"},
    {"ctest-allpass-oof.txt", "ctest", 2, 0, 0, 7, "100% tests passed, 0 tests failed out of 2"},
    {"ctest-somefail.txt", "ctest", 2, 1, 0, 9, "67% tests passed, 1 tests failed out of 3"},
    {"ctest-somefail-oof.txt", "ctest", 2, 1, 0, 11, "67% tests passed, 1 tests failed out of 3"},
    {"ctest-someskipped.txt", "ctest", 2, 0, 1, 9, "100% tests passed, 0 tests failed out of 3"},
    {"ctest-someskipped-oof.txt", "ctest", 2, 0, 1, 9,
     "100% tests passed, 0 tests failed out of 3"},
    {"ctest-skipregex.txt", "ctest", 2, 0, 1, 9, "100% tests passed, 0 tests failed out of 3"},
    {"ctest-skipregex-oof.txt", "ctest", 2, 0, 1, 9, "100% tests passed, 0 tests failed out of 3"},
    {"ctest-somedisabled.txt", "ctest", 2, 0, 1, 9, "100% tests passed, 0 tests failed out of 2"},
    {"ctest-somedisabled-oof.txt", "ctest", 2, 0, 1, 9,
     "100% tests passed, 0 tests failed out of 2"},
    {"ctest-onlyskipped.txt", "ctest", 0, 0, 1, 5, "100% tests passed, 0 tests failed out of 1"},
    {"ctest-onlyskipped-oof.txt", "ctest", 0, 0, 1, 5,
     "100% tests passed, 0 tests failed out of 1"},
    {"ctest-mixed.txt", "ctest", 2, 1, 2, 13, "75% tests passed, 1 tests failed out of 4"},
    {"ctest-mixed-oof.txt", "ctest", 2, 1, 2, 15, "75% tests passed, 1 tests failed out of 4"},
    {"ctest-mixed-color.txt", "ctest", 2, 1, 2, 13, "75% tests passed, 1 tests failed out of 4"},
    {"ctest-notrun.txt", "ctest", 2, 2, 1, 45, "60% tests passed, 2 tests failed out of 5"},
    {"ctest-notrun-oof.txt", "ctest", 2, 2, 1, 45, "60% tests passed, 2 tests failed out of 5"},
    {"ctest-notests.txt", "ctest", 0, 0, 0, 2, "No tests were found!!!"},
    {"ctest-notests-oof.txt", "ctest", 0, 0, 0, 2, "No tests were found!!!"},
    {"pytest-allpass.txt", "pytest", 5, 0, 0, 9,
     "============================== 5 passed in 0.01s ==============================="},
    {"pytest-allpass-q.txt", "pytest", 5, 0, 0, 2, "5 passed in 0.01s"},
    {"pytest-allpass-qq.txt", "", 0, 0, 0, 0, ""}, // -qq prints no closing line at all
    {"pytest-mixed.txt", "pytest", 3, 2, 2, 35,
     "= 1 failed, 2 passed, 1 skipped, 1 xfailed, 1 xpassed, 1 warning, 1 error in 0.03s ="},
    {"pytest-mixed-q.txt", "pytest", 3, 2, 2, 28,
     "1 failed, 2 passed, 1 skipped, 1 xfailed, 1 xpassed, 1 warning, 1 error in 0.02s"},
    {"pytest-mixed-rA.txt", "pytest", 3, 2, 2, 41,
     "= 1 failed, 2 passed, 1 skipped, 1 xfailed, 1 xpassed, 1 warning, 1 error in 0.04s ="},
    {"pytest-mixed-color.txt", "pytest", 3, 2, 2, 35,
     "= 1 failed, 2 passed, 1 skipped, 1 xfailed, 1 xpassed, 1 warning, 1 error in 0.06s ="},
    {"pytest-mixed-deselect-q.txt", "pytest", 3, 0, 0, 8,
     "2 passed, 4 deselected, 1 xpassed, 1 warning in 0.01s"},
    {"pytest-strict.txt", "pytest", 2, 3, 2, 38,
     "==== 2 failed, 2 passed, 1 skipped, 1 xfailed, 1 warning, 1 error in 0.02s ====="},
    {"pytest-empty.txt", "pytest", 0, 0, 0, 7,
     "============================ no tests ran in 0.00s ============================="},
    {"pytest-empty-q.txt", "pytest", 0, 0, 0, 2, "no tests ran in 0.00s"},
    {"pytest-collecterr.txt", "pytest", 0, 1, 0, 20,
     "=============================== 1 error in 0.05s ==============================="},
    {"pytest-collecterr-q.txt", "pytest", 0, 1, 0, 15, "1 error in 0.05s"},
    {"pytest-rerun.txt", "pytest", 2, 0, 0, 9,
     "========================== 2 passed, 1 rerun in 0.02s =========================="},
    {"pytest-rerun-q.txt", "pytest", 2, 0, 0, 2, "2 passed, 1 rerun in 0.02s"},
    {"pytest-slow-q.txt", "pytest", 1, 0, 0, 2, "1 passed in 61.01s (0:01:01)"},
    {"plain-smoke-pass.txt", "plain", 12, 0, 1, 14, "12 passed, 0 failed, 1 skipped"},
    {"plain-smoke-fail.txt", "plain", 3, 2, 0, 6, "2 failed, 3 passed"},
    {"buildah-plain-pass.combined", "plain", 12, 0, 1, 27, "12 passed, 0 failed, 1 skipped"},
    {"buildah-plain-fail.combined", "plain", 3, 2, 0, 19, "2 failed, 3 passed"},
    {"buildah-ctest-replay.combined", "ctest", 2, 1, 2, 25,
     "75% tests passed, 1 tests failed out of 4"},
    {"buildah-pytest-replay.combined", "pytest", 3, 2, 2, 48,
     "= 1 failed, 2 passed, 1 skipped, 1 xfailed, 1 xpassed, 1 warning, 1 error in 0.03s ="},
    {"composed/buildkit-ctest-someskipped.stderr", "ctest", 2, 0, 1, 34,
     "100% tests passed, 0 tests failed out of 3"},
    {"composed/buildkit-ctest-mixed-oof.stderr", "ctest", 2, 1, 2, 40,
     "75% tests passed, 1 tests failed out of 4"},
    // The failed step's replay repeats the summary (line 73); it is the same run.
    {"composed/buildkit-pytest-mixed.stderr", "pytest", 3, 2, 2, 60,
     "= 1 failed, 2 passed, 1 skipped, 1 xfailed, 1 xpassed, 1 warning, 1 error in 0.03s ="},
    {"composed/buildkit-pytest-slow-q.stderr", "pytest", 1, 0, 0, 27,
     "1 passed in 61.01s (0:01:01)"},
    {"composed/buildkit-plain-smoke-pass.stderr", "plain", 12, 0, 1, 39,
     "12 passed, 0 failed, 1 skipped"},
    {"composed/buildkit-plain-smoke-fail.stderr", "plain", 3, 2, 0, 31, "2 failed, 3 passed"},
};

TEST(SmokeSummaryRecordings, EachHasItsCounts) {
  for (const auto& r : k_recordings) {
    SCOPED_TRACE(r.file);
    auto counts = find_test_summaries(recorded_lines(r.file));
    if (r.format.empty()) {
      EXPECT_TRUE(counts.summaries.empty()) << counts.summaries.front().text;
      continue;
    }
    ASSERT_EQ(counts.summaries.size(), 1u);
    const auto& s = counts.summaries.front();
    EXPECT_EQ(s.format, r.format);
    EXPECT_EQ(s.passed, r.passed);
    EXPECT_EQ(s.failed, r.failed);
    EXPECT_EQ(s.skipped, r.skipped);
    EXPECT_EQ(s.line, r.line);
    EXPECT_EQ(s.text, r.text);
    EXPECT_EQ(counts.passed, r.passed);
    EXPECT_EQ(counts.failed, r.failed);
    EXPECT_EQ(counts.skipped, r.skipped);
  }
}

// A recording added to the folder without counts here would prove nothing.
TEST(SmokeSummaryRecordings, EveryRecordingIsChecked) {
  std::set<std::string> listed;
  for (const auto& r : k_recordings) {
    listed.insert(r.file);
  }
  std::set<std::string> on_disk;
  for (const auto& entry : fs::recursive_directory_iterator(k_fixtures)) {
    auto relative = fs::relative(entry.path(), k_fixtures).generic_string();
    auto ext = entry.path().extension();
    if (entry.is_regular_file() && !relative.starts_with("sources/") &&
        (ext == ".txt" || ext == ".combined" || ext == ".stderr")) {
      on_disk.insert(relative);
    }
  }
  EXPECT_EQ(on_disk, listed);
}

TEST(SmokeSummaryRecordings, EveryListedTestOfCtestIsCounted) {
  // Two passes, one failure, one SKIP_RETURN_CODE skip and one DISABLED test: five in all.
  auto counts = find_test_summaries(recorded_lines("ctest-mixed.txt"));
  EXPECT_EQ(counts.passed + counts.failed + counts.skipped, 5);
}

TEST(SmokeSummaryPlain, ItemsInAnyOrderEachAtMostOnce) {
  auto one = [](std::string line) { return find_test_summaries({std::move(line)}); };
  auto c = one("1 skipped, 2 failed, 3 passed");
  ASSERT_EQ(c.summaries.size(), 1u);
  EXPECT_EQ(c.summaries[0].format, "plain");
  EXPECT_EQ(c.passed, 3);
  EXPECT_EQ(c.failed, 2);
  EXPECT_EQ(c.skipped, 1);
  EXPECT_EQ(one("0 passed").summaries.size(), 1u);
  EXPECT_EQ(one("4 failed").failed, 4);
  EXPECT_EQ(one("  4 passed,0 failed  ").passed, 4);
  for (const char* not_summary :
       {"3 passed, 3 passed", "3 passed,, 1 failed", "3 passed, ", "-3 passed", "+3 passed",
        "3 passed 1 failed", "3  passed", "3 passed, 1 errored", "3 passed, 0 failed.",
        "three passed", "99999999999 passed", "3 PASSED"}) {
    EXPECT_TRUE(one(not_summary).summaries.empty()) << not_summary;
  }
}

TEST(SmokeSummaryPlain, SentencesThatMentionResultsAreNotSummaries) {
  std::vector<std::string> lines = {
      "see 3 passed tests below",
      "3 passed tests",
      "All 3 passed",
      "Tests: 3 passed, 0 failed",
      "smoke: 12 passed, 0 failed",
      "ok - 3 passed checks",
      "not ok - expected 0 failed, got 1 failed",
      "# 2 passed, 0 failed",
  };
  EXPECT_TRUE(find_test_summaries(lines).summaries.empty());
}

TEST(SmokeSummaryPytest, MapsEachKind) {
  auto one = [](std::string line) { return find_test_summaries({std::move(line)}); };
  auto c = one("=== 1 failed, 2 passed, 1 xfailed, 3 warnings, 2 errors in 0.50s ===");
  ASSERT_EQ(c.summaries.size(), 1u);
  EXPECT_EQ(c.summaries[0].format, "pytest");
  EXPECT_EQ(c.passed, 2);
  EXPECT_EQ(c.failed, 3);
  EXPECT_EQ(c.skipped, 1);
  c = one("4 xpassed, 5 deselected, 2 rerun in 12.34s (0:00:12)");
  EXPECT_EQ(c.passed, 4);
  EXPECT_EQ(c.failed, 0);
  EXPECT_EQ(c.skipped, 0);
  // Everything deselected: a run, but of nothing.
  c = one("======= 5 deselected in 0.01s =======");
  ASSERT_EQ(c.summaries.size(), 1u);
  EXPECT_EQ(c.passed + c.failed + c.skipped, 0);
  // pytest's days form, for a run longer than a day.
  EXPECT_EQ(one("1 passed in 90061.00s (1 day, 1:01:01)").passed, 1);
}

// Older pytest: `in 0.12 seconds`, and its stat keys printed unpluralised. From its
// terminal.py (`"%s in %.2f seconds"`, `"%d %s" % (len(val), key)`); no recording here.
TEST(SmokeSummaryPytest, OlderDurationAndNouns) {
  auto c = find_test_summaries({"=== 2 passed, 2 error, 1 warnings in 0.12 seconds ==="});
  ASSERT_EQ(c.summaries.size(), 1u);
  EXPECT_EQ(c.passed, 2);
  EXPECT_EQ(c.failed, 2);
}

TEST(SmokeSummaryPytest, OtherLinesAreNotSummaries) {
  std::vector<std::string> lines = {
      "collected 5 items",
      "collected 0 items",
      "=================================== FAILURES ===================================",
      "=========================== short test summary info ============================",
      "!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!",
      "test_smoke.py ..FsxXE                                                    [100%]",
      "FAILED test_smoke.py::test_fail - assert (1 + 1) == 3",
      "PASSED test_smoke.py::test_pass_one",
      "5 tests collected in 0.01s",           // --collect-only: nothing ran
      "1 passed, 2 subtests passed in 0.10s", // a plugin's kind cannot be placed
      "5 passed in 0.12",
      "5 passed in s",
      "==== 5 passed in 0.12s",
      "5 passed in 0.12s ====",
      "====5 passed in 0.12s====",
      "5 passed, 5 passed in 0.12s",
      "no tests ran",
      "some tests ran in 0.01s",
  };
  auto counts = find_test_summaries(lines);
  for (const auto& s : counts.summaries) {
    ADD_FAILURE() << "read as a summary: " << s.text;
  }
}

TEST(SmokeSummaryCtest, PerTestAndOtherLinesAreNotSummaries) {
  std::vector<std::string> lines = {
      "Test project /src/build",
      "    Start 1: pass_a",
      "1/4 Test #1: a ....   Passed 0.00 sec",
      "3/5 Test #3: fail_c ...........................***Failed    0.01 sec",
      "4/5 Test #4: skip_d ...........................***Skipped   0.01 sec",
      "100% tests passed",
      "tests passed, 0 tests failed out of 2",
      "100% tests passed, 3 tests failed out of 2",
      "Total Test time (real) =   0.05 sec",
      "The following tests did not run:",
      "\t  4 - skip_d (Skipped)",
      "Errors while running CTest",
      "No tests were found",
  };
  auto counts = find_test_summaries(lines);
  for (const auto& s : counts.summaries) {
    ADD_FAILURE() << "read as a summary: " << s.text;
  }
}

TEST(SmokeSummaryCtest, DidNotRunListCountsOnlyRightAfterTheSummary) {
  // Other output between the summary and a list: the list is someone else's.
  auto counts = find_test_summaries({
      "100% tests passed, 0 tests failed out of 3",
      "",
      "something else",
      "The following tests did not run:",
      "\t  3 - skip_d (Skipped)",
  });
  EXPECT_EQ(counts.passed, 3);
  EXPECT_EQ(counts.skipped, 0);
  // More skipped than ran cannot be this run's list.
  counts = find_test_summaries({
      "50% tests passed, 1 tests failed out of 2",
      "The following tests did not run:",
      "\t  1 - a (Skipped)",
      "\t  2 - b (Skipped)",
  });
  EXPECT_EQ(counts.passed, 1);
  EXPECT_EQ(counts.failed, 1);
  EXPECT_EQ(counts.skipped, 0);
  // Four-digit test numbers fill ctest's three-wide column.
  counts = find_test_summaries({
      "100% tests passed, 0 tests failed out of 1200",
      "",
      "Total Test time (real) =  12.00 sec",
      "",
      "The following tests did not run:",
      "\t1005 - big_one (Skipped)",
      "\t1100 - off (Disabled)",
  });
  EXPECT_EQ(counts.passed, 1199);
  EXPECT_EQ(counts.skipped, 2);
}

TEST(SmokeSummaryOutput, NothingRanIsASummaryWithNoCounts) {
  for (const char* line : {"no tests ran in 0.01s", "No tests were found!!!"}) {
    auto counts = find_test_summaries({"some output", line});
    ASSERT_EQ(counts.summaries.size(), 1u) << line;
    EXPECT_EQ(counts.summaries[0].line, 2);
    EXPECT_EQ(counts.passed + counts.failed + counts.skipped, 0);
  }
  EXPECT_TRUE(find_test_summaries({"built", "done"}).summaries.empty());
  EXPECT_TRUE(find_test_summaries({}).summaries.empty());
}

TEST(SmokeSummaryOutput, SeveralSummariesAreSummedAndEachListed) {
  auto counts = find_test_summaries({
      "ok - shell starts",
      "2 passed, 0 failed",
      "=================================== FAILURES ===================================",
      "==== 5 passed, 1 skipped in 0.12s ====",
      "Test project /src/build",
      "75% tests passed, 1 tests failed out of 4",
  });
  ASSERT_EQ(counts.summaries.size(), 3u);
  EXPECT_EQ(counts.summaries[0].format, "plain");
  EXPECT_EQ(counts.summaries[0].line, 2);
  EXPECT_EQ(counts.summaries[1].format, "pytest");
  EXPECT_EQ(counts.summaries[1].line, 4);
  EXPECT_EQ(counts.summaries[2].format, "ctest");
  EXPECT_EQ(counts.summaries[2].line, 6);
  EXPECT_EQ(counts.passed, 2 + 5 + 3);
  EXPECT_EQ(counts.failed, 1);
  EXPECT_EQ(counts.skipped, 1);
}

TEST(SmokeSummaryOutput, RawLogLinesAreReadAsPrinted) {
  auto counts = find_test_summaries({
      "#8 [smoke 1/1] RUN sh /smoke/run.sh",
      "#0 0.061 ok - shell starts",
      "#8 0.345 3 passed, 1 failed\r",
      "#8 12.34 \x1b[32m5 passed\x1b[0m in 0.12s",
      "#8 123.4 No tests were found!!!",
      "#8 DONE 130.0s",
  });
  ASSERT_EQ(counts.summaries.size(), 3u);
  EXPECT_EQ(counts.summaries[0].text, "3 passed, 1 failed");
  EXPECT_EQ(counts.summaries[0].line, 3);
  EXPECT_EQ(counts.summaries[1].text, "5 passed in 0.12s");
  EXPECT_EQ(counts.summaries[2].format, "ctest");
  EXPECT_EQ(counts.passed, 8);
  EXPECT_EQ(counts.failed, 1);
}

TEST(SmokeSummaryOutput, BuildkitReplayOfAFailedStepIsNotReadTwice) {
  auto counts = find_test_summaries({
      "#8 [smoke 1/1] RUN sh /smoke/run.sh",
      "#0 0.050 2 passed, 1 failed",
      "#8 0.051 ------",
      "#8 0.052 done",
      "#8 ERROR: process \"/bin/sh -c sh /smoke/run.sh\" did not complete successfully: exit code: "
      "1",
      "------",
      " > [smoke 1/1] RUN sh /smoke/run.sh:",
      "#0 0.050 2 passed, 1 failed",
      "#8 0.051 ------", // the step's own output, not the end of the replay
      "#8 0.052 2 passed, 1 failed",
      "------",
      "error: failed to solve: process \"/bin/sh -c sh /smoke/run.sh\" did not complete "
      "successfully: exit code: 1",
  });
  ASSERT_EQ(counts.summaries.size(), 1u);
  EXPECT_EQ(counts.summaries[0].line, 2);
  EXPECT_EQ(counts.passed, 2);
}

TEST(SmokeSummaryOutput, OutputThatOnlyLooksLikeAReplayIsRead) {
  // Unprefixed lines inside the frame: a step's own output, so read.
  auto counts = find_test_summaries({"------", " > section:", "3 passed", "------"});
  ASSERT_EQ(counts.summaries.size(), 1u);
  EXPECT_EQ(counts.passed, 3);
}

TEST(SmokeSummaryOutput, PrintedTextDropsPrefixColourAndCarriageReturn) {
  EXPECT_EQ(printed_text("#12 0.345 hello"), "hello");
  EXPECT_EQ(printed_text("#0 0.061 hello"), "hello");
  EXPECT_EQ(printed_text("#8 0.512 "), "");
  EXPECT_EQ(printed_text("#8 0.512"), "");
  EXPECT_EQ(printed_text("#8 DONE 0.1s"), "#8 DONE 0.1s");
  EXPECT_EQ(printed_text("#8 0.512x"), "#8 0.512x");
  EXPECT_EQ(printed_text("#8 1. x"), "#8 1. x");
  EXPECT_EQ(printed_text("\x1b[0;31m1 tests failed\x1b[0m\r\r"), "1 tests failed");
  EXPECT_EQ(printed_text("a\x1b[2Kb"), "a\x1b[2Kb"); // only colour is dropped
  EXPECT_EQ(printed_text("  kept  "), "  kept  ");
}

TEST(SmokeSummaryLog, AStreamedLogReadsAsItsLinesDoForEveryRecording) {
  for (const auto& entry : fs::directory_iterator(k_fixtures)) {
    if (entry.path().extension() != ".combined") {
      continue;
    }
    SCOPED_TRACE(entry.path().filename().string());
    auto streamed = find_test_summaries_in(entry.path());
    ASSERT_TRUE(streamed) << streamed.error();
    SmokeCounts whole = find_test_summaries(recorded_lines(entry.path().filename().string()));
    EXPECT_EQ(streamed->passed, whole.passed);
    EXPECT_EQ(streamed->failed, whole.failed);
    EXPECT_EQ(streamed->skipped, whole.skipped);
    ASSERT_EQ(streamed->summaries.size(), whole.summaries.size());
    for (size_t i = 0; i < whole.summaries.size(); ++i) {
      EXPECT_EQ(streamed->summaries[i].line, whole.summaries[i].line);
      EXPECT_EQ(streamed->summaries[i].text, whole.summaries[i].text);
    }
  }
}

TEST(SmokeSummaryLog, LinesLongerThanAChunkNeitherHideNorFakeASummary) {
  testing::TempDir dir;
  fs::path log = dir.path() / "smoke.log";
  {
    std::ofstream out(log, std::ios::binary);
    // 3 MiB with no newline (across the reader's chunks), ending in what would be a summary:
    // only its first 64 KiB are looked at, so it is none.
    out << std::string(3u << 20, 'x') << " 99 passed\n";
    out << "#7 1.250 4 passed, 0 failed\n";
    out << std::string(2u << 20, '=') << "\n";
    out << "1 passed"; // the last line, without a newline
  }
  auto counts = find_test_summaries_in(log);
  ASSERT_TRUE(counts) << counts.error();
  ASSERT_EQ(counts->summaries.size(), 2u);
  EXPECT_EQ(counts->summaries[0].line, 2);
  EXPECT_EQ(counts->summaries[1].line, 4);
  EXPECT_EQ(counts->passed, 5);
}

TEST(SmokeSummaryLog, ALogThatCannotBeReadSaysWhy) {
  auto counts = find_test_summaries_in("/nonexistent/smoke.log");
  ASSERT_FALSE(counts);
  EXPECT_NE(counts.error().find("cannot read /nonexistent/smoke.log: No such file"),
            std::string::npos)
      << counts.error();
}

TEST(SmokeSummaryOutput, ACtestListCutByTheEndOfTheOutputStillCounts) {
  auto counts = find_test_summaries(
      {"75% tests passed, 1 tests failed out of 4", "", "Total Test time (real) =   0.01 sec", "",
       "The following tests did not run:", "\t  4 - skipme (Skipped)"});
  ASSERT_EQ(counts.summaries.size(), 1u);
  EXPECT_EQ(counts.passed, 2);
  EXPECT_EQ(counts.failed, 1);
  EXPECT_EQ(counts.skipped, 1);
}

} // namespace
} // namespace kiln
