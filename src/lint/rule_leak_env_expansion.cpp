#include <optional>

#include <fmt/format.h>

#include "gates/image_env.h"
#include "lint/rules.h"

namespace kiln {

// `ENV CACHE=${SCCACHE_WEBDAV_ENDPOINT}` launders a build-host value past a name check: the
// image's ENV carries the endpoint under a name nobody refuses.
void check_leak_env_expansion(const LintContext& ctx, std::vector<LintFinding>& out) {
  for (const auto& ins : ctx.dockerfile.instructions) {
    if (!keyword_is(ins, "env")) {
      continue;
    }
    std::optional<ReferenceColumns> references; // read at the instruction's first finding
    for (std::size_t i = 0; i + 1 < ins.args.size(); i += 2) {
      const auto& name = ins.args[i];
      // Only `$` references a variable: a value without one copies nothing. Tested first, as
      // it is much cheaper than the name patterns.
      if (ins.args[i + 1].find('$') == std::string::npos) {
        continue;
      }
      // The name itself is already refused by leak-env-name; one finding per fault.
      if (build_host_name(name, ctx.options.extra_names)) {
        continue;
      }
      // With no variables set, every reference comes back as unset: exactly the names used.
      for (const auto& used : expand_words(ins.args[i + 1], {}, ctx.dockerfile.escape).unset) {
        auto pattern = build_host_name(used, ctx.options.extra_names);
        if (!pattern || used == name) {
          continue;
        }
        if (!references) {
          references.emplace(ctx.start_line(ins));
        }
        out.push_back(make_finding(
            ctx, ins, references->column(used), "leak-env-expansion",
            fmt::format("ENV {} copies {} (a build-host setting, matches {}) into the image "
                        "under another name; use the ARG in RUN only, never in ENV",
                        name, used, *pattern)));
      }
    }
  }
}

} // namespace kiln
