#include <fmt/format.h>

#include "gates/image_env.h"
#include "lint/rules.h"

namespace kiln {

// The image-env gate refuses these names in a built image; catching them in the Dockerfile
// fails before a long build instead of after it.
void check_leak_env_name(const LintContext& ctx, std::vector<LintFinding>& out) {
  for (const auto& ins : ctx.dockerfile.instructions) {
    if (!keyword_is(ins, "env")) {
      continue;
    }
    for (std::size_t i = 0; i + 1 < ins.args.size(); i += 2) {
      const auto& name = ins.args[i];
      auto pattern = build_host_name(name, ctx.options.extra_names);
      if (!pattern) {
        continue;
      }
      out.push_back(make_finding(ctx, ins, arg_column(ins, i), "leak-env-name",
                                 build_host_name_message(name, *pattern)));
    }
  }
}

} // namespace kiln
