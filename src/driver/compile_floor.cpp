#include "driver/compile_floor.h"

#include <algorithm>

#include <fmt/format.h>

namespace kiln {

CompileFloorVerdict judge_compile_floor(int min_requests,
                                        const std::optional<CompileReport>& report,
                                        const std::vector<StepSeen>& steps) {
  if (min_requests <= 0) {
    return {};
  }
  int compile_ran = 0;
  int compile_cached = 0;
  for (const StepSeen& step : steps) {
    if (step.instruction.find("kiln-cc") != std::string::npos) {
      ++(step.cached ? compile_cached : compile_ran);
    }
  }
  bool all_cached = !steps.empty() && std::all_of(steps.begin(), steps.end(),
                                                  [](const StepSeen& s) { return s.cached; });
  if (compile_ran == 0 && (compile_cached > 0 || all_cached)) {
    return {true, compile_cached > 0
                      ? fmt::format("satisfied: its {} compile step(s) came from the layer "
                                    "cache and compiled nothing",
                                    compile_cached)
                      : "satisfied: every step came from the layer cache and compiled nothing"};
  }
  if (!report) {
    return {false,
            fmt::format("no step reported compile-cache stats, and min_compile_requests "
                        "is {}{}: end each compiling step with `kiln-cc session stats`",
                        min_requests,
                        compile_ran > 0 ? fmt::format(" ({} compile step(s) ran)", compile_ran)
                                        : std::string())};
  }
  if (report->totals.compile_requests >= min_requests) {
    return {true, fmt::format("met: {} compile request(s) reached the compile cache, floor {}",
                              report->totals.compile_requests, min_requests)};
  }
  return {false, fmt::format("only {} compile request(s) reached the compile cache, below "
                             "min_compile_requests {}: the compiles bypassed the cache (a hit "
                             "rate cannot show this: a compile that never reaches the cache is "
                             "not counted in it)",
                             report->totals.compile_requests, min_requests)};
}

} // namespace kiln
