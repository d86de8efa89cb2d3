#include <optional>

#include "lint/rules.h"
#include "lint/shell_commands.h"

namespace kiln {
namespace {

bool long_flag(std::string_view word, std::string_view name) {
  return word.starts_with(name) && (word.size() == name.size() || word[name.size()] == '=');
}

// hadolint's DL3047: --progress chooses the display; -q, -nv, -o and -a (and their long forms)
// take the progress bar out of the log already.
bool quiet_enough(const std::vector<std::string_view>& words, std::size_t from) {
  for (std::size_t i = from; i < words.size(); ++i) {
    auto w = words[i];
    if (long_flag(w, "--progress") || long_flag(w, "--quiet") || long_flag(w, "--no-verbose") ||
        long_flag(w, "--output-file") || long_flag(w, "--append-output") || w == "-nv") {
      return true;
    }
    if (w.size() > 1 && w[0] == '-' && w[1] != '-' &&
        w.substr(1).find_first_of("qoa") != std::string_view::npos) {
      return true;
    }
  }
  return false;
}

} // namespace

// wget's default progress bar redraws with carriage returns, which a build log stores as one
// line per update: a large download writes thousands of lines into every build's log.
void check_wget_progress(const LintContext& ctx, std::vector<LintFinding>& out) {
  for (const auto& ins : ctx.dockerfile.instructions) {
    if (!keyword_is(ins, "run") || ins.args.empty()) {
      continue;
    }
    std::optional<LineSearch> search;
    for_each_run_script(ins, [&](std::string_view script, bool on_start_line) {
      if (script.find("wget") == std::string_view::npos) {
        return; // most scripts do not mention it: no need to split them into commands
      }
      for_each_command(script, [&](const std::vector<std::string_view>& words) {
        std::size_t name = command_name(words);
        if (name >= words.size()) {
          return;
        }
        auto command = words[name];
        if (command != "wget" && !command.ends_with("/wget")) {
          return;
        }
        if (quiet_enough(words, name + 1)) {
          return;
        }
        int column = 0;
        if (on_start_line) {
          if (!search) {
            search.emplace(ctx.start_line(ins), arg_column(ins, 0));
          }
          column = search->find(command);
        }
        out.push_back(make_finding(ctx, ins, column, "wget-without-progress",
                                   "wget without --progress, -q or -nv writes its progress bar "
                                   "into the build log, a line per update; use `wget "
                                   "--progress=dot:giga URL`, or -q / -nv"));
      });
    });
  }
}

} // namespace kiln
