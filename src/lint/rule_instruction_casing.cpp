#include <fmt/format.h>

#include "lint/rules.h"

namespace kiln {

// A file that mixes `RUN` and `run` reads as two authors' work; BuildKit takes the casing most
// of the file's instructions use as the one to follow. Instructions before the first FROM are
// not counted nor judged, as BuildKit's stages do not hold them.
void check_instruction_casing(const LintContext& ctx, std::vector<LintFinding>& out) {
  int lower_count = 0;
  int upper_count = 0;
  for (const auto& stage : ctx.stages) {
    for (const Instruction* ins : stage) {
      auto keyword = written_keyword(*ins);
      if (is_lower(keyword)) {
        ++lower_count;
      } else if (is_upper(keyword)) {
        ++upper_count;
      }
    }
  }
  bool majority_lower = lower_count > upper_count;
  for (const auto& stage : ctx.stages) {
    for (const Instruction* ins : stage) {
      auto keyword = written_keyword(*ins);
      bool wrong = majority_lower ? !is_lower(keyword) : !is_upper(keyword);
      if (!wrong) {
        continue;
      }
      out.push_back(make_finding(
          ctx, *ins, 0, "consistent-instruction-casing",
          fmt::format("Command '{}' should match the case of the command majority ({})", keyword,
                      majority_lower ? "lowercase" : "uppercase")));
    }
  }
}

} // namespace kiln
