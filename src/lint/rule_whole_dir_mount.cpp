#include <algorithm>

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

std::vector<std::string> split_blank(const std::string& s) {
  std::vector<std::string> words;
  std::string word;
  for (char c : s) {
    if (c == ' ' || c == '\t') {
      if (!word.empty()) {
        words.push_back(word);
      }
      word.clear();
    } else {
      word += c;
    }
  }
  if (!word.empty()) {
    words.push_back(word);
  }
  return words;
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
      for (const auto& flag : ins.flags) {
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
        int from = flag.pos.line == ins.start.line ? flag.pos.column : 1;
        auto key = make_finding(ctx, ins, "source=" + source, "", "", from);
        bool long_key = key.column != ins.start.column;
        auto needle = (long_key ? "source=" : "src=") + source;
        auto f = make_finding(ctx, ins, needle, "whole-dir-mount", message(source), from);
        if (f.column != ins.start.column) {
          f.column += static_cast<int>(needle.size() - source.size());
        }
        out.push_back(std::move(f));
      }
    } else if (keyword_is(ins, "copy") && ins.heredocs.empty()) {
      auto words = ins.json_form ? ins.args : split_blank(ins.args.empty() ? "" : ins.args[0]);
      for (std::size_t i = 0; i + 1 < words.size(); ++i) {
        if (!listed(words[i])) {
          continue;
        }
        // Past the flags, so `--from=ci` does not match a source named `ci`.
        int from = ins.start.column + static_cast<int>(ins.keyword.size());
        for (const auto& flag : ins.flags) {
          if (flag.pos.line == ins.start.line) {
            from = std::max(from, flag.pos.column + 2 + static_cast<int>(flag.name.size()));
          }
        }
        out.push_back(make_finding(ctx, ins, words[i], "whole-dir-mount", message(words[i]), from));
      }
    }
  }
}

} // namespace kiln
