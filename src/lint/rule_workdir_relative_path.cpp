#include <fmt/format.h>

#include "lint/rules.h"

namespace kiln {
namespace {

// Absolute for Linux (`/x`) and for Windows images (`C:\x`, `\x`), whose WORKDIR BuildKit
// judges by the target's own rules.
bool absolute(std::string_view path) {
  if (!path.empty() && (path[0] == '/' || path[0] == '\\')) {
    return true;
  }
  return path.size() >= 2 && path[1] == ':' &&
         ((path[0] >= 'A' && path[0] <= 'Z') || (path[0] >= 'a' && path[0] <= 'z'));
}

} // namespace

// A relative WORKDIR resolves against the base image's working directory, which the base image
// may change in any release; once the build has set an absolute one (in the stage or a stage
// it is built FROM), later relative ones are relative to that and fine.
void check_workdir_relative_path(const LintContext& ctx, std::vector<LintFinding>& out) {
  std::vector<bool> workdir_set(ctx.stages.size(), false);
  for (std::size_t s = 0; s < ctx.stages.size(); ++s) {
    bool set = ctx.parents[s] >= 0 && workdir_set[static_cast<std::size_t>(ctx.parents[s])];
    for (const Instruction* ins : ctx.stages[s]) {
      if (set || !keyword_is(*ins, "workdir") || ins->args.empty()) {
        continue;
      }
      // BuildKit judges the path after expansion; a variable kiln cannot know expands empty,
      // so `$HOME/app` counts as absolute rather than as a finding kiln cannot be sure of.
      auto path = expand_words(ins->args[0], {}, ctx.dockerfile.escape).value;
      if (!absolute(path)) {
        out.push_back(make_finding(ctx, *ins, arg_column(*ins, 0), "workdir-relative-path",
                                   fmt::format("Relative workdir {} can have unexpected results "
                                               "if the base image changes",
                                               go_quote(path))));
      }
      set = true;
    }
    workdir_set[s] = set;
  }
}

} // namespace kiln
