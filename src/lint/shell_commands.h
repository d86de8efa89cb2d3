#pragma once

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <string_view>
#include <vector>

#include "dockerfile/parser.h"

namespace kiln {

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

/// Where the command's name is among `words`: after its leading `NAME=value` assignments, the
/// shell keywords that open a body (`then make`, `do make`) and the wrappers that run another
/// command (`sudo make`, `env -i make`, `time make`) with their options; words.size() when
/// there is none.
inline std::size_t command_name(const std::vector<std::string_view>& words) {
  auto is_assignment = [](std::string_view word) {
    auto eq = word.find('=');
    return eq != std::string_view::npos && eq > 0 &&
           word.substr(0, eq).find_first_of("'\"$-/") == std::string_view::npos;
  };
  constexpr std::string_view k_keywords[] = {"then", "do", "else", "elif", "{", "!"};
  constexpr std::string_view k_wrappers[] = {"sudo", "env",   "time",    "nice",
                                             "exec", "nohup", "command", "xargs"};
  auto one_of = [](std::string_view word, const auto& list) {
    return std::find(std::begin(list), std::end(list), word) != std::end(list);
  };
  std::size_t name = 0;
  while (name < words.size()) {
    std::string_view word = words[name];
    if (is_assignment(word) || one_of(word, k_keywords)) {
      ++name;
    } else if (one_of(word, k_wrappers)) {
      ++name;
      while (name < words.size() && words[name].starts_with('-')) {
        ++name; // the wrapper's own options
      }
    } else {
      break;
    }
  }
  return name;
}

/// Each script a RUN runs: its shell form (`on_start_line` true: a finding can take a column
/// on the instruction's first line), its JSON form joined by blanks, and each heredoc.
template <typename OnScript> void for_each_run_script(const Instruction& ins, OnScript on) {
  if (ins.json_form) {
    std::string joined;
    for (const auto& arg : ins.args) {
      joined += (joined.empty() ? "" : " ") + arg;
    }
    on(std::string_view(joined), false);
  } else if (!ins.args.empty()) {
    on(std::string_view(ins.args[0]), true);
  }
  for (const auto& heredoc : ins.heredocs) {
    on(std::string_view(heredoc.content), false);
  }
}

} // namespace kiln
