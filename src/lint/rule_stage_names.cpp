#include <string>
#include <unordered_set>

#include <fmt/format.h>

#include "lint/rules.h"
#include "util/strings.h"

namespace kiln {

// BuildKit lower-cases stage names when it matches them, so `AS Build` and `AS build` are one
// name, and `scratch` or `context` as a name shadows what FROM and --from mean by them.
void check_stage_names(const LintContext& ctx, std::vector<LintFinding>& out) {
  std::unordered_set<std::string> seen;
  for (const auto& stage : ctx.stages) {
    const Instruction& from = *stage.front();
    if (from.args.size() != 3) {
      continue;
    }
    const std::string& name = from.args[2];
    int name_column = arg_column(from, 2);
    if (!is_lower(name)) {
      out.push_back(make_finding(ctx, from, name_column, "stage-name-casing",
                                 fmt::format("Stage name '{}' should be lowercase", name)));
    }
    // Only a FROM written all in one case says which case `AS` should be in; a mixed-case
    // FROM is consistent-instruction-casing's finding.
    std::string_view keyword = written_keyword(from);
    const std::string& as = from.args[1];
    bool mismatch = (is_lower(keyword) && !is_lower(as)) ||
                    (!is_lower(keyword) && is_upper(keyword) && !is_upper(as));
    if (mismatch) {
      out.push_back(
          make_finding(ctx, from, arg_column(from, 1), "from-as-casing",
                       fmt::format("'{}' and '{}' keywords' casing do not match", as, keyword)));
    }
    std::string key = lower(name);
    if (key == "scratch" || key == "context") {
      out.push_back(
          make_finding(ctx, from, name_column, "reserved-stage-name",
                       fmt::format("Stage name should not use the same name as reserved stage {}",
                                   go_quote(key))));
    }
    if (!seen.insert(key).second) {
      out.push_back(make_finding(
          ctx, from, name_column, "duplicate-stage-name",
          fmt::format("Duplicate stage name {}, stage names should be unique", go_quote(key))));
    }
  }
}

} // namespace kiln
