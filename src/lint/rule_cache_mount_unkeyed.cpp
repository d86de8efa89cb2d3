#include <string>
#include <vector>

#include <fmt/format.h>

#include "dockerfile/mounts.h"
#include "lint/rules.h"

namespace kiln {
namespace {

/// Whether the stage runs on the build's own platform whatever it builds for
/// (`FROM --platform=$BUILDPLATFORM`): its tools, and so its caches, are the same for every
/// target.
bool on_build_platform(const std::vector<const Instruction*>& stage) {
  for (const Instruction* ins : stage) {
    if (keyword_is(*ins, "from")) {
      for (const auto& flag : ins->flags) {
        if (flag.name == "platform" && flag.value.find("BUILDPLATFORM") != std::string::npos) {
          return true;
        }
      }
    }
  }
  return false;
}

/// Whether the stage is written to build for several platforms: it reads the target platform,
/// or its FROM names one.
bool multi_platform(const std::vector<const Instruction*>& stage) {
  for (const Instruction* ins : stage) {
    if (keyword_is(*ins, "from")) {
      for (const auto& flag : ins->flags) {
        if (flag.name == "platform") {
          return true;
        }
      }
    } else if (keyword_is(*ins, "arg")) {
      for (size_t a = 0; a < ins->args.size(); a += 2) {
        if (ins->args[a].starts_with("TARGET")) {
          return true;
        }
      }
    }
  }
  return false;
}

} // namespace

// A cache mount is keyed by its id alone (its target when it has none), so every platform a
// file builds for shares one: an arm64 compile reads objects an amd64 toolchain wrote there.
// Keying the id by the platform (or the toolchain's pin) gives each its own.
void check_cache_mount_unkeyed(const LintContext& ctx, std::vector<LintFinding>& out) {
  for (const auto& stage : ctx.stages) {
    if (on_build_platform(stage) || (ctx.options.platforms < 2 && !multi_platform(stage))) {
      continue;
    }
    for (const Instruction* ins : stage) {
      if (!keyword_is(*ins, "run")) {
        continue;
      }
      for (const auto& flag : ins->flags) {
        if (flag.name != "mount" || mount_option(flag.value, {"type"}) != "cache") {
          continue;
        }
        auto id = mount_option(flag.value, {"id"});
        auto target = mount_option(flag.value, {"target", "dst", "destination"});
        std::string_view key = id && !id->empty() ? *id : target.value_or("");
        if (key.empty() || key.find('$') != std::string_view::npos) {
          continue;
        }
        out.push_back(make_finding(
            ctx, *ins, 0, "cache-mount-unkeyed",
            fmt::format("the cache mount {} is keyed by {} alone, so every platform this file "
                        "builds for{} shares it and reads what another's toolchain wrote; add "
                        "the platform to its id (`id={}-${{TARGETPLATFORM}}`, with `ARG "
                        "TARGETPLATFORM` in the stage)",
                        key, id && !id->empty() ? "its id" : "its target",
                        ctx.options.platforms > 1
                            ? fmt::format(" ({} in the chain's lanes)", ctx.options.platforms)
                            : "",
                        key)));
      }
    }
  }
}

} // namespace kiln
