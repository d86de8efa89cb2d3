#include <algorithm>
#include <array>
#include <optional>

#include <fmt/format.h>

#include "dockerfile/mounts.h"
#include "lint/rules.h"
#include "lint/shell_commands.h"

namespace kiln {
namespace {

/// The secret a run offers each stage its job budget in (JOBS, MEMORY_LIMIT_GB).
constexpr std::string_view k_budget = "kiln-budget";

/// What runs a compile whose parallelism is its own to choose: a build tool, or a compiler
/// launcher handed a compiler. Not a tool asked for its version or help, nor a launcher asked
/// for its statistics (`ccache -s`, `sccache --show-stats`).
bool compiles(const std::vector<std::string_view>& words, std::size_t name) {
  std::string_view command = words[name];
  command = command.substr(command.find_last_of('/') + 1);
  auto args = std::vector<std::string_view>(words.begin() + static_cast<std::ptrdiff_t>(name) + 1,
                                            words.end());
  auto has = [&](std::string_view arg) {
    return std::find(args.begin(), args.end(), arg) != args.end();
  };
  constexpr std::array<std::string_view, 3> k_tools = {"make", "gmake", "ninja"};
  if (std::find(k_tools.begin(), k_tools.end(), command) != k_tools.end()) {
    return !has("--version") && !has("--help") && !has("-v") && !has("-h");
  }
  constexpr std::array<std::string_view, 3> k_launchers = {"sccache", "ccache", "kiln-cc"};
  if (std::find(k_launchers.begin(), k_launchers.end(), command) != k_launchers.end()) {
    // `kiln-cc cc ...` and `ccache gcc ...` compile; `kiln-cc session ...` starts a session.
    return !args.empty() && !args.front().starts_with('-') && args.front() != "session";
  }
  return command == "cmake" && has("--build");
}

} // namespace

// A compile that does not read the run's job budget picks its own -j (often every core): with
// several stages building at once each takes the whole host, and a memory-heavy compile runs it
// out of the memory the budget was sized to leave. The secret is visible only to the RUN that
// mounts it, so each compiling RUN must mount it itself.
void check_compile_without_budget(const LintContext& ctx, std::vector<LintFinding>& out) {
  for (const auto& ins : ctx.dockerfile.instructions) {
    if (!keyword_is(ins, "run") || run_mounts_secret(ins, k_budget)) {
      continue;
    }
    bool found = false;
    std::optional<LineSearch> search;
    for_each_run_script(ins, [&](std::string_view script, bool on_start_line) {
      for_each_command(script, [&](const std::vector<std::string_view>& words) {
        std::size_t name = command_name(words);
        if (found || name >= words.size() || !compiles(words, name)) {
          return;
        }
        found = true; // one finding per RUN: the fix is one mount
        int column = 0;
        if (on_start_line) {
          search.emplace(ctx.start_line(ins), arg_column(ins, 0));
          column = search->find(words[name]);
        }
        out.push_back(make_finding(
            ctx, ins, column, "compile-without-budget",
            fmt::format("RUN compiles ({}) without mounting the {} secret, so its job count "
                        "ignores the run's budget and stages building at once each take the "
                        "whole host; add `--mount=type=secret,id={}` and `. /run/secrets/{}` "
                        "before it, then use -j\"$JOBS\"",
                        words[name], k_budget, k_budget, k_budget)));
      });
    });
  }
}

} // namespace kiln
