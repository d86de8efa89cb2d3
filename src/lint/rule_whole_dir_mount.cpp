#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "lint/rules.h"

namespace kiln {
namespace {

std::string normalize(std::string path) {
  if (path.rfind("./", 0) == 0) {
    path.erase(0, 2);
  }
  while (path.size() > 1 && path.back() == '/') {
    path.pop_back();
  }
  return path;
}

} // namespace

// Directories listed per-file-only hold files that change independently; mounting or copying
// the whole directory puts every file in the cache key, so any edit invalidates every layer.
void check_whole_dir_mount(const LintContext& ctx, std::vector<LintFinding>& out) {
  const auto& dirs = ctx.options.per_file_dirs;
  if (dirs.empty()) {
    return; // nothing is per-file-only, so nothing can be used whole
  }
  auto listed = [&](const std::string& source) {
    auto norm = normalize(source);
    return std::any_of(dirs.begin(), dirs.end(),
                       [&](const std::string& d) { return normalize(d) == norm; });
  };
  auto message = [](const std::string& source) {
    return fmt::format("{} is a per-file-only directory: using it whole puts every file in "
                       "the cache key; mount or copy the files this step needs one by one",
                       source);
  };
  for (const auto& ins : ctx.dockerfile.instructions) {
    if (keyword_is(ins, "run")) {
      for (std::size_t i = 0; i < ins.flags.size(); ++i) {
        const auto& flag = ins.flags[i];
        if (flag.name != "mount") {
          continue;
        }
        if (mount_option(flag.value, {"type"}).value_or("bind") != "bind") {
          continue;
        }
        std::string source(mount_option(flag.value, {"source", "src"}).value_or(""));
        if (source.empty() || !listed(source)) {
          continue;
        }
        // Looked for in this flag's own text: from it to the next flag on the line.
        int from = flag.pos.line == ins.start.line ? flag.pos.column : 0;
        int to = i + 1 < ins.flags.size() && ins.flags[i + 1].pos.line == ins.start.line
                     ? ins.flags[i + 1].pos.column
                     : 0;
        auto line = ctx.start_line(ins);
        int column = 0;
        for (std::string_view key : {"source=", "src="}) {
          if (int at = LineSearch(line, from, to).find(std::string(key) + source); at > 0) {
            column = at + static_cast<int>(key.size());
            break;
          }
        }
        out.push_back(make_finding(ctx, ins, column, "whole-dir-mount", message(source)));
      }
    } else if (keyword_is(ins, "copy") && ins.heredocs.empty()) {
      auto words = ins.json_form ? ins.args : split_blank(ins.args.empty() ? "" : ins.args[0]);
      // Past the flags, so `--from=ci` does not match a source named `ci`; each source after
      // the one before it.
      std::optional<LineSearch> search;
      for (std::size_t i = 0; i + 1 < words.size(); ++i) {
        if (!listed(words[i])) {
          continue;
        }
        if (!search) {
          search.emplace(ctx.start_line(ins), arg_column(ins, 0));
        }
        out.push_back(
            make_finding(ctx, ins, search->find(words[i]), "whole-dir-mount", message(words[i])));
      }
    }
  }
}

} // namespace kiln
