#include <optional>

#include "lint/rules.h"

namespace kiln {
namespace {

// The commands of a shell script, each as its words: split at `;`, `&`, `|`, newlines,
// parentheses and backquotes outside quotes, words at blanks, quotes kept inside words. A
// reading of the script good enough to find a command's name and its flags, which is all
// this rule asks.
template <typename OnCommand> void for_each_command(std::string_view script, OnCommand on) {
  std::vector<std::string_view> words;
  std::size_t word_begin = std::string_view::npos;
  auto end_word = [&](std::size_t at) {
    if (word_begin != std::string_view::npos) {
      words.push_back(script.substr(word_begin, at - word_begin));
      word_begin = std::string_view::npos;
    }
  };
  auto end_command = [&](std::size_t at) {
    end_word(at);
    if (!words.empty()) {
      on(words);
    }
    words.clear();
  };
  for (std::size_t i = 0; i < script.size(); ++i) {
    char c = script[i];
    if (c == '\'' || c == '"') {
      if (word_begin == std::string_view::npos) {
        word_begin = i;
      }
      auto close = script.find(c, i + 1);
      i = close == std::string_view::npos ? script.size() - 1 : close;
      continue;
    }
    if (c == '\\') {
      if (word_begin == std::string_view::npos) {
        word_begin = i;
      }
      ++i;
      continue;
    }
    if (c == ';' || c == '&' || c == '|' || c == '\n' || c == '(' || c == ')' || c == '`') {
      end_command(i);
    } else if (c == ' ' || c == '\t' || c == '\r') {
      end_word(i);
    } else if (word_begin == std::string_view::npos) {
      word_begin = i;
    }
  }
  end_command(script.size());
}

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

bool is_assignment(std::string_view word) {
  auto eq = word.find('=');
  return eq != std::string_view::npos && eq > 0 &&
         word.substr(0, eq).find_first_of("'\"$-/") == std::string_view::npos;
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
    auto judge = [&](std::string_view script, bool on_start_line) {
      if (script.find("wget") == std::string_view::npos) {
        return; // most scripts do not mention it: no need to split them into commands
      }
      for_each_command(script, [&](const std::vector<std::string_view>& words) {
        std::size_t name = 0;
        while (name < words.size() && is_assignment(words[name])) {
          ++name;
        }
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
    };
    if (ins.json_form) {
      std::string joined;
      for (const auto& arg : ins.args) {
        joined += (joined.empty() ? "" : " ") + arg;
      }
      judge(joined, false);
    } else {
      judge(ins.args[0], true);
    }
    for (const auto& heredoc : ins.heredocs) {
      judge(heredoc.content, false);
    }
  }
}

} // namespace kiln
