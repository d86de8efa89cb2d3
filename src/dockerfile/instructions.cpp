#include "dockerfile/instructions.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "util/strings.h"

namespace kiln {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t';
}

bool is_word_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}

bool is_word_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

std::string_view trim_end(std::string_view text) {
  return text.substr(0, text.find_last_not_of(" \t") + 1);
}

bool is_blank_or_comment(std::string_view line) {
  std::string_view text = trim(line);
  return text.empty() || text[0] == '#';
}

std::vector<std::string> physical_lines(std::string_view text) {
  std::vector<std::string> lines = split(text, '\n');
  for (auto& line : lines) {
    if (!line.empty() && line.back() == '\r') {
      line.pop_back();
    }
  }
  return lines;
}

// The escape character from the parser directives, which may only open the file.
char escape_char(const std::vector<std::string>& lines) {
  char escape = '\\';
  for (const auto& line : lines) {
    std::string_view text = trim(line);
    if (text.empty() || text[0] != '#') {
      break;
    }
    size_t equals = text.find('=');
    if (equals == std::string_view::npos) {
      break;
    }
    std::string name = lower(trim(text.substr(1, equals - 1)));
    if (name.empty() || !std::all_of(name.begin(), name.end(),
                                     [](char c) { return is_word_char(c) || c == '-'; })) {
      break;
    }
    std::string_view value = trim(text.substr(equals + 1));
    if (name == "escape" && (value == "`" || value == "\\")) {
      escape = value[0];
    }
  }
  return escape;
}

struct Heredoc {
  std::string word;
  bool strip_tabs = false;
};

// Heredocs opened on one logical line, in order: `<<WORD`, `<<-WORD`, `<<"WORD"`, `<<'WORD'`.
std::vector<Heredoc> heredocs_in(std::string_view line) {
  std::vector<Heredoc> heredocs;
  size_t at = 0;
  while ((at = line.find("<<", at)) != std::string_view::npos) {
    size_t run_end = line.find_first_not_of('<', at);
    if (run_end == std::string_view::npos) {
      break;
    }
    // `<<<` is a shell here-string, not a heredoc.
    if (run_end - at != 2) {
      at = run_end;
      continue;
    }
    size_t i = run_end;
    Heredoc heredoc;
    if (line[i] == '-') {
      heredoc.strip_tabs = true;
      ++i;
    }
    char quote = 0;
    if (i < line.size() && (line[i] == '"' || line[i] == '\'')) {
      quote = line[i++];
    }
    size_t word_begin = i;
    if (i < line.size() && is_word_start(line[i])) {
      while (i < line.size() && is_word_char(line[i])) {
        ++i;
      }
    }
    bool closed = quote == 0 || (i < line.size() && line[i] == quote);
    if (i > word_begin && closed) {
      heredoc.word = std::string(line.substr(word_begin, i - word_begin));
      heredocs.push_back(heredoc);
    }
    at = i;
  }
  return heredocs;
}

} // namespace

Instructions logical_instructions(std::string_view dockerfile_text) {
  std::vector<std::string> lines = physical_lines(dockerfile_text);
  Instructions result;
  result.escape = escape_char(lines);
  const char escape = result.escape;

  size_t i = 0;
  while (i < lines.size()) {
    if (is_blank_or_comment(lines[i])) {
      ++i;
      continue;
    }
    std::string logical;
    std::string_view text = trim_end(lines[i++]);
    while (!text.empty() && text.back() == escape) {
      text.remove_suffix(1);
      logical += text;
      while (i < lines.size() && is_blank_or_comment(lines[i])) {
        ++i;
      }
      text = i < lines.size() ? trim_end(lines[i++]) : std::string_view();
    }
    logical += text;

    for (const auto& heredoc : heredocs_in(logical)) {
      while (i < lines.size()) {
        std::string_view body = lines[i++];
        if (heredoc.strip_tabs) {
          body.remove_prefix(std::min(body.find_first_not_of('\t'), body.size()));
        }
        if (body == heredoc.word) {
          break;
        }
      }
    }
    result.lines.emplace_back(trim(logical));
  }
  return result;
}

std::string instruction_keyword(std::string_view instruction) {
  size_t end = 0;
  while (end < instruction.size() && !is_space(instruction[end])) {
    ++end;
  }
  return lower(instruction.substr(0, end));
}

std::string_view instruction_arguments(std::string_view instruction) {
  size_t end = 0;
  while (end < instruction.size() && !is_space(instruction[end])) {
    ++end;
  }
  return trim(instruction.substr(end));
}

} // namespace kiln
