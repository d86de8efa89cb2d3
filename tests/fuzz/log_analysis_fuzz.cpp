// kiln logs analyze's one-pass reader: any bytes, in any chunks, with or without a line-time
// sidecar. The result must not depend on where the chunks end, must stay within its bounds,
// and must make JSON and a table.
#include <cstdlib>

#include "forensics/log_analysis.h"
#include "fuzz_bundle.h"

namespace {

using namespace kiln::forensics;

nlohmann::json table(LogResult log) {
  RunAnalysis run;
  run.logs.push_back(std::move(log));
  summarize(run);
  (void)format_tty(run);
  nlohmann::json json = to_json(run);
  (void)json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return json;
}

void check(const LogResult& log, const Options& options, size_t size) {
  if (log.bytes != size) {
    std::abort();
  }
  for (const StepResult& step : log.steps) {
    if (step.name.size() > 200 || step.errors.size() > 2 * options.error_lines + 4 ||
        step.output_lines + step.replayed_lines > log.lines ||
        (step.seconds && *step.seconds < 0) ||
        (step.idle_tail_seconds && *step.idle_tail_seconds < 0) ||
        step.warnings.noise + step.warnings.signal > step.warnings.total) {
      std::abort();
    }
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text = kiln::fuzz::as_text(data, size);
  Options options;
  options.error_lines = 3;
  options.flood_lines = 20;

  LogAnalyzer whole(options);
  whole.feed(text);
  LogResult first = whole.finish();
  check(first, options, size);

  // The same bytes in chunks whose size the input picks.
  size_t chunk = size == 0 ? 1 : 1 + data[0] % 64;
  LogAnalyzer pieces(options);
  for (size_t at = 0; at < size; at += chunk) {
    pieces.feed(text.substr(at, chunk));
  }
  LogResult second = pieces.finish();
  if (table(first) != table(second)) {
    std::abort();
  }

  // The input read as its own sidecar too: marks at any offsets and times.
  LogAnalyzer timed(options, LineClock(parse_line_times(text)));
  timed.feed(text);
  LogResult third = timed.finish();
  check(third, options, size);
  (void)table(std::move(third));
  return 0;
}
