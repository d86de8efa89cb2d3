#include <algorithm>

#include <fmt/format.h>

#include "lint/rules.h"

namespace kiln {
namespace {

std::string strip_slash(std::string path) {
  while (path.size() > 1 && path.back() == '/') {
    path.pop_back();
  }
  return path;
}

} // namespace

// A compile-cache mount without the endpoint ARG runs sccache local-only: the build still
// passes, but every builder recompiles from scratch and nobody notices the remote cache is gone.
void check_cache_arg_missing(const LintContext& ctx, std::vector<LintFinding>& out) {
  const auto& options = ctx.options;
  for (const auto& stage : split_stages(ctx.dockerfile)) {
    bool declared = std::any_of(stage.begin(), stage.end(), [&](const Instruction* ins) {
      if (ins->keyword != "arg") {
        return false;
      }
      for (std::size_t i = 0; i < ins->args.size(); i += 2) {
        if (ins->args[i] == options.cache_endpoint_arg) {
          return true;
        }
      }
      return false;
    });
    if (declared) {
      continue;
    }
    for (const auto* ins : stage) {
      if (ins->keyword != "run") {
        continue;
      }
      for (const auto& flag : ins->flags) {
        if (flag.name != "mount") {
          continue;
        }
        auto mount = parse_mount(flag.value);
        if (mount["type"] != "cache") {
          continue;
        }
        std::string target = mount.count("target") != 0 ? mount["target"]
                             : mount.count("dst") != 0  ? mount["dst"]
                                                        : mount["destination"];
        target = strip_slash(target);
        bool listed = std::any_of(options.cache_targets.begin(), options.cache_targets.end(),
                                  [&](const std::string& t) { return strip_slash(t) == target; });
        if (!listed) {
          continue;
        }
        out.push_back(make_finding(
            ctx, *ins, "--mount", "cache-arg-missing",
            fmt::format("RUN mounts the compile cache at {} but this stage does not declare "
                        "`ARG {}`, so the compiler cache runs local-only; add the ARG",
                        target, options.cache_endpoint_arg),
            flag.pos.line == ins->start.line ? flag.pos.column : 1));
      }
    }
  }
}

} // namespace kiln
