#pragma once

#include <deque>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <tl/expected.hpp>

namespace kiln {

/// Reads the test results out of what a smoke build's steps printed, for the coverage floors
/// (min_passed, max_skipped): a smoke stage whose tests asserted nothing must not pass as green,
/// and an exit status alone cannot tell "all passed" from "nothing ran". Only the closing
/// summary lines test runners print are read, each as a whole line; a line that merely mentions
/// "passed" is not a result. The shapes are the ones recorded in tests/fixtures/smoke.
///
/// Three formats:
/// - plain, kiln's own convention for shell smoke scripts: `12 passed, 0 failed, 1 skipped`,
///   comma-separated `<count> passed|failed|skipped` items in any order, each at most once.
///   Nothing may stand before or after them (`Tests: 3 passed` is not read).
/// - pytest's closing line, `==== 2 passed, 1 skipped in 0.12s ====` or bare under `-q`, the
///   time also as `61.01s (0:01:01)`, or `0.12 seconds` (older pytest). errors count as
///   failed (a test that could not run its fixture proved nothing); xpassed as passed (under
///   xfail_strict pytest already reports those as failed); xfailed as skipped (it asserted
///   nothing that works); deselected, warnings and rerun (the attempts before a retry) are not
///   tests' outcomes and are left out. `no tests ran` is a summary with nothing in it. Any other
///   word (another plugin's, such as `2 subtests passed`) makes the line no summary: its counts
///   could not be placed.
/// - ctest's `75% tests passed, 1 tests failed out of 4`, and `No tests were found!!!` (nothing
///   ran). Recorded with ctest 3.25: `out of` counts the tests that ran plus those skipped by
///   SKIP_RETURN_CODE (or a skip regex), and ctest counts those as passed; DISABLED tests are in
///   neither. Both kinds are listed after the summary under `The following tests did not run:`
///   as `(Skipped)` or `(Disabled)`, so passed = total - failed - listed (Skipped), and skipped =
///   every listed test. A test that could not start (`Not Run`: missing executable or required
///   file) is already among the failed.
///
/// Lines may come raw from a log: a BuildKit plain-progress prefix (`#12 0.345 `), colour
/// escapes and a trailing `\r` are dropped first, and the lines BuildKit repeats under
/// `------` / ` > [stage] RUN ...:` when a step fails are not read twice.

/// The most tests a count may claim. No smoke stage runs a billion tests, and below it two counts
/// add without overflow: a count that reaches it is held there and the gate refuses it. (Counts
/// once wrapped: output claiming 2^32 failures summed to 0 failed and passed the gate.)
constexpr int k_max_test_count = 1'000'000'000;

/// One closing summary found in the output.
struct TestSummary {
  std::string format; // "plain", "pytest" or "ctest"
  int passed = 0;
  int failed = 0;
  int skipped = 0;
  int line = 0;     // 1-based, in the lines it was found in
  std::string text; // the line as the runner printed it: no log prefix, colour or `\r`
};

/// Every summary found, in order, and their sum (each count held at k_max_test_count). No summary
/// at all means the output reported no results; a summary with all counts zero means a runner
/// said it ran nothing.
struct SmokeCounts {
  int passed = 0;
  int failed = 0;
  int skipped = 0;
  std::vector<TestSummary> summaries;
};

/// How much of a line the reader looks at: a summary is one short line, and a 1 GB line of
/// output must not be held whole to learn it is none.
constexpr std::size_t k_summary_line_limit = 64 * 1024;

/// The summaries of output given one line at a time, holding three lines at most: what
/// BuildKit's replay frame and ctest's list of tests that did not run need to be recognised.
class SummaryReader {
public:
  /// The next line, without its newline; only its first k_summary_line_limit bytes are read.
  void line(std::string_view text);
  /// Every summary found, in order, and their sum. The reader is spent.
  SmokeCounts finish();

private:
  struct CtestList {
    TestSummary summary; // its line and text; the counts once the list has ended
    int failed = 0;
    int total = 0;
    bool total_time_seen = false;
    bool in_list = false;
    int skipped = 0;
    int disabled = 0;
  };
  bool replay_starts() const;
  void step();
  void summary_line(std::string_view raw);
  void ctest_list_line(std::string_view raw);
  void end_ctest_list();
  void add(TestSummary summary);

  std::deque<std::string> m_window; // the lines read and not yet looked at
  std::size_t m_number = 0;         // of the line looked at last, 1-based
  bool m_in_replay = false;
  std::optional<CtestList> m_ctest; // a ctest summary waiting for its list
  SmokeCounts m_counts;
};

/// Every summary in the lines a build's steps printed (one line per entry), summed.
SmokeCounts find_test_summaries(const std::vector<std::string>& lines);

/// Every summary in the log at `log`, read in chunks: a log of any size costs a few megabytes.
tl::expected<SmokeCounts, std::string> find_test_summaries_in(const std::filesystem::path& log);

/// `line` as the program printed it: without a BuildKit plain-progress prefix, colour (SGR)
/// escapes and trailing `\r`.
std::string printed_text(std::string_view line);

} // namespace kiln
