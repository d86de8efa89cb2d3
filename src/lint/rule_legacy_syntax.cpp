#include <algorithm>

#include <fmt/format.h>

#include "lint/rules.h"

namespace kiln {
namespace {

// `ENV key value`: BuildKit reads the first word without `=` as the whole instruction's one
// key, and the rest of the line, blanks and all, as its value.
bool legacy_key_value(const Instruction& ins) {
  std::string_view rest = ins.original;
  rest.remove_prefix(std::min(rest.size(), ins.keyword.size()));
  std::size_t begin = rest.find_first_not_of(" \t");
  if (begin == std::string_view::npos) {
    return false;
  }
  std::size_t end = rest.find_first_of(" \t", begin);
  return rest.substr(begin, end - begin).find('=') == std::string_view::npos;
}

} // namespace

// Syntax BuildKit still accepts but has deprecated: each works today and is slated to stop.
void check_legacy_syntax(const LintContext& ctx, std::vector<LintFinding>& out) {
  const auto& instructions = ctx.dockerfile.instructions;
  for (const auto& ins : instructions) {
    if (keyword_is(ins, "maintainer")) {
      out.push_back(make_finding(ctx, ins, 0, "maintainer-deprecated",
                                 "Maintainer instruction is deprecated in favor of using label"));
    } else if ((keyword_is(ins, "env") || keyword_is(ins, "label")) && legacy_key_value(ins)) {
      auto keyword = written_keyword(ins);
      out.push_back(make_finding(
          ctx, ins, 0, "legacy-key-value-format",
          fmt::format("\"{} key=value\" should be used instead of legacy \"{} key value\" format",
                      keyword, keyword)));
    }
  }
  // Both lists are in file order: one walk pairs each empty continuation with the instruction
  // it is in, whose start line suppressions bind to.
  std::size_t i = 0;
  for (int line : ctx.dockerfile.empty_continuation_lines) {
    while (i + 1 < instructions.size() && instructions[i].end.line < line) {
      ++i;
    }
    if (instructions.empty()) {
      break;
    }
    LintFinding f =
        make_finding(ctx, instructions[i], 1, "no-empty-continuation", "Empty continuation line");
    f.line = line;
    out.push_back(std::move(f));
  }
}

} // namespace kiln
