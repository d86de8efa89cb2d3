#include <array>

#include <fmt/format.h>

#include "lint/rules.h"

namespace kiln {

// CMD, ENTRYPOINT and HEALTHCHECK set the image's runtime config, not a layer.
//
// json-args-recommended: in shell form the command runs under `/bin/sh -c`, which becomes PID 1
// and does not pass SIGTERM on, so `docker stop` waits out its timeout and kills. A SHELL
// instruction (in the stage or one it is built FROM) says the shell is chosen on purpose.
//
// multiple-instructions-disallowed: only the last of each in a stage takes effect; the finding
// is on the earlier one, the one that is silently dropped.
void check_runtime_config(const LintContext& ctx, std::vector<LintFinding>& out) {
  std::vector<bool> shell_set(ctx.stages.size(), false);
  for (std::size_t s = 0; s < ctx.stages.size(); ++s) {
    bool shell = ctx.parents[s] >= 0 && shell_set[static_cast<std::size_t>(ctx.parents[s])];
    std::array<const Instruction*, 3> last{}; // cmd, entrypoint, healthcheck
    for (const Instruction* ins : ctx.stages[s]) {
      if (keyword_is(*ins, "shell")) {
        shell = true;
        continue;
      }
      std::size_t slot = keyword_is(*ins, "cmd")           ? 0
                         : keyword_is(*ins, "entrypoint")  ? 1
                         : keyword_is(*ins, "healthcheck") ? 2
                                                           : last.size();
      if (slot == last.size()) {
        continue;
      }
      auto keyword = written_keyword(*ins);
      if (last[slot] != nullptr) {
        out.push_back(make_finding(ctx, *last[slot], 0, "multiple-instructions-disallowed",
                                   fmt::format("Multiple {} instructions should not be used in "
                                               "the same stage because only the last one will "
                                               "be used",
                                               keyword)));
      }
      last[slot] = ins;
      if (slot < 2 && !ins->json_form && !shell) {
        out.push_back(make_finding(ctx, *ins, 0, "json-args-recommended",
                                   fmt::format("JSON arguments recommended for {} to prevent "
                                               "unintended behavior related to OS signals",
                                               keyword)));
      }
    }
    shell_set[s] = shell;
  }
}

} // namespace kiln
