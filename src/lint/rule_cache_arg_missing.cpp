#include <algorithm>
#include <iterator>

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
  std::vector<std::string> targets; // options.cache_targets without trailing slashes, on demand
  for (const auto& stage : ctx.stages) {
    bool mounts = std::any_of(stage.begin(), stage.end(), [](const Instruction* ins) {
      return keyword_is(*ins, "run") && !ins->flags.empty();
    });
    if (!mounts) {
      continue; // the common stage: no RUN flag at all, so nothing to find
    }
    bool declared = std::any_of(stage.begin(), stage.end(), [&](const Instruction* ins) {
      if (!keyword_is(*ins, "arg")) {
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
      if (!keyword_is(*ins, "run")) {
        continue;
      }
      for (const auto& flag : ins->flags) {
        if (flag.name != "mount") {
          continue;
        }
        if (mount_option(flag.value, {"type"}).value_or("") != "cache") {
          continue;
        }
        auto target_option = mount_option(flag.value, {"target", "dst", "destination"});
        std::string target = strip_slash(std::string(target_option.value_or("")));
        if (targets.empty()) {
          std::transform(options.cache_targets.begin(), options.cache_targets.end(),
                         std::back_inserter(targets), strip_slash);
        }
        bool listed = std::find(targets.begin(), targets.end(), target) != targets.end();
        if (!listed) {
          continue;
        }
        out.push_back(make_finding(
            ctx, *ins, flag.pos.line == ins->start.line ? flag.pos.column : 0, "cache-arg-missing",
            fmt::format("RUN mounts the compile cache at {} but this stage does not declare "
                        "`ARG {}`, so the compiler cache runs local-only; add the ARG",
                        target, options.cache_endpoint_arg)));
      }
    }
  }
}

} // namespace kiln
