#include "gates/smoke_floors.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "util/strings.h"

namespace kiln {

SmokeVerdict judge_smoke(const SmokeCounts& counts, int min_passed, int max_skipped) {
  if (counts.summaries.empty()) {
    return {false, "no test summary in the smoke output (a `N passed, N failed, N skipped` line, "
                   "pytest's or ctest's closing line): a smoke stage that reports nothing "
                   "asserted nothing; print one"};
  }
  if (counts.passed == 0 && counts.failed == 0 && counts.skipped == 0) {
    return {false, "the smoke tests ran nothing (0 passed, 0 failed, 0 skipped); \"all passed\" "
                   "with nothing run is never green"};
  }
  if (std::max({counts.passed, counts.failed, counts.skipped}) >= k_max_test_count) {
    return {false, fmt::format("the smoke output claims {} or more tests ({} passed, {} failed, "
                               "{} skipped): no smoke stage runs that many, so the summary is "
                               "no count to trust; make the tests print their real counts",
                               k_max_test_count, counts.passed, counts.failed, counts.skipped)};
  }
  std::vector<std::string> missed;
  if (counts.failed > 0) {
    missed.push_back(fmt::format("{} test(s) failed", counts.failed));
  }
  if (counts.passed < min_passed) {
    missed.push_back(
        fmt::format("{} passed, below the floor min_passed = {}", counts.passed, min_passed));
  }
  if (counts.skipped > max_skipped) {
    missed.push_back(
        fmt::format("{} skipped, above the ceiling max_skipped = {}", counts.skipped, max_skipped));
  }
  return {missed.empty(), join(missed, "; ")};
}

} // namespace kiln
