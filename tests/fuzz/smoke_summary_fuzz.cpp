// The smoke gate's reader of test-runner summaries, on any build output: no crash, and no
// output that reports a failure ever passes the gate.
#include <cstdlib>

#include "fuzz_bundle.h"
#include "gates/smoke_floors.h"
#include "gates/smoke_summary.h"
#include "util/strings.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;
  std::vector<std::string> lines = split(fuzz::as_text(data, size), '\n');
  SmokeCounts counts = find_test_summaries(lines);
  SmokeVerdict verdict = judge_smoke(counts, 1, 0);
  for (const TestSummary& summary : counts.summaries) {
    if (summary.passed < 0 || summary.failed < 0 || summary.skipped < 0 || summary.line < 1 ||
        static_cast<size_t>(summary.line) > lines.size()) {
      std::abort();
    }
    if (verdict.ok && summary.failed > 0) {
      std::abort(); // a summary said tests failed and the gate passed
    }
  }
  if (counts.passed < 0 || counts.failed < 0 || counts.skipped < 0) {
    std::abort();
  }
  for (const std::string& line : lines) {
    if (printed_text(line).size() > line.size()) {
      std::abort();
    }
  }
  return 0;
}
